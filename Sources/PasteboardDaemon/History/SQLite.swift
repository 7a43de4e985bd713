import CHistorySeal
import CSQLite
import Dispatch
import FoundationEssentials
import PasteboardKit
import Synchronization

/// A failed SQLite call: the result code and SQLite's message.
package struct SQLiteError: Error, Sendable, CustomStringConvertible {
    package let code: Int32
    package let message: String

    /// The file is not a database or is damaged.
    /// A sealed page that does not open (SQLITE_IOERR_DATA) is damage too.
    package var isCorrupt: Bool { code & 0xFF == SQLITE_CORRUPT || code & 0xFF == SQLITE_NOTADB || code == SQLITE_IOERR | (32 << 8) }
    /// The disk (or quota) is full.
    package var isFull: Bool { code & 0xFF == SQLITE_FULL }
    /// Another connection holds the lock (another xpbd starting at the same moment).
    package var isBusy: Bool { code & 0xFF == SQLITE_BUSY || code & 0xFF == SQLITE_LOCKED }
    package var description: String { "\(message) (SQLite code \(code))" }
}

/// One SQLite connection (the C API through Modules/CSQLite), used from one thread at a time.
final class SQLiteDatabase {
    private let handle: OpaquePointer
    /// Where it was opened and how, for a second connection (``integersOnTwo(_:each:)``); nil
    /// for a database in memory, which no other connection sees.
    private let location: (path: String, seal: HistorySeal?)?

    /// Opens (or creates) the database at `path`; `readOnly` opens an existing one to read alone.
    /// With `seal`, through the sealing VFS: every page on disk sealed with its key (a new
    /// database reserves each page's nonce and tag), temporary tables and indexes in memory.
    init(path: String, readOnly: Bool = false, seal: HistorySeal? = nil) throws(SQLiteError) {
        var db: OpaquePointer?
        // URIs: a `VACUUM INTO` names the sealed file it writes by one (a path never begins `file:`).
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_URI
        var name = path
        if let seal {
            let registered = xpbseal_register()
            guard registered == SQLITE_OK else { throw SQLiteError(code: registered, message: "the sealing VFS cannot be registered") }
            name = seal.uri(for: path)
        }
        let code = sqlite3_open_v2(name, &db, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            throw SQLiteError(code: code, message: message)
        }
        handle = db
        location = path == ":memory:" ? nil : (path, seal)
        sqlite3_busy_timeout(db, 2000)
        sqlite3_extended_result_codes(db, 1)
        if seal != nil {
            reserveSealBytes()
            try execute("PRAGMA temp_store=MEMORY")
        }
    }

    /// Asks for each page's nonce and tag to be reserved (taken by a new database, or by one
    /// this connection writes out whole, `VACUUM INTO`).
    func reserveSealBytes() {
        var reserve = Int32(XPBSEAL_RESERVE)
        sqlite3_file_control(handle, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
    }

    deinit { sqlite3_close_v2(handle) }

    /// Rows this connection has inserted, changed or deleted since it opened: it moves with
    /// each of its own writes (`PRAGMA data_version` moves with other connections' commits).
    var totalChanges: Int64 { sqlite3_total_changes64(handle) }

    private func error(_ code: Int32) -> SQLiteError {
        SQLiteError(code: code, message: String(cString: sqlite3_errmsg(handle)))
    }

    /// Runs statements that return no rows.
    func execute(_ sql: String) throws(SQLiteError) {
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw error(code) }
    }

