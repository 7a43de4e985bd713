internal import CX11
import FoundationEssentials
import PasteboardKit
import Synchronization

/// One X protocol error, copied out of Xlib's handler.
struct XErrorRecord: Sendable, Equatable {
    let serial: UInt
    let errorCode: UInt8
    let requestCode: UInt8
    let minorCode: UInt8
    let resource: UInt
}

/// Xlib's error handlers are process-wide C function pointers without a context argument, so
/// they file what they see here, keyed by the display's address; the display's own X thread
/// collects its records after each batch of Xlib calls and routes them by request serial.
enum XErrorSink {
    private static let records = Mutex<[UInt: [XErrorRecord]]>([:])
    private static let dead = Mutex<Set<UInt>>([])
    private static let installed = Mutex(false)

    static func key(_ display: OpaquePointer) -> UInt { UInt(bitPattern: display) }

    /// Installs the process-wide handlers once: protocol errors are filed, an I/O error marks the
    /// display dead; neither ends the process.
    static func install() {
        installed.withLock { done in
            guard !done else { return }
            done = true
            _ = XSetErrorHandler { display, event in
                guard let display, let event else { return 0 }
                let record = XErrorRecord(
                    serial: event.pointee.serial, errorCode: event.pointee.error_code,
                    requestCode: event.pointee.request_code, minorCode: event.pointee.minor_code,
                    resource: event.pointee.resourceid)
                XErrorSink.records.withLock { $0[XErrorSink.key(display), default: []].append(record) }
                return 0
            }
            // Xlib's default I/O error handler exits: replace it with one that only records.
            _ = XSetIOErrorHandler { display in
                if let display { XErrorSink.markDead(display) }
                return 0
            }
        }
    }

    /// Makes a lost connection on `display` return to the caller instead of exiting.
    static func guardExit(of display: OpaquePointer) {
        XSetIOErrorExitHandler(display, { display, _ in
            if let display { XErrorSink.markDead(display) }
        }, nil)
    }

    static func markDead(_ display: OpaquePointer) {
        _ = dead.withLock { $0.insert(key(display)) }
    }

    static func isDead(_ display: OpaquePointer) -> Bool {
        dead.withLock { $0.contains(key(display)) }
    }

    /// Takes the records filed for `display` so far.
    static func take(_ display: OpaquePointer) -> [XErrorRecord] {
        records.withLock { $0.removeValue(forKey: key(display)) ?? [] }
    }

    /// Forgets a closed display.
    static func forget(_ display: OpaquePointer) {
        _ = records.withLock { $0.removeValue(forKey: key(display)) }
        _ = dead.withLock { $0.remove(key(display)) }
    }
}

/// A compare-and-own (or compare-and-clear) whose precondition did not hold: the selection's
/// owner was not one the caller knew.
struct OwnDeclined: Error {}

/// Errors of the X11 backend.
public enum X11BackendError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No display name was given and `$DISPLAY` is not set.
    case noDisplay
    /// The X server could not be reached.
    case cannotOpenDisplay(String)
    /// The connection to the X server was lost.
    case connectionLost
    /// The selection could not be acquired.
    case ownershipRefused(selection: String)

    /// A sentence that says what happened and what to try.
    public var description: String {
        switch self {
        case .noDisplay:
            return "no X display: $DISPLAY is not set; run inside an X session or set DISPLAY (e.g. DISPLAY=:0)"
        case let .cannotOpenDisplay(name):
            return "cannot open X display \"\(name)\": is the X server running, and may this user connect (xauth)?"
        case .connectionLost:
            return "the connection to the X server was lost"
        case let .ownershipRefused(selection):
            return "could not become owner of \(selection): another client took it at the same moment; try again"
        }
    }
}
