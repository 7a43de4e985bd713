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
///
/// The store is its entrance (``add(_:display:)``: an entry written, the same content not
/// repeated) and the small changes of an entry (pin, touch, a paste noted); its other jobs are
/// parts of their own, over one connection (``HistoryDatabase``): ``reading`` (listings,
/// searches, lookups), ``removal`` (caps, deletes, secrets forgotten, the disk's reserve) and
/// ``upkeep`` (describing, indexing and pruning in turns).
final class HistoryStore {
    /// Payloads up to this size live in the database; larger ones in files.
    static let inlineLimit = 16 << 10
    /// This store's limit: ``inlineLimit`` on disk, every payload for a store in memory.
    private let inlineLimit: Int
    let directory: URL
    let database: HistoryDatabase
    private var sql: SQLiteDatabase { database.connection }
    /// The payload files of large targets, named by digest.
    private let payloads: PayloadFiles
    let reading: HistoryReading
    let removal: HistoryRemoval
    let upkeep: HistoryUpkeep

    /// Opens (or creates) the store in `directory` (made 0700). With `seals`, sealed at rest with
    /// the first key of them that opens it (``HistorySealing``): a plain history is sealed first.
    init(directory: URL, maxEntries: Int, maxBytes: Int, seals: [HistorySeal] = [], logger: Logger) throws {
        self.directory = directory
        inlineLimit = Self.inlineLimit
        payloads = PayloadFiles(directory: directory.appendingPathComponent("blobs"))
        let path = directory.appendingPathComponent("history.sqlite").path
        for path in [directory.path, payloads.directory.path] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            chmod(path, 0o700)
        }
        let connection: SQLiteDatabase
        if seals.isEmpty {
            connection = try HistorySchema.open(path, logger: logger)
        } else {
            let opened = try HistorySealing.open(path, seals: seals, logger: logger)
            connection = opened.database
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
        database = HistoryDatabase(connection: connection, path: path, isInMemory: false, seal: payloads.seal, logger: logger)
        (reading, removal, upkeep) = Self.parts(database, payloads, directory, maxEntries, maxBytes, logger)
        // The open reads no row per entry (a million took 40 s): what is left to prune,
        // describe, index or check is done after, in turns (``HistoryUpkeep/maintain()``,
        // ``HistorySchema/damage(at:)``; a pruned entry costs up to 3.5 ms, so not even one turn
        // of them is pruned here).
        removal.collectGarbage()
        removal.keepReserve()
    }

    /// A history in memory only, for a state directory that cannot be used (read-only, not a
    /// directory, no permission): entries last until the daemon stops.
    init(inMemoryFor directory: URL, maxEntries: Int, maxBytes: Int, logger: Logger) throws {
        self.directory = directory
        inlineLimit = .max
        payloads = PayloadFiles(directory: directory.appendingPathComponent("blobs"))
        let connection = try SQLiteDatabase(path: ":memory:")
        try HistorySchema.prepare(connection, inMemory: true)
        database = HistoryDatabase(connection: connection, path: ":memory:", isInMemory: true, seal: nil, logger: logger)
        (reading, removal, upkeep) = Self.parts(database, payloads, directory, maxEntries, maxBytes, logger)
    }

    /// The parts over one connection.
    private static func parts(_ database: HistoryDatabase, _ payloads: PayloadFiles, _ directory: URL, _ maxEntries: Int, _ maxBytes: Int,
                              _ logger: Logger) -> (HistoryReading, HistoryRemoval, HistoryUpkeep) {
        let targetBytes = TargetBytes(payloads: payloads)
        let reading = HistoryReading(database: database, payloads: payloads, targetBytes: targetBytes, logger: logger)
        let removal = HistoryRemoval(database: database, payloads: payloads, reading: reading,
                                     reserve: DiskReserve(path: directory.appendingPathComponent("reserve").path),
                                     maxEntries: maxEntries, maxBytes: maxBytes, logger: logger)
        let upkeep = HistoryUpkeep(database: database, reading: reading, removal: removal, targetBytes: targetBytes, logger: logger)
        return (reading, removal, upkeep)
    }

    // MARK: Writing