    /// Runs one statement with `bindings` and returns its rows.
    @discardableResult
    func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> [[SQLiteValue]] {
        var statement: OpaquePointer?
        var code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code) }
        defer { sqlite3_finalize(statement) }
        try bind(bindings, to: statement)
        var rows: [[SQLiteValue]] = []
        while true {
            code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw error(code) }
            let columns = sqlite3_column_count(statement)
            rows.append((0..<columns).map { column in
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
                case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
                case SQLITE_TEXT: return .text(String(cString: sqlite3_column_text(statement, column)))
                case SQLITE_BLOB:
                    let count = Int(sqlite3_column_bytes(statement, column))
                    guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return .blob(Data()) }
                    return .blob(Data(bytes: bytes, count: count))
                default: return .null
                }
            })
        }
        return rows
    }

    /// Runs one statement whose first column is an integer, giving each row's to `body` as it
    /// is stepped, without making a row (100,000 ids cost no allocation each); `body` returns
    /// false to stop.
    func forEachInteger(_ sql: String, _ bindings: [SQLiteValue] = [], _ body: (Int64) -> Bool) throws(SQLiteError) {
        try step(sql, bindings) { body(sqlite3_column_int64($0, 0)) }
    }

    /// Runs one statement whose first column is an integer and second a number (an id and its
    /// time), giving each row's to `body` as it is stepped; `body` returns false to stop.
    func forEachKey(_ sql: String, _ bindings: [SQLiteValue] = [], _ body: (Int64, Double) -> Bool) throws(SQLiteError) {
        try step(sql, bindings) { body(sqlite3_column_int64($0, 0), sqlite3_column_double($0, 1)) }
    }

    /// Steps one statement, handing each row (the statement) to `body` until it returns false.
    private func step(_ sql: String, _ bindings: [SQLiteValue], _ body: (OpaquePointer) -> Bool) throws(SQLiteError) {
        var statement: OpaquePointer?
        var code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code) }
        defer { sqlite3_finalize(statement) }
        try bind(bindings, to: statement)
        while true {
            code = sqlite3_step(statement)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { throw error(code) }
            guard body(statement) else { return }
        }
    }

    /// A second connection to this database, to read beside this one (nil for one in memory).
    func twin() throws(SQLiteError) -> SQLiteDatabase? {
        try location.map { location throws(SQLiteError) in try Self.reader(at: location) }
    }

    private static func reader(at location: (path: String, seal: HistorySeal?)) throws(SQLiteError) -> SQLiteDatabase {
        try SQLiteDatabase(path: location.path, readOnly: true, seal: location.seal)
    }

    /// As ``integers(_:each:)``, the second half of `bindings` at the same time on a connection
    /// of its own, on another thread (a database on disk, 64 bindings or more): a search's
    /// places, counted along a long index, take half the time on two cores. Where that
    /// connection does not open, this one counts them all.
    func integersOnTwo(_ sql: String, each bindings: [[SQLiteValue]]) throws(SQLiteError) -> [Int64?] {
        guard let location, bindings.count >= 64 else { return try integers(sql, each: bindings) }
        let half = bindings.count / 2
        let second = Array(bindings[half...])
        final class Counted: Sendable {
            let values = Mutex<[Int64?]?>(nil)
        }
        let counted = Counted()
        let done = DispatchSemaphore(value: 0)
        Background.run("xpbd.history.count", qos: .userInitiated) {
            defer { done.signal() }
            guard let twin = try? Self.reader(at: location), let values = try? twin.integers(sql, each: second) else { return }
            counted.values.withLock { $0 = values }
        }
        let first: [Int64?]
        do {
            first = try integers(sql, each: Array(bindings[..<half]))
        } catch {
            done.wait()
            throw error
        }
        done.wait()
        if let rest = counted.values.withLock({ $0 }) { return first + rest }
        return try first + integers(sql, each: second)
    }

    /// Runs `sql`, a statement whose first column of its first row is an integer, once for each
    /// of `bindings`, prepared once: many small counts cost a step each, not a compilation each
    /// (40 µs, more than a count of a thousand index entries). The integers, nil for no row.
    func integers(_ sql: String, each bindings: [[SQLiteValue]]) throws(SQLiteError) -> [Int64?] {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code) }
        defer { sqlite3_finalize(statement) }
        var results: [Int64?] = []
        results.reserveCapacity(bindings.count)
        for values in bindings {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
            try bind(values, to: statement)
            let step = sqlite3_step(statement)
            switch step {
            case SQLITE_ROW: results.append(sqlite3_column_int64(statement, 0))
            case SQLITE_DONE: results.append(nil)
            default: throw error(step)
            }
        }
        return results
    }

    private func bind(_ bindings: [SQLiteValue], to statement: OpaquePointer) throws(SQLiteError) {
        for (offset, value) in bindings.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .null: code = sqlite3_bind_null(statement, index)
            case let .integer(number): code = sqlite3_bind_int64(statement, index, number)
            case let .real(number): code = sqlite3_bind_double(statement, index, number)
            case let .text(text): code = csqlite_bind_text_copy(statement, index, text)
            case let .blob(data):
                code = data.withUnsafeBytes { csqlite_bind_blob_copy(statement, index, $0.baseAddress, Int32($0.count)) }
            }
            guard code == SQLITE_OK else { throw error(code) }
        }
    }

    /// Runs `body` in one transaction: all of it is written, or none.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    var lastInsertedRow: Int64 { sqlite3_last_insert_rowid(handle) }
}

/// A value bound to or read from a statement.
enum SQLiteValue: Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    var integer: Int64? { if case let .integer(value) = self { return value } else { return nil } }
    var real: Double? {
        switch self {
        case let .real(value): return value
        case let .integer(value): return Double(value)
        default: return nil
        }
    }
    var text: String? { if case let .text(value) = self { return value } else { return nil } }
    var blob: Data? { if case let .blob(value) = self { return value } else { return nil } }
}
