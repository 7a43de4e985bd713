import CLinux
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The error number a failed system call set, typed (swift-system's `Errno`, kept to what this
/// package needs: a whole package dependency for one wrapper was not worth it to library users).
package struct Errno: Error, Equatable, Sendable, CustomStringConvertible {
    /// The C value.
    package let rawValue: Int32

    /// Wraps a C errno value.
    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno now.
    package static var current: Errno { Errno(rawValue: errno) }

    package static let interrupted = Errno(rawValue: EINTR)
    package static let wouldBlock = Errno(rawValue: EAGAIN)
    package static let invalidArgument = Errno(rawValue: EINVAL)
    package static let notImplemented = Errno(rawValue: ENOSYS)
    package static let isDirectory = Errno(rawValue: EISDIR)

    /// The C library's sentence for it (`strerror`).
    package var description: String { String(cString: strerror(rawValue)) }
}

/// The one way this package makes a system call that can be interrupted.
package enum SystemCall {
    /// Runs `call` (a system call that returns a negative value and sets errno on failure),
    /// again while a signal interrupts it (`EINTR`), and returns its non-negative result.
    ///
    /// - Throws: the errno of any other failure.
    package static func retrying<Result: BinaryInteger>(_ call: () -> Result) throws(Errno) -> Result {
        while true {
            let result = call()
            if result >= 0 { return result }
            let failure = Errno.current
            if failure != .interrupted { throw failure }
        }
    }

    /// What the symbolic link at `path` points to (`readlink`: `/proc/PID/exe`, a descriptor's
    /// `socket:[inode]`), as UTF-8, at most `capacity` bytes of it; nil when `path` is no link or
    /// cannot be read.
    package static func linkTarget(_ path: String, capacity: Int = Int(PATH_MAX)) -> String? {
        linkBytes(path, capacity: capacity).map { String(decoding: $0, as: UTF8.self) }
    }

    /// ``linkTarget(_:capacity:)``'s bytes, read into a buffer on the stack.
    package static func linkBytes(_ path: String, capacity: Int = Int(PATH_MAX)) -> [UInt8]? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer -> [UInt8]? in
            let count = buffer.withMemoryRebound(to: CChar.self) { readlink(path, $0.baseAddress!, capacity) }
            guard count > 0 else { return nil }
            return Array(buffer[..<count])
        }
    }

    /// The bytes of a small file such as `/proc/PID/stat` (at most `limit`), read with plain
    /// `read` calls; nil when it cannot be opened or read. Foundation's file reading asks for
    /// the file's attributes and sizes its buffer from them (zero for /proc files), which costs
    /// a copy's start more than the reads themselves.
    package static func smallFile(_ path: String, limit: Int = 1 << 16) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // Read through a buffer on the stack: one array, sized by what was read (a /proc file
        // says nothing of its size).
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) { buffer -> [UInt8]? in
            var bytes: [UInt8] = []
            while bytes.count < limit {
                let read = Glibc.read(fd, buffer.baseAddress!, min(buffer.count, limit - bytes.count))
                if read < 0, errno == EINTR { continue }
                guard read >= 0 else { return nil }
                if read == 0 { break }
                bytes.append(contentsOf: buffer[..<read])
            }
            return bytes
        }
    }
}

/// A thread of its own for a blocking loop, without Foundation's `Thread` (which would link all
/// of Foundation and ICU's data into the binaries).
package enum DetachedThread {
    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Runs `body` on a new detached thread named `name` (the kernel keeps 15 bytes of it, shown
    /// by `ps -L` and `top -H`).
    ///
    /// - Throws: `pthread_create`'s error when no thread could be made (`EAGAIN`: the process or
    ///   the user is at the thread limit); `body` has then not run.
    package static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(Errno) {
        let start = Unmanaged.passRetained(Start(name: name, body: body))
        var thread = pthread_t()
        let made = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            let start = Unmanaged<Start>.fromOpaque(argument).takeRetainedValue()
            _ = clinux_set_thread_name(start.name)
            start.body()
            return nil
        }, start.toOpaque())
        guard made == 0 else {
            start.release()
            throw Errno(rawValue: made)
        }
        pthread_detach(thread)
    }
}

/// A lock with a condition to wait on (POSIX's mutex and condition variable), the shape of
/// Foundation's `NSCondition` without linking Foundation proper. Waits measure time on the
/// monotonic clock, so a wall-clock jump neither ends nor stretches them.
package final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }

    /// Wakes every waiter (call with the lock held).
    package func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits for a broadcast (call with the lock held; it is held again on return).
    package func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits for a broadcast until `deadline` (wall-clock time, turned into time from now);
    /// false when the deadline passed first.
    package func wait(until deadline: Date) -> Bool {
        let remaining = deadline.timeIntervalSinceNow
        guard remaining > 0 else { return false }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let whole = remaining.rounded(.down)
        var nanoseconds = Int(now.tv_nsec) + Int((remaining - whole) * 1_000_000_000)
        var seconds = Int(now.tv_sec) + Int(min(whole, Double(Int32.max)))
        if nanoseconds >= 1_000_000_000 {
            seconds += 1
            nanoseconds -= 1_000_000_000
        }
        var until = timespec(tv_sec: seconds, tv_nsec: nanoseconds)
        return pthread_cond_timedwait(condition, mutex, &until) != ETIMEDOUT
    }
}

extension Data {
    /// The UTF-8 bytes of `text`, copied straight from the string's storage. `Data(text.utf8)`
    /// goes through Data's generic sequence initializer, whose first use in a process makes a
    /// run-time conformance look-up that scans every conformance record of the binary (about
    /// 100 µs here, in every short command that makes one).
    package init(utf8Of text: String) {
        var text = text
        self = text.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return Data() }
            return Data(bytes: base, count: bytes.count)
        }
    }

    /// Zeroes the bytes (a secret dropped) and empties the value. Where the storage is shared
    /// with another value, the write zeroes this value's own copy: the other holder's bytes stay
    /// until it lets them go.
    package mutating func wipe() {
        guard !isEmpty else { return }
        withUnsafeMutableBytes { bytes in
            if let base = bytes.baseAddress { explicit_bzero(base, bytes.count) }
        }
        self = Data()
    }
}
