import Glibc

/// Bytes kept in a file of the history's own (`reserve`) while the disk has room, and given back
/// when it is full: deleting needs some (SQLite writes the change to its log before the space of
/// what it deletes is free), and a user who deletes entries to free space must not be told that
/// the disk is full.
struct DiskReserve {
    static let bytes = 256 << 10

    let path: String

    /// Makes the reserve whole again if the disk has room (it was given back, or never made).
    /// Returns false only when the disk is full; any other failure to make it (a file system
    /// that will not) is no reason to stop keeping entries.
    func keep() -> Bool {
        var info = stat()
        if stat(path, &info) == 0, Int(info.st_blocks) * 512 >= Self.bytes { return true }
        let isFull = { (code: Int32) in code == ENOSPC || code == EDQUOT }
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return !isFull(errno) }
        defer { close(fd) }
        // Blocks really allocated: a sparse file would free nothing.
        let code = posix_fallocate(fd, 0, off_t(Self.bytes))
        guard code == 0 else {
            _ = ftruncate(fd, 0)
            return !isFull(code)
        }
        return true
    }

    /// Gives the reserve back to the disk; whether there was one.
    func giveBack() -> Bool {
        unlink(path) == 0
    }
}
