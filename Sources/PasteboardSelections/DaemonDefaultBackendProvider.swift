import PasteboardKit

/// Makes `Pasteboard.general` this user's headless xpbd's pasteboards in any process that links
/// this module (the X11 and Wayland modules do) on a host without a display
/// (``PasteboardKit/SessionHost/daemon``); found by name by `PasteboardSystem`.
public final class DaemonDefaultBackendProvider: DefaultBackendProvider {
    public static func serves(_ host: SessionHost) -> Bool { host == .daemon }

    /// A backend on the headless xpbd's socket.
    ///
    /// - Throws: ``PasteboardKit/PasteboardError/unavailable(_:)`` when no headless xpbd answers
    ///   (saying how to start one).
    public static func makeBackend(on host: SessionHost) throws -> any PasteboardBackend {
        guard host == .daemon else { throw PasteboardError.unavailable("the headless daemon's backend serves no display, not \(host)") }
        return try DaemonPasteboardBackend()
    }
}
