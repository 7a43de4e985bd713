import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire

/// The history's large payloads as content-addressed files (`blobs/ab/abcdef…`, named by
/// SHA-256): written whole or not at all, shared by every row (and every daemon of the user)
/// that names the same bytes, deleted once no row names them, and overwritten before they go
/// when they held a secret.
///
/// Sealed (``HistorySeal``), a file holds its payload sealed and is named by a keyed digest: its
/// name tells nothing of the contents.
final class PayloadFiles {
    let directory: URL
    /// The key payloads are sealed with; nil: plain.
    var seal: HistorySeal?
    /// Numbers this process's temporary files.
    private var temporaryCounter = 0

    init(directory: URL) {
        self.directory = directory
    }

    /// Where the payload of `digest` lives.
    func path(_ digest: Digest) -> String { path(hex: digest.hex) }

    func path(hex: String) -> String {
        let name = fileName(hex)
        return directory.appendingPathComponent(String(name.prefix(2))).appendingPathComponent(name).path
    }

    /// The file name of the payload of digest `hex`.
    func fileName(_ hex: String) -> String { seal?.fileName(forDigest: hex) ?? hex }

    /// The payload of `digest`, whole (a plain file mapped, not read); nil when it is missing or
    /// does not open.
    func contents(_ digest: Digest) -> Data? {
        guard let bytes = try? Data(contentsOf: URL(fileURLWithPath: path(digest)), options: .alwaysMapped) else { return nil }
        guard let seal else { return bytes }
        return seal.open(bytes)
    }

    /// The first `count` bytes of the payload of `digest`.
    func head(_ digest: Digest, count: Int) -> Data? {
        guard let seal else { return try? FileContents(path: path(digest)).read(offset: 0, length: count) }
        guard let bytes = try? Data(contentsOf: URL(fileURLWithPath: path(digest)), options: .alwaysMapped) else { return nil }
        return seal.open(bytes, count: count)
    }

    /// Writes a payload file unless one with its digest exists: to a temporary name, synced,
    /// then renamed, so that a file under a digest's name is always whole.
    /// Returns whether it made the file (false: one with this digest was there).
    @discardableResult
    func write(_ data: Data, digest: Digest) throws -> Bool {
        let final = path(digest)
        if FileManager.default.fileExists(atPath: final) { return false }
        var data = data
        if let seal {
            guard let sealed = seal.seal(data) else { throw POSIXFailure("sealing a payload", EIO) }
            data = sealed
        }
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
        let names = Set(names.map(fileName))
        let before = Set(before.map(fileName))
        for folder in (try? files.contentsOfDirectory(atPath: directory.path)) ?? [] {
            let path = directory.appendingPathComponent(folder).path
            // The marker of a sealing under way (``HistoryStore``) is not a payload.
            if folder.hasPrefix(".") { continue }
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

    /// Seals the plain payload files (an earlier xpbd's) under their sealed names, each plain one
    /// overwritten; those sealed already stay. Returns how many were sealed.
    @discardableResult
    func sealPlainFiles() -> Int {
        guard seal != nil else { return 0 }
        let files = FileManager.default
        var sealed = 0
        for folder in (try? files.contentsOfDirectory(atPath: directory.path)) ?? [] where !folder.hasPrefix("tmp-") {
            let folderPath = directory.appendingPathComponent(folder).path
            for name in (try? files.contentsOfDirectory(atPath: folderPath)) ?? [] {
                let plainPath = folderPath + "/" + name
                guard let digest = Digest(hex: name), let bytes = try? Data(contentsOf: URL(fileURLWithPath: plainPath), options: .alwaysMapped),
                      !HistorySeal.isSealed(bytes), path(digest) != plainPath else { continue }
                // A plain file's name is its digest: one that does not match is not ours to seal.
                guard Digest(of: bytes) == digest, (try? write(bytes, digest: digest)) != nil else { continue }
                Self.overwrite(plainPath)
                sealed += 1
            }
        }
        return sealed
    }

    /// Overwrites a file with zeros, synced, then removes it.
    static func overwrite(_ path: String) {
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd >= 0 {
            overwrite(descriptor: fd)
            close(fd)
        }
        unlink(path)
    }

    /// Overwrites an open file with zeros, synced (the caller closes it).
    static func overwrite(descriptor fd: Int32) {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size > 0 else { return }
        let zeros = [UInt8](repeating: 0, count: min(Int(info.st_size), 1 << 20))
        var done = 0
        while done < Int(info.st_size) {
            let wrote = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, min(Int(info.st_size) - done, $0.count), off_t(done)) }
            guard wrote > 0 else { break }
            done += wrote
        }
        fsync(fd)
    }
}
