import FoundationEssentials
import Glibc

/// Why a request to xpbd failed.
package struct ControlClientError: Error, CustomStringConvertible, Equatable {
    package enum Kind: Sendable, Equatable {
        /// Nothing listens on the socket.
        case notRunning
        /// The daemon refused, answered with an error, or broke the protocol.
        case failed
        /// No display is named, so there is no display's daemon to ask.
        case noDisplay
    }

    package let kind: Kind
    package let message: String
    package var description: String { message }

    package init(_ message: String, _ kind: Kind = .failed) {
        self.message = message
        self.kind = kind
    }
}

/// A blocking client of a daemon's control socket (no X connection needed): xpb's, and the
/// library's backend on a host without a display.
package struct ControlClient {
    package let socketPath: String
    package let display: String
    private var channel: FrameChannel

    /// The socket of `display`'s daemon (nil: `$DISPLAY`).
    package static func socketPath(display: String?) throws -> (path: String, display: String) {
        let environment = ControlEndpoint.environment
        guard let display = display ?? environment["DISPLAY"], !display.isEmpty else {
            throw ControlClientError("no display: set DISPLAY or pass --display", .noDisplay)
        }
        return (ControlEndpoint.socketPath(display: display, environment: environment, uid: getuid()), display)
    }

    /// Connects and checks the protocol version. A connection dropped before the daemon's
    /// hello (it sheds connections that say nothing when many come at once; nothing was asked
    /// yet) is made again, a few times within `timeout`.
    ///
    /// - Throws: a ``ControlClientError`` saying the daemon is not running, or why it refused.
    package init(display: String?, timeout: Double = 10) throws {
        let (path, display) = try Self.socketPath(display: display)
        try self.init(path: path, display: display, timeout: timeout,
                      notRunning: "xpbd is not running for display \(display) (nothing listens on \(path)); start it with 'xpbd &' or 'systemctl --user start xpbd'")
    }

    /// Connects to the daemon listening on `path`; `notRunning` is the failure when none does.
    package init(path: String, display: String, timeout: Double = 10, notRunning: String) throws {
        socketPath = path
        self.display = display
        let deadline = Date().addingTimeInterval(timeout)
        var attempt = 0
        while true {
            let fd: Int32
            do {
                fd = try LocalSocket.connect(path)
            } catch where [ENOENT, ECONNREFUSED].contains(error.code) {
                throw ControlClientError(notRunning, .notRunning)
            } catch {
                throw ControlClientError("cannot reach xpbd: \(error)")
            }
            var channel = FrameChannel(fd: fd)
            channel.setTimeout(max(0.1, deadline.timeIntervalSinceNow))
            let answer = Result { () throws -> Frame? in
                try channel.send(.hello, ControlHello.current)
                return try channel.receive()
            }
            guard case let .success(frame?) = answer else {
                Glibc.close(fd)
                attempt += 1
                if attempt < 5, Date() < deadline {
                    usleep(useconds_t(10_000 << attempt))
                    continue
                }
                _ = try answer.get()
                throw ControlClientError("xpbd closed the connection")
            }
            self.channel = channel
            if frame.kind == .error { throw ControlClientError("xpbd refused: \(Self.message(frame))") }
            guard frame.kind == .hello, let theirs = try? ControlCoding.decode(ControlHello.self, from: frame.payload) else {
                throw ControlClientError("xpbd answered something that is not the control protocol")
            }
            if let mismatch = ControlHello.current.mismatch(with: theirs) { throw ControlClientError("xpbd: \(mismatch)") }
            return
        }
    }

    /// Sends a request and waits for the answer; an error frame becomes a ``ControlClientError``.
    package mutating func send(_ request: ControlRequest) throws -> ControlReply {
        try channel.send(.request, request)
        guard let frame = try channel.receive() else { throw ControlClientError("xpbd closed the connection without answering") }
        switch frame.kind {
        case .reply:
            do { return try ControlCoding.decode(ControlReply.self, from: frame.payload) } catch {
                throw ControlClientError("xpbd's answer could not be read: \(error)")
            }
        case .page:
            do {
                let page = try HistoryPageCoding.decode(frame.payload)
                return .historyPage(entries: page.entries, total: page.total, partial: page.partial ? true : nil)
            } catch {
                throw ControlClientError("xpbd's history page could not be read: \(error)")
            }
        case .error:
            throw ControlClientError("xpbd: \(Self.message(frame))")
        default:
            throw ControlClientError("xpbd answered with an unexpected frame")
        }
    }

    /// Sends a request whose answer comes in several frames (``nextReply()``, ``nextFrame()``).
    package func post(_ request: ControlRequest) throws {
        try channel.send(.request, request)
    }

    /// Sends raw bytes in a data frame (a write's body).
    package func sendData(_ data: Data) throws {
        try channel.send(Frame(kind: .data, payload: data))
    }

    /// The next frame of a streamed answer: a reply or data; an error frame becomes a ``ControlClientError``.
    package mutating func nextFrame() throws -> Frame {
        guard let frame = try channel.receive() else { throw ControlClientError("xpbd closed the connection during its answer") }
        switch frame.kind {
        case .reply, .data: return frame
        case .error: throw ControlClientError("xpbd: \(Self.message(frame))")
        default: throw ControlClientError("xpbd answered with an unexpected frame")
        }
    }

    /// The next frame, which must be a reply.
    package mutating func nextReply() throws -> ControlReply {
        let frame = try nextFrame()
        guard frame.kind == .reply else { throw ControlClientError("xpbd sent data where an answer was due") }
        do { return try ControlCoding.decode(ControlReply.self, from: frame.payload) } catch {
            throw ControlClientError("xpbd's answer could not be read: \(error)")
        }
    }

    /// No timeout on receiving (a watch waits for changes as long as they take).
    package func waitIndefinitely() {
        channel.setTimeout(0)
    }

    private static func message(_ frame: Frame) -> String {
        (try? ControlCoding.decode(ControlFailure.self, from: frame.payload))?.message ?? "(no reason given)"
    }

    package func close() { Glibc.close(channel.fd) }

    /// The connection's socket (to shut it down from another thread, which ends a watch).
    package var descriptor: Int32 { channel.fd }
}
