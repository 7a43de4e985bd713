#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// Frames over a blocking socket (xpb's client, and the daemon's per-connection threads).
package struct FrameChannel {
    package let fd: Int32
    private var decoder = FrameDecoder()

    package init(fd: Int32) { self.fd = fd }

    /// Sends one frame whole.
    package func send(_ frame: Frame) throws(WireError) {
        let code = frame.encoded.withUnsafeBytes { writeAll(fd, $0, socket: true) }
        if let code { throw WireError("sending: \(String(cString: strerror(code)))") }
    }

    /// The next frame; nil when the peer closed the connection cleanly between frames.
    package mutating func receive() throws(WireError) -> Frame? {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let frame = try decoder.next() { return frame }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw WireError("the peer did not answer in time") }
                throw WireError("receiving: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return nil }
            decoder.append(Data(buffer[0..<count]))
        }
    }

    /// The next frame, which must arrive whole within `seconds` however the peer spaces its bytes
    /// (a peer trickling a byte a second cannot hold the connection); nil when the peer closed
    /// the connection cleanly between frames.
    package mutating func receive(within seconds: Double) throws(WireError) -> Frame? {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let frame = try decoder.next() { return frame }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw WireError("the peer did not send a whole frame within \(seconds) s") }
            var value = timeval(tv_sec: Int(remaining), tv_usec: max(1, Int((remaining - remaining.rounded(.down)) * 1_000_000)))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                throw WireError("receiving: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return nil }
            decoder.append(Data(buffer[0..<count]))
        }
    }

    /// Sends `value` as JSON in a frame of `kind`.
    package func send<T: Encodable>(_ kind: FrameKind, _ value: T) throws(WireError) {
        let payload: Data
        do { payload = try ControlCoding.encode(value) } catch { throw WireError("encoding: \(error)") }
        try send(Frame(kind: kind, payload: payload))
    }

    /// Gives up a blocking receive or send after `seconds`.
    package func setTimeout(_ seconds: Double) {
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// Writes every byte of `buffer` to `fd`, going on after EINTR: with `send` and MSG_NOSIGNAL on a
/// socket (no SIGPIPE), with `write` otherwise (pipes, files). Nil when all went, else the errno.
package func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, socket: Bool = false) -> Int32? {
    var offset = 0
    while offset < buffer.count {
        let start = buffer.baseAddress! + offset
        let sent = socket ? Glibc.send(fd, start, buffer.count - offset, Int32(MSG_NOSIGNAL)) : Glibc.write(fd, start, buffer.count - offset)
        if sent < 0 {
            if errno == EINTR { continue }
            return errno
        }
        offset += sent
    }
    return nil
}

/// UNIX stream sockets by path.
package enum LocalSocket {
    /// Connects to `path`; throws with the system's reason (ENOENT, ECONNREFUSED …) in `code`.
    package static func connect(_ path: String) throws(LocalSocketError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LocalSocketError(code: errno, path: path) }
        var address = try makeAddress(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw LocalSocketError(code: code, path: path)
        }
        return fd
    }

    /// A socket listening on `path` (which must not exist), mode 600: only its user reaches it,
    /// whatever the directory allows. Throws with the system's reason in `code`.
    package static func listen(_ path: String, backlog: Int32) throws(LocalSocketError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LocalSocketError(code: errno, path: path) }
        var address = try makeAddress(path)
        let previousMask = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previousMask)
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw LocalSocketError(code: code, path: path)
        }
        return fd
    }

    /// `sockaddr_un` for a path (at most 107 bytes).
    package static func makeAddress(_ path: String) throws(LocalSocketError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw LocalSocketError(code: ENAMETOOLONG, path: path) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }
}

/// A socket call that failed, with errno.
package struct LocalSocketError: Error, Sendable, CustomStringConvertible {
    package let code: Int32
    package let path: String
    package var description: String { "\(path): \(String(cString: strerror(code)))" }

    package init(code: Int32, path: String) {
        self.code = code
        self.path = path
    }
}
