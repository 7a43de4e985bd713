import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire
import Synchronization

/// Links between two hubs of one process (a bridge's: its X port's hub and its Wayland port's):
/// a socket pair instead of a dial of a control socket, and the same xpb-sync on it, so that the
/// dialer's reconnect, heartbeat and status work as for any link. The served hub is found by the
/// name its dialer asks for (``SyncLinkSpec/Endpoint/inProcess(_:)``).
extension SyncHub {
    /// The hubs that answer in-process links, by name.
    private static let inProcess = Mutex<[String: HubReference]>([:])

    /// Answers in-process links asked for by `name` until ``stopServingInProcess(_:)``.
    package func serveInProcess(as name: String) {
        Self.inProcess.withLock { $0[name] = HubReference(self) }
    }

    package func stopServingInProcess(_ name: String) {
        Self.inProcess.withLock { hubs in
            if hubs[name]?.hub === self { hubs.removeValue(forKey: name) }
        }
    }

    /// The dialing side's end of a new in-process link to the hub serving `name`; the other end
    /// is read by a thread of its own until its hello, then accepted as a link that came in.
    static func dialInProcess(_ name: String) throws -> SyncTransport {
        guard let hub = inProcess.withLock({ $0[name]?.hub }) else {
            throw Failure("no port of this xpbd serves display \(name)")
        }
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw POSIXFailure("a socket pair for the link to display \(name)", errno)
        }
        let theirs = fds[1]
        do {
            // The dialer sends its hello, then waits for the answer: nothing past the hello is
            // read here, so the hub's reader of the link misses nothing.
            try DetachedThread.start(name: "xpbd.sync.accept") { [weak hub] in
                var reader = FrameReader(fd: theirs)
                guard let hub, let frame = try? reader.next(timeout: 30), frame.kind == .hello else {
                    close(theirs)
                    return
                }
                hub.accept(fd: theirs, hello: frame.payload)
            }
        } catch {
            close(fds[0])
            close(theirs)
            throw error
        }
        return SyncTransport(socket: fds[0])
    }
}
