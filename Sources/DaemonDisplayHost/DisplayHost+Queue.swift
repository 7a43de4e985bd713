import FoundationEssentials
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The paste queue on X: the X thread takes the turns (``PasteboardSelections/PasteTurns``), and
/// reports each item pasted.
extension DisplayHost: PasteQueueHost {
    package func answerQueue(_ request: QueueRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        pasteQueue.answer(request, on: &channel, host: self)
    }

    package func serveQueue(_ items: [Snapshot], isServing: @escaping @Sendable () -> Bool, onPaste: @escaping @Sendable (Int) -> Void) throws {
        // The X thread swaps the items itself, and ends the queue with the ownership.
        try backend.managerPort.keepQueue(.general, items: items.map { ($0.advertised, $0.targets.map(\.captured)) },
                                          credit: CopyCredit(name: "xpb queue", pid: nil), onPaste: onPaste)
    }

    package func serveAsCopy(_ snapshot: Snapshot) throws {
        try serve(snapshot)
    }

    package func queueTakesClipboard() {
        state.withLock { _ = $0.current.drop(.general) }
    }
}
