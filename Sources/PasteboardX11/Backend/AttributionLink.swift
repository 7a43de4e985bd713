internal import CX11
internal import CXEvents
import PasteboardKit
import PasteboardSelections
import Synchronization

/// A second connection to the display, for telling who owns a selection (``OwnerAttribution``)
/// off the X thread: the owner window's properties, the X-Resource client id, a walk of the
/// top-level windows, and on this host the kernel's socket table and up to a few hundred
/// `/proc/N/fd` listings. Run on the X thread, each look held up every transfer and conversion
/// behind it; here it runs on the asking thread, one look at a time, and the X thread never
/// waits for it.
///
/// Opened on first use and kept (a daemon asks for every copy); a connection the server dropped
/// is opened again on the next look.
final class AttributionLink: Sendable {
    private let displayName: String
    private let configuration: X11Configuration
    /// The connection, confined to the lock: one look at a time.
    private let wire = Mutex<X11Wire?>(nil)
    /// What the processes held at the last look (``HolderCensus``); taken under `wire`'s lock.
    private let census = Mutex(HolderCensus())

    init(displayName: String, configuration: X11Configuration) {
        self.displayName = displayName
        self.configuration = configuration
    }

    /// Who owns the selection named `selection`; nil when nobody does.
    ///
    /// - Throws: ``X11BackendError/cannotOpenDisplay(_:)`` when the display cannot be reached.
    func ownerInfo(ofSelection selection: String) throws -> SelectionOwnerInfo? {
        try withWire { wire in census.withLock { OwnerAttribution(wire: wire).ownerInfo(wire.atom(selection), census: &$0) } }
    }

    /// The window manager's check window and its client's pid (``OwnerAttribution/windowManager()``).
    func windowManager() throws -> (window: X11Window, processID: Int?)? {
        try withWire { OwnerAttribution(wire: $0).windowManager() }
    }

    /// Runs `body` on the connection, one look at a time: opened anew if the server dropped it.
    private func withWire<T: Sendable>(_ body: (X11Wire) -> T) throws -> T {
        try wire.withLock { current in
            if let dead = current, dead.isDead {
                Self.close(dead)
                current = nil
            }
            let wire = try current ?? open()
            current = wire
            return body(wire)
        }
    }

    private func open() throws -> X11Wire {
        XErrorSink.install()
        guard let display = XOpenDisplay(X11Connection.numericHost(displayName)) else {
            throw X11BackendError.cannotOpenDisplay(displayName)
        }
        XErrorSink.guardExit(of: display)
        // Replies and errors through XCB, as on the X thread: errors are routed by serial.
        cxevents_take_queue(UnsafeMutableRawPointer(display))
        var lookUp = configuration
        lookUp.windowName = "xpb (owner look-up)"
        // No owner changes are followed here: no XFixes.
        lookUp.watchesOwnerChanges = false
        return X11Wire(display: display, configuration: lookUp)
    }

    private static func close(_ wire: X11Wire) {
        wire.close(destroying: [], connectionAlive: !wire.isDead)
    }

    deinit {
        wire.withLock { current in
            if let current { Self.close(current) }
        }
    }
}
