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
}
