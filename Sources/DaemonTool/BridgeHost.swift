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

/// xpbd on a Wayland session with XWayland: one daemon (one history, one record pipeline, one
/// control socket, one D-Bus name) over two ports, XWayland's display (``DisplayHost``) and the
/// Wayland session (``WaylandHost``). Each port keeps the copies made on it; a copy on either
/// side is carried to the other by the sync ledger, between the daemon's hub (the X port's,
/// which also links to other displays and machines) and the Wayland port's own, linked in this
/// process (``SyncLinkSpec/Endpoint/inProcess(_:)``): announced at once, its bytes moved only
/// when someone pastes there. CLIPBOARD and PRIMARY both, no focus needed. One copy is one
/// history entry.
///
/// The compositor has a bridge of its own, once an X window has had the focus: its XWayland
/// window manager takes the X selection for every new Wayland copy (ours too), and answers for
/// it only while an X window has the focus. The X port treats it as a participant, not as an
/// app: what it takes is the newest copy already, which the X port takes back and serves
/// itself (``BridgeRules``), and it announces an X copy to Wayland only once it holds its
/// bytes, since the compositor's take ends the X app's ownership.
///
/// Requests go where a client of the session meets them today: the Wayland port answers the
/// pasteboard requests, the paste queue and a history entry selected again; both ports hear a
/// secret forgotten and a paste noted.
final class BridgeHost: ClipboardHost {
    let x: DisplayHost
    let wayland: WaylandHost
    /// The Wayland port's side of the carry.
    private let waylandHub: SyncHub
    /// What the daemon over this host is configured with (the X port's: the world's links, the
    /// compositor's client among the bridge's processes).
    let configuration: DaemonConfiguration
    private let logger: Logger
    /// The compositor's process (its X client is the compositor's own bridge).
    private let compositorPID: Int?
    /// What tells the compositor's echoes from copies, shared by both ports.
    private let memory = BridgeMemory()

    init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.logger = logger
        var waylandSide = configuration
        waylandSide.session = SessionPlan(hosts: [.wayland])
        waylandSide.sync.syncsPrimary = true
        // The world's links (--peer, --sync-display) are the X port's: Wayland copies reach them
        // through it.
        waylandSide.sync.links = []
        // Each port's lines say which side speaks.
        var waylandLogger = logger
        waylandLogger[metadataKey: "side"] = "wayland"
        var xLogger = logger
        xLogger[metadataKey: "side"] = "x11"
        let wayland = try WaylandHost(configuration: waylandSide, logger: waylandLogger)
        let waylandHub = SyncHub(configuration: waylandSide.sync, surface: wayland.surface, displayName: wayland.nodeName, logger: waylandLogger)
        wayland.portHub.withLock { $0 = waylandHub }
        self.wayland = wayland
        self.waylandHub = waylandHub
        var xSide = configuration
        xSide.session = SessionPlan(hosts: [.x11(display: nil)])
        xSide.sync.syncsPrimary = true
        xSide.sync.links.insert(SyncLinkSpec(endpoint: .inProcess(wayland.nodeName)), at: 0)
        // The compositor's own bridge owns X selections for Wayland copies: not the X port's copies.
        xSide.compositorPID = wayland.backend.compositorPID
        let compositorPID = xSide.compositorPID
        self.compositorPID = compositorPID
        if let compositorPID { xSide.appRules.bridgeProcesses.insert(compositorPID) }
        self.configuration = xSide
        let x = try DisplayHost(configuration: xSide, logger: xLogger)
        self.x = x
        wayland.bridgeMemory.withLock { $0 = memory }
        x.bridgeMemory.withLock { $0 = memory }
        let xBackend = x.backend
        memory.catchesUp { try? xBackend.managerPort.catchUp() }
        let backend = wayland.backend
        x.waylandSelection.withLock {
            $0 = { [weak waylandHub] name in
                guard let owner = backend.currentOwner(of: name) else { return .bridges }
                if owner == WaylandPasteboardBackend.ourOwner { return backend.servesQueue(on: name) ? .queue : .bridges }
                return waylandHub?.hasRead(name, owner: owner) == true ? .read : .unread
            }
        }
    }

    // MARK: What the daemon sees

    /// The X port's: the hub's node, and the entries its app may take back.
    var nodeName: String { x.nodeName }
    /// The Wayland session's: where its clients find xpbd first.
    var defaultSocketPath: String { wayland.defaultSocketPath }
    /// XWayland's display's too, for clients that see only `DISPLAY`.
    var otherSocketPaths: [String] { [x.defaultSocketPath] }
    var displays: [String] { [x.nodeName, wayland.nodeName] }
    var surface: any SyncSurface { x.surface }
    var keeps: [String] { x.keeps + wayland.keeps.filter { !x.keeps.contains($0) } }
    var stopsWhenIdle: Bool { false }
    var seesTakeBacks: Bool { x.seesTakeBacks }

    // MARK: Lifecycle

    func start(_ daemon: ClipboardDaemon) throws {
        try wayland.start(daemon)
        do {
            try x.start(daemon)
        } catch {
            wayland.stopping()
            wayland.close()
            throw error
        }
    }

    /// The Wayland port's hub answers the X port's in-process link before the daemon's hub dials it.
    func connect(_ daemon: ClipboardDaemon) {
        waylandHub.serveInProcess(as: wayland.nodeName)
        wayland.connect(daemon)
        waylandHub.start()
        x.connect(daemon)
        logger.info("bridging display \(x.nodeName) (XWayland) and the Wayland session \(wayland.nodeName): CLIPBOARD and PRIMARY, each way")
    }

    func reload(_ fresh: DaemonConfiguration) {
        wayland.reload(fresh)
        // The compositor's client stays out of the X port's apps after a reload too.
        var xSide = fresh
        if let compositorPID { xSide.appRules.bridgeProcesses.insert(compositorPID) }
        x.reload(xSide)
    }

    func stopping() {
        x.stopping()
        wayland.stopping()
    }

    /// After the daemon's hub stopped: its dialer does not take the carry's end for a lost link.
    func close() {
        waylandHub.stopServingInProcess(wayland.nodeName)
        waylandHub.stop()
        x.close()
        wayland.close()
    }

    // MARK: Requests

    func serveSelected(_ snapshot: Snapshot) throws {
        try wayland.serveSelected(snapshot)
    }

    func clearSelection(_ name: Pasteboard.Name) throws {
        try wayland.clearSelection(name)
    }

    func forgetKept(_ name: Pasteboard.Name, time: Date) {
        x.forgetKept(name, time: time)
        wayland.forgetKept(name, time: time)
    }

    func answerQueue(_ request: QueueRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        wayland.answerQueue(request, on: &channel)
    }

    func answer(_ request: ControlRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        wayland.answer(request, on: &channel)
    }

    /// The Wayland session's: what its clients see change.
    func changeCounts() -> [String: Int] {
        wayland.changeCounts()
    }

    func ownerPasted(_ record: PasteRecord, of name: Pasteboard.Name, by owner: String) {
        x.ownerPasted(record, of: name, by: owner)
        wayland.ownerPasted(record, of: name, by: owner)
    }

    func servedEntry(of name: Pasteboard.Name) -> Int64? {
        wayland.servedEntry(of: name) ?? x.servedEntry(of: name)
    }
}
