import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWayland
import PasteboardWire
import Synchronization

/// The paste queue on a Wayland session. Data-control names no reader, so a paste is one
/// receive of a data type, once the reader has every byte. Items that offer the same types are
/// served by one source, which serves the next item after each paste (``QueuedRun``): no
/// selection change, so a reader that looks at the selection again during its paste (wl-paste
/// does, under load) still reads the item it began with. Where the types change, the next item
/// is set as a new source.
extension WaylandHost: PasteQueueHost {
    func answerQueue(_ request: QueueRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        pasteQueue.answer(request, on: &channel, host: self)
    }

    func serveQueue(_ items: [Snapshot], isServing: @escaping @Sendable () -> Bool, onPaste: @escaping @Sendable (Int) -> Void) throws {
        let kept = items.map { KeptSelection(advertised: $0.advertised, targets: $0.targets.map(\.captured)) }
        try serveRun(from: 0, of: kept, isServing: isServing, onPaste: onPaste)
    }

    /// Serves the run of items from `start` that offer the same types as one source. Its pastes
    /// move it on; the paste of its last item sets the next run, while the queue is still served
    /// and the selection still ours (compare-and-own: a copy made meanwhile stays), before the
    /// paste is reported.
    private func serveRun(from start: Int, of items: [KeptSelection], isServing: @escaping @Sendable () -> Bool,
                          onPaste: @escaping @Sendable (Int) -> Void) throws {
        var after = start + 1
        while after < items.count, items[after].targets == items[start].targets { after += 1 }
        let end = after
        let run = QueuedRun(Array(items[start..<end]))
        let owned = try backend.serveQueued(run, on: .general, if: { start == 0 || $0 == WaylandPasteboardBackend.ourOwner }) { [weak self] in
            guard let pasted = run.pasted() else { return }
            if pasted.isLast, isServing(), end < items.count {
                do {
                    try self?.serveRun(from: end, of: items, isServing: isServing, onPaste: onPaste)
                } catch {
                    self?.logger.warning("paste queue: the next item could not be served: \(error)")
                }
            }
            onPaste(start + pasted.index)
        }
        if !owned { logger.info("paste queue: another copy took CLIPBOARD before its next item was served") }
    }

    func serveAsCopy(_ snapshot: Snapshot) throws {
        try serve(snapshot, ifEmpty: false)
    }

    func queueTakesClipboard() {
        state.withLock { state in
            state.current.removeValue(forKey: .general)
            state.keptFrom.removeValue(forKey: .general)
        }
    }
}

/// Queued items that offer the same types, served by one source: each paste serves the next;
/// the last stays.
final class QueuedRun: HeldTargets {
    private let items: [KeptSelection]
    /// The item served, and whether the last one was pasted.
    private let position = Mutex((index: 0, done: false))

    init(_ items: [KeptSelection]) {
        self.items = items
    }

    private var current: KeptSelection { items[position.withLock { $0.index }] }
    var targets: [String] { items[0].targets }
    var manifest: Data? { current.manifest }
    func size(of target: String) -> Int? { current.size(of: target) }
    func bytes(for target: String) throws -> (type: String, data: Data)? { try current.bytes(for: target) }

    /// A paste was served: the item it had (its index in the run, and whether it was the run's
    /// last), and the next is served from now on. Nil once the last was pasted (it stays).
    func pasted() -> (index: Int, isLast: Bool)? {
        position.withLock { position -> (index: Int, isLast: Bool)? in
            guard !position.done else { return nil }
            let index = position.index
            let isLast = index + 1 == items.count
            position = isLast ? (index, true) : (index + 1, false)
            return (index, isLast)
        }
    }
}
