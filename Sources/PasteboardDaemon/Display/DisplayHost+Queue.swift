import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The paste queue on X: the X thread takes the turns (``PasteboardSelections/PasteTurns``), and
/// reports each item pasted.
extension DisplayHost: PasteQueueHost {
    func answerQueue(_ request: QueueRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        pasteQueue.answer(request, on: &channel, host: self)
    }

    func serveQueue(_ items: [Snapshot], isServing: @escaping @Sendable () -> Bool, onPaste: @escaping @Sendable (Int) -> Void) throws {
        // The X thread swaps the items itself, and ends the queue with the ownership.
        try backend.managerPort.keepQueue(.general, items: items.map { ($0.advertised, $0.targets.map(\.captured)) },
                                          credit: CopyCredit(name: "xpb queue", pid: nil), onPaste: onPaste)
    }

    func serveAsCopy(_ snapshot: Snapshot) throws {
        try serve(snapshot)
    }

    func queueTakesClipboard() {
        state.withLock { _ = $0.current.removeValue(forKey: .general) }
    }
}
