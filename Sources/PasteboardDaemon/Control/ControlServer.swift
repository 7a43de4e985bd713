import CLinux
import FoundationEssentials
import PasteboardKit
import Glibc
import Logging
import PasteboardWire
import Synchronization

/// A reply to a request, or a reply's payload encoded before (see ``ClipboardDaemon/listing``).
package enum ControlAnswer {
    case reply(ControlReply)
    /// A page of the history, already in its compact form (``HistoryPageCoding``).
    case page(Data)
    /// The handler answered on the connection itself (a streamed read or write, a watch).
    case answered
}

/// Answers one request; may talk on the client's connection (streams) before it returns.
typealias ControlHandler = @Sendable (ControlRequest, inout FrameChannel) -> Result<ControlAnswer, ControlFailure>

/// The daemon's control socket: a UNIX socket (0600, in a 0700 directory) answering
/// ``ControlRequest``s. Each connection is checked with SO_PEERCRED: a peer of another user is
/// refused. One thread accepts; each connection is served on a thread of its own.
///
/// Budgets, so that no flood of one kind locks out `xpb history` and `xpb daemon status`:
/// a connection must send its hello frame whole within ``helloDeadline`` (a byte a second does
/// not keep it), and each later frame within ``frameDeadline``; at most ``maxPending``
/// connections wait for their hello, and when one more comes the one that has waited longest is
/// dropped (a real client says hello at once, so the flood's own connections go first); at most
/// ``maxConnections`` clients that said hello are served at once.
final class ControlServer: Sendable {
    /// Clients past their hello served at once; one more is told the daemon is busy.
    static let maxConnections = 16
    /// Connections waiting for their hello at once; one more drops the oldest.
    static let maxPending = 16
    static let helloDeadline: Double = 2
    static let frameDeadline: Double = 10

    let path: String
    private let listener: Int32
    /// The socket file's identity, so that a stopping daemon never removes a successor's socket.
    private let inode: (dev: UInt, ino: UInt)
    private let logger: Logger
    private let handler: ControlHandler
    /// Takes a connection that said hello in the sync protocol (the descriptor is then its).
    private let syncHandler: @Sendable (Int32, Data) -> Void
    private let active = Mutex(0)
    /// Connections waiting for their hello, with when they were accepted.
    private let pending = Mutex<[Int32: Date]>([:])
    private let isStopped = Mutex(false)
    /// How often refused connections are logged.
    private let refusals = Mutex(LogThrottle())

    init(path: String, logger: Logger, handler: @escaping ControlHandler,
         syncHandler: @escaping @Sendable (Int32, Data) -> Void) throws {
        self.path = path
        self.logger = logger
        self.handler = handler
        self.syncHandler = syncHandler
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var info = stat()
        guard lstat(directory, &info) == 0, info.st_uid == getuid(), info.st_mode & S_IFMT == S_IFDIR else {
            throw POSIXFailure("\(directory) is not a directory of this user", EPERM)
        }
        chmod(directory, 0o700)
        // A socket file here is one left by a daemon that died: we hold CLIPBOARD_MANAGER, so no
        // live daemon of this display can be behind it.
        unlink(path)
        let fd: Int32
        do {
            fd = try LocalSocket.listen(path, backlog: 32)
        } catch {
            throw POSIXFailure("listening on \(path)", error.code)
        }
        guard stat(path, &info) == 0 else {
            let code = errno
            close(fd)
            throw POSIXFailure("listening on \(path)", code)
        }
        listener = fd
        inode = (UInt(info.st_dev), UInt(info.st_ino))
        do {
            try DetachedThread.start(name: "xpbd.control") { [self] in acceptLoop() }
        } catch {
            close(fd)
            unlink(path)
            throw POSIXFailure("starting the control socket's thread", error.rawValue)
        }
    }

    /// Clients past their hello being served now.
    var clientCount: Int { active.withLock { $0 } }

