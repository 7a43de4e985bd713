import Glibc
import PasteboardSelections
import PasteboardWire
import PasteboardX11

/// The daemon `xpb history` and `xpb daemon status` ask: the display's xpbd, or, where the
/// pasteboards' host is this user's headless xpbd (no display), that one.
enum DaemonAccess {
    /// A control connection; a ``Failure`` when no daemon answers (status 1 for a display's,
    /// 5 where there is no display either).
    static func client(display: String?, timeout: Double = 10) throws -> ControlClient {
        do {
            switch SelectionOptions.Host(display: display, backend: nil) {
            case .display:
                return try ControlClient(display: display, timeout: timeout)
            case .wayland:
                // xpbd keeps a Wayland session's clipboard through its XWayland display.
                guard let name = getenv("DISPLAY").map({ String(cString: $0) }), !name.isEmpty else {
                    throw Failure("xpbd keeps a Wayland session's clipboard through XWayland: set DISPLAY to XWayland's display", .noDisplay)
                }
                return try ControlClient(display: name, timeout: timeout)
            case .daemon:
                do {
                    return try ControlClient(path: DaemonPasteboardBackend.socketPath, display: "headless", timeout: timeout,
                                             notRunning: DaemonPasteboardBackend.notRunning)
                } catch let error as ControlClientError where error.kind == .notRunning {
                    throw Failure(error.message, .noDisplay)
                }
            }
        } catch let error as ControlClientError {
            throw Failure(error)
        }
    }
}
