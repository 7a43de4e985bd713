import Dispatch
import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The text of another node's copy, read whole: what a node without a history sends
/// (``SyncNode``) and what its daemon keeps of it (``ClipboardDaemon/keep(_:app:targets:)``).
extension RemoteTarget {
    /// The text targets asked of a copy, best first.
    static let textTargets = ["UTF8_STRING", "text/plain;charset=utf-8", "text/plain", "STRING", "TEXT"]

    /// The best text target among `targets`.
    package static func text(of targets: [RemoteTarget]) -> RemoteTarget? {
        textTargets.lazy.compactMap { name in targets.first { $0.target == name } }.first
    }

    /// The bytes of a remote target, whole, within `limit` and `timeout` seconds.
    package func readWhole(limit: Int, timeout: Double) -> Result<Data, SyncHub.Failure> {
        if let size, size > limit {
            return .failure(SyncHub.Failure("the text is \(ByteCount.format(size)), over the \(ByteCount.format(limit)) cap"))
        }
        guard let stream = open() else { return .failure(SyncHub.Failure("the node that holds it cannot be reached")) }
        defer { stream.cancel() }
        let deadline = Date().addingTimeInterval(timeout)
        var data = Data()
        while true {
            let snapshot = stream.snapshot()
            if let failure = snapshot.failure { return .failure(SyncHub.Failure(failure)) }
            if let chunk = stream.take(upTo: 1 << 20) {
                data.append(chunk)
                if data.count > limit {
                    return .failure(SyncHub.Failure("the text is over the \(ByteCount.format(limit)) cap"))
                }
                continue
            }
            if snapshot.isEnded, snapshot.buffered == 0 { return .success(data) }
            guard deadline.timeIntervalSinceNow > 0 else { return .failure(SyncHub.Failure("no bytes within \(Int(timeout)) s")) }
            let moved = DispatchSemaphore(value: 0)
            stream.observe(after: snapshot.version) { moved.signal() }
            _ = moved.wait(timeout: .now() + min(1, max(0.01, deadline.timeIntervalSinceNow)))
        }
    }
}
