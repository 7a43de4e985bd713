import FoundationEssentials
import Glibc
import ImageCodecs
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The history's reading: listings and searches (pages, thumbnails after the lock), an entry
/// by its place or id, the newest of a selection, texts for a menu, counts. It changes nothing
/// but what it caches (the last search's place, thumbnails of images no entry keeps).
final class HistoryReading {
    private let database: HistoryDatabase
    private var sql: SQLiteDatabase { database.connection }
    private let payloads: PayloadFiles
    /// Reads kept targets' bytes for listings (heads, pixel sizes, thumbnails' sources).
    private let targetBytes: TargetBytes
    /// Where thumbnails of image entries are made (none: entries list no thumbnail).
    var thumbnails: ThumbnailCache?
    private let logger: Logger
    /// Where the last search's walk stopped, and the history's version then: the next page of
    /// the same search of the same history resumes it (``HistoryIndex/SearchCursor``).
    private var searchCursor: (cursor: HistoryIndex.SearchCursor, version: ListingVersion)?

    init(database: HistoryDatabase, payloads: PayloadFiles, targetBytes: TargetBytes, logger: Logger) {
        self.database = database
        self.payloads = payloads
        self.targetBytes = targetBytes
        self.logger = logger
    }


    func id(at index: Int) throws -> Int64? {
        guard index >= 0 else { return nil }
        return try sql.query("SELECT id FROM entries WHERE expires IS NULL OR expires > ? ORDER BY used DESC, id DESC LIMIT 1 OFFSET ?",
                             [.real(Date().timeIntervalSince1970), .integer(Int64(index))]).first?[0].integer
    }

    /// The number of entries and their bytes.
    func totals() -> (count: Int, bytes: Int) {
        (try? EntryTotals.all(in: sql)) ?? (0, 0)
    }

    /// What a full listing depends on: the connection, its own count of changed rows, SQLite's
    /// `data_version` (which moves when another connection commits: the daemons of other
    /// displays share the history), and the first expiry still ahead (an entry that expires
    /// leaves the listing without a write). Equal versions list the same entries (a thumbnail is
    /// made once and stays).
    struct ListingVersion: Equatable {
        let database: ObjectIdentifier
        let changes: Int64
        let othersChanges: Int64
        let nextExpiry: Double?
    }

    /// The version the full listing has now; nil when it cannot be told (list it afresh).
    func listingVersion(now: Double = Date().timeIntervalSince1970) -> ListingVersion? {
        guard let others = try? sql.query("PRAGMA data_version").first?[0].integer,
              let row = try? sql.query("SELECT min(expires) FROM entries WHERE expires > ?", [.real(now)]).first else { return nil }
        let nextExpiry = row[0].real
        if let nextExpiry, nextExpiry <= now { return nil }
        return ListingVersion(database: ObjectIdentifier(sql), changes: sql.totalChanges, othersChanges: others, nextExpiry: nextExpiry)
    }

    /// The entries, newest first, as a person reads them (``EntryDescription``); with `search`,
    /// only those whose text, types or preview contain it (ignoring case). Thumbnails not made
    /// yet are made here (``listing(search:)`` leaves them for after the lock).
    func summaries(search: String? = nil) throws -> [HistoryEntrySummary] {
        var listing = try listing(search: search)
        return listing.finished()
    }

    /// The most bytes of entries one page carries (about: previews, lines, target names), well
    /// under a frame's 16 MiB; a page past it ends early, and the next begins where it ended.
    static let pageBytes = 4 << 20

