import FoundationEssentials
import Glibc
import ImageCodecs
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The clipboard history on disk: SQLite (WAL) for the entries and small payloads, and
/// content-addressed files (`blobs/ab/abcdef…`, named by SHA-256) for large ones, which
/// identical bytes share.
///
/// Crash safety: a payload file is complete (written, synced, renamed) before the row that
/// names it is committed, and a row is committed in one transaction with its targets, so a
/// process killed at any moment loses at most the entry being written; files no row names are
/// removed at the next start. A database SQLite finds damaged is moved aside and a new one made.
final class HistoryStore {
    /// Payloads up to this size live in the database; larger ones in files.
    static let inlineLimit = 16 << 10
    /// This store's limit: ``inlineLimit`` on disk, every payload for a store in memory.
    private let inlineLimit: Int
    /// Whether the history lives in memory only (its directory could not be used).
    let isInMemory: Bool

    let directory: URL
    let databasePath: String
    /// The payload files of large targets, named by digest.
    private let payloads: PayloadFiles
    /// Room kept for deleting on a full disk.
    private let reserve: DiskReserve
    private let logger: Logger
    private var database: SQLiteDatabase
    var maxEntries: Int
    var maxBytes: Int
    /// Where thumbnails of image entries are made (none: entries list no thumbnail).
    var thumbnails: ThumbnailCache?
    /// Reads kept targets' bytes for listings (heads, pixel sizes, thumbnails' sources).
    private let targetBytes: TargetBytes

    /// The key the history is sealed with at rest (its payload files' too); nil: plain.
    var seal: HistorySeal? { payloads.seal }

