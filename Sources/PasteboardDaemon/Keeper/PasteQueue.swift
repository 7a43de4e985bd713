import PasteboardWire

/// The paste queue's items (`xpb queue`), first in, first out: what the display serves, one item
/// per paste (``PasteboardSelections/PasteTurns`` on the X side). A value: the host hands it
/// what happens, and serves what it says.
///
/// Each change to the items (added, cleared) is served anew as a new generation; a paste the X
/// side reports names its generation and the index of the item in it, so that a report of an
/// older generation is ignored. When the last item is pasted the queue is empty, and the
/// clipboard keeps that item (served as any copy, to every reader after).
struct PasteQueue {
    /// The items not pasted yet, the next first.
    private(set) var items: [Snapshot] = []
    /// Moves each time the items are served anew.
    private(set) var generation = 0
    /// How many items of this generation's list were pasted (and removed from `items`).
    private var pastedInGeneration = 0
    /// The most items a queue holds.
    static let maxItems = 1000

    /// The bytes the items hold.
    var size: Int { items.reduce(0) { $0 + $1.size } }

    /// Adds items at the end, if the queue stays within ``maxItems`` and `maxBytes`; returns the
    /// list to serve now (every item left), with its generation.
    mutating func add(_ new: [Snapshot], maxBytes: Int) throws(ControlFailure) -> (items: [Snapshot], generation: Int) {
        guard items.count + new.count <= Self.maxItems else {
            throw ControlFailure("the paste queue holds at most \(Self.maxItems) items (\(items.count) now): nothing was added")
        }
        let adding = new.reduce(0) { $0 + $1.size }
        guard size + adding <= maxBytes else {
            throw ControlFailure("the paste queue holds at most \(ByteCount.format(maxBytes)) (\(ByteCount.format(size)) now, \(ByteCount.format(adding)) more asked): nothing was added")
        }
        items += new
        return serveAnew()
    }

    private mutating func serveAnew() -> (items: [Snapshot], generation: Int) {
        generation += 1
        pastedInGeneration = 0
        return (items, generation)
    }

    /// Item `index` of generation `generation` was pasted: it and those before it leave the
    /// queue. Returns how many left now (0: an old report, or one already counted).
    mutating func pasted(_ index: Int, generation: Int) -> Int {
        guard generation == self.generation, index + 1 > pastedInGeneration else { return 0 }
        let gone = min(index + 1 - pastedInGeneration, items.count)
        items.removeFirst(gone)
        pastedInGeneration = index + 1
        return gone
    }

    /// Empties the queue (asked, or another copy took the clipboard); returns how many items it held.
    mutating func clear() -> Int {
        let count = items.count
        items.removeAll()
        generation += 1
        pastedInGeneration = 0
        return count
    }
}
