import FoundationEssentials
import Glibc
import Logging

/// The history database's tables and how it is opened: WAL, the schema and what earlier versions
/// lacked, the integrity check, and a damaged database moved aside for a new one. The daemons of
/// one user (one per display) share the database, and wait for each other while one prepares it.
enum HistorySchema {
    /// How long opening waits for the other daemons of the user (they share the database) that
    /// start at the same moment: two displays at login, a VNC display beside the desktop.
    static let openPatience: Double = 20

    /// Opens the database and checks it; a damaged one is moved aside (with a warning) and a
    /// new one created. While another daemon holds it (creating it, switching it to WAL), the
    /// whole preparation is tried again, for up to ``openPatience`` seconds.
    /// With `seal`, the database is opened through the sealing VFS (it is sealed already, or new).
    static func open(_ path: String, seal: HistorySeal? = nil, logger: Logger) throws -> SQLiteDatabase {
        let deadline = Date().addingTimeInterval(openPatience)
        while true {
            do {
                let database = try SQLiteDatabase(path: path, seal: seal)
                try prepare(database)
                return database
            } catch {
                if error.isBusy, Date() < deadline {
                    usleep(50_000)
                    continue
                }
                guard error.isCorrupt else { throw error }
                return try openAfterMovingAside(path, seal: seal, because: error, logger: logger)
            }
        }
    }

    private static func openAfterMovingAside(_ path: String, seal: HistorySeal?, because error: SQLiteError, logger: Logger) throws -> SQLiteDatabase {
        moveAside(path, because: error, logger: logger)
        let database = try SQLiteDatabase(path: path, seal: seal)
        try prepare(database)
        return database
    }

    /// Renames a damaged database (and its WAL files) to `<name>.corrupt-<time>`.
    static func moveAside(_ path: String, because error: SQLiteError, logger: Logger) {
        let aside = path + ".corrupt-\(Int(Date().timeIntervalSince1970))"
        logger.warning("history database is damaged (\(error)); moved aside to \(aside), starting a new one")
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            rename(path + suffix, aside + suffix)
        }
    }

    static func prepare(_ database: SQLiteDatabase, inMemory: Bool = false) throws(SQLiteError) {
        let mode = inMemory ? "wal" : try database.query("PRAGMA journal_mode=WAL").first?.first?.text
        // A mode that did not change is another connection's lock (it answers with the old
        // mode), not damage: SQLITE_BUSY (5), tried again by open().
        if mode != "wal" { throw SQLiteError(code: 5, message: "the database could not be switched to WAL (journal mode \(mode ?? "?")); another process holds it") }
        // The log is written back into the database every 32 pages and then cut to 256 KiB: the
        // database holds the pages, and a full disk needs little to write the log back (the
        // reserve, see freeingSpace), where 1000 pages by default left it all in the log.
        try database.execute("""
            PRAGMA synchronous=FULL;
            PRAGMA secure_delete=ON;
            PRAGMA foreign_keys=ON;
            PRAGMA wal_autocheckpoint=32;
            PRAGMA journal_size_limit=262144;
            CREATE TABLE IF NOT EXISTS entries(
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                selection TEXT NOT NULL,
                display TEXT NOT NULL,
                created REAL NOT NULL,
                used REAL NOT NULL,
                source TEXT,
                pid INTEGER,
                size INTEGER NOT NULL,
                preview TEXT NOT NULL,
                text TEXT,
                advertised TEXT NOT NULL,
                expires REAL,
                local_only INTEGER NOT NULL DEFAULT 0,
                complete INTEGER NOT NULL DEFAULT 1,
                app TEXT,
                pinned INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS targets(
                entry INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
                position INTEGER NOT NULL,
                name TEXT NOT NULL,
                type TEXT NOT NULL,
                digest TEXT NOT NULL,
                size INTEGER NOT NULL,
                data BLOB,
                PRIMARY KEY(entry, position));
            CREATE INDEX IF NOT EXISTS targets_digest ON targets(digest);
            CREATE INDEX IF NOT EXISTS targets_files ON targets(digest) WHERE data IS NULL;
            CREATE TABLE IF NOT EXISTS pastes(
                entry INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
                time REAL NOT NULL,
                app TEXT,
                pid INTEGER,
                unknown TEXT);
            CREATE INDEX IF NOT EXISTS pastes_entry ON pastes(entry, time);
            """)
        // What earlier versions lacked, added by one daemon at a time (those of other displays,
        // started in the same instant, wait for the write lock, then find it done).
        try database.execute("BEGIN IMMEDIATE")
        do {
            // Entries written before the owner's application was recorded.
            let columns = try database.query("PRAGMA table_info(entries)").compactMap { $0[1].text }
            if !columns.contains("app") { try database.execute("ALTER TABLE entries ADD COLUMN app TEXT") }
            if !columns.contains("pinned") { try database.execute("ALTER TABLE entries ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0") }
            try HistoryIndex.prepare(database, columns: Set(columns))
            try EntryTotals.prepare(database)
            try database.execute("COMMIT")
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }

    /// Checks the whole file at `path` on a connection of its own, reading alone (the history's
    /// own goes on writing meanwhile): a file whose header and schema opened can still be damaged
    /// inside. Every page is read, 1.7 s at a million entries, so this runs after the open, off
    /// the history's lock (``ClipboardDaemon/beginCheck()``). Returns the damage found, nil when
    /// the file is whole or could not be read to tell.
    static func damage(at path: String, seal: HistorySeal? = nil) -> SQLiteError? {
        do {
            let database = try SQLiteDatabase(path: path, readOnly: true, seal: seal)
            let check = try database.query("PRAGMA quick_check").first?.first?.text
            return check == "ok" ? nil : SQLiteError(code: 11, message: "integrity check: \(check ?? "no answer")")
        } catch {
            return error.isCorrupt ? error : nil
        }
    }
}
