import PasteboardSelections

/// A paste queue served on one selection (`xpb queue`): what we serve for each queued item, and
/// whose turn it is (``PasteTurns``). Each conversion request first takes its turn
/// (``SelectionServer/takeQueueTurn(_:)``): the selection then serves the item that turn names.
/// The reader holding an item has its window watched, so that its going ends its paste.
struct QueuedSelection {
    /// What we serve for each item, in order; all owned at one timestamp.
    let items: [OwnedSelection]
    var turns: PasteTurns
    /// The holder's window, watched while it holds the item.
    var watched: X11Window?
    /// Told (on a worker) each item pasted, by its index.
    let onPaste: @Sendable (Int) -> Void
}

/// The items a queue is made of, built on the X thread as ownership is taken.
final class QueuedItemsBox {
    var items: [OwnedSelection] = []
}