    /// Stores a snapshot as the newest entry. An entry of its selection with the same content
    /// (``contentKey``) is not repeated: one with the very same targets moves to the top, any
    /// other is replaced by this one. Returns the entry's id.
    @discardableResult
    func add(_ snapshot: Snapshot, display: String) throws -> Int64 {
        // New entries never take the space kept for deleting them.
        guard removal.keepReserve() else {
            throw POSIXFailure("keeping \(ByteCount.format(DiskReserve.bytes)) free (\(removal.reserve.path)) so that entries can be deleted", ENOSPC)
        }
        return try database.recovering {
            let exact = snapshot.targets.map { "\($0.target):\($0.digest.hex)" }.joined(separator: " ")
            let content = Self.contentKey(snapshot.targets.map { ($0.target, $0.digest.hex) })
            var replaced: [Int64] = []
            var pinned = false
            if !content.isEmpty {
                // The entries of the same content, found by its key (indexed), not by a look at each one.
                let rows = try sql.query("""
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
                        try sql.query("UPDATE entries SET used = ? WHERE id = ?", [.real(snapshot.time.timeIntervalSince1970), .integer(id)])
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
            let named = replaced.isEmpty ? [] : removal.referencedFiles() ?? []
            let description = EntryDescription.describe(snapshot.targets.map { EntryDescription.Target(name: $0.target, size: $0.data.count) }) {
                snapshot.targets[$0].data.prefix(64)
            }
            let id: Int64
            do {
                id = try sql.transaction { () throws -> Int64 in
                    for id in replaced { try HistoryIndex.delete("id = ?", [.integer(id)], in: sql) }
                    try sql.query("""
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
                    let id = sql.lastInsertedRow
                    try HistoryIndex.index("id = ?", [.integer(id)], in: sql)
                    for (position, target) in snapshot.targets.enumerated() {
                        try sql.query("INSERT INTO targets(entry, position, name, type, digest, size, data) VALUES (?, ?, ?, ?, ?, ?, ?)", [
                            .integer(id), .integer(Int64(position)), .text(target.target), .text(target.type), .text(target.digest.hex),
                            .integer(Int64(target.data.count)), target.data.count > inlineLimit ? .null : .blob(target.data),
                        ])
                    }
                    return id
                }
            } catch {
                let names = removal.referencedFiles() ?? []
                for digest in made where !names.contains(digest.hex) { unlink(payloads.path(digest)) }
                throw error
            }
            if !replaced.isEmpty { removal.collectGarbage(named: named) }
            try removal.prune()
            return id
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
        try database.recovering {
            guard let id = try reading.id(at: index) else { return false }
            try sql.query("UPDATE entries SET pinned = ? WHERE id = ?", [.integer(pinned ? 1 : 0), .integer(id)])
            return true
        }
    }


    /// Makes the ids this store gives new entries start after `id` (a store in memory beside
    /// the one on disk names its entries apart from it: ``History``).
    func numberEntries(after id: Int64) throws {
        try sql.execute("DELETE FROM sqlite_sequence WHERE name = 'entries'")
        try sql.query("INSERT INTO sqlite_sequence(name, seq) VALUES ('entries', ?)", [.integer(id)])
    }

    /// Notes a paste of entry `id` (``EntryPastes``); nothing when it is gone.
    func addPaste(_ record: PasteRecord, to id: Int64) throws {
        try database.recovering { try EntryPastes.add(record, to: id, in: sql) }
    }

    /// Writes this history's entries, the oldest first, into `other`, each as it was: when it was
    /// last used, whether it is pinned, its pastes (a history kept in memory while the keyring
    /// was locked, moved into the disk's once it opens). The expired ones are left. Returns how
    /// many were written.
    func moveEntries(into other: HistoryStore) throws -> Int {
        var moved = 0
        let rows = try database.recovering { try sql.query("SELECT id, display, used, pinned FROM entries ORDER BY used, id") }
        for row in rows {
            guard let id = row[0].integer, let snapshot = try reading.snapshot(entry: id) else { continue }
            let written = try other.add(snapshot, display: row[1].text ?? "")
            try other.database.recovering {
                try other.database.connection.query("UPDATE entries SET used = max(used, ?), pinned = max(pinned, ?) WHERE id = ?",
                                                    [.real(row[2].real ?? 0), .integer(row[3].integer ?? 0), .integer(written)])
            }
            for paste in try reading.pastes(of: id).reversed() { try other.addPaste(paste, to: written) }
            moved += 1
        }
        return moved
    }


    /// Moves an entry to the top (it became the clipboard again), or marks it used at `time`
    /// (seconds since 1970).
    func touch(_ id: Int64, at time: Double? = nil) throws {
        try database.recovering { try sql.query("UPDATE entries SET used = ? WHERE id = ?", [.real(time ?? Date().timeIntervalSince1970), .integer(id)]) }
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
