import CommandLineTable
import PasteboardKit
import PasteboardWayland
import PasteboardX11
import Synchronization

/// Where one xpb run's pasteboards live: the library's ``SessionPlan`` (`--backend`, `--display`,
/// the environment), and, once a connection settled it, the host reached (a compositor without
/// data-control passes to XWayland's display). Every command decides through it: reading,
/// copying, clearing, and the daemon's commands (`history`, `queue`, `daemon status`).
final class Session: Sendable {
    static let backendOption = OptionSpec.value(
        nil, "backend", "name",
        "x11 or wayland: the session's clipboard to use (default: $XPB_BACKEND, else Wayland when WAYLAND_DISPLAY is set, through XWayland when the compositor offers no data-control, else X when DISPLAY is, else the headless xpbd).",
        completion: .words(SessionHost.Name.allCases.map(\.rawValue)))

    let plan: SessionPlan
    private let reached = Mutex<SessionHost?>(nil)

    /// `backend`: `--backend` as given; `display`: `--display`.
    init(backend: String?, display: String?) throws(UsageError) {
        do throws(SessionPlan.Refusal) {
            let named = try backend.map { name throws(SessionPlan.Refusal) in try SessionHost.Name(naming: name, from: "--backend") }
            plan = try SessionPlan(backend: named, display: display)
        } catch {
            throw UsageError(error.description)
        }
    }

    /// The host reached, else the one tried first.
    var host: SessionHost { reached.withLock { $0 } ?? plan.first }

    /// Connects through the plan (``SessionPlan/connect(_:)``); the host reached is
    /// ``host`` from then on, and the only one a later connection tries. A host that cannot be
    /// used at all is a ``Failure`` with ``Status/noDisplay``.
    func connect<Connection>(_ open: (SessionHost) throws -> Connection) throws -> Connection {
        let plan = reached.withLock { $0 }.map { SessionPlan(hosts: [$0]) } ?? plan
        do {
            let (host, connection) = try plan.connect(open)
            reached.withLock { $0 = host }
            return connection
        } catch PasteboardError.unavailable(let message) {
            throw Failure(message, .noDisplay)
        }
    }

    /// The host, settled without keeping a connection, for a command that only asks the daemon:
    /// a compositor is asked once whether it serves data-control. A compositor that cannot be
    /// reached at all leaves the first host (the daemon's own error then says what is wrong).
    func settled() -> SessionHost {
        if let host = reached.withLock({ $0 }) { return host }
        guard plan.hosts.count > 1 else { return plan.first }
        return (try? connect { host -> SessionHost in
            if host == .wayland { _ = try Self.compositor(readsOnce: true).close(handOff: false) }
            return host
        }) ?? plan.first
    }

    /// A connection to the Wayland compositor.
    /// `ownsBeforeThread`: events are read on this thread until `startThread()` (`xpb copy`
    /// sets the selection, then forks).
    static func compositor(readTimeout: Double? = nil, maxSize: Int? = nil, readsOnce: Bool = false,
                           ownsBeforeThread: Bool = false) throws -> WaylandPasteboardBackend {
        var configuration = WaylandPasteboardBackend.Configuration()
        configuration.runsOnCallersThread = readsOnce || ownsBeforeThread
        if let readTimeout { configuration.readTimeout = readTimeout }
        if let maxSize { configuration.maxReadSize = maxSize }
        return try WaylandPasteboardBackend(configuration: configuration)
    }
}

extension SessionHost {
    /// Whether the host keeps what is written after xpb exits (the daemon does; on a display or a
    /// compositor a process must own the selection: ``CopyCommand``'s background owner).
    var keepsContents: Bool { self == .daemon }

    /// What a lost connection is said as.
    var lostConnection: String {
        switch self {
        case .daemon: return "the headless xpbd stopped"
        case .wayland: return "the connection to the Wayland compositor was lost"
        case .x11: return X11BackendError.connectionLost.description
        }
    }
}
