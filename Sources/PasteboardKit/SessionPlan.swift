import FoundationEssentials
import Glibc

/// Where a session's pasteboards live.
public enum SessionHost: Hashable, Sendable, CustomStringConvertible {
    /// An X display (nil: `$DISPLAY`).
    case x11(display: String?)
    /// The Wayland compositor (`$WAYLAND_DISPLAY`), through its data-control protocol.
    case wayland
    /// No display at all: this host's headless xpbd.
    case daemon

    public var description: String {
        switch self {
        case let .x11(display): return "the X display \(display ?? "$DISPLAY")"
        case .wayland: return "the Wayland compositor"
        case .daemon: return "the headless xpbd"
        }
    }

    /// The names a user gives a host (`--backend`, `XPB_BACKEND`).
    public enum Name: String, Sendable, CaseIterable {
        case x11, wayland

        /// `name` as given (any case); `source` names where it came from, for the error.
        public init(naming name: String, from source: String) throws(SessionPlan.Refusal) {
            guard let parsed = Name(rawValue: name.lowercased()) else {
                throw SessionPlan.Refusal("\(source) is '\(name)': choose x11 or wayland")
            }
            self = parsed
        }
    }
}

/// Which host a process's pasteboards live on, decided once, the same way for the library's
/// default pasteboards (``PasteboardSystem``), every `xpb` command and `xpbd`:
///
/// 1. a host named (`--backend`, else `XPB_BACKEND`);
/// 2. else an X display named (`--display`);
/// 3. else the Wayland compositor when `WAYLAND_DISPLAY` is set, and, when `DISPLAY` is set too
///    (XWayland), that display after it: a compositor with no data-control protocol (GNOME's
///    Mutter, Weston) is reached through XWayland, whose selections the compositor carries to its
///    Wayland clients itself;
/// 4. else the X display of `DISPLAY`;
/// 5. else this host's headless xpbd.
///
/// Pure: the environment is read through a function; connecting is the caller's
/// (``connect(_:)``), as is what a host that cannot serve looks like (``isUnserved(_:)``).
public struct SessionPlan: Equatable, Sendable {
    /// The hosts to try, in order: the next one only when the one before cannot serve
    /// (``isUnserved(_:)``), or when the process links no backend for it (the library's default).
    /// A host named (`--backend`, `XPB_BACKEND`, `--display`) is the only one.
    public let hosts: [SessionHost]

    /// Why a plan cannot be made: a host named wrongly, or two choices that contradict.
    public struct Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The plan for a host named (`backend`), an X display named (`display`), and the
    /// environment (`XPB_BACKEND` is read only when `backend` is nil).
    public init(backend: SessionHost.Name? = nil, display: String? = nil,
                environment: (String) -> String? = SessionPlan.processEnvironment) throws(Refusal) {
        func value(_ name: String) -> String? { environment(name).flatMap { $0.isEmpty ? nil : $0 } }
        var named = backend
        if named == nil, let name = value("XPB_BACKEND") {
            named = try SessionHost.Name(naming: name, from: "XPB_BACKEND")
        }
        switch named {
        case .x11?:
            hosts = [.x11(display: display)]
        case .wayland?:
            if display != nil { throw Refusal("--display names an X display: it cannot go with --backend wayland") }
            hosts = [.wayland]
        case nil:
            if let display {
                hosts = [.x11(display: display)]
            } else if value("WAYLAND_DISPLAY") != nil {
                hosts = value("DISPLAY") != nil ? [.wayland, .x11(display: nil)] : [.wayland]
            } else {
                hosts = [value("DISPLAY") != nil ? .x11(display: nil) : .daemon]
            }
        }
    }

    /// A plan of these hosts, in this order (at least one).
    public init(hosts: [SessionHost]) {
        precondition(!hosts.isEmpty, "a session plan needs a host")
        self.hosts = hosts
    }

    /// The host tried first.
    public var first: SessionHost { hosts[0] }

    /// The Wayland session with XWayland beside it, neither named: the case where a daemon keeps
    /// both and bridges them (where the compositor serves data-control).
    public var isWaylandWithXWayland: Bool { hosts == [.wayland, .x11(display: nil)] }

    /// What a compositor without data-control says when connecting to it (``isUnserved(_:)``).
    public static let noDataControl = "the Wayland compositor offers no data-control protocol (zwlr_data_control_manager_v1 or ext_data_control_manager_v1), which a clipboard tool needs to reach the clipboard without a window; GNOME's Mutter and Weston are such compositors. Where XWayland runs (DISPLAY set), xpb goes through it by itself unless --backend wayland or XPB_BACKEND=wayland names the compositor; else use an X session, or a compositor with data-control (sway, Hyprland, KDE Plasma)"

    /// Whether `error`, thrown while connecting to a host, means only that this host cannot serve
    /// a clipboard tool (a compositor with no data-control), so that the next host is tried.
    public static func isUnserved(_ error: any Error) -> Bool {
        (error as? PasteboardError) == .unavailable(noDataControl)
    }

    /// Connects to the first host that serves: `open` connects to one host; after a host that
    /// cannot serve (``isUnserved(_:)``) the next is tried. Every other error ends the plan.
    /// Returns the host reached and its connection.
    public func connect<Connection>(_ open: (SessionHost) throws -> Connection) throws -> (SessionHost, Connection) {
        var index = hosts.startIndex
        while true {
            let host = hosts[index]
            do {
                return (host, try open(host))
            } catch where Self.isUnserved(error) && index + 1 < hosts.endIndex {
                index += 1
            }
        }
    }

    /// The process's environment, read with `getenv` (ProcessInfo's environment builds a
    /// dictionary of all of it: a fifth of a paste's instructions, measured with callgrind).
    public static let processEnvironment: @Sendable (String) -> String? = { name in getenv(name).map { String(cString: $0) } }
}
