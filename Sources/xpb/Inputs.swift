internal import CLinux
import FoundationEssentials
import Glibc
import PasteboardKit

/// How `xpb copy` takes its inputs: bounded reads of streams, saved copies for the background
/// owner (secrets in memory only), and snapshots of files so that what is pasted is what was
/// copied.
enum Inputs {
    /// Files up to this size are snapshotted into memory when copied (bigger ones are cloned
    /// where the file system can, else served from disk and refused once changed).
    static let snapshotBudget = 64 << 20

    /// Everything `fd` yields, refusing more than `limit` bytes.
    static func read(_ fd: Int32, named name: String, limit: Int) throws -> Data {
        var data = Data()
        try pump(fd, named: name, limit: limit) { data.append(contentsOf: $0) }
        return data
    }

    /// Standard input and pipes up to this size are saved to a memory file; past it they move
    /// to an unlinked temporary file (under `TMPDIR`), so a large stream does not sit in memory.
    static let memorySaveBudget = 4 << 20

    /// Copies a stream into a descriptor the background owner reads from: a sealed memory file
    /// (a secret whatever its size: never on a disk; anything else within ``memorySaveBudget``,
    /// which spares the common small copy a file made and unlinked), else an unlinked temporary
    /// file. Refuses more than `limit` bytes: the clipboard then keeps what it had.
    static func save(_ source: Int32, named name: String, limit: Int, secret: Bool) throws -> Int32 {
        var fd = clinux_memfd(secret ? "xpb-secret" : "xpb-copy")
        guard fd >= 0 else { throw Failure("cannot keep \(name) in memory: \(String(cString: strerror(errno)))") }
        var inMemory = true
        var saved = 0
        do {
            try pump(source, named: name, limit: limit) { chunk in
                if inMemory, !secret, saved + chunk.count > memorySaveBudget {
                    fd = try spill(fd, size: saved, named: name)
                    inMemory = false
                }
                try writeAll(chunk, to: fd)
                saved += chunk.count
            }
            if inMemory { _ = clinux_seal(fd) }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Moves the `size` bytes of memory file `memory` to a new unlinked temporary file and
    /// returns it (positioned at its end); the memory file is closed then. On failure the
    /// memory file is left to the caller.
    private static func spill(_ memory: Int32, size: Int, named name: String) throws -> Int32 {
        var template = Array((FileManager.default.temporaryDirectory.path + "/xpb-copy-XXXXXX").utf8CString)
        let file = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard file >= 0 else { throw Failure("cannot create a temporary file: \(String(cString: strerror(errno)))") }
        _ = fcntl(file, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var offset = off_t(0)
        while Int(offset) < size {
            let sent = sendfile(file, memory, &offset, size - Int(offset))
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else {
                let reason = sent < 0 ? String(cString: strerror(errno)) : "it ended early"
                close(file)
                throw Failure("cannot save \(name) to a temporary file: \(reason)")
            }
        }
        close(memory)
        return file
    }

    /// Reads `fd` to its end in pieces, handing each to `body`.
    private static func pump(_ fd: Int32, named name: String, limit: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var total = 0
        while true {
            let count: Int
            do throws(Errno) {
                count = try SystemCall.retrying { Glibc.read(fd, &buffer, buffer.count) }
            } catch .isDirectory {
                throw Failure("cannot read \(name): it is a directory")
            } catch {
                throw Failure("cannot read \(name): \(error)")
            }
            if count == 0 { return }
            total += count
            guard total <= limit else {
                throw Failure("\(name) is larger than the \(limit)-byte limit (--max-size); nothing was copied")
            }
            try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
    }

    /// A copy of `file` that later changes to the original cannot reach: its bytes in a sealed
    /// memory file within ``snapshotBudget``, else a copy-on-write clone beside it; else the
    /// file itself (the owner then refuses to serve it once it has changed).
    static func snapshot(_ file: FileContents, path: String) -> FileContents {
        if file.size <= snapshotBudget, let snapshot = memoryCopy(of: file, path: path) { return snapshot }
        // The file's own directory ("/" for a file at the root, the working directory for a bare name).
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let clone = file.withDescriptor { clinux_reflink_in(directory, $0) }
        if clone >= 0, let snapshot = try? FileContents(adopting: clone, size: file.size, path: path) {
            return snapshot
        }
        return file
    }

    /// The file's bytes in a sealed memory file; nil when one cannot be made.
    private static func memoryCopy(of file: FileContents, path: String) -> FileContents? {
        let copy = clinux_memfd("xpb-snapshot")
        guard copy >= 0 else { return nil }
        guard copyAll(from: file, to: copy), clinux_seal(copy) == 0 else {
            close(copy)
            return nil
        }
        // Adopting closes the descriptor itself when it fails.
        return try? FileContents(adopting: copy, size: file.size, path: path)
    }

    private static func copyAll(from file: FileContents, to destination: Int32) -> Bool {
        var offset = off_t(0)
        return file.withDescriptor { source in
            while Int(offset) < file.size {
                let sent = sendfile(destination, source, &offset, file.size - Int(offset))
                if sent < 0, errno == EINTR { continue }
                guard sent > 0 else { return false }
            }
            return true
        }
    }
}
