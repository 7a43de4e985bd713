import PasteboardKit
import PasteboardSelections

/// Makes `Pasteboard.general` the X clipboard in any process that links this module and has
/// `$DISPLAY` set, and, on a host without a display where this user's headless xpbd answers,
/// that daemon's pasteboards (``DaemonPasteboardBackend``); found by name by `PasteboardSystem`
/// (a class: the runtime finds classes by name, not enums or structs).
public final class X11DefaultBackendProvider: DefaultBackendProvider {
    /// A backend on `$DISPLAY`, else the headless daemon's.
    ///
    /// - Throws: ``PasteboardKit/PasteboardError/unavailable(_:)`` when there is neither a
    ///   display nor a headless daemon (saying how to have either), or
    ///   ``X11BackendError/cannotOpenDisplay(_:)``.
    public static func makeDefaultBackend() throws -> any PasteboardBackend {
        do {
            return try X11PasteboardBackend()
        } catch X11BackendError.noDisplay {
            return try DaemonPasteboardBackend()
        }
    }
}