    /// Opens (or creates) the store in `directory` (made 0700). With `seals`, sealed at rest with
    /// the first key of them that opens it (``HistorySealing``): a plain history is sealed first.
    init(directory: URL, maxEntries: Int, maxBytes: Int, seals: [HistorySeal] = [], logger: Logger) throws {
        self.directory = directory
        self.maxEntries = maxEntries
        self.maxBytes = maxBytes
        self.logger = logger
        inlineLimit = Self.inlineLimit
        isInMemory = false
        payloads = PayloadFiles(directory: directory.appendingPathComponent("blobs"))
        targetBytes = TargetBytes(payloads: payloads)
        reserve = DiskReserve(path: directory.appendingPathComponent("reserve").path)
        databasePath = directory.appendingPathComponent("history.sqlite").path
        for path in [directory.path, payloads.directory.path] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            chmod(path, 0o700)
        }
        if seals.isEmpty {
            database = try HistorySchema.open(databasePath, logger: logger)
        } else {
            let opened = try HistorySealing.open(databasePath, seals: seals, logger: logger)
            database = opened.database
            payloads.seal = opened.seal
            if let sealed = opened.seal { logger.info("the history is sealed at rest with the key from \(sealed.source)") }
            // Plain payload files are sealed once the database is: a marker carries the work over
            // a crash.
            let marker = payloads.directory.appendingPathComponent(".sealing").path
            if opened.seal != nil, opened.converted || FileManager.default.fileExists(atPath: marker) {
                _ = FileManager.default.createFile(atPath: marker, contents: nil)
                let count = payloads.sealPlainFiles()
                unlink(marker)
                if count > 0 { logger.notice("sealed \(count) payload files of the history; their plain bytes were overwritten") }
            }
        }
        // The open reads no row per entry (a million took 40 s): what is left to prune,
        // describe, index or check is done after, in turns (``maintain()``, ``HistorySchema/damage(at:)``;
        // a pruned entry costs up to 3.5 ms, so not even one turn of them is pruned here).
        collectGarbage()
        keepReserve()
    }

    /// A history in memory only, for a state directory that cannot be used (read-only, not a
    /// directory, no permission): entries last until the daemon stops.
    init(inMemoryFor directory: URL, maxEntries: Int, maxBytes: Int, logger: Logger) throws {
        self.directory = directory
        self.maxEntries = maxEntries
        self.maxBytes = maxBytes
        self.logger = logger
        inlineLimit = .max
        isInMemory = true
        payloads = PayloadFiles(directory: directory.appendingPathComponent("blobs"))
        targetBytes = TargetBytes(payloads: payloads)
        reserve = DiskReserve(path: directory.appendingPathComponent("reserve").path)
        databasePath = ":memory:"
        database = try SQLiteDatabase(path: ":memory:")
        try HistorySchema.prepare(database, inMemory: true)
    }

    // MARK: Upkeep in turns

    /// The most entries a call of ``prune(reserving:bytes:atMost:)`` deletes unless told: a copy
    /// over the caps prunes a few itself (it added one), and caps lowered by 100,000 are met by
    /// ``maintain()``'s paced turns, with the history's lock free between them (1,000 pruned at
    /// a copy held it 3.5 s at a million entries).
    static let copyTurn = TurnPacing.fewest

    /// What the upkeep has done since it began, said once it is done.
    private var upkeep: (began: Date, described: Int, indexed: Int, pruned: Int)?
    /// How many entries the next turn of upkeep takes.
    private var pacing = TurnPacing()
    /// Where the last search's walk stopped, and the history's version then: the next page of
    /// the same search of the same history resumes it (``HistoryIndex/SearchCursor``).
    private var searchCursor: (cursor: HistoryIndex.SearchCursor, version: ListingVersion)?

    /// One turn of the history's upkeep, the first of these with work left: delete the entries
    /// beyond the caps, the oldest first (before any work is spent on them); describe entries
    /// written without a description (by an earlier xpbd, by another writer, or before the
    /// description's rules changed, ``HistoryIndex/descriptionVersion``), the newest first; add
    /// those not in the search index to it.
    /// Returns whether work is left (the caller runs another turn, after whatever waits for the
    /// lock). Meanwhile a listing describes what it shows itself, and a search looks at the rows
    /// not indexed yet one by one.
    func maintain() -> Bool {
        var done = upkeep ?? (Date(), 0, 0, 0)
        defer { upkeep = done }
        // One step's entries and time set the next turn's size.
        func paced(_ step: () throws -> Int) rethrows -> Int {
            let began = Date()
            let count = try step()
            pacing.took(Date().timeIntervalSince(began), for: count)
            return count
        }
        do {
            var more = false
            done.pruned += try paced {
                let before = totals().count
                more = try prune(atMost: pacing.size)
                return max(0, before - totals().count)
            }
            if more { return true }
            let described = try paced { try recovering { try describeUndescribed(atMost: pacing.size) } }
            done.described += described
            if described > 0 { return true }
            let indexed = try paced { try recovering { try indexUnindexed(atMost: pacing.size) } }
            done.indexed += indexed
            if indexed > 0 { return true }
        } catch {
            logger.warning("could not describe, index or prune the history's entries: \(error)")
        }
        if done.described + done.indexed + done.pruned > 0 {
            logger.info("""
                history upkeep: described \(done.described), indexed \(done.indexed) for search and pruned \(done.pruned) entries \
                in \(Int(Date().timeIntervalSince(done.began) * 1000)) ms, in turns of about \(Int(TurnPacing.target * 1000)) ms
                """)
        }
        done = (Date(), 0, 0, 0)
        return false
    }

    /// Describes up to `limit` of the entries written without a description, the newest first:
    /// their types, content size and content key, which listings, searches and the look for a
    /// copy kept before read. They leave the search index while their types change (indexed
    /// again by ``indexUnindexed(atMost:)``). Returns how many.
    private func describeUndescribed(atMost limit: Int) throws -> Int {
        // By the partial index of the rows without one: no row read to find them.
        let ids = try database.query("SELECT id FROM entries WHERE types IS NULL OR content_key IS NULL ORDER BY id DESC LIMIT ?",
                                     [.integer(Int64(limit))]).compactMap { $0[0].integer }
        guard !ids.isEmpty else { return 0 }
        var targets: [Int64: [(name: String, size: Int, digest: String, inline: Bool)]] = [:]
        for row in try database.query("SELECT entry, name, size, digest, data IS NOT NULL FROM targets WHERE \(HistoryIndex.among(ids, column: "entry")) ORDER BY entry, position") {
            guard let entry = row[0].integer, let name = row[1].text else { continue }
            targets[entry, default: []].append((name, Int(row[2].integer ?? 0), row[3].text ?? "", row[4].integer == 1))
        }
        try database.transaction {
            try HistoryIndex.unindex(HistoryIndex.among(ids), [], in: database)
            for id in ids {
                let kept = targets[id] ?? []
                let description = EntryDescription.describe(kept.map { EntryDescription.Target(name: $0.name, size: $0.size) }) { position in
                    self.targetBytes.head(in: self.database, entry: id, position: position, digest: kept[position].digest, inline: kept[position].inline)
                }
                try database.query("UPDATE entries SET types = ?, content_size = ?, content_key = ? WHERE id = ?", [
                    .text(description.types.joined(separator: "\n")), .integer(Int64(description.size)),
                    .text(Self.contentKey(kept.map { ($0.name, $0.digest) })), .integer(id),
                ])
            }
        }
        return ids.count
    }

    /// Adds up to `limit` of the entries not in the search index to it, the newest first;
    /// returns how many.
    private func indexUnindexed(atMost limit: Int) throws -> Int {
        let ids = try database.query("SELECT id FROM entries WHERE indexed = 0 ORDER BY id DESC LIMIT ?", [.integer(Int64(limit))])
            .compactMap { $0[0].integer }
        guard !ids.isEmpty else { return 0 }
        try database.transaction { try HistoryIndex.index(HistoryIndex.among(ids), [], in: database) }
        return ids.count
    }

    /// Counts the files this store has opened at ``databasePath``: one moved aside for damage
    /// is followed by a new one.
    private(set) var generation = 1

    /// The damage a check of the whole file found (``HistorySchema/damage(at:)``, run off the
    /// lock, on the file of `generation`) handled: the file is moved aside and a new one made, as
    /// when a query finds it damaged. Nothing when the store has since made a new file itself.
    func replaceDamaged(_ damage: SQLiteError, generation checked: Int) {
        guard !isInMemory, checked == generation else { return }
        do {
            HistorySchema.moveAside(databasePath, because: damage, logger: logger)
            generation += 1
            database = try HistorySchema.open(databasePath, seal: seal, logger: logger)
        } catch {
            logger.error("the history could not be made again after its damage: \(error)")
        }
    }

    /// Runs `body`; when SQLite reports the database damaged, moves it aside, starts a new one,
    /// and runs `body` once more.
    @discardableResult
    private func recovering<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError where error.isCorrupt {
            HistorySchema.moveAside(databasePath, because: error, logger: logger)
            generation += 1
            database = try HistorySchema.open(databasePath, seal: seal, logger: logger)
            return try body()
        }
    }

    // MARK: Writing

    /// Stores a snapshot as the newest entry. An entry of its selection with the same content
    /// (``contentKey``) is not repeated: one with the very same targets moves to the top, any
    /// other is replaced by this one. Returns the entry's id.
    @discardableResult
    func add(_ snapshot: Snapshot, display: String) throws -> Int64 {
        // New entries never take the space kept for deleting them.
        guard keepReserve() else {
            throw POSIXFailure("keeping \(ByteCount.format(DiskReserve.bytes)) free (\(reserve.path)) so that entries can be deleted", ENOSPC)
        }
        return try recovering {
            let exact = snapshot.targets.map { "\($0.target):\($0.digest.hex)" }.joined(separator: " ")
            let content = Self.contentKey(snapshot.targets.map { ($0.target, $0.digest.hex) })
            var replaced: [Int64] = []
            var pinned = false
            if !content.isEmpty {
                // The entries of the same content, found by its key (indexed), not by a look at each one.
                let rows = try database.query("""
                    SELECT id, (SELECT group_concat(pair, ' ') FROM (SELECT name || ':' || digest AS pair FROM targets WHERE entry = entries.id ORDER BY position)),
                           pinned
                    FROM entries WHERE selection = ? AND content_key = ? ORDER BY used DESC, id DESC
                    """, [.text(snapshot.selection.rawValue), .text(content)])
                for row in rows {
                    guard let id = row[0].integer else { continue }
                    let pairs = (row[1].text ?? "").split(separator: " ").compactMap { pair -> (String, String)? in
                        guard let colon = pair.lastIndex(of: ":") else { return nil }
                        return (String(pair[..<colon]), String(pair[pair.index(after: colon)...]))
                    }
                    guard Self.contentKey(pairs) == content else { continue }
                    // A pinned entry replaced by the same content copied again stays pinned.
                    if row[2].integer == 1 { pinned = true }
                    if replaced.isEmpty, row[1].text == exact {
                        try database.query("UPDATE entries SET used = ? WHERE id = ?", [.real(snapshot.time.timeIntervalSince1970), .integer(id)])
                        return id
                    }
                    replaced.append(id)
                }
            }
            // Files first: a row never names a payload that is not on disk. The files made here go
            // again if the row cannot be written (a full disk): nothing is left behind that no row
            // names, and the space is there for the next entry.
            var written: Set<Digest> = []
            var made: [Digest] = []
            do {
                for target in snapshot.targets where target.data.count > inlineLimit && written.insert(target.digest).inserted {
                    if try payloads.write(target.data, digest: target.digest) { made.append(target.digest) }
                }
            } catch {
                made.forEach { unlink(payloads.path($0)) }
                throw error
            }
            let named = replaced.isEmpty ? [] : referencedFiles() ?? []
            let description = EntryDescription.describe(snapshot.targets.map { EntryDescription.Target(name: $0.target, size: $0.data.count) }) {
                snapshot.targets[$0].data.prefix(64)
            }
            let id: Int64
            do {
                id = try database.transaction { () throws -> Int64 in
                    for id in replaced { try HistoryIndex.delete("id = ?", [.integer(id)], in: database) }
                    try database.query("""
                        INSERT INTO entries(selection, display, created, used, source, pid, size, preview, text, advertised, expires, local_only, complete, app,
                                            pinned, types, content_size, content_key)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """, [
                            .text(snapshot.selection.rawValue), .text(display), .real(snapshot.time.timeIntervalSince1970),
                            .real(snapshot.time.timeIntervalSince1970), snapshot.source.map { .text($0) } ?? .null,
                            snapshot.pid.map { .integer(Int64($0)) } ?? .null, .integer(Int64(snapshot.size)), .text(snapshot.preview),
                            snapshot.text().map { .text($0) } ?? .null, .text(snapshot.advertised.joined(separator: "\n")),
                            snapshot.expires.map { .real($0.timeIntervalSince1970) } ?? .null, .integer(snapshot.isLocalOnly ? 1 : 0),
                            .integer(snapshot.isComplete ? 1 : 0), snapshot.app.map { .text($0) } ?? .null, .integer(pinned ? 1 : 0),
                            .text(description.types.joined(separator: "\n")), .integer(Int64(description.size)), .text(content),
                        ])
                    let id = database.lastInsertedRow
                    try HistoryIndex.index("id = ?", [.integer(id)], in: database)
                    for (position, target) in snapshot.targets.enumerated() {
                        try database.query("INSERT INTO targets(entry, position, name, type, digest, size, data) VALUES (?, ?, ?, ?, ?, ?, ?)", [
                            .integer(id), .integer(Int64(position)), .text(target.target), .text(target.type), .text(target.digest.hex),
                            .integer(Int64(target.data.count)), target.data.count > inlineLimit ? .null : .blob(target.data),
                        ])
                    }
                    return id
                }
            } catch {
                let names = referencedFiles() ?? []
                for digest in made where !names.contains(digest.hex) { unlink(payloads.path(digest)) }
                throw error
            }
            if !replaced.isEmpty { collectGarbage(named: named) }
            try prune()
            return id
        }
    }

    /// Whether an entry of the snapshot's selection has its content (``contentKey``): a copy of
    /// it is that entry moved to the top.
    func holdsContent(of snapshot: Snapshot) throws -> Bool {
        let content = Self.contentKey(snapshot.targets.map { ($0.target, $0.digest.hex) })
        guard !content.isEmpty else { return false }
        return try recovering {
            try !database.query("SELECT 1 FROM entries WHERE selection = ? AND content_key = ? LIMIT 1",
                                [.text(snapshot.selection.rawValue), .text(content)]).isEmpty
        }
    }

    /// What makes two entries the same to a person: the distinct payloads, whatever the targets
    /// that serve them (xclip's text and xpb's are one entry). Left out: xpb's manifest, which
    /// names targets and options, not content, and beside a UTF-8 text the legacy encodings of
    /// the same text (`STRING` is Latin-1, `TEXT` and `COMPOUND_TEXT` the owner's choice). Empty
    /// for no payload.
    static func contentKey(_ targets: [(name: String, digest: String)]) -> String {
        let hasUTF8 = targets.contains { $0.name == "UTF8_STRING" || $0.name == "text/plain;charset=utf-8" }
        let legacy: Set<String> = hasUTF8 ? ["STRING", "TEXT", "COMPOUND_TEXT"] : []
        return Set(targets.filter { $0.name != "XPB_MANIFEST" && !legacy.contains($0.name) }.map(\.digest)).sorted().joined(separator: " ")
    }

    /// Pins or unpins entry `index`; false when there is none.
    func pin(index: Int, _ pinned: Bool) throws -> Bool {
        try recovering {
            guard let id = try id(at: index) else { return false }
            try database.query("UPDATE entries SET pinned = ? WHERE id = ?", [.integer(pinned ? 1 : 0), .integer(id)])
            return true
        }
    }

    /// Deletes entry `id` (as ``delete(index:)`` deletes); false when there is none.
    func delete(entry id: Int64) throws -> Bool {
        guard let index = try index(ofEntry: id) else { return false }
        return try delete(index: index)
    }

    /// Makes the ids this store gives new entries start after `id` (a store in memory beside
    /// the one on disk names its entries apart from it: ``History``).
    func numberEntries(after id: Int64) throws {
        try database.execute("DELETE FROM sqlite_sequence WHERE name = 'entries'")
        try database.query("INSERT INTO sqlite_sequence(name, seq) VALUES ('entries', ?)", [.integer(id)])
    }

    /// Notes a paste of entry `id` (``EntryPastes``); nothing when it is gone.
    func addPaste(_ record: PasteRecord, to id: Int64) throws {
        try recovering { try EntryPastes.add(record, to: id, in: database) }
    }

    /// Writes this history's entries, the oldest first, into `other`, each as it was: when it was
    /// last used, whether it is pinned, its pastes (a history kept in memory while the keyring
    /// was locked, moved into the disk's once it opens). The expired ones are left. Returns how
    /// many were written.
    func moveEntries(into other: HistoryStore) throws -> Int {
        var moved = 0
        let rows = try recovering { try database.query("SELECT id, display, used, pinned FROM entries ORDER BY used, id") }
        for row in rows {
            guard let id = row[0].integer, let snapshot = try snapshot(entry: id) else { continue }
            let written = try other.add(snapshot, display: row[1].text ?? "")
            try other.recovering {
                try other.database.query("UPDATE entries SET used = max(used, ?), pinned = max(pinned, ?) WHERE id = ?",
                                         [.real(row[2].real ?? 0), .integer(row[3].integer ?? 0), .integer(written)])
            }
            for paste in try pastes(of: id).reversed() { try other.addPaste(paste, to: written) }
            moved += 1
        }
        return moved
    }

    /// The pastes of entry `id`, newest first.
    func pastes(of id: Int64) throws -> [PasteRecord] {
        try recovering { try EntryPastes.of("entry = ?", [.integer(id)], in: database)[id] ?? [] }
    }

    /// Moves an entry to the top (it became the clipboard again), or marks it used at `time`
    /// (seconds since 1970).
    func touch(_ id: Int64, at time: Double? = nil) throws {
        try recovering { try database.query("UPDATE entries SET used = ? WHERE id = ?", [.real(time ?? Date().timeIntervalSince1970), .integer(id)]) }
    }

    /// Removes expired entries, then the oldest beyond the entry and size caps (the newest is
    /// always kept; pinned entries are never removed, nor counted), then payload files no
    /// entry names. At most `turn` entries go in one call, in one transaction: returns whether
    /// more are to go (caps lowered by 100,000: ``maintain()`` goes on in turns).
    @discardableResult
    func prune(reserving entries: Int = 0, bytes: Int = 0, atMost turn: Int = copyTurn) throws -> Bool {
        let maxEntries = max(1, maxEntries - entries)
        let maxBytes = max(0, maxBytes - bytes)
        return try recovering {
            // Within the caps and nothing expired (each copy asks): two rows read, by an index
            // and from the totals the triggers keep (``EntryTotals``), never a row an entry.
            let now = Date().timeIntervalSince1970
            let expired = try database.query("SELECT id FROM entries WHERE expires IS NOT NULL AND expires <= ? LIMIT ?",
                                              [.real(now), .integer(Int64(turn))]).compactMap { $0[0].integer }
            let caps = try EntryTotals.of(pinned: false, in: database)
            let over = { (count: Int, bytes: Int) in count > 1 && (count > maxEntries || bytes > maxBytes) }
            guard !expired.isEmpty || over(caps.count, caps.bytes) else { return false }
            let named = referencedFiles() ?? []
            let more = try database.transaction { () throws -> Bool in
                if !expired.isEmpty { try HistoryIndex.delete(HistoryIndex.among(expired), [], in: database) }
                var (count, bytes) = try EntryTotals.of(pinned: false, in: database)
                let room = turn - expired.count
                guard room > 0, over(count, bytes) else { return over(count, bytes) }
                // The oldest first, along the listing order's index: the newest `maxEntries`
                // (whose bytes fit) stay, as when counted from the newest.
                var doomed: [Int64] = []
                for row in try database.query("SELECT id, size FROM entries WHERE pinned = 0 ORDER BY used, id LIMIT ?", [.integer(Int64(room))]) {
                    guard over(count, bytes), let id = row[0].integer else { break }
                    doomed.append(id)
                    count -= 1
                    bytes -= Int(row[1].integer ?? 0)
                }
                if !doomed.isEmpty { try HistoryIndex.delete(HistoryIndex.among(doomed), [], in: database) }
                return over(count, bytes)
            }
            collectGarbage(named: named)
            return more
        }
    }

    /// Deletes payload files (and leftover temporary files) no entry names.
    ///
    /// The daemons of one user (one per display) share the store: a file another daemon wrote
    /// a moment ago may belong to a row it is about to commit. Only files older than
    /// ``garbageAge`` are deleted.
    /// `named`: the payload files named before entries were deleted: those no longer named are
    /// ours to delete at once, whatever their age.
    func collectGarbage(named before: Set<String> = []) {
        guard !isInMemory, let names = referencedFiles() else { return }
        payloads.collectGarbage(referenced: names, named: before)
    }

    /// The payload files rows name now; nil when the database cannot say.
    private func referencedFiles() -> Set<String>? {
        guard let rows = try? database.query("SELECT DISTINCT digest FROM targets WHERE data IS NULL") else { return nil }
        return Set(rows.compactMap { $0[0].text })
    }

    func delete(index: Int) throws -> Bool {
        try recovering {
            guard let id = try id(at: index) else { return false }
            let named = referencedFiles() ?? []
            try freeingSpace { try database.transaction { try HistoryIndex.delete("id = ?", [.integer(id)], in: database) } }
            // A deleted entry's rows leave no byte behind (freed pages are zeroed: secure_delete;
            // the log is cut). Its trigrams stay in the search index's segments until they merge:
            // merging them all (``forgetSecret``) rewrites the index, 1.8 s at 100,000 entries.
            collectGarbage(named: named)
            checkpoint()
            keepReserve()
            return true
        }
    }

    /// Forgets a copy that was a secret (``TakenBackCopies``), so that no byte of it stays in the
    /// state or cache directories: the entry (`entry`, else the one of `selection` made or used
    /// at `time` on `display`) is deleted with SQLite's secure delete (freed pages zeroed), the
    /// search index merged (its segments held the text's trigrams), the log written back and cut
    /// to nothing; its payload files that no other entry names are overwritten with zeros before
    /// they go, and its thumbnails removed. Returns whether an entry was found.
    func forgetSecret(entry: Int64?, selection: Pasteboard.Name, time: Date, display: String) throws -> Bool {
        try recovering {
            let seconds = time.timeIntervalSince1970
            let id = try entry.flatMap { id in try database.query("SELECT id FROM entries WHERE id = ?", [.integer(id)]).first?[0].integer }
                ?? database.query("SELECT id FROM entries WHERE selection = ? AND display = ? AND (created = ? OR used = ?) ORDER BY id DESC LIMIT 1",
                                  [.text(selection.rawValue), .text(display), .real(seconds), .real(seconds)]).first?[0].integer
            guard let id else { return false }
            let digests = Set(try database.query("SELECT digest FROM targets WHERE entry = ?", [.integer(id)]).compactMap { $0[0].text })
            let named = referencedFiles() ?? []
            try freeingSpace {
                try database.transaction { try HistoryIndex.delete("id = ?", [.integer(id)], in: database) }
            }
            try? HistoryIndex.optimize(in: database)
            let stillNamed = referencedFiles() ?? named
            let kept = try keptDigests(among: digests)
            for digest in digests where !kept.contains(digest) {
                if named.contains(digest), !stillNamed.contains(digest) { PayloadFiles.overwrite(payloads.path(hex: digest)) }
                if let thumbnails {
                    unlink(thumbnails.path(for: digest))
                    unlink(thumbnails.failurePath(for: digest))
                }
            }
            collectGarbage(named: named)
            // The log held the entry's pages: it is cut to nothing, waiting a little for a
            // reader (another display's xpbd shares the store) to let it go.
            var truncated = checkpoint()
            for _ in 1..<10 where !truncated {
                usleep(50_000)
                truncated = checkpoint()
            }
            if !truncated {
                logger.warning("a forgotten secret's pages stay in the history's log (\(databasePath)-wal) until its next checkpoint: another reader holds it")
            }
            keepReserve()
            return true
        }
    }

    /// Forgets, as secrets are (``forgetSecret(entry:selection:time:display:)``: no byte stays),
    /// the entries made since `date` whose app is unknown or one of `apps` (compared ignoring
    /// case), pinned ones excepted: what a password manager's job can have copied through a
    /// clipboard helper. Returns how many.
    func forgetCopies(since date: Date, byApps apps: [String]) throws -> Int {
        let names = Set(apps.map { $0.lowercased() })
        let rows = try recovering {
            try database.query("SELECT id, app, selection, created, display FROM entries WHERE pinned = 0 AND created >= ?",
                               [.real(date.timeIntervalSince1970)])
        }
        var forgotten = 0
        for row in rows {
            guard let id = row[0].integer, row[1].text.map({ names.contains($0.lowercased()) }) ?? true else { continue }
            let selection = Pasteboard.Name(rawValue: row[2].text ?? "")
            let time = Date(timeIntervalSince1970: row[3].real ?? 0)
            if try forgetSecret(entry: id, selection: selection, time: time, display: row[4].text ?? "") { forgotten += 1 }
        }
        return forgotten
    }

    /// Forgets every entry but the pinned ones, or with `includingPinned` every one.
    func clear(includingPinned: Bool = false) throws {
        try recovering {
            let named = referencedFiles() ?? []
            let which = includingPinned ? "" : " WHERE pinned = 0"
            // The search index emptied in one step, the pinned entries that stay indexed again.
            let reindexPinned = {
                try self.database.query("UPDATE entries SET indexed = 0 WHERE pinned = 1")
                try HistoryIndex.index("pinned = 1", [], in: self.database)
            }
            do {
                try freeingSpace {
                    try database.transaction {
                        try HistoryIndex.empty(in: database)
                        try database.execute("DELETE FROM entries\(which)")
                        if !includingPinned { try reindexPinned() }
                    }
                }
            } catch let error as SQLiteError where error.isFull {
                // All at once needs log space for every page: one entry at a time, each written
                // back into the database (whose space it frees) before the next.
                checkpoint()
                try database.transaction { try HistoryIndex.empty(in: database) }
                checkpoint()
                while let id = try database.query("SELECT id FROM entries\(which) LIMIT 1").first?[0].integer {
                    try database.query("DELETE FROM entries WHERE id = ?", [.integer(id)])
                    checkpoint()
                }
                if !includingPinned { try database.transaction { try reindexPinned() } }
            }
            collectGarbage(named: named)
            checkpoint()
            keepReserve()
            thumbnails?.prune(keeping: [])
        }
    }

    // MARK: A full disk

    /// Makes the reserve whole again if the disk has room (``DiskReserve``); false only when
    /// the disk is full.
    @discardableResult
    func keepReserve() -> Bool {
        isInMemory || reserve.keep()
    }

    /// Runs `body`, a change that frees space. When the disk is full, the reserve is given
    /// back, and with it the log is written into the database and emptied (the database grows
    /// by the pages it does not hold yet; the log, often far larger, is freed), then it runs
    /// again.
    private func freeingSpace<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError where error.isFull {
            guard !isInMemory else { throw error }
            if reserve.giveBack() {
                logger.warning("the disk is full: gave back the \(ByteCount.format(DiskReserve.bytes)) reserve (\(reserve.path)) to delete history entries")
            }
            checkpoint()
            return try body()
        }
    }

    /// Writes the WAL back into the database file and cuts it (a clean stop, a deletion).
    /// Returns whether the log was written back whole and cut (false: a reader held it, or the
    /// database would not say).
    @discardableResult
    func checkpoint() -> Bool {
        (try? database.query("PRAGMA wal_checkpoint(TRUNCATE)").first?.first?.integer) == 0
    }

    // MARK: Reading

    private func id(at index: Int) throws -> Int64? {
        guard index >= 0 else { return nil }
        return try database.query("SELECT id FROM entries WHERE expires IS NULL OR expires > ? ORDER BY used DESC, id DESC LIMIT 1 OFFSET ?",
                                  [.real(Date().timeIntervalSince1970), .integer(Int64(index))]).first?[0].integer
    }

    /// The number of entries and their bytes.
    func totals() -> (count: Int, bytes: Int) {
        (try? EntryTotals.all(in: database)) ?? (0, 0)
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
        guard let others = try? database.query("PRAGMA data_version").first?[0].integer,
              let row = try? database.query("SELECT min(expires) FROM entries WHERE expires > ?", [.real(now)]).first else { return nil }
        let nextExpiry = row[0].real
        if let nextExpiry, nextExpiry <= now { return nil }
        return ListingVersion(database: ObjectIdentifier(database), changes: database.totalChanges, othersChanges: others, nextExpiry: nextExpiry)
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
        try recovering {
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
            let rows = try database.query("""
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
                ? try database.query("SELECT entry, name, size, digest, data IS NOT NULL FROM targets WHERE \(listed) ORDER BY entry, position", bindings)
                : try database.query("SELECT entry, name, size, digest, data IS NOT NULL FROM targets ORDER BY entry, position")
            for row in targetRows {
                guard let entry = row[0].integer, let name = row[1].text else { continue }
                targets[entry, default: []].append((name, Int(row[2].integer ?? 0), row[3].text ?? "", row[4].integer == 1))
            }
            let pastes = try EntryPastes.of(narrowed ? listed : nil, narrowed ? bindings : [], in: database)
            var total = matched?.total ?? 0
            if matched == nil, paged {
                // The totals the triggers keep, less the expired entries not pruned yet (by the expiry's index).
                let expired = try database.query("SELECT count(*) FROM entries WHERE expires IS NOT NULL AND expires <= ?", [.real(now)])
                total = try EntryTotals.all(in: database).count - Int(expired.first?[0].integer ?? 0)
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
                    self.targetBytes.head(in: self.database, entry: id, position: position, digest: kept[position].digest, inline: kept[position].inline)
                }
                var preview = row[6].text ?? ""
                let head = row[9].text
                // An image is shown by its pixel size and, where the cache is, a thumbnail.
                var picture: (width: Int, height: Int, thumbnail: String?)?
                var toMake: (position: Int, digest: String, inline: Bool)?
                if head == nil, let position = kept.firstIndex(where: { ImageFormat(mimeType: $0.name)?.isReadable ?? false }),
                   let size = targetBytes.pixelSize(in: database, entry: id, position: position, digest: kept[position].digest, inline: kept[position].inline) {
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
                   let image = targetBytes.payload(in: database, entry: id, position: toMake.position, digest: toMake.digest, inline: toMake.inline) {
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
        let found = try HistoryIndex.search(search, offset: offset, limit: limit, in: database, now: now, resume: resume)
        if let cursor = found.cursor, let version { searchCursor = (cursor, version) } else { searchCursor = nil }
        return found
    }

    /// Those of `digests` that a kept target has.
    private func keptDigests(among digests: Set<String>) throws -> Set<String> {
        var kept: Set<String> = []
        let all = Array(digests)
        for start in stride(from: 0, to: all.count, by: 500) {
            let chunk = all[start..<min(all.count, start + 500)]
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try database.query("SELECT DISTINCT digest FROM targets WHERE digest IN (\(marks))", chunk.map { .text($0) }) {
                if let digest = row[0].text { kept.insert(digest) }
            }
        }
        return kept
    }

    /// Entry `index` (0 = newest) with its payloads (files mapped, not read).
    func snapshot(at index: Int) throws -> Snapshot? {
        try recovering { try id(at: index).flatMap { try snapshot(id: $0) } }
    }

    /// Entry `id` (as listings name it), nil when there is none or it expired.
    func snapshot(entry id: Int64) throws -> Snapshot? {
        try recovering { try index(ofEntry: id) == nil ? nil : snapshot(id: id) }
    }

    /// Where entry `id` is in the listing (0 = newest), nil when there is none or it expired.
    func index(ofEntry id: Int64) throws -> Int? {
        try recovering {
            let now = Date().timeIntervalSince1970
            guard let row = try database.query("SELECT used FROM entries WHERE id = ? AND (expires IS NULL OR expires > ?)", [.integer(id), .real(now)]).first,
                  let used = row[0].real else { return nil }
            let before = try database.query("""
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
        try recovering {
            var texts: [(text: String, used: Double)] = []
            var bytes = 0
            var last: (used: Double, id: Int64)?
            let now = Date().timeIntervalSince1970
            repeat {
                let after = last.map { _ in " AND (used < ? OR (used = ? AND id < ?))" } ?? ""
                let rows = try database.query("""
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
        try recovering {
            try database.query("""
                SELECT id, selection, created, used, display FROM entries WHERE expires IS NULL OR expires > ? ORDER BY used DESC, id DESC
                """, [.real(Date().timeIntervalSince1970)]).compactMap { row in
                row[0].integer.map { ($0, Pasteboard.Name(rawValue: row[1].text ?? "general"), row[2].real ?? 0, row[3].real ?? 0, row[4].text ?? "") }
            }
        }
    }

    /// How many entries (not expired) were used after `time` (seconds since 1970); with
    /// `selection` and `display`, only theirs.
    func count(usedAfter time: Double, selection: Pasteboard.Name? = nil, display: String? = nil) throws -> Int {
        try recovering {
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
            return Int(try database.query("SELECT count(*) FROM entries WHERE \(condition)", bindings).first?[0].integer ?? 0)
        }
    }

    /// The newest entry of a selection, preferring one taken on `display`; expired ones never.
    /// By the index of each selection's entries by display, newest last: the display's newest
    /// is one look, and the newest of any display one look for each display (a loose scan of the
    /// index, never a sort of a million rows).
    func latest(selection: Pasteboard.Name, display: String) throws -> Snapshot? {
        try recovering {
            let now = Date().timeIntervalSince1970
            func newest(on display: String) throws -> (id: Int64, used: Double)? {
                try database.query("""
                    SELECT id, used FROM entries INDEXED BY entries_latest WHERE selection = ? AND display = ? AND (expires IS NULL OR expires > ?)
                    ORDER BY used DESC, id DESC LIMIT 1
                    """, [.text(selection.rawValue), .text(display), .real(now)]).first.flatMap { row in
                    row[0].integer.map { ($0, row[1].real ?? 0) }
                }
            }
            if let mine = try newest(on: display) { return try snapshot(id: mine.id) }
            var best: (id: Int64, used: Double)?
            var after: String?
            while let next = try database.query("""
                SELECT display FROM entries INDEXED BY entries_latest WHERE selection = ?\(after == nil ? "" : " AND display > ?") ORDER BY display LIMIT 1
                """, [.text(selection.rawValue)] + (after.map { [.text($0)] } ?? [])).first?[0].text {
                after = next
                if let candidate = try newest(on: next), best.map({ (candidate.used, candidate.id) > ($0.used, $0.id) }) ?? true { best = candidate }
            }
            return try best.flatMap { try snapshot(id: $0.id) }
        }
    }

    private func snapshot(id: Int64) throws -> Snapshot? {
        guard let row = try database.query(
            "SELECT selection, used, source, pid, advertised, expires, local_only, complete, app FROM entries WHERE id = ?", [.integer(id)]).first
        else { return nil }
        var targets: [KeptTarget] = []
        for target in try database.query("SELECT name, type, digest, data FROM targets WHERE entry = ? ORDER BY position", [.integer(id)]) {
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
}

/// A failed system call, with what was being done.
struct POSIXFailure: Error, CustomStringConvertible {
    let operation: String
    let code: Int32
    init(_ operation: String, _ code: Int32) {
        self.operation = operation
        self.code = code
    }
    var isDiskFull: Bool { code == ENOSPC || code == EDQUOT }
    var description: String { "\(operation): \(String(cString: strerror(code)))" }
}

/// A listing of the history whose thumbnails are made after the history's lock is released
/// (``HistoryStore/listing(search:)``).
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