    /// The entries as ``summaries(search:)`` lists them, with the thumbnails still to make left
    /// out: the caller makes them (``HistoryListing/finished()``) after releasing the history's
    /// lock, so that decoding images never holds up the history. With `limit`, a page: at most
    /// `limit` entries (fewer past ``pageBytes``) from entry `offset` on, of the whole history or
    /// of the search's matches; `total` says how many there are in all.
    func listing(search: String? = nil, offset: Int = 0, limit: Int? = nil) throws -> HistoryListing {
        try database.recovering {
            let searching = !(search ?? "").isEmpty
            let now = Date().timeIntervalSince1970
            // A search asks the index for its matches (``HistoryIndex``), then lists the page's
            // alone; without one, a page is asked of SQLite: 1,000 of 100,000 entries cost 1,000.
            let matched = searching ? try searchPage(search ?? "", offset: max(0, offset), limit: limit, now: now) : nil
            let page = matched.map { $0.page.map(\.id) }
            let paged = limit != nil || offset > 0
            let window = paged ? " LIMIT \(limit ?? -1) OFFSET \(max(0, offset))" : ""
            // Not expired, said so that SQLite walks the listing order's index (newest first) and
            // stops at the page's end: by the expiry's index it sorted a million rows for a page of one.
            let chosen = page.map { HistoryIndex.among($0) } ?? "+expires IS NULL OR +expires > ?"
            let order = "ORDER BY used DESC, id DESC\(page == nil ? window : "")"
            let bindings: [SQLiteValue] = page == nil ? [.real(now)] : []
            let rows = try sql.query("""
                SELECT id, selection, used, source, pid, size, preview,
                       length(text) - length(replace(text, char(10), '')), substr(text, -1) = char(10), substr(text, 1, 4096), app, pinned,
                       types, content_size
                FROM entries WHERE \(chosen) \(order)
                """, bindings)
            var targets: [Int64: [(name: String, size: Int, digest: String, inline: Bool)]] = [:]
            // A page or a search reads the targets and pastes of its entries alone: a search's
            // by their ids (its page's entries read again to be ordered cost a third of a page of
            // a million-entry history's matches), a page's as the page's query chooses them.
            let narrowed = paged || page != nil
            let listed = page.map { HistoryIndex.among($0, column: "entry") } ?? "entry IN (SELECT id FROM entries WHERE \(chosen) \(order))"
            let targetRows = narrowed
                ? try sql.query("SELECT entry, name, size, digest, data IS NOT NULL FROM targets WHERE \(listed) ORDER BY entry, position", bindings)
                : try sql.query("SELECT entry, name, size, digest, data IS NOT NULL FROM targets ORDER BY entry, position")
            for row in targetRows {
                guard let entry = row[0].integer, let name = row[1].text else { continue }
                targets[entry, default: []].append((name, Int(row[2].integer ?? 0), row[3].text ?? "", row[4].integer == 1))
            }
            let pastes = try EntryPastes.of(narrowed ? listed : nil, narrowed ? bindings : [], in: sql)
            var total = matched?.total ?? 0
            if matched == nil, paged {
                // The totals the triggers keep, less the expired entries not pruned yet (by the expiry's index).
                let expired = try sql.query("SELECT count(*) FROM entries WHERE expires IS NOT NULL AND expires <= ?", [.real(now)])
                total = try EntryTotals.all(in: sql).count - Int(expired.first?[0].integer ?? 0)
            }
            // A match's index is its place in the whole history (what `select N` takes).
            let indexes = Dictionary(matched?.page.map { ($0.id, $0.place) } ?? [], uniquingKeysWith: { first, _ in first })
            var result: [HistoryEntrySummary] = []
            var pending: [HistoryListing.Pending] = []
            var sized: Set<String> = []
            var bytes = 0
            for (position, row) in rows.enumerated() {
                let id = row[0].integer ?? 0
                let index = indexes[id] ?? ((paged ? max(0, offset) : 0) + position)
                let kept = targets[id] ?? []
                // Described when kept; an entry written without a description is described now.
                let description = row[12].text.map { types in
                    EntryDescription(types: types.isEmpty ? [] : types.components(separatedBy: "\n"), size: Int(row[13].integer ?? 0))
                } ?? EntryDescription.describe(kept.map { EntryDescription.Target(name: $0.name, size: $0.size) }) { position in
                    self.targetBytes.head(in: self.sql, entry: id, position: position, digest: kept[position].digest, inline: kept[position].inline)
                }
                var preview = row[6].text ?? ""
                let head = row[9].text
                // An image is shown by its pixel size and, where the cache is, a thumbnail.
                var picture: (width: Int, height: Int, thumbnail: String?)?
                var toMake: (position: Int, digest: String, inline: Bool)?
                if head == nil, let position = kept.firstIndex(where: { ImageFormat(mimeType: $0.name)?.isReadable ?? false }),
                   let size = targetBytes.pixelSize(in: sql, entry: id, position: position, digest: kept[position].digest, inline: kept[position].inline) {
                    let target = kept[position]
                    sized.insert(target.digest)
                    var thumbnail: String?
                    switch thumbnails?.existing(target.digest) {
                    case let .made(path)?: thumbnail = path
                    case .failed?: break
                    case nil: toMake = (position, target.digest, target.inline)
                    }
                    picture = (size.width, size.height, thumbnail)
                }
                if head == nil, let type = description.types.first {
                    // Kept without text: named by what a person recognises (older entries named
                    // their first target, perhaps a toolkit's marker).
                    preview = picture.map { "[\(type) \($0.width)×\($0.height)]" } ?? "[\(type) \(ByteCount.format(description.size))]"
                }
                let lines = head.map {
                    EntryDescription.moreLines(head: $0, lineFeeds: Int(row[7].integer ?? 0), endsWithLineFeed: row[8].integer == 1)
                } ?? (count: 0, rest: "")
                bytes += 256 + preview.utf8.count + lines.rest.utf8.count + kept.reduce(0) { $0 + $1.name.utf8.count + 3 }
                if let toMake, thumbnails != nil,
                   let image = targetBytes.payload(in: sql, entry: id, position: toMake.position, digest: toMake.digest, inline: toMake.inline) {
                    // Made after the lock; the payload is mapped (a file) or small (inline).
                    pending.append(.init(index: result.count, digest: toMake.digest, image: image))
                }
                result.append(HistoryEntrySummary(
                    index: index, id: id, selection: SelectionNames.selection(for: Pasteboard.Name(rawValue: row[1].text ?? "general")),
                    time: Date(timeIntervalSince1970: row[2].real ?? 0), targets: kept.map(\.name), types: description.types,
                    size: description.size, keptBytes: Int(row[5].integer ?? 0), source: row[3].text, pid: row[4].integer.map { Int($0) },
                    preview: preview, moreLines: lines.count, rest: lines.rest,
                    pixelWidth: picture?.width, pixelHeight: picture?.height, thumbnail: picture?.thumbnail, app: row[10].text,
                    pinned: row[11].integer == 1, pastes: pastes[id] ?? []))
                if limit != nil, bytes >= Self.pageBytes { break }
            }
            if !searching, offset == 0 {
                // A listing from the newest entry: the thumbnails and remembered pixel sizes of
                // images no entry keeps any more (deleted, evicted) go. A page does not see every
                // image, so it asks the database which of those it knows of are kept (by the
                // digest's index: a history of 100,000 texts is not read for it).
                let kept = paged ? try keptDigests(among: (thumbnails?.digests() ?? []).union(targetBytes.sizedImages)) : sized
                thumbnails?.prune(keeping: kept)
                targetBytes.forgetSizes(except: kept)
            }
            return HistoryListing(entries: result, pending: pending, thumbnails: thumbnails,
                                  total: searching || paged ? total : result.count, partial: matched?.partial ?? false)
        }
    }

