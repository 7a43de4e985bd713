import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The history's verbs, written once behind every front door: the control socket (`xpb
/// history`), Klipper's D-Bus interface and `org.xpb.Pasteboard1`. A front door names entries its
/// own way (a place in the listing, newest 0; an id that stays the entry's) and says the results
/// in its own words; what a verb does, and that the history's listeners learn of every change
/// (``changed``), is here.
struct HistoryService: Sendable {
    /// An entry as a front door names it.
    enum Entry: Sendable, CustomStringConvertible {
        /// Its place in the listing, newest 0 (`xpb history`, Klipper).
        case index(Int)
        /// Its id (`org.xpb.Pasteboard1`).
        case id(Int64)

        public var description: String {
            switch self {
            case let .index(index): return "\(index)"
            case let .id(id): return "with id \(id)"
            }
        }
    }

    /// A verb refused: no such entry, or one with nothing left to serve. The front door says it
    /// as its protocol's argument error.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    let store: HistoryLock
    /// The displays (or sessions) this daemon keeps, whose newest copies ``latest(_:orNewest:)``
    /// finds: one, or a bridge's two.
    let displays: [String]
    /// Serves an entry selected again (the host's: on the display, the compositor, or in memory).
    let serve: @Sendable (Snapshot) throws -> Void
    /// Told after every change a verb made (the listing encoded ahead, Klipper's signal).
    let changed: @Sendable () -> Void

    // MARK: Reading

    /// The entry, nil when there is none.
    func snapshot(_ entry: Entry) throws -> Snapshot? {
        try store.withLock { history in
            switch entry {
            case let .index(index): return index >= 0 ? try history.snapshot(at: index) : nil
            case let .id(id): return try history.snapshot(entry: id)
            }
        }
    }

    /// The newest copy of a pasteboard made on one of ``displays``; with `orNewest`, else the
    /// newest entry at all.
    func latest(_ selection: Pasteboard.Name, orNewest: Bool = false) throws -> Snapshot? {
        try store.withLock { history in
            try history.latest(selection: selection, displays: displays) ?? (orNewest ? history.snapshot(at: 0) : nil)
        }
    }

    /// The newest copy of a pasteboard made on `display` (a port restoring its own at start).
    func latest(_ selection: Pasteboard.Name, madeOn display: String) throws -> Snapshot? {
        try store.withLock { try $0.latest(selection: selection, display: display) }
    }

    /// A page of the listing, and how many entries match in all (`partial`: those up to the
    /// page's end, more may follow). With `thumbnails`, those still to make are made after the
    /// history's lock (a slow image holds up nobody else).
    func page(search: String? = nil, offset: Int, limit: Int,
              thumbnails: Bool = true) throws -> (entries: [HistoryEntrySummary], total: Int, partial: Bool) {
        var listing = try store.withLock { try $0.listing(search: search, offset: offset, limit: limit) }
        return (thumbnails ? listing.finished() : listing.entries, listing.total, listing.partial)
    }

    /// The whole listing, thumbnails made.
    func listing(search: String?) throws -> [HistoryEntrySummary] {
        var listing = try store.withLock { try $0.listing(search: search) }
        return listing.finished()
    }

    /// Each entry's text, newest first, a long one cut at `limit` bytes, as many as fit in
    /// `budget` bytes.
    func texts(limit: Int, budget: Int) throws -> [String] {
        try store.withLock { try $0.texts(limit: limit, budget: budget) }
    }

    // MARK: Verbs

    /// Serves an entry again, and moves it to the top; what it served.
    @discardableResult
    func select(_ entry: Entry) throws -> Snapshot {
        guard let snapshot = try snapshot(entry) else { throw Refusal(description: "no history entry \(entry)") }
        guard !snapshot.targets.isEmpty else { throw Refusal(description: "history entry \(entry) has no payload left") }
        try serve(snapshot)
        if let id = snapshot.id { try store.withLock { try $0.touch(id) } }
        changed()
        return snapshot
    }

    func pin(_ entry: Entry, _ pinned: Bool) throws {
        guard try store.withLock({ history in try index(of: entry, in: history).map { try history.pin(index: $0, pinned) } ?? false }) else {
            throw Refusal(description: "no history entry \(entry)")
        }
        changed()
    }

    func delete(_ entry: Entry) throws {
        guard try store.withLock({ history in try index(of: entry, in: history).map { try history.delete(index: $0) } ?? false }) else {
            throw Refusal(description: "no history entry \(entry)")
        }
        changed()
    }

    /// Forgets every entry; the pinned ones too with `includingPinned`.
    func clear(includingPinned: Bool = false) throws {
        try store.withLock { try $0.clear(includingPinned: includingPinned) }
        changed()
    }

    /// Forgets the copies made since `date` by these apps (or by none known); how many.
    func forgetCopies(since date: Date, byApps apps: [String]) throws -> Int {
        let forgotten = try store.withLock { try $0.forgetCopies(since: date, byApps: apps) }
        if forgotten > 0 { changed() }
        return forgotten
    }

    /// Writes what the history holds to disk now (it always is; this checkpoints).
    func checkpoint() {
        store.withLock { _ = $0.checkpoint() }
    }

    private func index(of entry: Entry, in history: History) throws -> Int? {
        switch entry {
        case let .index(index): return index >= 0 ? index : nil
        case let .id(id): return try history.index(ofEntry: id)
        }
    }
}
