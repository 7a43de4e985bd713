import FoundationEssentials

/// What the history keeps beside each entry to list and search it without reading every one:
/// its description (the content's types and size, ``EntryDescription``), its content key (the
/// look for a copy kept before is one indexed query), and a full-text index of the start of its
/// text, its preview, its app and its types (SQLite's FTS5 with the trigram tokenizer: any part
/// of a word matches, ignoring case, as the search always did).
///
/// The index holds no text of its own (contentless) and is written by the store, never by
/// triggers: every row deleted is taken out of it first if it is in it (``delete(_:_:in:)``),
/// clearing the history empties it in one step (a full disk has room for that, not for a
/// tombstone a row), and rows another writer added (an earlier xpbd, a test filling the
/// database) are indexed after the next open, in turns (``HistoryUpkeep/maintain()``), and
/// searched by a look at each meanwhile (their `indexed` is 0; a partial index finds them).
enum HistoryIndex {
    /// The version of ``EntryDescription``'s rules the stored descriptions follow: a history
    /// described by earlier rules is described again when opened.
    static let descriptionVersion: Int64 = 1

    /// The characters of an entry's text the index holds: a text longer than that is looked at
    /// whole by a search (a partial index finds the few that are; a trigram index of a long
    /// random text, a key or a base64 blob, would be several times its size).
    static let indexedCharacters = 4096

    /// The columns the index is given for a row: the same expressions to add it and to take it
    /// out (a contentless index must be told exactly what it was given).
    private static let indexed = "substr(coalesce(text, ''), 1, \(indexedCharacters)), preview, coalesce(app, ''), coalesce(types, '')"

    /// Whether a row is in the index (its document, by rowid).
    private static let isIndexed = "EXISTS (SELECT 1 FROM entries_search WHERE rowid = entries.id)"

    /// Adds the description columns, the content key's index, the expiry's index (a listing
    /// asks for the next expiry each time), the listing order's index (newest first, and
    /// whether expired, without reading a row: a match's place in the whole history is counted
    /// along it), the index of each selection's entries by display and age (the newest copy of
    /// a display, restored at start, is one look), the full-text index and the partial indexes of the
    /// rows a search looks at whole and of those the upkeep is to describe or index, to a
    /// history that lacks them (`columns`: the entries table's columns now). Descriptions of
    /// earlier rules are cleared, to be made again (``HistoryUpkeep/maintain()``, which indexes
    /// the rows not indexed yet too).
    static func prepare(_ database: SQLiteDatabase, columns: Set<String>) throws(SQLiteError) {
        for (column, type) in [("types", "TEXT"), ("content_size", "INTEGER"), ("content_key", "TEXT"), ("indexed", "INTEGER NOT NULL DEFAULT 0")]
        where !columns.contains(column) {
            try database.execute("ALTER TABLE entries ADD COLUMN \(column) \(type)")
        }
        try database.execute("""
            CREATE INDEX IF NOT EXISTS entries_content ON entries(selection, content_key);
            CREATE INDEX IF NOT EXISTS entries_expires ON entries(expires);
            DROP INDEX IF EXISTS entries_used;
            CREATE INDEX IF NOT EXISTS entries_order ON entries(used, id, expires);
            CREATE INDEX IF NOT EXISTS entries_latest ON entries(selection, display, used, id);
            CREATE INDEX IF NOT EXISTS entries_unindexed ON entries(id) WHERE indexed = 0;
            CREATE INDEX IF NOT EXISTS entries_undescribed ON entries(id) WHERE types IS NULL OR content_key IS NULL;
            CREATE INDEX IF NOT EXISTS entries_long ON entries(id) WHERE length(text) > \(indexedCharacters);
            CREATE VIRTUAL TABLE IF NOT EXISTS entries_search USING fts5(text, preview, app, types, content='', tokenize='trigram');
            """)
        if (try database.query("PRAGMA user_version").first?[0].integer ?? 0) < descriptionVersion {
            // Described again, and indexed again with the new types.
            try unindex("1", [], in: database)
            try database.execute("UPDATE entries SET types = NULL, content_size = NULL; PRAGMA user_version = \(descriptionVersion)")
        }
    }

    /// Indexes the rows `condition` names that are not in the index.
    static func index(_ condition: String, _ bindings: [SQLiteValue], in database: SQLiteDatabase) throws(SQLiteError) {
        try database.query("""
            INSERT INTO entries_search(rowid, text, preview, app, types) SELECT id, \(indexed) FROM entries
            WHERE (\(condition)) AND NOT \(isIndexed)
            """, bindings)
        try database.query("UPDATE entries SET indexed = 1 WHERE indexed = 0 AND (\(condition))", bindings)
    }