    /// A page of a search's matches (``HistoryIndex/search(_:offset:limit:in:now:resume:sparse:)``),
    /// resuming the last page's walk where it is this one's start in the same history.
    private func searchPage(_ search: String, offset: Int, limit: Int?, now: Double) throws(SQLiteError) -> HistoryIndex.SearchPage {
        let version = listingVersion(now: now)
        let resume = searchCursor.flatMap { $0.version == version ? $0.cursor : nil }
        let found = try HistoryIndex.search(search, offset: offset, limit: limit, in: sql, now: now, resume: resume)
        if let cursor = found.cursor, let version { searchCursor = (cursor, version) } else { searchCursor = nil }
        return found
    }

    /// Those of `digests` that a kept target has.
    func keptDigests(among digests: Set<String>) throws -> Set<String> {
        var kept: Set<String> = []
        let all = Array(digests)
        for start in stride(from: 0, to: all.count, by: 500) {
            let chunk = all[start..<min(all.count, start + 500)]
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try sql.query("SELECT DISTINCT digest FROM targets WHERE digest IN (\(marks))", chunk.map { .text($0) }) {
                if let digest = row[0].text { kept.insert(digest) }
            }
        }
        return kept
    }

    /// Entry `index` (0 = newest) with its payloads (files mapped, not read).
    func snapshot(at index: Int) throws -> Snapshot? {
        try database.recovering { try id(at: index).flatMap { try snapshot(id: $0) } }
    }

    /// Entry `id` (as listings name it), nil when there is none or it expired.
    func snapshot(entry id: Int64) throws -> Snapshot? {
        try database.recovering { try index(ofEntry: id) == nil ? nil : snapshot(id: id) }
    }

    /// Where entry `id` is in the listing (0 = newest), nil when there is none or it expired.
    func index(ofEntry id: Int64) throws -> Int? {
        try database.recovering {
            let now = Date().timeIntervalSince1970
            guard let row = try sql.query("SELECT used FROM entries WHERE id = ? AND (expires IS NULL OR expires > ?)", [.integer(id), .real(now)]).first,
                  let used = row[0].real else { return nil }
            let before = try sql.query("""
                SELECT count(*) FROM entries WHERE (expires IS NULL OR expires > ?) AND (used > ? OR (used = ? AND id > ?))
                """, [.real(now), .real(used), .real(used), .integer(id)]).first?[0].integer ?? 0
            return Int(before)
        }
    }

