import FoundationEssentials
import Glibc
import ImageCodecs
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// What leaves the history: entries beyond the caps or expired (pruned), deleted or cleared by
/// a person, forgotten as secrets (no byte left behind), payload files no row names; and the
/// room kept on disk so that deleting works on a full disk (``DiskReserve``).
final class HistoryRemoval {
    private let database: HistoryDatabase
    private var sql: SQLiteDatabase { database.connection }
    private let payloads: PayloadFiles
    private let reading: HistoryReading
    /// Room kept for deleting on a full disk.
    let reserve: DiskReserve
    private let logger: Logger
    var maxEntries: Int
    var maxBytes: Int

    init(database: HistoryDatabase, payloads: PayloadFiles, reading: HistoryReading, reserve: DiskReserve,
         maxEntries: Int, maxBytes: Int, logger: Logger) {
        self.database = database
        self.payloads = payloads
        self.reading = reading
        self.reserve = reserve
        self.maxEntries = maxEntries
        self.maxBytes = maxBytes
        self.logger = logger
    }

    /// Deletes entry `id` (as ``delete(index:)`` deletes); false when there is none.
    func delete(entry id: Int64) throws -> Bool {
        guard let index = try reading.index(ofEntry: id) else { return false }
        return try delete(index: index)
    }

