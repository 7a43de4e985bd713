import Dispatch
import FoundationEssentials
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// A history both sides of a bridge share (one listing, whichever side is asked).
package final class HistoryLock: Sendable {
    private let history: Mutex<History>
    /// The history's writes, in order, off the hosts' and the clients' threads: one queue per
    /// history, so the two sides of a bridge, which share one, write in one order, and a reader
    /// that waits for the writes handed in before it waits for both sides'.
    let writes = DispatchQueue(label: "xpbd.storage")
    private static let writesKey = DispatchSpecificKey<Bool>()

    /// Whether the file's check after the open (``ClipboardDaemon/beginHistoryUpkeep()``) has
    /// begun: the two sides of a bridge share the history, and one check is enough.
    private let checked = Mutex(false)
    /// Whether the history is kept in memory until the keyring holding its key unlocks, and no
    /// daemon waits for that yet (the two sides of a bridge share the history: one waits).
    private let keyringWait: Mutex<Bool>

    init(_ history: sending History, awaitsKeyring: Bool = false) {
        self.history = Mutex(history)
        keyringWait = Mutex(awaitsKeyring)
        writes.setSpecific(key: Self.writesKey, value: true)
    }

    /// True once where the history awaits the keyring: the caller waits for it.
    func beginKeyringWait() -> Bool {
        keyringWait.withLock { waits in
            defer { waits = false }
            return waits
        }
    }

    /// True the first time it is asked, false after: the caller checks the file.
    func beginCheck() -> Bool {
        checked.withLock { begun in
            defer { begun = true }
            return !begun
        }
    }

    /// Whether the caller runs on ``writes``.
    var isOnWrites: Bool { DispatchQueue.getSpecific(key: Self.writesKey) == true }

    package func withLock<Result, Failure: Error>(_ body: (inout sending History) throws(Failure) -> sending Result) throws(Failure) -> sending Result {
        try history.withLock(body)
    }
}