    /// The entries' texts, newest first (those without text left out), each cut at `limit` bytes,
    /// with when each was last used: as many as fit in `budget` bytes (the first always), read a
    /// thousand at a time along the listing order's index, so that a million entries are never
    /// all read for a menu that shows a few thousand.
    func texts(limit: Int, budget: Int) throws -> [(text: String, used: Double)] {
        try database.recovering {
            var texts: [(text: String, used: Double)] = []
            var bytes = 0
            var last: (used: Double, id: Int64)?
            let now = Date().timeIntervalSince1970
            repeat {
                let after = last.map { _ in " AND (used < ? OR (used = ? AND id < ?))" } ?? ""
                let rows = try sql.query("""
                    SELECT substr(text, 1, ?), used, id FROM entries WHERE text IS NOT NULL AND (+expires IS NULL OR +expires > ?)\(after)
                    ORDER BY used DESC, id DESC LIMIT 1000
                    """, [.integer(Int64(limit)), .real(now)] + (last.map { [.real($0.used), .real($0.used), .integer($0.id)] } ?? []))
                for row in rows {
                    guard bytes < budget || texts.isEmpty else { break }
                    let text = row[0].text ?? ""
                    texts.append((text, row[1].real ?? 0))
                    bytes += text.utf8.count
                }
                guard rows.count == 1000, let end = rows.last else { break }
                last = (end[1].real ?? 0, end[2].integer ?? 0)
            } while bytes < budget
            return texts
        }
    }

    /// The entries in listing order (newest first), as few words: their id, selection, when
    /// made and last used, and display.
    func order() throws -> [(id: Int64, selection: Pasteboard.Name, created: Double, used: Double, display: String)] {
        try database.recovering {
            try sql.query("""
                SELECT id, selection, created, used, display FROM entries WHERE expires IS NULL OR expires > ? ORDER BY used DESC, id DESC
                """, [.real(Date().timeIntervalSince1970)]).compactMap { row in
                row[0].integer.map { ($0, Pasteboard.Name(rawValue: row[1].text ?? "general"), row[2].real ?? 0, row[3].real ?? 0, row[4].text ?? "") }
            }
        }
    }

    /// How many entries (not expired) were used after `time` (seconds since 1970); with
    /// `selection` and `display`, only theirs.
    func count(usedAfter time: Double, selection: Pasteboard.Name? = nil, display: String? = nil) throws -> Int {
        try database.recovering {
            var condition = "used > ? AND (expires IS NULL OR expires > ?)"
            var bindings: [SQLiteValue] = [.real(time), .real(Date().timeIntervalSince1970)]
            if let selection {
                condition += " AND selection = ?"
                bindings.append(.text(selection.rawValue))
            }
            if let display {
                condition += " AND display = ?"
                bindings.append(.text(display))
            }
            return Int(try sql.query("SELECT count(*) FROM entries WHERE \(condition)", bindings).first?[0].integer ?? 0)
        }
    }

    /// The newest entry of a selection, preferring one taken on `display`; expired ones never.
    func latest(selection: Pasteboard.Name, display: String) throws -> Snapshot? {
        try latest(selection: selection, displays: [display])
    }

    /// The newest entry of a selection taken on one of `displays` (a bridge keeps two), else the
    /// newest of any display; expired ones never. By the index of each selection's entries by
    /// display, newest last: a display's newest is one look, and the newest of any display one
    /// look for each display (a loose scan of the index, never a sort of a million rows).
    func latest(selection: Pasteboard.Name, displays: [String]) throws -> Snapshot? {
        try database.recovering {
            if let mine = try newestEntry(selection, on: displays) { return try snapshot(id: mine.id) }
            return try newestEntry(selection, on: allDisplays(selection)).flatMap { try snapshot(id: $0.id) }
        }
    }

    /// The newest entry of a selection taken on one of `displays` only (not expired): its id and
    /// when it was last used.
    func newest(selection: Pasteboard.Name, on displays: [String]) throws -> (id: Int64, used: Double)? {
        try database.recovering { try newestEntry(selection, on: displays) }
    }

