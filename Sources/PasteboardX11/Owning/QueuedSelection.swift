import PasteboardSelections

/// A paste queue served on one selection (`xpb queue`): what we serve for each queued item, and
/// whose turn it is (``PasteTurns``). Each conversion request first takes its turn
/// (``SelectionServer/takeQueueTurn(_:)``): the selection then serves the item that turn names.
/// The reader holding an item has its window watched, so that its going ends its paste; a timer
/// ends a paste whose reader is silent. When a paste ends, the next item is announced: the
/// selection is taken again at a new timestamp (``SelectionServer/announceQueueItem(_:id:)``).
struct QueuedSelection {
    /// Tells this queue from a later one on the same selection, for timers and announces that
    /// finish late.
    let id: Int
    /// What we serve for each item, in order; all made at the first ownership's timestamp.
    let items: [OwnedSelection]
    var turns: PasteTurns
    /// The time of the selection's last announce: the item served is owned since then.
    var since: X11Timestamp
    /// The holder's window, watched while it holds the item.
    var watched: X11Window?
    /// The timer that tells the turns when a silent reader's paste is over.
    var timer: TimerHandle?
    /// Told (on a worker) each item pasted, by its index.
    let onPaste: @Sendable (Int) -> Void

    /// What is served for `item` now.
    func served(_ item: Int) -> OwnedSelection {
        var state = items[item]
        state.timestamp = since
        return state
    }
}

/// The items a queue is made of, built on the X thread as ownership is taken.
final class QueuedItemsBox {
    var items: [OwnedSelection] = []
}