/// The history as its readers see it: the entries on disk (``HistoryStore``) and the copies
/// held in memory while their app may still take them back (``TakenBackCopies``: a password
/// manager that marks nothing clears its copy itself). A held copy is listed, searched, selected
/// and served like any entry, but touches no file: taken back, it is dropped from memory; kept,
/// it is written (``writeHeld(except:)``) once its window ends, a newer copy replaces
/// it, its owner goes away, the user pins it, or the daemon stops. A daemon killed outright
/// loses the held copies (at most one per selection, at most the window old).
///
/// Held entries are numbered apart from the disk's (from ``heldIDs`` on); a held entry written
/// to disk gets the disk's next id, and a reader that names it by its held id still finds it
/// (``renamed``). Indexes are places in the merged listing: each held entry stands after the
/// disk's entries used later than it.
package final class History {
    /// The history on disk, or in memory where the disk cannot be used (until ``adopt(_:)``).
    private(set) var disk: HistoryStore
    private let held: HistoryStore
    /// Held ids and the disk ids they were written as, the newest last (a few hundred kept).
    private var renamed: [(held: Int64, disk: Int64)] = []
    /// Where held entries are numbered from: past any id a history on disk reaches.
    static let heldIDs: Int64 = 1 << 40

    init(disk: HistoryStore, logger: Logger) throws {
        self.disk = disk
        held = try HistoryStore(inMemoryFor: disk.directory, maxEntries: Int.max, maxBytes: Int.max, logger: logger)
        try held.numberEntries(after: Self.heldIDs)
    }

    var databasePath: String { disk.database.path }
    var maxEntries: Int {
        get { disk.removal.maxEntries }
        set { disk.removal.maxEntries = newValue }
    }
    var maxBytes: Int {
        get { disk.removal.maxBytes }
        set { disk.removal.maxBytes = newValue }
    }

    /// Takes `opened` as the history on disk in place of the one kept in memory (the keyring
    /// holding its key was locked at start, and is open now): the entries kept meanwhile are
    /// written into it first, as they were (``HistoryStore/moveEntries(into:)``). Returns how many.
    func adopt(_ opened: HistoryStore) throws -> Int {
        let moved = try disk.moveEntries(into: opened)
        opened.reading.thumbnails = opened.reading.thumbnails ?? disk.reading.thumbnails
        disk = opened
        return moved
    }

    // MARK: Writing

    /// Stores a snapshot as the newest entry: on disk, or held in memory while its app may take
    /// it back (`holding`). A copy of what an entry on disk holds is that entry moved to the top
    /// (the disk has its bytes already). Returns the entry's id.
    @discardableResult
    func add(_ snapshot: Snapshot, display: String, holding: Bool = false) throws -> Int64 {
        guard holding, try !disk.reading.holdsContent(of: snapshot) else { return try disk.add(snapshot, display: display) }
        let id = try held.add(snapshot, display: display)
        // The caps count the held copies: the disk makes room for them as for any copy.
        let (count, bytes) = held.reading.totals()
        try disk.removal.prune(reserving: count, bytes: bytes)
        return id
    }

    /// A held copy, named as ``TakenBackCopies`` names it: its selection and when it was made.
    struct HeldKey: Hashable, Sendable {
        let selection: Pasteboard.Name
        let time: Double

        init(_ selection: Pasteboard.Name, time: Date) {
            self.init(selection, seconds: time.timeIntervalSince1970)
        }

        /// `seconds` since 1970, as the history stores them.
        init(_ selection: Pasteboard.Name, seconds: Double) {
            self.selection = selection
            time = seconds
        }
    }

    /// A held entry written to disk.
    struct Written {
        let selection: Pasteboard.Name
        let held: Int64
        let disk: Int64
    }

    /// Writes the held copies other than `holding` to disk, the oldest first (on a full disk,
    /// those not written stay held, and the next call tries again); with `display`, only that
    /// display's (the two sides of a bridge share the history, and each holds its own). Returns
    /// those written.
    func writeHeld(except holding: Set<HeldKey>, of display: String? = nil) throws -> [Written] {
        var written: [Written] = []
        for entry in try held.reading.order().reversed()
        where !holding.contains(HeldKey(entry.selection, seconds: entry.created)) && (display == nil || entry.display == display) {
            guard var snapshot = try held.reading.snapshot(entry: entry.id) else { continue }
            // Made when it was made; listed by when it was last used.
            snapshot.time = Date(timeIntervalSince1970: entry.created)
            snapshot.id = nil
            let id = try disk.add(snapshot, display: entry.display)
            if entry.used > entry.created { try disk.touch(id, at: entry.used) }
            // Who pasted it while it was held goes with it, the oldest first.
            for paste in try held.reading.pastes(of: entry.id).reversed() { try disk.addPaste(paste, to: id) }
            _ = try held.removal.delete(entry: entry.id)
            renamed.append((entry.id, id))
            if renamed.count > 512 { renamed.removeFirst(renamed.count - 256) }
            written.append(Written(selection: entry.selection, held: entry.id, disk: id))
        }
        return written
    }

    /// Notes a paste of entry `id` (a held id, or one written since under another: ``renamed``);
    /// nothing when the entry is gone.
    func addPaste(_ record: PasteRecord, to id: Int64) throws {
        if isHeld(id) { try held.addPaste(record, to: id) } else { try disk.addPaste(record, to: onDisk(id)) }
    }

    /// The pastes of entry `id` (as ``addPaste(_:to:)`` names it), newest first.
    func pastes(of id: Int64) throws -> [PasteRecord] {
        try isHeld(id) ? held.reading.pastes(of: id) : disk.reading.pastes(of: onDisk(id))
    }

    /// The id entry `id` has on disk (a held id written since: the disk's id for it).
    private func onDisk(_ id: Int64) -> Int64 {
        renamed.last { $0.held == id }?.disk ?? id
    }

    private func isHeld(_ id: Int64) -> Bool {
        id > Self.heldIDs && renamed.last(where: { $0.held == id }) == nil
    }

    // MARK: Places

    /// The held entries' places in the merged listing, in order (0 = newest).
    private func heldPlaces() throws -> [(place: Int, id: Int64)] {
        var places: [(place: Int, id: Int64)] = []
        for (position, entry) in try held.reading.order().enumerated() {
            places.append((try disk.reading.count(usedAfter: entry.used) + position, entry.id))
        }
        return places
    }

    /// The merged place of the disk's entry `index`: the held places at or before it push it on.
    private static func merged(_ index: Int, _ places: [(place: Int, id: Int64)]) -> Int {
        var place = index
        for held in places where held.place <= place { place += 1 }
        return place
    }

    /// The disk's index for merged place `index`, or the held entry standing there.
    private static func split(_ index: Int, _ places: [(place: Int, id: Int64)]) -> (disk: Int?, held: Int64?) {
        if let held = places.first(where: { $0.place == index }) { return (nil, held.id) }
        return (index - places.count { $0.place < index }, nil)
    }

    // MARK: Reading

    /// As ``HistoryReading/listing(search:offset:limit:)``, held entries in their places. In a
    /// search, held matches rank before the disk's (they are the newest copies).
    func listing(search: String? = nil, offset: Int = 0, limit: Int? = nil) throws -> HistoryListing {
        let places = try heldPlaces()
        guard !places.isEmpty else { return try disk.reading.listing(search: search, offset: offset, limit: limit) }
        let offset = max(0, offset)
        let searching = !(search ?? "").isEmpty
        let heldListing = try held.reading.listing(search: search)
        let placeOf = Dictionary(places.map { ($0.id, $0.place) }, uniquingKeysWith: { first, _ in first })
        // The held entries in the window, and where the disk's part of it begins.
        let heldShown: [HistoryEntrySummary]
        let diskOffset: Int
        if searching {
            heldShown = Array(heldListing.entries.dropFirst(offset).prefix(limit ?? .max))
            diskOffset = max(0, offset - heldListing.entries.count)
        } else {
            let end = limit.map { offset.clampedSum($0) } ?? .max
            heldShown = heldListing.entries.filter { entry in
                let place = entry.id.flatMap { placeOf[$0] } ?? 0
                return place >= offset && place < end
            }
            diskOffset = offset - places.count { $0.place < offset }
        }
        let diskLimit = limit.map { $0 - heldShown.count }
        // A page of at least one: its total is wanted even when held entries fill the window.
        var diskListing = try disk.reading.listing(search: search, offset: diskOffset, limit: diskLimit.map { max(1, $0) })
        if diskLimit == 0 {
            diskListing.entries = []
            diskListing.pending = []
        }
        var entries: [(summary: HistoryEntrySummary, pending: HistoryListing.Pending?)] = []
        for entry in heldShown {
            var summary = entry
            summary.index = entry.id.flatMap { placeOf[$0] } ?? 0
            entries.append((summary, nil))
        }
        for (position, entry) in diskListing.entries.enumerated() {
            var summary = entry
            summary.index = Self.merged(entry.index, places)
            entries.append((summary, diskListing.pending.first { $0.index == position }))
        }
        entries.sort { $0.summary.index < $1.summary.index }
        var pending: [HistoryListing.Pending] = []
        for (position, entry) in entries.enumerated() {
            if let item = entry.pending { pending.append(.init(index: position, digest: item.digest, image: item.image)) }
        }
        return HistoryListing(entries: entries.map(\.summary), pending: pending, thumbnails: diskListing.thumbnails,
                              total: diskListing.total + heldListing.entries.count, partial: diskListing.partial)
    }

    /// The listings' version: the disk's and the held entries'.
    struct ListingVersion: Equatable {
        let disk: HistoryReading.ListingVersion
        let held: HistoryReading.ListingVersion
    }

    func listingVersion() -> ListingVersion? {
        guard let disk = disk.reading.listingVersion(), let held = held.reading.listingVersion() else { return nil }
        return ListingVersion(disk: disk, held: held)
    }

    /// Entry `index` (0 = newest) with its payloads.
    func snapshot(at index: Int) throws -> Snapshot? {
        let place = Self.split(index, try heldPlaces())
        if let id = place.held { return try held.reading.snapshot(entry: id) }
        return try place.disk.flatMap { try disk.reading.snapshot(at: $0) }
    }

    /// Entry `id` (as listings name it), nil when there is none or it expired.
    func snapshot(entry id: Int64) throws -> Snapshot? {
        try isHeld(id) ? held.reading.snapshot(entry: id) : disk.reading.snapshot(entry: onDisk(id))
    }

    /// Where entry `id` is in the listing (0 = newest).
    func index(ofEntry id: Int64) throws -> Int? {
        let places = try heldPlaces()
        if isHeld(id) { return places.first { $0.id == id }?.place }
        return try disk.reading.index(ofEntry: onDisk(id)).map { Self.merged($0, places) }
    }

    /// The entries' texts, newest first, each cut at `limit` bytes, as many as fit in `budget`
    /// bytes (``HistoryReading/texts(limit:budget:)``).
    func texts(limit: Int, budget: Int) throws -> [String] {
        let heldTexts = try held.reading.texts(limit: limit, budget: budget)
        let diskTexts = try disk.reading.texts(limit: limit, budget: budget)
        guard !heldTexts.isEmpty else { return diskTexts.map(\.text) }
        return (heldTexts + diskTexts).enumerated().sorted { ($0.element.used, -$0.offset) > ($1.element.used, -$1.offset) }.map(\.element.text)
    }

    /// The newest entry of a selection, preferring one taken on `display` (a held one is).
    package func latest(selection: Pasteboard.Name, display: String) throws -> Snapshot? {
        try latest(selection: selection, displays: [display])
    }

    /// The newest entry of a selection taken on one of `displays`, held or on disk; else the
    /// newest of any display.
    package func latest(selection: Pasteboard.Name, displays: [String]) throws -> Snapshot? {
        let heldOwn = try held.reading.newest(selection: selection, on: displays)
        let diskOwn = try disk.reading.newest(selection: selection, on: displays)
        if let heldOwn, diskOwn.map({ heldOwn.used >= $0.used }) ?? true {
            return try held.reading.latest(selection: selection, displays: displays)
        }
        if diskOwn != nil { return try disk.reading.latest(selection: selection, displays: displays) }
        // None of these displays': the newest of any, a held one first where nothing on disk was
        // used after it.
        if let copy = try held.reading.latest(selection: selection, displays: displays),
           try disk.reading.count(usedAfter: copy.time.timeIntervalSince1970, selection: selection) == 0 {
            return copy
        }
        return try disk.reading.latest(selection: selection, displays: displays)
    }

    /// The number of entries and their bytes, held ones too.
    func totals() -> (count: Int, bytes: Int) {
        let (onDisk, inMemory) = (disk.reading.totals(), held.reading.totals())
        return (onDisk.count + inMemory.count, onDisk.bytes + inMemory.bytes)
    }

    // MARK: Changing

    /// Moves an entry to the top (it became the clipboard again).
    func touch(_ id: Int64) throws {
        if isHeld(id) { try held.touch(id) } else { try disk.touch(onDisk(id)) }
    }

    /// Deletes entry `index`: a held one leaves memory, never having touched a file.
    func delete(index: Int) throws -> Bool {
        let place = Self.split(index, try heldPlaces())
        if let id = place.held { return try held.removal.delete(entry: id) }
        return try place.disk.map { try disk.removal.delete(index: $0) } ?? false
    }

    /// Pins or unpins entry `index`. A held entry pinned is written at once (the user keeps it);
    /// unpinned, it is as it was.
    func pin(index: Int, _ pinned: Bool) throws -> Bool {
        let place = Self.split(index, try heldPlaces())
        guard let id = place.held else { return try place.disk.map { try disk.pin(index: $0, pinned) } ?? false }
        guard pinned else { return true }
        let keys = try held.reading.order().filter { $0.id != id }.map { HeldKey($0.selection, seconds: $0.created) }
        guard let written = try writeHeld(except: Set(keys)).first,
              let index = try disk.reading.index(ofEntry: written.disk) else { return false }
        return try disk.pin(index: index, true)
    }

    /// Forgets every entry but the pinned ones (held entries are never pinned), or every one.
    func clear(includingPinned: Bool = false) throws {
        try held.removal.clear(includingPinned: true)
        try disk.removal.clear(includingPinned: includingPinned)
    }

    /// As ``HistoryRemoval/forgetCopies(since:byApps:)``, held copies too.
    func forgetCopies(since date: Date, byApps apps: [String]) throws -> Int {
        try held.removal.forgetCopies(since: date, byApps: apps) + disk.removal.forgetCopies(since: date, byApps: apps)
    }

    /// As ``HistoryRemoval/forgetSecret(entry:selection:time:display:)``: a held copy is dropped
    /// from memory, one written is forgotten on disk.
    func forgetSecret(entry: Int64?, selection: Pasteboard.Name, time: Date, display: String) throws -> Bool {
        if try held.removal.forgetSecret(entry: entry.flatMap { isHeld($0) ? $0 : nil }, selection: selection, time: time, display: display) { return true }
        return try disk.removal.forgetSecret(entry: entry.map(onDisk), selection: selection, time: time, display: display)
    }

    /// A few entries pruned, as at a copy (``HistoryRemoval/prune(reserving:bytes:atMost:)``); whether more are to go.
    @discardableResult
    func prune() throws -> Bool {
        try held.removal.prune()
        return try disk.removal.prune()
    }

    @discardableResult
    func checkpoint() -> Bool {
        disk.database.checkpoint()
    }
}
