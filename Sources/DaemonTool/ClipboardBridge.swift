import Dispatch
import FoundationEssentials
import Logging
import DaemonDisplayHost
import DaemonWaylandHost
import PasteboardDaemon
import PasteboardKit
import PasteboardWire
import PasteboardWayland
import PasteboardX11
import Synchronization

/// xpbd on a Wayland session with XWayland: one daemon keeps XWayland's display, another the
/// Wayland session, in one process and one history, and the X one links to the Wayland one
/// through the sync machinery (its socket, as `--sync-display` does): a copy on either side is
/// announced to the other, and its bytes move only when someone pastes there. CLIPBOARD and
/// PRIMARY both, no focus needed. Each side keeps (and records) only the copies made on it, so
/// one copy is one history entry.
///
/// The compositor has a bridge of its own, once an X window has had the focus: its XWayland
/// window manager takes the X selection for every new Wayland copy (ours too), and answers for
/// it only while an X window has the focus. The X side treats it as a participant, not as an
/// app: what it takes is the newest copy already, which the X side takes back and serves
/// itself (``DisplayHost/compositorTook(_:window:)``), and it announces an X copy to Wayland
/// only once it holds its bytes, since the compositor's take ends the X app's ownership.
package final class ClipboardBridge: RunningDaemon {
    let x: ClipboardDaemon
    let wayland: ClipboardDaemon
    private let logger: Logger
    /// The compositor's process (its X client is the compositor's own bridge).
    private let compositorPID: Int?

    package init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.logger = logger
        var waylandSide = configuration
        waylandSide.session = SessionPlan(hosts: [.wayland])
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
        // The two hosts are made here, each a port of its own kind: no down-cast reaches them.
        let waylandHost = try WaylandHost(configuration: waylandSide, logger: waylandLogger)
        wayland = try ClipboardDaemon(host: waylandHost, configuration: waylandSide, logger: waylandLogger)
        var xSide = configuration
        xSide.session = SessionPlan(hosts: [.x11(display: nil)])
        xSide.sync.syncsPrimary = true
        xSide.sync.links.insert(SyncLinkSpec(endpoint: .display(waylandHost.nodeName)), at: 0)
        // The compositor's own bridge owns X selections for Wayland copies: not the X side's copies.
        xSide.compositorPID = waylandHost.backend.compositorPID
        compositorPID = xSide.compositorPID
        if let compositorPID { xSide.appRules.bridgeProcesses.insert(compositorPID) }
        let displayHost = try DisplayHost(configuration: xSide, logger: xLogger)
        // One history: either side lists the copies the other holds while their app may take them back.
        x = try ClipboardDaemon(host: displayHost, configuration: xSide, logger: xLogger, history: wayland.store)
        waylandHost.bridgeMemory.withLock { $0 = memory }
        displayHost.bridgeMemory.withLock { $0 = memory }
        let xBackend = displayHost.backend
        memory.catchesUp { try? xBackend.managerPort.catchUp() }
        let backend = waylandHost.backend
        let hub = wayland.hub
        displayHost.waylandSelection.withLock {
            $0 = { [weak hub] name in
                guard let owner = backend.currentOwner(of: name) else { return .bridges }
                if owner == WaylandPasteboardBackend.ourOwner { return backend.servesQueue(on: name) ? .queue : .bridges }
                return hub?.hasRead(name, owner: owner) == true ? .read : .unread
            }
        }
    }

    /// What tells the compositor's echoes from copies, shared by both sides.
    private let memory = BridgeMemory()

    package func start() throws {
        try wayland.start()
        do {
            try x.start()
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
        Background.run("xpbd.bridge.x11") {
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

    package var lostItsDisplay: Bool { wayland.lostItsDisplay || x.lostItsDisplay }

    package func reload(_ fresh: DaemonConfiguration) {
        wayland.reload(fresh)
        // The compositor's client stays out of the X side's apps after a reload too.
        var xSide = fresh
        if let compositorPID { xSide.appRules.bridgeProcesses.insert(compositorPID) }
        x.reload(xSide)
    }
}