    private func newestEntry(_ selection: Pasteboard.Name, on displays: [String]) throws -> (id: Int64, used: Double)? {
        let now = Date().timeIntervalSince1970
        var best: (id: Int64, used: Double)?
        for display in displays {
            let found = try sql.query("""
                SELECT id, used FROM entries INDEXED BY entries_latest WHERE selection = ? AND display = ? AND (expires IS NULL OR expires > ?)
                ORDER BY used DESC, id DESC LIMIT 1
                """, [.text(selection.rawValue), .text(display), .real(now)]).first.flatMap { row in
                row[0].integer.map { (id: $0, used: row[1].real ?? 0) }
            }
            if let found, best.map({ (found.used, found.id) > ($0.used, $0.id) }) ?? true { best = found }
        }
        return best
    }

    /// Every display a selection has entries of, one look in the index each.
    private func allDisplays(_ selection: Pasteboard.Name) throws -> [String] {
        var displays: [String] = []
        while let next = try sql.query("""
            SELECT display FROM entries INDEXED BY entries_latest WHERE selection = ?\(displays.isEmpty ? "" : " AND display > ?") ORDER BY display LIMIT 1
            """, [.text(selection.rawValue)] + (displays.last.map { [.text($0)] } ?? [])).first?[0].text {
            displays.append(next)
        }
        return displays
    }

    private func snapshot(id: Int64) throws -> Snapshot? {
        guard let row = try sql.query(
            "SELECT selection, used, source, pid, advertised, expires, local_only, complete, app FROM entries WHERE id = ?", [.integer(id)]).first
        else { return nil }
        var targets: [KeptTarget] = []
        for target in try sql.query("SELECT name, type, digest, data FROM targets WHERE entry = ? ORDER BY position", [.integer(id)]) {
            guard let name = target[0].text, let type = target[1].text, let digest = target[2].text.flatMap(Digest.init(hex:)) else { continue }
            if let data = target[3].blob {
                targets.append(KeptTarget(target: name, type: type, data: data, digest: digest))
            } else if let data = payloads.contents(digest) {
                targets.append(KeptTarget(target: name, type: type, data: data, digest: digest))
            } else {
                logger.warning("history entry \(id): the payload of \(name) (\(digest.hex)) is missing; served without it")
            }
        }
        var snapshot = Snapshot(selection: Pasteboard.Name(rawValue: row[0].text ?? "general"),
                                advertised: (row[4].text ?? "").split(separator: "\n").map(String.init), targets: targets,
                                time: Date(timeIntervalSince1970: row[1].real ?? 0), source: row[2].text, pid: row[3].integer.map { Int($0) })
        snapshot.expires = row[5].real.map { Date(timeIntervalSince1970: $0) }
        snapshot.isLocalOnly = row[6].integer == 1
        snapshot.isComplete = row[7].integer != 0
        snapshot.app = row[8].text
        snapshot.id = id
        snapshot.shareIdenticalPayloads()
        return snapshot
    }

    /// Whether an entry of the snapshot's selection has its content (``contentKey``): a copy of
    /// it is that entry moved to the top.
    func holdsContent(of snapshot: Snapshot) throws -> Bool {
        let content = HistoryStore.contentKey(snapshot.targets.map { ($0.target, $0.digest.hex) })
        guard !content.isEmpty else { return false }
        return try database.recovering {
            try !sql.query("SELECT 1 FROM entries WHERE selection = ? AND content_key = ? LIMIT 1",
                                [.text(snapshot.selection.rawValue), .text(content)]).isEmpty
        }
    }

    /// The pastes of entry `id`, newest first.
    func pastes(of id: Int64) throws -> [PasteRecord] {
        try database.recovering { try EntryPastes.of("entry = ?", [.integer(id)], in: sql)[id] ?? [] }
    }
}


/// A listing of the history whose thumbnails are made after the history's lock is released
/// (``HistoryReading/listing(search:)``).
struct HistoryListing {
    struct Pending {
        let index: Int
        let digest: String
        let image: Data
    }

    var entries: [HistoryEntrySummary]
    var pending: [Pending]
    let thumbnails: ThumbnailCache?
    /// How many entries the whole listing (or search) has, the page's and the others; with
    /// ``partial``, the matches up to the page's end: more may follow.
    var total = 0
    var partial = false

    /// The entries, with the thumbnails still to make made (or found failed, and remembered so).
    mutating func finished() -> [HistoryEntrySummary] {
        for item in pending {
            entries[item.index].thumbnail = thumbnails?.thumbnail(for: item.digest, image: item.image)
        }
        pending = []
        return entries
    }
}
