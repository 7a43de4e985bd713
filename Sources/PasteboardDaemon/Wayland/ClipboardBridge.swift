import Dispatch
import FoundationEssentials
import Logging
import PasteboardKit
import PasteboardWire
import PasteboardX11
import Synchronization

/// What `xpbd`'s command line runs: one daemon, or the bridge of two.
package protocol RunningDaemon: AnyObject, Sendable {
    func start() throws
    /// Blocks until it stops; the failure, nil for a clean stop.
    func run() -> String?
    func stop()
    func reload(_ fresh: DaemonConfiguration)
}

extension ClipboardDaemon: RunningDaemon {}

/// xpbd on a Wayland session with XWayland: one daemon keeps XWayland's display, another the
/// Wayland session, in one process and one history, and the X one links to the Wayland one
/// through the sync machinery (its socket, as `--sync-display` does): a copy on either side is
/// announced to the other, and its bytes move only when someone pastes there. CLIPBOARD and
/// PRIMARY both, no focus needed. Each side keeps (and records) only the copies made on it, so
/// one copy is one history entry; what the compositor's own bridge owns on the X side (its
/// window manager's selection window, a client of the compositor's process) is neither kept nor
/// carried, so the two bridges never carry one copy back and forth.
package final class ClipboardBridge: RunningDaemon {
    /// The X side (made anew when it must take `CLIPBOARD_MANAGER` over from the compositor).
    private let xSide: Mutex<ClipboardDaemon>
    var x: ClipboardDaemon { xSide.withLock { $0 } }
    let wayland: ClipboardDaemon
    private let logger: Logger
    private let xConfiguration: DaemonConfiguration
    private let xLogger: Logger
    private let compositorPID: Int?

    package init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.logger = logger
        var waylandSide = configuration
        waylandSide.usesWayland = true
        waylandSide.bridgesWayland = false
        waylandSide.sync.syncsPrimary = true
        // The world's links (--peer, --sync-display) are the X side's: the Wayland side's
        // copies reach them through it.
        waylandSide.sync.links = []
        waylandSide.socketPath = nil
        // Each side's lines say which side speaks.
        var waylandLogger = logger
        waylandLogger[metadataKey: "side"] = "wayland"
        var xLogger = logger
        xLogger[metadataKey: "side"] = "x11"
        wayland = try ClipboardDaemon(configuration: waylandSide, logger: waylandLogger)
        var xSide = configuration
        xSide.usesWayland = false
        xSide.bridgesWayland = false
        xSide.sync.syncsPrimary = true
        xSide.sync.links.insert(SyncLinkSpec(endpoint: .display(wayland.host.nodeName)), at: 0)
        // The compositor's own bridge owns X selections for Wayland copies: not the X side's copies.
        compositorPID = (wayland.host as? WaylandHost)?.backend.compositorPID
        if let compositorPID { xSide.appRules.bridgeProcesses.insert(compositorPID) }
        xConfiguration = xSide
        self.xLogger = xLogger
        self.xSide = Mutex(try ClipboardDaemon(configuration: xSide, logger: xLogger))
        (wayland.host as? WaylandHost)?.bridgeMemory.withLock { $0 = memory }
        (x.host as? DisplayHost)?.bridgeMemory.withLock { $0 = memory }
    }

    /// What tells the compositor's echoes from copies, shared by both sides.
    private let memory = BridgeMemory()

    package func start() throws {
        try wayland.start()
        do {
            do {
                try x.start()
            } catch let ClipboardManagerError.alreadyRunning(owner) where owner.processID != nil && owner.processID == compositorPID {
                // wlroots' XWayland window manager holds CLIPBOARD_MANAGER (it hands X copies of
                // exiting apps to Wayland): the bridge keeps X copies itself, so it takes over.
                logger.info("the compositor's XWayland window manager holds CLIPBOARD_MANAGER on \(x.host.nodeName): taking it over, the bridge keeps X copies")
                let failed = x
                failed.stop()
                _ = failed.run()
                var replacing = xConfiguration
                replacing.replace = true
                replacing.compositorClientBase = owner.window.rawValue & ~DisplayHost.clientResourceMask
                let fresh = try ClipboardDaemon(configuration: replacing, logger: xLogger)
                (fresh.host as? DisplayHost)?.bridgeMemory.withLock { $0 = memory }
                xSide.withLock { $0 = fresh }
                try fresh.start()
            }
        } catch {
            wayland.stop()
            _ = wayland.run()
            throw error
        }
        logger.info("bridging display \(x.host.nodeName) (XWayland) and the Wayland session \(wayland.host.nodeName): CLIPBOARD and PRIMARY, each way")
    }

    /// Both run until one stops; then the other is stopped too.
    package func run() -> String? {
        let xFailure = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let x = self.x
        let wayland = self.wayland
        DispatchQueue.global().async {
            let failure = x.run()
            xFailure.withLock { $0 = failure }
            wayland.stop()
            done.signal()
        }
        let waylandFailure = wayland.run()
        x.stop()
        done.wait()
        return waylandFailure ?? xFailure.withLock { $0 }
    }

    package func stop() {
        wayland.stop()
        x.stop()
    }

    package func reload(_ fresh: DaemonConfiguration) {
        wayland.reload(fresh)
        x.reload(fresh)
    }
}
