import CHistorySeal
import CSQLite
import FoundationEssentials
import Glibc
import Logging
import PasteboardWire

/// Why a sealed history was not opened: it is left as it is, and the daemon keeps its history in
/// memory for this run.
package struct HistorySealError: Error, CustomStringConvertible {
    package let description: String
}

/// The history's database opened sealed: with the first key that opens it, after sealing a plain
/// one (an earlier xpbd's) in place.
enum HistorySealing {
    /// Where a conversion writes the sealed copy.
    static func sealingPath(_ path: String) -> String { path + ".sealing" }
    /// The plain file's second name while the sealed copy takes its place.
    static func plainPath(_ path: String) -> String { path + ".plain-old" }

    /// Opens the history at `path` with the first of `seals` that opens it (a new history with
    /// the first). A plain history is sealed first; when that fails (a full disk), it is opened
    /// plain for this run, said in a warning, and nothing of it is lost: the returned seal is
    /// then nil. `converted`: whether it was sealed now. Throws ``HistorySealError`` when the
    /// history is sealed with none of the keys.
    static func open(_ path: String, seals: [HistorySeal], logger: Logger) throws -> (database: SQLiteDatabase, seal: HistorySeal?, converted: Bool) {
        guard let first = seals.first else { throw HistorySealError(description: "no key") }
        var probe = first.probe(path)
        // One sealing at a time: the daemons of one user's displays start together and share
        // the history; the one that waited finds it sealed.
        var lock: Int32 = -1
        if probe == .plain {
            lock = Glibc.open(path + ".seal-lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if lock >= 0 { while flock(lock, LOCK_EX) != 0, errno == EINTR {} }
            probe = first.probe(path)
        }
        defer { if lock >= 0 { close(lock) } }
        finishConversion(path, logger: logger)
        switch probe {
        case .plain:
            do {
                try convert(path, to: first, logger: logger)
            } catch {
                logger.warning("the history in \(path) could not be sealed (\(error)): it stays plain until the next start, whole")
                try? FileManager.default.removeItem(atPath: sealingPath(path))
                return (try HistorySchema.open(path, logger: logger), nil, false)
            }
            return (try HistorySchema.open(path, seal: first, logger: logger), first, true)
        case .wrongKey:
            guard let other = seals.dropFirst().first(where: { $0.probe(path) == .opens }) else {
                throw HistorySealError(description: "the history in \(path) is sealed with a key that \(seals.map(\.source.description).joined(separator: " and ")) does not hold: it is left as it is")
            }
            return (try HistorySchema.open(path, seal: other, logger: logger), other, false)
        case .empty, .opens, .unreadable:
            return (try HistorySchema.open(path, seal: first, logger: logger), first, false)
        }
    }

    /// Writes a sealed copy of the plain database at `path` (`VACUUM INTO` through the sealing
    /// VFS, each page reserving its nonce and tag), puts it in the plain one's place, and
    /// overwrites the plain pages: the database's and its log's.
    static func convert(_ path: String, to seal: HistorySeal, logger: Logger) throws {
        let started = Date()
        let sealing = sealingPath(path)
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(sealing + suffix) }
        var log: Int32 = -1
        do {
            let registered = xpbseal_register()
            guard registered == SQLITE_OK else { throw SQLiteError(code: registered, message: "the sealing VFS cannot be registered") }
            let plain = try SQLiteDatabase(path: path)
            try withExtendedLifetime(plain) {
                let pageSize = try plain.query("PRAGMA page_size").first?.first?.integer ?? 0
                guard pageSize == Int64(XPBSEAL_PAGE) else {
                    throw HistorySealError(description: "its pages are of \(pageSize) bytes, not \(XPBSEAL_PAGE)")
                }
                // The log's plain pages: SQLite deletes the file as the connection closes (after
                // this block); held open from here, it is overwritten below.
                log = Glibc.open(path + "-wal", O_RDWR | O_CLOEXEC | O_NOFOLLOW)
                plain.reserveSealBytes()
                try plain.execute("VACUUM INTO '\(seal.uri(for: sealing).replacing("'", with: "''"))'")
            }
        } catch {
            if log >= 0 { close(log) }
            for suffix in ["", "-journal"] { unlink(sealing + suffix) }
            throw error
        }
        defer { if log >= 0 { close(log) } }
        guard seal.probe(sealing) == .opens else {
            unlink(sealing)
            throw HistorySealError(description: "the sealed copy does not open")
        }
        // The plain file keeps a second name until the sealed one has taken its place: a crash
        // between the two leaves one of them under the history's name, never neither.
        let plainOld = plainPath(path)
        unlink(plainOld)
        guard link(path, plainOld) == 0 else { throw POSIXFailure("linking \(path)", errno) }
        guard rename(sealing, path) == 0 else {
            let failure = POSIXFailure("renaming \(sealing)", errno)
            unlink(plainOld)
            throw failure
        }
        syncFolder(of: path)
        if log >= 0 { PayloadFiles.overwrite(descriptor: log) }
        for suffix in ["-wal", "-shm"] { PayloadFiles.overwrite(path + suffix) }
        PayloadFiles.overwrite(plainOld)
        let milliseconds = Int(Date().timeIntervalSince(started) * 1000)
        logger.notice("the history in \(path) is sealed now, with the key from \(seal.source); its plain pages were overwritten (\(milliseconds) ms)")
    }

    /// Ends a conversion a crash cut short: the plain file's second name goes (overwritten when
    /// the sealed copy has taken the history's name; only unlinked while it is the history
    /// itself), and a sealed copy never put in place is removed.
    static func finishConversion(_ path: String, logger: Logger) {
        let plainOld = plainPath(path)
        var old = stat(), current = stat()
        if lstat(plainOld, &old) == 0 {
            if lstat(path, &current) == 0, current.st_ino == old.st_ino, current.st_dev == old.st_dev {
                unlink(plainOld)
            } else {
                PayloadFiles.overwrite(plainOld)
                logger.notice("the plain history a sealing left (\(plainOld)) is overwritten")
            }
        }
        let sealing = sealingPath(path)
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(sealing + suffix) }
    }

    private static func syncFolder(of path: String) {
        let fd = Glibc.open(URL(fileURLWithPath: path).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
    }
}
