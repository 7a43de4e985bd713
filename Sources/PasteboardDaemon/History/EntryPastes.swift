import FoundationEssentials
import PasteboardWire

/// Who pasted each entry: the `pastes` table, a row per paste of a copy xpbd served (its reader's
/// app and pid, or why none is known, and when). The newest ``PasteRecord/maxPerEntry`` are kept
/// per entry, and the rows go with their entry (`ON DELETE CASCADE`). A row holds no byte of the
/// copy.
enum EntryPastes {
    /// Notes a paste of entry `entry`; nothing when the entry is gone (deleted, evicted meanwhile).
    static func add(_ record: PasteRecord, to entry: Int64, in database: SQLiteDatabase) throws(SQLiteError) {
        try database.query("""
            INSERT INTO pastes(entry, time, app, pid, unknown) SELECT id, ?, ?, ?, ? FROM entries WHERE id = ?
            """, [.real(record.time.timeIntervalSince1970), record.app.map { .text($0) } ?? .null, record.pid.map { .integer(Int64($0)) } ?? .null,
                  record.unknown.map { .text($0) } ?? .null, .integer(entry)])
        try database.query("""
            DELETE FROM pastes WHERE entry = ?1 AND rowid NOT IN (SELECT rowid FROM pastes WHERE entry = ?1 ORDER BY time DESC, rowid DESC LIMIT ?2)
            """, [.integer(entry), .integer(Int64(PasteRecord.maxPerEntry))])
    }

    /// The pastes of the entries `chosen` selects (an SQL condition on the pastes' `entry`, with
    /// its bindings; nil: every entry), newest first per entry.
    static func of(_ chosen: String?, _ bindings: [SQLiteValue] = [], in database: SQLiteDatabase) throws(SQLiteError) -> [Int64: [PasteRecord]] {
        let rows = try database.query("""
            SELECT entry, time, app, pid, unknown FROM pastes\(chosen.map { " WHERE \($0)" } ?? "")
            ORDER BY entry, time DESC, rowid DESC
            """, bindings)
        var pastes: [Int64: [PasteRecord]] = [:]
        for row in rows {
            guard let entry = row[0].integer else { continue }
            pastes[entry, default: []].append(PasteRecord(time: Date(timeIntervalSince1970: row[1].real ?? 0), app: row[2].text,
                                                          pid: row[3].integer.map { Int($0) }, unknown: row[4].text))
        }
        return pastes
    }
}