    /// Takes the rows `condition` names out of the index (before what it holds of them changes).
    static func unindex(_ condition: String, _ bindings: [SQLiteValue], in database: SQLiteDatabase) throws(SQLiteError) {
        try database.query("""
            INSERT INTO entries_search(entries_search, rowid, text, preview, app, types) SELECT 'delete', id, \(indexed) FROM entries
            WHERE (\(condition)) AND \(isIndexed)
            """, bindings)
        try database.query("UPDATE entries SET indexed = 0 WHERE indexed = 1 AND (\(condition))", bindings)
    }

    /// Deletes the rows `condition` names, out of the index first. Run inside a transaction: the
    /// two steps are one change.
    static func delete(_ condition: String, _ bindings: [SQLiteValue], in database: SQLiteDatabase) throws(SQLiteError) {
        try database.query("""
            INSERT INTO entries_search(entries_search, rowid, text, preview, app, types) SELECT 'delete', id, \(indexed) FROM entries
            WHERE (\(condition)) AND \(isIndexed)
            """, bindings)
        try database.query("DELETE FROM entries WHERE \(condition)", bindings)
    }

    /// Empties the index in one step; the rows that stay are to be indexed again
    /// (``index(_:_:in:)``, after their `indexed` is cleared).
    /// Merges the index's segments into one: what deleted rows left in them (a contentless
    /// index keeps a deletion as a marker beside the old terms) is gone from the file.
    static func optimize(in database: SQLiteDatabase) throws(SQLiteError) {
        try database.execute("INSERT INTO entries_search(entries_search) VALUES ('optimize')")
    }

    static func empty(in database: SQLiteDatabase) throws(SQLiteError) {
        try database.execute("INSERT INTO entries_search(entries_search) VALUES ('delete-all')")
    }

    /// The condition that `column` is one of `ids` (integers, written into the statement: a
    /// list of a thousand needs no thousand bindings).
    static func among(_ ids: some Sequence<Int64>, column: String = "id") -> String {
        "\(column) IN (\(ids.map(String.init).joined(separator: ",")))"
    }

    /// Up to this many matches are placed by their own rows (``placeFew``), more by a walk.
    static let sparseMatches = 4096

    /// The places in the whole history of matches `from` to `to` (newest first) of `found`, a
    /// few ids of entries not expired: each match's order read by its id, sorted, and the places
    /// counted along the listing order's index (SQLite counts a range of it without reading a
    /// row: about 50 ms for a million, one statement stepped once a match; half of the ranges on
    /// a second connection at the same time), from one match to
    /// the next, the `expired` entries not pruned yet left out.
    static func placeFew(_ found: Set<Int64>, from offset: Int, to end: Int, expired: [(used: Double, id: Int64)],
                                 in database: SQLiteDatabase) throws(SQLiteError) -> [(id: Int64, place: Int)] {
        var keys: [(used: Double, id: Int64)] = []
        let ids = Array(found)
        for start in stride(from: 0, to: ids.count, by: 500) {
            for row in try database.query("SELECT used, id FROM entries WHERE \(among(ids[start..<min(ids.count, start + 500)]))") {
                if let id = row[1].integer { keys.append((row[0].real ?? 0, id)) }
            }
        }
        keys.sort { ($0.used, $0.id) > ($1.used, $1.id) }
        let chosen = Array(keys[min(offset, keys.count)..<min(end, keys.count)])
        // The entries used later than each match and not later than the one before it (all
        // those used later, for the first), and those used at the same time with a greater id.
        var ranges: [[SQLiteValue]] = []
        for (position, key) in chosen.enumerated() {
            ranges.append([.real(key.used), .real(position == 0 ? .infinity : chosen[position - 1].used)])
        }
        let between = try database.integersOnTwo("SELECT count(*) FROM entries INDEXED BY entries_order WHERE used > ?1 AND used <= ?2", each: ranges)
        // The entries used at the same time as a match, with a greater id, stand before it: the
        // ids used at each match's time, asked in one statement a chunk (a statement a match
        // cost 8 ms of a thousand matches' 40).
        var atTime: [Double: [Int64]] = [:]
        let times = Array(Set(chosen.map(\.used)))
        for start in stride(from: 0, to: times.count, by: 500) {
            let chunk = times[start..<min(times.count, start + 500)]
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try database.query("SELECT used, id FROM entries INDEXED BY entries_order WHERE used IN (\(marks))", chunk.map { .real($0) }) {
                if let used = row[0].real, let id = row[1].integer { atTime[used, default: []].append(id) }
            }
        }
        var page: [(id: Int64, place: Int)] = []
        var newer = 0
        for (position, key) in chosen.enumerated() {
            newer += Int(between[position] ?? 0)
            let gone = expired.count { ($0.used, $0.id) > key }
            let tied = atTime[key.used]?.count { $0 > key.id } ?? 0
            page.append((key.id, newer + tied - gone))
        }
        return page
    }
}