    /// Removes expired entries, then the oldest beyond the entry and size caps (the newest is
    /// always kept; pinned entries are never removed, nor counted), then payload files no
    /// entry names. At most `turn` entries go in one call, in one transaction: returns whether
    /// more are to go (caps lowered by 100,000: ``HistoryUpkeep/maintain()`` goes on in turns).
    @discardableResult
    func prune(reserving entries: Int = 0, bytes: Int = 0, atMost turn: Int = HistoryUpkeep.copyTurn) throws -> Bool {
        let maxEntries = max(1, maxEntries - entries)
        let maxBytes = max(0, maxBytes - bytes)
        return try database.recovering {
            // Within the caps and nothing expired (each copy asks): two rows read, by an index
            // and from the totals the triggers keep (``EntryTotals``), never a row an entry.
            let now = Date().timeIntervalSince1970
            let expired = try sql.query("SELECT id FROM entries WHERE expires IS NOT NULL AND expires <= ? LIMIT ?",
                                        [.real(now), .integer(Int64(turn))]).compactMap { $0[0].integer }
            let caps = try EntryTotals.of(pinned: false, in: sql)
            let over = { (count: Int, bytes: Int) in count > 1 && (count > maxEntries || bytes > maxBytes) }
            guard !expired.isEmpty || over(caps.count, caps.bytes) else { return false }
            let named = referencedFiles() ?? []
            let more = try sql.transaction { () throws -> Bool in
                if !expired.isEmpty { try HistoryIndex.delete(HistoryIndex.among(expired), [], in: sql) }
                var (count, bytes) = try EntryTotals.of(pinned: false, in: sql)
                let room = turn - expired.count
                guard room > 0, over(count, bytes) else { return over(count, bytes) }
                // The oldest first, along the listing order's index: the newest `maxEntries`
                // (whose bytes fit) stay, as when counted from the newest.
                var doomed: [Int64] = []
                for row in try sql.query("SELECT id, size FROM entries WHERE pinned = 0 ORDER BY used, id LIMIT ?", [.integer(Int64(room))]) {
                    guard over(count, bytes), let id = row[0].integer else { break }
                    doomed.append(id)
                    count -= 1
                    bytes -= Int(row[1].integer ?? 0)
                }
                if !doomed.isEmpty { try HistoryIndex.delete(HistoryIndex.among(doomed), [], in: sql) }
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
        guard !database.isInMemory, let names = referencedFiles() else { return }
        payloads.collectGarbage(referenced: names, named: before)
    }

    /// The payload files rows name now; nil when the database cannot say.
    func referencedFiles() -> Set<String>? {
        guard let rows = try? sql.query("SELECT DISTINCT digest FROM targets WHERE data IS NULL") else { return nil }
        return Set(rows.compactMap { $0[0].text })
    }

    func delete(index: Int) throws -> Bool {
        try database.recovering {
            guard let id = try reading.id(at: index) else { return false }
            let named = referencedFiles() ?? []
            try freeingSpace { try sql.transaction { try HistoryIndex.delete("id = ?", [.integer(id)], in: sql) } }
            // A deleted entry's rows leave no byte behind (freed pages are zeroed: secure_delete;
            // the log is cut). Its trigrams stay in the search index's segments until they merge:
            // merging them all (``forgetSecret``) rewrites the index, 1.8 s at 100,000 entries.
            collectGarbage(named: named)
            database.checkpoint()
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
        try database.recovering {
            let seconds = time.timeIntervalSince1970
            let id = try entry.flatMap { id in try sql.query("SELECT id FROM entries WHERE id = ?", [.integer(id)]).first?[0].integer }
                ?? sql.query("SELECT id FROM entries WHERE selection = ? AND display = ? AND (created = ? OR used = ?) ORDER BY id DESC LIMIT 1",
                             [.text(selection.rawValue), .text(display), .real(seconds), .real(seconds)]).first?[0].integer
            guard let id else { return false }
            let digests = Set(try sql.query("SELECT digest FROM targets WHERE entry = ?", [.integer(id)]).compactMap { $0[0].text })
            let named = referencedFiles() ?? []
            try freeingSpace {
                try sql.transaction { try HistoryIndex.delete("id = ?", [.integer(id)], in: sql) }
            }
            try? HistoryIndex.optimize(in: sql)
            let stillNamed = referencedFiles() ?? named
            let kept = try reading.keptDigests(among: digests)
            for digest in digests where !kept.contains(digest) {
                if named.contains(digest), !stillNamed.contains(digest) { PayloadFiles.overwrite(payloads.path(hex: digest)) }
                if let thumbnails = reading.thumbnails {
                    unlink(thumbnails.path(for: digest))
                    unlink(thumbnails.failurePath(for: digest))
                }
            }
            collectGarbage(named: named)
            // The log held the entry's pages: it is cut to nothing, waiting a little for a
            // reader (another display's xpbd shares the store) to let it go.
            var truncated = database.checkpoint()
            for _ in 1..<10 where !truncated {
                usleep(50_000)
                truncated = database.checkpoint()
            }
            if !truncated {
                logger.warning("a forgotten secret's pages stay in the history's log (\(database.path)-wal) until its next checkpoint: another reader holds it")
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
        let rows = try database.recovering {
            try sql.query("SELECT id, app, selection, created, display FROM entries WHERE pinned = 0 AND created >= ?",
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
        try database.recovering {
            let named = referencedFiles() ?? []
            let which = includingPinned ? "" : " WHERE pinned = 0"
            // The search index emptied in one step, the pinned entries that stay indexed again.
            let reindexPinned = {
                try self.sql.query("UPDATE entries SET indexed = 0 WHERE pinned = 1")
                try HistoryIndex.index("pinned = 1", [], in: self.sql)
            }
            do {
                try freeingSpace {
                    try sql.transaction {
                        try HistoryIndex.empty(in: sql)
                        try sql.execute("DELETE FROM entries\(which)")
                        if !includingPinned { try reindexPinned() }
                    }
                }
            } catch let error as SQLiteError where error.isFull {
                // All at once needs log space for every page: one entry at a time, each written
                // back into the database (whose space it frees) before the next.
                database.checkpoint()
                try sql.transaction { try HistoryIndex.empty(in: sql) }
                database.checkpoint()
                while let id = try sql.query("SELECT id FROM entries\(which) LIMIT 1").first?[0].integer {
                    try sql.query("DELETE FROM entries WHERE id = ?", [.integer(id)])
                    database.checkpoint()
                }
                if !includingPinned { try sql.transaction { try reindexPinned() } }
            }
            collectGarbage(named: named)
            database.checkpoint()
            keepReserve()
            reading.thumbnails?.prune(keeping: [])
        }
    }

    // MARK: A full disk

    /// Makes the reserve whole again if the disk has room (``DiskReserve``); false only when
    /// the disk is full.
    @discardableResult
    func keepReserve() -> Bool {
        database.isInMemory || reserve.keep()
    }

    /// Runs `body`, a change that frees space. When the disk is full, the reserve is given
    /// back, and with it the log is written into the database and emptied (the database grows
    /// by the pages it does not hold yet; the log, often far larger, is freed), then it runs
    /// again.
    private func freeingSpace<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError where error.isFull {
            guard !database.isInMemory else { throw error }
            if reserve.giveBack() {
                logger.warning("the disk is full: gave back the \(ByteCount.format(DiskReserve.bytes)) reserve (\(reserve.path)) to delete history entries")
            }
            database.checkpoint()
            return try body()
        }
    }
}
