import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import Glibc
import PasteboardWire
import PasteboardX11

/// `xpb daemon link`: joins standard input and output to the daemon's socket, byte for byte,
/// until either side ends. The remote command of `xpbd --peer`: ssh carries the sync protocol
/// between the two daemons, this process only moves bytes (it reads none of them).
struct DaemonLink {
    let socketPath: String

    init(display: String?) throws {
        let environment = ProcessInfo.processInfo.environment
        if let display = display ?? environment["DISPLAY"].flatMap({ $0.isEmpty ? nil : $0 }) {
            socketPath = ControlEndpoint.socketPath(display: display, environment: environment, uid: getuid())
            return
        }
        // No display named (an ssh session has none): the only daemon of this user here.
        let directory = ControlEndpoint.directory(environment: environment, uid: getuid())
        let sockets = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("xpbd-") && $0.hasSuffix(".socket") }.sorted()
        guard !sockets.isEmpty else {
            // A host without a display (a server): a headless daemon, started for this link and
            // the ones after it (it exits after --idle-exit with no link and no client).
            socketPath = try Self.startHeadless()
            return
        }
        guard sockets.count == 1 else {
            let displays = sockets.map { String($0.dropFirst("xpbd-".count).dropLast(".socket".count)) }
            throw Failure("several xpbd run here (displays \(displays.joined(separator: ", "))): name one with --display (in xpbd: --peer HOST,display=:N)", .usage)
        }
        socketPath = directory + "/" + sockets[0]
    }

    /// Starts `xpbd --headless` (this binary, detached, its log beside its socket) and waits
    /// until it answers; returns its socket.
    static func startHeadless() throws -> String {
        let path = DaemonPasteboardBackend.socketPath
        let directory = ControlEndpoint.directory(environment: ControlEndpoint.environment, uid: getuid())
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let log = directory + "/xpbd-headless.log"
        let pid = try Detach.spawn(arguments: ["--headless", "--sync-primary"], fds: [], log: log, program: "xpbd")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if DaemonPasteboardBackend.isRunning { return path }
            // Another link started one at the same moment: ours stops, theirs answers.
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid, !DaemonPasteboardBackend.isRunning {
                throw Failure("the headless xpbd exited at once (status \(status >> 8)); see \(log)", .failure)
            }
            usleep(10_000)
        }
        throw Failure("the headless xpbd did not answer within 10 s; see \(log)", .failure)
    }

    func run() throws {
        let fd: Int32
        do {
            fd = try LocalSocket.connect(socketPath)
        } catch {
            throw Failure("cannot reach xpbd: \(error)", .failure)
        }
        signal(SIGPIPE, SIG_IGN)
        // Standard input to the socket on a thread of its own; the socket to standard output here.
        do {
            try DetachedThread.start(name: "xpb.link.up") {
                Self.copy(from: 0, to: fd)
                shutdown(fd, Int32(SHUT_WR))
            }
        } catch {
            close(fd)
            throw Failure("cannot start a thread: \(error)", .failure)
        }
        Self.copy(from: fd, to: 1)
        // The daemon closed the link: nothing more to carry.
        close(fd)
    }

    /// Copies until the end of `source` or a failed write.
    private static func copy(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + offset, count - offset) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}