    /// Stops accepting and removes the socket file (if it is still ours).
    func stop() {
        isStopped.withLock { $0 = true }
        var info = stat()
        if stat(path, &info) == 0, UInt(info.st_dev) == inode.dev, UInt(info.st_ino) == inode.ino { unlink(path) }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        while !isStopped.withLock({ $0 }) {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE {
                    usleep(250_000)
                    continue
                }
                break
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            // The descriptor stays open (the serving thread closes it): only shut down, so the
            // number cannot be reused while that thread still holds it.
            // The one evicted is the oldest that has sent nothing for a moment: a client whose
            // hello is in (xpb sends it at once), or that connected just now, is not dropped for
            // connections that send nothing, however fast they come back.
            let evicted = pending.withLock { pending -> Int32? in
                var oldest: Int32?
                if pending.count >= Self.maxPending {
                    let now = Date()
                    let byAge = pending.sorted { $0.value < $1.value }
                    let silent = byAge.filter { Self.bytesWaiting(on: $0.key) == 0 }
                    oldest = (silent.first { now.timeIntervalSince($0.value) > Self.evictionGrace } ?? silent.first ?? byAge.first)?.key
                    if let oldest { pending.removeValue(forKey: oldest) }
                }
                pending[fd] = Date()
                return oldest
            }
            if let evicted { shutdown(evicted, Int32(SHUT_RDWR)) }
            do {
                try DetachedThread.start(name: "xpbd.client") { [self] in
                    let handedOver = serve(fd)
                    if let handedOver {
                        // A sync link: no deadline from here, and it does not count as a control connection.
                        var forever = timeval()
                        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, socklen_t(MemoryLayout<timeval>.size))
                        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &forever, socklen_t(MemoryLayout<timeval>.size))
                        syncHandler(fd, handedOver)
                    } else {
                        close(fd)
                    }
                }
            } catch {
                // At the thread limit: this client is turned away, the daemon goes on.
                _ = pending.withLock { $0.removeValue(forKey: fd) }
                close(fd)
            }
        }
        close(listener)
    }

    /// How long a new connection has to send its first bytes before it is the first to go when
    /// too many are pending.
    static let evictionGrace = 0.2

    /// Bytes received on a connection and not read yet.
    private static func bytesWaiting(on fd: Int32) -> Int32 {
        var count: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &count) == 0 ? count : 0
    }

    /// Answers a control connection; for a sync link's hello, returns its payload instead.
    private func serve(_ fd: Int32) -> Data? {
        var channel = FrameChannel(fd: fd)
        channel.setTimeout(Self.frameDeadline)
        var uid: uid_t = 0
        let leavePending = { [self] in _ = pending.withLock { $0.removeValue(forKey: fd) } }
        guard clinux_peer_uid(fd, &uid) == 0, uid == getuid() else {
            leavePending()
            let (log, left) = refusals.withLock { $0.admit(now: Date().timeIntervalSince1970) }
            if log {
                logger.warning("control socket: refused a connection from uid \(uid) (only uid \(getuid()) may talk to this daemon)\(left > 0 ? " (and \(left) more since the last one logged)" : "")")
            }
            try? channel.send(.error, ControlFailure(message: "refused: this daemon serves uid \(getuid()) only"))
            return nil
        }
        let hello: Frame?
        do {
            hello = try channel.receive(within: Self.helloDeadline)
        } catch {
            leavePending()
            logger.debug("control connection ended before its hello: \(error)")
            return nil
        }
        leavePending()
        guard let hello, hello.kind == .hello, let theirs = try? ControlCoding.decode(ControlHello.self, from: hello.payload) else {
            try? channel.send(.error, ControlFailure(message: "expected a hello frame"))
            return nil
        }
        if theirs.protocol == SyncHello.protocolName { return hello.payload }
        let admitted = active.withLock { count -> Bool in
            guard count < Self.maxConnections else { return false }
            count += 1
            return true
        }
        guard admitted else {
            try? channel.send(.error, ControlFailure(message: "xpbd is busy: \(Self.maxConnections) clients are being served; try again"))
            return nil
        }
        defer { active.withLock { $0 -= 1 } }
        do {
            if let mismatch = ControlHello.current.mismatch(with: theirs) {
                try channel.send(.error, ControlFailure(message: mismatch))
                return nil
            }
            try channel.send(.hello, ControlHello.current)
            while let frame = try channel.receive(within: Self.frameDeadline) {
                guard frame.kind == .request, let request = try? ControlCoding.decode(ControlRequest.self, from: frame.payload) else {
                    try channel.send(.error, ControlFailure(message: "malformed request"))
                    return nil
                }
                switch handler(request, &channel) {
                case let .success(.reply(reply)): try channel.send(.reply, reply)
                case let .success(.page(payload)): try channel.send(Frame(kind: .page, payload: payload))
                case .success(.answered): break
                case let .failure(failure): try channel.send(.error, failure)
                }
            }
        } catch {
            logger.debug("control connection ended: \(error)")
        }
        return nil
    }

    /// The items of a write (``PasteboardWrite``): each representation's bytes read from the
    /// client's data frames, as many as it announced. Memory grows with the bytes that come,
    /// never ahead of them (a size is a claim).
    static func receiveItems(of write: PasteboardWrite, on channel: inout FrameChannel) -> Result<[PasteboardItem], ControlFailure> {
        var items: [PasteboardItem] = []
        do {
            for representations in write.items {
                var item = PasteboardItem()
                for representation in representations {
                    let type = try PasteboardType(representation.type)
                    var data = Data(capacity: min(representation.size, HeadlessProtocol.chunkSize))
                    while data.count < representation.size {
                        guard let frame = try channel.receive(within: frameDeadline) else {
                            return .failure(ControlFailure("the client went away during its write: nothing was changed"))
                        }
                        guard frame.kind == .data, data.count + frame.payload.count <= representation.size else {
                            return .failure(ControlFailure("the write's data did not match its announced sizes: nothing was changed"))
                        }
                        data.append(frame.payload)
                    }
                    item.setData(data, for: type)
                }
                items.append(item)
            }
        } catch {
            return .failure(ControlFailure("the write failed: \(error); nothing was changed"))
        }
        return .success(items)
    }
}
