import FoundationEssentials
import Glibc
import Logging

/// The history's upkeep, in turns sized to take about ``TurnPacing/target`` each, with the
/// history's lock free between them: entries beyond the caps pruned, entries written without a
/// description described, entries not in the search index indexed.
final class HistoryUpkeep {
    private let database: HistoryDatabase
    private var sql: SQLiteDatabase { database.connection }
    private let reading: HistoryReading
    private let removal: HistoryRemoval
    private let targetBytes: TargetBytes
    private let logger: Logger

    init(database: HistoryDatabase, reading: HistoryReading, removal: HistoryRemoval, targetBytes: TargetBytes, logger: Logger) {
        self.database = database
        self.reading = reading
        self.removal = removal
        self.targetBytes = targetBytes
        self.logger = logger
    }

    /// The most entries a call of ``HistoryRemoval/prune(reserving:bytes:atMost:)`` deletes
    /// unless told: a copy over the caps prunes a few itself (it added one), and caps lowered by
    /// 100,000 are met by ``maintain()``'s paced turns, with the history's lock free between them
    /// (1,000 pruned at a copy held it 3.5 s at a million entries).
    static let copyTurn = TurnPacing.fewest

    /// What the upkeep has done since it began, said once it is done.
    private var upkeep: (began: Date, described: Int, indexed: Int, pruned: Int)?
    /// How many entries the next turn of upkeep takes.
    private var pacing = TurnPacing()

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
                let before = reading.totals().count
                more = try removal.prune(atMost: pacing.size)
                return max(0, before - reading.totals().count)
            }
            if more { return true }
            let described = try paced { try database.recovering { try describeUndescribed(atMost: pacing.size) } }
            done.described += described
            if described > 0 { return true }
            let indexed = try paced { try database.recovering { try indexUnindexed(atMost: pacing.size) } }
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
        let ids = try sql.query("SELECT id FROM entries WHERE types IS NULL OR content_key IS NULL ORDER BY id DESC LIMIT ?",
                                [.integer(Int64(limit))]).compactMap { $0[0].integer }
        guard !ids.isEmpty else { return 0 }
        var targets: [Int64: [(name: String, size: Int, digest: String, inline: Bool)]] = [:]
        for row in try sql.query("SELECT entry, name, size, digest, data IS NOT NULL FROM targets WHERE \(HistoryIndex.among(ids, column: "entry")) ORDER BY entry, position") {
            guard let entry = row[0].integer, let name = row[1].text else { continue }
            targets[entry, default: []].append((name, Int(row[2].integer ?? 0), row[3].text ?? "", row[4].integer == 1))
        }
        try sql.transaction {
            try HistoryIndex.unindex(HistoryIndex.among(ids), [], in: sql)
            for id in ids {
                let kept = targets[id] ?? []
                let description = EntryDescription.describe(kept.map { EntryDescription.Target(name: $0.name, size: $0.size) }) { position in
                    self.targetBytes.head(in: self.sql, entry: id, position: position, digest: kept[position].digest, inline: kept[position].inline)
                }
                try sql.query("UPDATE entries SET types = ?, content_size = ?, content_key = ? WHERE id = ?", [
                    .text(description.types.joined(separator: "\n")), .integer(Int64(description.size)),
                    .text(HistoryStore.contentKey(kept.map { ($0.name, $0.digest) })), .integer(id),
                ])
            }
        }
        return ids.count
    }

    /// Adds up to `limit` of the entries not in the search index to it, the newest first;
    /// returns how many.
    private func indexUnindexed(atMost limit: Int) throws -> Int {
        let ids = try sql.query("SELECT id FROM entries WHERE indexed = 0 ORDER BY id DESC LIMIT ?", [.integer(Int64(limit))])
            .compactMap { $0[0].integer }
        guard !ids.isEmpty else { return 0 }
        try sql.transaction { try HistoryIndex.index(HistoryIndex.among(ids), [], in: sql) }
        return ids.count
    }
}
