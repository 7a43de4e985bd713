import PasteboardKit

/// Makes `Pasteboard.general` the X clipboard in any process that links this module and has
/// `$DISPLAY` set; found by name by `PasteboardSystem` (a class: the runtime finds classes by
/// name, not enums or structs).
public final class X11DefaultBackendProvider: DefaultBackendProvider {
    /// A backend on `$DISPLAY`.
    ///
    /// - Throws: ``X11BackendError/noDisplay`` or ``X11BackendError/cannotOpenDisplay(_:)``.
    public static func makeDefaultBackend() throws -> any PasteboardBackend {
        try X11PasteboardBackend()
    }
}
