import Dispatch
import FoundationEssentials
import PasteboardWire
import Synchronization

/// Sends a served transfer's bytes in data frames of at most 256 KiB (and never more than the
/// reader's window: a frame the credit can never cover would wait for ever), each within the credit.
final class ChunkSender {
    static let frameBytes = 256 << 10
    let frameBytes: Int
    let id: UInt64
    let link: SyncLink
    let task: ServeTask
    let limit: Int
    let what: String
    let isCurrent: () -> Bool
    /// Takes credit from the transfer table (nil: the reading side gave up).
    let take: (Int) -> Bool?
    private(set) var total = 0

    init(id: UInt64, link: SyncLink, task: ServeTask, limit: Int, window: Int, what: String, isCurrent: @escaping () -> Bool,
         take: @escaping (Int) -> Bool?) {
        frameBytes = max(1, min(Self.frameBytes, window))
        self.id = id
        self.link = link
        self.task = task
        self.limit = limit
        self.what = what
        self.isCurrent = isCurrent
        self.take = take
    }

    func send(_ data: Data) throws {
        var offset = 0
        while offset < data.count {
            guard isCurrent() else { throw SyncHub.Failure("the contents changed during the transfer") }
            let piece = min(frameBytes, data.count - offset)
            guard total + piece <= limit else {
                throw SyncHub.Failure("\(what) is larger than the \(ByteCount.format(limit)) cap per transfer (--sync-max-transfer)")
            }
            try task.acquire(piece, timeout: 60, take: take, isCurrent: isCurrent)
            link.sendData(id: id, data.subdata(in: data.startIndex + offset ..< data.startIndex + offset + piece))
            offset += piece
            total += piece
        }
    }
}

/// The sender of one fetch served from this display: it waits for credit (kept by the
/// ``TransferTable``) and is woken by grants and by the reading side giving up.
final class ServeTask: Sendable {
    let key: TransferTable.ServedKey
    /// The selection served: a change of its owner wakes the sender (its bytes are stale).
    let selection: String
    private let cancelled = Mutex(false)
    private let signal = DispatchSemaphore(value: 0)

    init(key: TransferTable.ServedKey, selection: String) {
        self.key = key
        self.selection = selection
    }

    func wake() {
        signal.signal()
    }

    func cancel() {
        cancelled.withLock { $0 = true }
        signal.signal()
    }

    var isCancelled: Bool { cancelled.withLock { $0 } }

    /// Takes `bytes` of credit through `take`, waiting for grants; throws when the reading side
    /// gave up, the contents are no longer `isCurrent` (checked at each wake), or after `timeout`
    /// seconds without enough.
    func acquire(_ bytes: Int, timeout: Double, take: (Int) -> Bool?, isCurrent: () -> Bool = { true }) throws {
        let end = DispatchTime.now() + timeout
        while true {
            if isCancelled { throw SyncHub.Failure("the reading side gave the transfer up") }
            guard isCurrent() else { throw SyncHub.Failure("the contents changed during the transfer") }
            switch take(bytes) {
            case true?: return
            case nil: throw SyncHub.Failure("the reading side gave the transfer up")
            case false?:
                if signal.wait(timeout: end) == .timedOut {
                    throw SyncHub.Failure("the reading side took nothing for \(Int(timeout)) s")
                }
            }
        }
    }
}
