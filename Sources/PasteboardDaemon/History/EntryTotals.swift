/// How many entries the history has and their bytes, pinned and not, kept in a table of two rows
/// by triggers on every write: the caps are checked after each copy, and a count of a million
/// rows (each with its text) read 1.4 GB for it, 0.3 s a copy. Triggers, not the store's own
/// sums: every writer keeps them, the xpbd of another display that shares the file, an earlier
/// version, a test filling the database.
enum EntryTotals {
    /// Makes the table and its triggers where the history lacks them, counting the entries
    /// already there once. Run inside the schema's write transaction (one daemon at a time).
    static func prepare(_ database: SQLiteDatabase) throws(SQLiteError) {
        let made = try !database.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entry_totals'").isEmpty
        try database.execute("""
            CREATE TABLE IF NOT EXISTS entry_totals(pinned INTEGER PRIMARY KEY, count INTEGER NOT NULL, bytes INTEGER NOT NULL);
            CREATE TRIGGER IF NOT EXISTS entries_counted AFTER INSERT ON entries BEGIN
                UPDATE entry_totals SET count = count + 1, bytes = bytes + new.size WHERE pinned = (new.pinned != 0);
            END;
            CREATE TRIGGER IF NOT EXISTS entries_uncounted AFTER DELETE ON entries BEGIN
                UPDATE entry_totals SET count = count - 1, bytes = bytes - old.size WHERE pinned = (old.pinned != 0);
            END;
            CREATE TRIGGER IF NOT EXISTS entries_recounted AFTER UPDATE OF pinned, size ON entries BEGIN
                UPDATE entry_totals SET count = count - 1, bytes = bytes - old.size WHERE pinned = (old.pinned != 0);
                UPDATE entry_totals SET count = count + 1, bytes = bytes + new.size WHERE pinned = (new.pinned != 0);
            END;
            """)
        if !made {
            try database.execute("""
                INSERT INTO entry_totals(pinned, count, bytes)
                SELECT kind, (SELECT count(*) FROM entries WHERE (pinned != 0) = kind),
                       (SELECT coalesce(sum(size), 0) FROM entries WHERE (pinned != 0) = kind)
                FROM (SELECT 0 AS kind UNION ALL SELECT 1);
                """)
        }
    }

    /// The entries and their bytes: the pinned ones, or the others.
    static func of(pinned: Bool, in database: SQLiteDatabase) throws(SQLiteError) -> (count: Int, bytes: Int) {
        guard let row = try database.query("SELECT count, bytes FROM entry_totals WHERE pinned = ?", [.integer(pinned ? 1 : 0)]).first else {
            return (0, 0)
        }
        return (Int(row[0].integer ?? 0), Int(row[1].integer ?? 0))
    }

    /// Every entry and their bytes.
    static func all(in database: SQLiteDatabase) throws(SQLiteError) -> (count: Int, bytes: Int) {
        let (pinned, other) = (try of(pinned: true, in: database), try of(pinned: false, in: database))
        return (pinned.count + other.count, pinned.bytes + other.bytes)
    }
}
