import PasteboardKit

/// Makes `Pasteboard.general` the Wayland clipboard in any process that links this module on a
/// Wayland session (``PasteboardKit/SessionPlan``); found by name by `PasteboardSystem` (a class:
/// the runtime finds classes by name). A compositor without data-control throws what
/// ``PasteboardKit/SessionPlan/isUnserved(_:)`` knows, and XWayland's display serves instead.
public final class WaylandDefaultBackendProvider: DefaultBackendProvider {
    public static func serves(_ host: SessionHost) -> Bool { host == .wayland }

    /// A backend on the compositor of `WAYLAND_DISPLAY`.
    public static func makeBackend(on host: SessionHost) throws -> any PasteboardBackend {
        guard host == .wayland else { throw PasteboardError.unavailable("the Wayland backend serves a Wayland compositor, not \(host)") }
        return try WaylandPasteboardBackend()
    }
}
