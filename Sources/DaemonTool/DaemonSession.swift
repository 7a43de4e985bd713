import DaemonDisplayHost
import DaemonWaylandHost
import Logging
import PasteboardDaemon
import PasteboardKit

/// The one place xpbd's host is made, from the configuration's ``SessionPlan`` (decided as `xpb`
/// and the library decide it): memory with `--headless`; on a Wayland session with XWayland,
/// both, one daemon over the two (``BridgeHost``), or XWayland's display alone where the compositor offers no
/// data-control (GNOME's Mutter, Weston carry XWayland's selections to their Wayland clients
/// themselves); else the plan's one host.
enum DaemonSession {
    static func make(configuration: DaemonConfiguration, logger: Logger) throws -> any RunningDaemon {
        let plan = configuration.session
        guard !configuration.isHeadless, plan.isWaylandWithXWayland else {
            return try daemon(configuration: configuration, logger: logger)
        }
        do {
            let bridge = try BridgeHost(configuration: configuration, logger: logger)
            return try ClipboardDaemon(host: bridge, configuration: bridge.configuration, logger: logger)
        } catch where SessionPlan.isUnserved(error) {
            logger.debug("the Wayland compositor offers no data-control: keeping XWayland's display, whose selections the compositor carries to its Wayland clients itself")
            var xOnly = configuration
            xOnly.session = SessionPlan(hosts: [plan.hosts[1]])
            return try daemon(configuration: xOnly, logger: logger)
        }
    }

    /// A daemon over the one host the configuration asks for (its session's first: the display,
    /// the Wayland session; memory with `--headless`).
    static func daemon(configuration: DaemonConfiguration, logger: Logger) throws -> ClipboardDaemon {
        let host: any ClipboardHost
        if configuration.isHeadless {
            host = MemoryHost(configuration: configuration, logger: logger)
        } else if configuration.session.first == .wayland {
            host = try WaylandHost(configuration: configuration, logger: logger)
        } else {
            host = try DisplayHost(configuration: configuration, logger: logger)
        }
        return try ClipboardDaemon(host: host, configuration: configuration, logger: logger)
    }
}
