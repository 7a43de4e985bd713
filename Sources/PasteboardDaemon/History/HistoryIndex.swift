import FoundationEssentials

/// What the history keeps beside each entry to list and search it without reading every one:
/// its description (the content's types and size, ``EntryDescription``), its content key (the
/// look for a copy kept before is one indexed query), and a full-text index of its text,
/// preview and app (SQLite's FTS5 with the trigram tokenizer: any part of a word matches,
/// ignoring case, as the search always did).
enum HistoryIndex {
    /// The version of ``EntryDescription``'s rules the stored descriptions follow: a history
    /// described by earlier rules is described again when opened.
    static let descriptionVersion: Int64 = 1

    /// The full-text index (external content: it holds the index, `entries` the text) and the
    /// triggers that keep it in step with `entries`, whoever writes them (every xpbd of the
    /// user shares the history). `used` (touched by every select) and the description columns
    /// are not indexed: changing them costs no indexing.
    static let schema = """
        CREATE VIRTUAL TABLE IF NOT EXISTS entries_search USING fts5(
            text, preview, app, content='entries', content_rowid='id', tokenize='trigram');
        CREATE TRIGGER IF NOT EXISTS entries_search_insert AFTER INSERT ON entries BEGIN
            INSERT INTO entries_search(rowid, text, preview, app) VALUES (new.id, new.text, new.preview, new.app);
        END;
        CREATE TRIGGER IF NOT EXISTS entries_search_delete AFTER DELETE ON entries BEGIN
            INSERT INTO entries_search(entries_search, rowid, text, preview, app) VALUES ('delete', old.id, old.text, old.preview, old.app);
        END;
        CREATE TRIGGER IF NOT EXISTS entries_search_update AFTER UPDATE OF text, preview, app ON entries BEGIN
            INSERT INTO entries_search(entries_search, rowid, text, preview, app) VALUES ('delete', old.id, old.text, old.preview, old.app);
            INSERT INTO entries_search(rowid, text, preview, app) VALUES (new.id, new.text, new.preview, new.app);
        END;
        """

    /// Adds the description columns, the content key's index and the full-text index to a
    /// history that lacks them (`columns`: the entries table's columns now); an index made here
    /// is filled from the entries at once. Descriptions of earlier rules are cleared, to be made
    /// again (``HistoryStore``'s `describeUndescribed`).
    static func prepare(_ database: SQLiteDatabase, columns: Set<String>) throws(SQLiteError) {
        for (column, type) in [("types", "TEXT"), ("content_size", "INTEGER"), ("content_key", "TEXT")] where !columns.contains(column) {
            try database.execute("ALTER TABLE entries ADD COLUMN \(column) \(type)")
        }
        try database.execute("CREATE INDEX IF NOT EXISTS entries_content ON entries(selection, content_key)")
        if (try database.query("PRAGMA user_version").first?[0].integer ?? 0) < descriptionVersion {
            try database.execute("UPDATE entries SET types = NULL, content_size = NULL; PRAGMA user_version = \(descriptionVersion)")
        }
        let existed = try database.query("SELECT count(*) FROM sqlite_master WHERE name = 'entries_search'").first?[0].integer == 1
        try database.execute(schema)
        if !existed { try database.execute("INSERT INTO entries_search(entries_search) VALUES ('rebuild')") }
    }

    /// The ids of the entries (not expired at `now`) whose text, preview, app or types contain
    /// `search` (ignoring case), newest first. Three characters or more go through the
    /// full-text index; shorter ones (which no trigram holds) look at every entry.
    static func matches(_ search: String, in database: SQLiteDatabase, now: Double) throws(SQLiteError) -> [Int64] {
        let wanted = search.lowercased()
        let live = "(expires IS NULL OR expires > ?)"
        let inTypes = "instr(lower(coalesce(types, '')), ?) > 0"
        let rows: [[SQLiteValue]]
        if wanted.count >= 3 {
            // One phrase: the trigrams of the whole string, in order (a substring).
            let phrase = "\"" + wanted.replacing("\"", with: "\"\"") + "\""
            rows = try database.query("""
                SELECT id FROM entries WHERE \(live) AND (id IN (SELECT rowid FROM entries_search WHERE entries_search MATCH ?) OR \(inTypes))
                ORDER BY used DESC, id DESC
                """, [.real(now), .text(phrase), .text(wanted)])
        } else {
            rows = try database.query("""
                SELECT id FROM entries WHERE (expires IS NULL OR expires > ?1) AND (instr(lower(coalesce(text, '')), ?2) > 0
                    OR instr(lower(preview), ?2) > 0 OR instr(lower(coalesce(app, '')), ?2) > 0 OR instr(lower(coalesce(types, '')), ?2) > 0)
                ORDER BY used DESC, id DESC
                """, [.real(now), .text(wanted)])
        }
        return rows.compactMap { $0[0].integer }
    }
}
