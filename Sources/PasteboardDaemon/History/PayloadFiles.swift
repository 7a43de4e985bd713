import FoundationEssentials
import Glibc
import PasteboardWire

/// The history's large payloads as content-addressed files (`blobs/ab/abcdef…`, named by
/// SHA-256): written whole or not at all, shared by every row (and every daemon of the user)
/// that names the same bytes, deleted once no row names them, and overwritten before they go
/// when they held a secret.
final class PayloadFiles {
    let directory: URL
    /// Numbers this process's temporary files.
    private var temporaryCounter = 0

    init(directory: URL) {
        self.directory = directory
    }

    /// Where the payload of `digest` lives.
    func path(_ digest: Digest) -> String { path(hex: digest.hex) }

    func path(hex: String) -> String {
        directory.appendingPathComponent(String(hex.prefix(2))).appendingPathComponent(hex).path
    }

    /// Writes a payload file unless one with its digest exists: to a temporary name, synced,
    /// then renamed, so that a file under a digest's name is always whole.
    /// Returns whether it made the file (false: one with this digest was there).
    @discardableResult
    func write(_ data: Data, digest: Digest) throws -> Bool {
        let final = path(digest)
        if FileManager.default.fileExists(atPath: final) { return false }
        let folder = URL(fileURLWithPath: final).deletingLastPathComponent().path
        if mkdir(folder, 0o700) != 0, errno != EEXIST { throw POSIXFailure("creating \(folder)", errno) }
        temporaryCounter += 1
        let temporary = directory.appendingPathComponent("tmp-\(getpid())-\(temporaryCounter)").path
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXFailure("creating \(temporary)", errno) }
        var failure = data.withUnsafeBytes { writeAll(fd, $0) }.map { POSIXFailure("writing \(temporary)", $0) }
        if failure == nil, fsync(fd) != 0 { failure = POSIXFailure("syncing \(temporary)", errno) }
        close(fd)
        if failure == nil, rename(temporary, final) != 0 { failure = POSIXFailure("renaming \(temporary)", errno) }
        if let failure {
            unlink(temporary)
            throw failure
        }
        return true
    }

    /// How old an unnamed payload file must be before it is deleted, in seconds.
    static let garbageAge: Double = 60

    /// Deletes the payload files no row names (`referenced`: the digests rows name now). The
    /// daemons of one user share the files: one another daemon wrote a moment ago may belong to
    /// a row it is about to commit, so only files older than ``garbageAge`` are deleted, and
    /// those named before entries were deleted (`before`), which are ours to delete at once.
    func collectGarbage(referenced names: Set<String>, named before: Set<String>) {
        let files = FileManager.default
        let now = Date().timeIntervalSince1970
        let isOld = { (path: String) -> Bool in
            guard let modified = Self.modificationTime(path) else { return false }
            return now - modified > Self.garbageAge
        }
        for folder in (try? files.contentsOfDirectory(atPath: directory.path)) ?? [] {
            let path = directory.appendingPathComponent(folder).path
            if folder.hasPrefix("tmp-") {
                if isOld(path) { unlink(path) }
                continue
            }
            for file in (try? files.contentsOfDirectory(atPath: path)) ?? [] where !names.contains(file) && (before.contains(file) || isOld(path + "/" + file)) {
                unlink(path + "/" + file)
            }
        }
    }

    /// A file's modification time (seconds since 1970), nil when it is gone.
    private static func modificationTime(_ path: String) -> Double? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Double(info.st_mtim.tv_sec)
    }

    /// Overwrites a file with zeros, synced, then removes it.
    static func overwrite(_ path: String) {
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd >= 0 {
            var info = stat()
            if fstat(fd, &info) == 0, info.st_size > 0 {
                let zeros = [UInt8](repeating: 0, count: min(Int(info.st_size), 1 << 20))
                var left = Int(info.st_size)
                while left > 0 {
                    let wrote = zeros.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, min(left, $0.count)) }
                    guard wrote > 0 else { break }
                    left -= wrote
                }
                fsync(fd)
            }
            close(fd)
        }
        unlink(path)
    }
}
