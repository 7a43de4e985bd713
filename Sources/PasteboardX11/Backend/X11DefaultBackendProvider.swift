import PasteboardKit

/// Makes `Pasteboard.general` the X clipboard in any process that links this module where the
/// session's host is an X display (``PasteboardKit/SessionPlan``: `DISPLAY` set, or XWayland's
/// beside a compositor this process cannot use); found by name by `PasteboardSystem` (a class:
/// the runtime finds classes by name, not enums or structs).
public final class X11DefaultBackendProvider: DefaultBackendProvider {
    public static func serves(_ host: SessionHost) -> Bool {
        if case .x11 = host { return true }
        return false
    }

    /// A backend on the display.
    ///
    /// - Throws: ``X11BackendError/cannotOpenDisplay(_:)`` and the other errors of connecting.
    public static func makeBackend(on host: SessionHost) throws -> any PasteboardBackend {
        guard case let .x11(display) = host else { throw PasteboardError.unavailable("the X11 backend serves an X display, not \(host)") }
        return try X11PasteboardBackend(display: display)
    }
}
