import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import PasteboardX11

/// The daemon `xpb history`, `queue`, `clear` and `daemon status` ask: the session's xpbd, on the
/// host the session settles on (``Session/settled()``): the display's, the Wayland session's,
/// or, with no display, this user's headless xpbd.
enum DaemonAccess {
    /// A control connection; a ``Failure`` when no daemon answers (status 1 for a display's,
    /// 5 where there is no display either).
    static func client(session: Session, timeout: Double = 10) throws -> ControlClient {
        let host = session.settled()
        do {
            return try open(host, timeout: timeout)
        } catch let error as ControlClientError where error.kind == .notRunning && host == .daemon {
            throw Failure(error.message, .noDisplay)
        } catch let error as ControlClientError {
            throw Failure(error)
        }
    }

    /// A control connection to the display's or the Wayland session's xpbd; nil where none
    /// listens (and on a host with no display, whose copies the headless xpbd holds itself).
    static func clientIfRunning(session: Session, timeout: Double) throws -> ControlClient? {
        let host = session.settled()
        guard host != .daemon else { return nil }
        do {
            return try open(host, timeout: timeout)
        } catch let error as ControlClientError where error.kind == .notRunning {
            return nil
        } catch let error as ControlClientError {
            throw Failure(error)
        }
    }

    /// A control connection to the xpbd of `host`, as the session settled on it (once: settling
    /// may connect to the compositor).
    private static func open(_ host: SessionHost, timeout: Double) throws -> ControlClient {
        switch host {
        case let .x11(display):
            return try ControlClient(display: display, timeout: timeout)
        case .wayland:
            let (path, name) = waylandSocket()
            return try ControlClient(path: path, display: name, timeout: timeout,
                                     notRunning: "xpbd is not running for the Wayland session \(name) (nothing listens on \(path)); start it with 'xpbd &'")
        case .daemon:
            return try ControlClient(path: DaemonPasteboardBackend.socketPath, display: "headless", timeout: timeout,
                                     notRunning: DaemonPasteboardBackend.notRunning)
        }
    }

    /// The socket of the Wayland session's xpbd, named after the compositor's, and that name.
    static func waylandSocket() -> (path: String, name: String) {
        let socket = getenv("WAYLAND_DISPLAY").map { String(cString: $0) } ?? "wayland-0"
        let name = socket.split(separator: "/").last.map(String.init) ?? socket
        return (ControlEndpoint.socketPath(display: name, environment: ControlEndpoint.environment, uid: getuid()), name)
    }
}
