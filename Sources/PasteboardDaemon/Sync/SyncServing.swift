import Dispatch
import Foundation
import PasteboardWire
import Synchronization

/// Sends a served transfer's bytes in data frames of at most 256 KiB, each within the credit.
final class ChunkSender {
    static let frameBytes = 256 << 10
    let id: UInt64
    let link: SyncLink
    let task: ServeTask
    let limit: Int
    let what: String
    let isCurrent: () -> Bool
    private(set) var total = 0

    init(id: UInt64, link: SyncLink, task: ServeTask, limit: Int, what: String, isCurrent: @escaping () -> Bool) {
        self.id = id
        self.link = link
        self.task = task
        self.limit = limit
        self.what = what
        self.isCurrent = isCurrent
    }

    func send(_ data: Data) throws {
        var offset = 0
        while offset < data.count {
            guard isCurrent() else { throw SyncHub.Failure("the contents changed during the transfer") }
            let piece = min(Self.frameBytes, data.count - offset)
            guard total + piece <= limit else {
                throw SyncHub.Failure("\(what) is larger than the \(ByteCount.format(limit)) cap per transfer (--sync-max-transfer)")
            }
            try task.acquire(piece, timeout: 60)
            link.sendData(id: id, data.subdata(in: data.startIndex + offset ..< data.startIndex + offset + piece))
            offset += piece
            total += piece
        }
    }
}

/// One fetch served from this display: the credit the reading side granted, and whether it gave up.
final class ServeTask: Sendable {
    private let state: Mutex<(credit: Int, cancelled: Bool)>
    private let signal = DispatchSemaphore(value: 0)

    init(credit: Int) {
        state = Mutex((credit, false))
    }

    func grant(_ bytes: Int) {
        state.withLock { $0.credit += max(0, bytes) }
        signal.signal()
    }

    func cancel() {
        state.withLock { $0.cancelled = true }
        signal.signal()
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Takes `bytes` of credit, waiting for grants; throws when cancelled or after `timeout`
    /// seconds without enough.
    func acquire(_ bytes: Int, timeout: Double) throws {
        let end = DispatchTime.now() + timeout
        while true {
            let outcome = state.withLock { state -> Bool? in
                if state.cancelled { return false }
                guard state.credit >= bytes else { return nil }
                state.credit -= bytes
                return true
            }
            if outcome == false { throw SyncHub.Failure("the reading side gave the transfer up") }
            if outcome == true { return }
            if signal.wait(timeout: end) == .timedOut {
                throw SyncHub.Failure("the reading side took nothing for \(Int(timeout)) s")
            }
        }
    }
}
