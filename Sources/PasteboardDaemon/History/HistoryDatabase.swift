import FoundationEssentials
import Glibc
import Logging

/// The history's SQLite connection (``HistoryStore``'s parts share it): the file it is open on,
/// the key it is sealed with, and what happens when SQLite finds it damaged (moved aside, a new
/// one made, ``generation`` counted on).
final class HistoryDatabase {
    let path: String
    /// Whether the history lives in memory only (its directory could not be used).
    let isInMemory: Bool
    /// The key the history is sealed with at rest (its payload files' too); nil: plain.
    let seal: HistorySeal?
    private let logger: Logger
    /// The open connection: a new one after damage.
    private(set) var connection: SQLiteDatabase

    init(connection: SQLiteDatabase, path: String, isInMemory: Bool, seal: HistorySeal?, logger: Logger) {
        self.connection = connection
        self.path = path
        self.isInMemory = isInMemory
        self.seal = seal
        self.logger = logger
    }

    /// Counts the files this store has opened at ``path``: one moved aside for damage
    /// is followed by a new one.
    private(set) var generation = 1

    /// The damage a check of the whole file found (``HistorySchema/damage(at:)``, run off the
    /// lock, on the file of `generation`) handled: the file is moved aside and a new one made, as
    /// when a query finds it damaged. Nothing when the store has since made a new file itself.
    func replaceDamaged(_ damage: SQLiteError, generation checked: Int) {
        guard !isInMemory, checked == generation else { return }
        do {
            HistorySchema.moveAside(path, because: damage, logger: logger)
            generation += 1
            connection = try HistorySchema.open(path, seal: seal, logger: logger)
        } catch {
            logger.error("the history could not be made again after its damage: \(error)")
        }
    }

    /// Runs `body`; when SQLite reports the database damaged, moves it aside, starts a new one,
    /// and runs `body` once more.
    @discardableResult
    func recovering<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError where error.isCorrupt {
            HistorySchema.moveAside(path, because: error, logger: logger)
            generation += 1
            connection = try HistorySchema.open(path, seal: seal, logger: logger)
            return try body()
        }
    }

    /// Writes the WAL back into the database file and cuts it (a clean stop, a deletion).
    /// Returns whether the log was written back whole and cut (false: a reader held it, or the
    /// database would not say).
    @discardableResult
    func checkpoint() -> Bool {
        (try? connection.query("PRAGMA wal_checkpoint(TRUNCATE)").first?.first?.integer) == 0
    }
}
