import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// One node of the sync mesh: a thin driver over two pure values kept under one lock,
/// ``SyncLedger`` (the ordering: which copy is newest, what to announce, own, clear) and
/// ``TransferTable`` (fetches asked and served: credit, caps, cancels). Events go in, effects
/// come out and are performed here: frames queued on links, offers read (through the daemon's
/// ``OwnerOffers``), the display's selections owned or cleared by compare-and-own on the X thread.
///
/// Files: this one holds the links (registry, hellos, heartbeat, frames in); `+Ordering` drives
/// the ledger, `+Transfers` the table and the served fetches, `+Status` answers `xpb daemon status`.
///
/// Threads: link readers route messages at once (no X work); owning and clearing run on `queue`,
/// reading offers on `localQueue`, each served fetch on a worker (in its turn at the owner's
/// ``OwnerGate``, like the keeper's capture). Nothing here waits on a peer while holding anything
/// another link or the X thread needs.
package final class SyncHub: Sendable {
    struct State {
        /// The ordering: stamps, the shared value and this display's own change per selection.
        var ledger: SyncLedger
        var links: [Int: SyncLink] = [:]
        var nextLink = 1
        /// Fetches asked for and served: credit, caps, cancels.
        var transfers: TransferTable
        /// The streams of this display's readers, by fetch id.
        var streams: [UInt64: ByteStream] = [:]
        /// The senders of fetches served from this display.
        var senders: [TransferTable.ServedKey: ServeTask] = [:]
        var isStopped = false
        /// The links that came in on the control socket (a cap holds them).
        var incoming: Set<Int> = []
        /// Incoming links admitted and not registered yet (their hello being answered).
        var admitting = 0
        /// How often refused links are logged.
        var refusals = LogThrottle()
        /// How often failed fetches are logged: a reader that asks again and again (a
        /// compositor's bridge, a script in a loop) must not flood the journal.
        var fetchFailures = LogThrottle(burst: 5, interval: 10)
        /// Every target name other nodes announced (each became an X atom of this display, which
        /// the X server never frees), and how many each link brought in.
        var foreignNames: Set<String> = []
        var namesBrought: [Int: Int] = [:]
        /// Links told once that their names are over budget.
        var overNameBudget: Set<Int> = []

        /// Whether the heartbeat has nothing to ping or time out: no link, and no fetch either way.
        var hasNothingToWatch: Bool { links.isEmpty && streams.isEmpty && senders.isEmpty && transfers.isEmpty }
    }

    /// Links that came in on the control socket at once: each costs threads and buffers, and any
    /// process of the user can open them. One more is refused.
    static let maxIncomingLinks = 32

    let configuration: SyncConfiguration
    package let node: String
    package let nodeName: String
    package let synced: [Pasteboard.Name]
    /// The selections shared: an X display's, or a headless daemon's in memory.
    package let surface: any SyncSurface
    let logger: Logger
    let state: Mutex<State>
    /// Owning and clearing this display's selections for other nodes' changes (X round trips).
    let queue = DispatchQueue(label: "xpbd.sync")
    /// Reading what this display's new owners offer: an owner slow to answer delays only its own
    /// announce, not what comes from elsewhere.
    let localQueue = DispatchQueue(label: "xpbd.sync.local")
    let dialers = Mutex<[PeerDialer]>([])
    /// Keeps a copy owned for a node without a history (``onKeep(_:)``): its selection, its app,
    /// its targets (fetched when read).
    package typealias KeepHook = @Sendable (Pasteboard.Name, String, [RemoteTarget]) -> Void
    let keeping = Mutex<KeepHook?>(nil)
    /// Signalled when a link registers or the hub stops: the resting heartbeat goes on.
    let heartbeatWake = DispatchSemaphore(value: 0)

    package init(configuration: SyncConfiguration, surface: any SyncSurface, displayName: String, logger: Logger) {
        self.configuration = configuration
        self.surface = surface
        self.logger = logger
        var random = SystemRandomNumberGenerator()
        node = String(random.next(), radix: 16)
        state = Mutex(State(ledger: SyncLedger(node: node), transfers: TransferTable(caps: TransferTable.Caps(
            maxTransfer: configuration.maxTransferBytes, maxTotal: configuration.maxTotalBytes, window: configuration.window))))
        nodeName = "\(LocalProcess.hostName) \(displayName)"
        synced = configuration.selections(for: nil)
    }

    /// Dials the configured links, starts the heartbeat, and announces what this display holds.
    package func start() {
        // Writes to an ssh that died must fail with EPIPE, not kill the daemon.
        signal(SIGPIPE, SIG_IGN)
        do {
            // The heartbeat ticks only while there is something to watch: a daemon with no link
            // must not wake 4 times a second for nothing. It rests on `heartbeatWake` until a
            // link registers (or the hub stops).
            let wake = heartbeatWake
            try DetachedThread.start(name: "xpbd.sync.tick") { [weak self] in
                while true {
                    guard let hub = self else { return }
                    let (stopped, idle) = hub.state.withLock { ($0.isStopped, $0.hasNothingToWatch) }
                    if stopped { return }
                    if idle {
                        wake.wait()
                        continue
                    }
                    hub.tick()
                    usleep(250_000)
                }
            }
        } catch {
            logger.error("sync: cannot start the heartbeat's thread (links will not ping or time out): \(error)")
        }
        for name in synced {
            if let owner = surface.currentOwner(of: name), owner != surface.ourOwner {
                let selection = SelectionNames.selection(for: name)
                perform(state.withLock { $0.ledger.ownerChanged(selection, owner: owner, event: .copied, now: Self.wallClock) })
            }
        }
        let made = configuration.links.map { PeerDialer(spec: $0, hub: self, logger: logger) }
        dialers.withLock { $0 = made }
        for dialer in made { dialer.start() }
    }

    package func stop() {
        let links = state.withLock { state -> [SyncLink] in
            state.isStopped = true
            return Array(state.links.values)
        }
        heartbeatWake.signal()
        for dialer in dialers.withLock({ $0 }) { dialer.stop() }
        for link in links { link.close("the daemon is stopping") }
    }

    static func name(ofSelection selection: String) -> Pasteboard.Name? {
        switch selection {
        case "CLIPBOARD": return .general
        case "PRIMARY": return .find
        default: return nil
        }
    }

    // MARK: Links

    /// This side's hello on a link it dials.
    func hello(for spec: SyncLinkSpec) -> SyncHello {
        SyncHello(node: node, name: nodeName, sends: spec.sends, receives: spec.receives,
                  selections: configuration.selections(for: spec).map(SelectionNames.selection(for:)))
    }

    /// Checks the other side's hello: nil when the link can go on, else why not.
    package func refusal(of theirs: SyncHello, ours: SyncHello) -> String? {
        if let mismatch = ours.mismatch(with: theirs) { return mismatch }
        if theirs.node == node { return "the link leads back to this daemon" }
        return nil
    }

    /// A link whose hellos were exchanged starts carrying changes.
    @discardableResult
    package func register(transport: SyncTransport, reader: FrameReader, label: String, ours: SyncHello, theirs: SyncHello,
                  incoming: Bool = false) -> SyncLink {
        let selections = Set(ours.selections).intersection(theirs.selections).compactMap(Self.name(ofSelection:))
        let names = { (names: Set<Pasteboard.Name>) in Set(names.map(SelectionNames.selection(for:))) }
        // The ledger knows the link before its reader starts: an announce the peer sends at once
        // is weighed, never dropped as coming from an unknown link (seen under load). Changes of
        // this display made while no link was up are read now; the other side is caught up with
        // what this node holds (queued on the link until its writer starts).
        let (link, effects) = state.withLock { state -> (SyncLink, [SyncLedger.Effect]) in
            let link = SyncLink(id: state.nextLink, transport: transport, label: label, theirs: theirs,
                                sends: ours.sends && theirs.receives, receives: ours.receives && theirs.sends,
                                selections: Set(selections).intersection(synced))
            state.nextLink += 1
            state.links[link.id] = link
            if incoming {
                state.incoming.insert(link.id)
                state.admitting -= 1
            }
            let sends = link.sends ? names(link.selections) : []
            let receives = link.receives ? names(link.selections) : []
            return (link, state.ledger.linkUp(link.id, sends: sends, receives: receives, now: Date()))
        }
        perform(effects)
        heartbeatWake.signal()
        link.start(reader: reader, handler: { [weak self] link, frame in self?.handle(frame, from: link) },
                   onClose: { [weak self] link, reason in self?.linkClosed(link, reason: reason) })
        return link
    }

    /// A link dialed by another daemon, handed over by the control server after its hello.
    func accept(fd: Int32, hello payload: Data) {
        // The control server's socket: its channel writes the answer.
        let channel = FrameChannel(fd: fd)
        guard let theirs = try? ControlCoding.decode(SyncHello.self, from: payload) else {
            try? channel.send(.error, ControlFailure("malformed sync hello"))
            close(fd)
            return
        }
        let ours = SyncHello(node: node, name: nodeName, sends: theirs.receives, receives: theirs.sends,
                             selections: synced.map(SelectionNames.selection(for:)))
        // A place among the incoming links is taken before the answer, so that links coming in
        // at once cannot all pass the cap.
        let admitted = state.withLock { state -> Bool in
            guard state.incoming.count + state.admitting < Self.maxIncomingLinks else { return false }
            state.admitting += 1
            return true
        }
        let release = { [self] in state.withLock { $0.admitting -= 1 } }
        if let refusal = refusal(of: theirs, ours: ours) ?? (state.withLock { $0.isStopped } ? "the daemon is stopping" : nil)
            ?? (admitted ? nil : "\(Self.maxIncomingLinks) links came in already") {
            if admitted { release() }
            let (log, left) = state.withLock { $0.refusals.admit(now: Date().timeIntervalSince1970) }
            if log {
                logger.warning("sync: refused a link from \(LogThrottle.printable(theirs.name)): \(refusal)\(left > 0 ? " (and \(left) more since the last one logged)" : "")")
            }
            try? channel.send(.error, ControlFailure(refusal))
            close(fd)
            return
        }
        do {
            try channel.send(.hello, ours)
        } catch {
            release()
            close(fd)
            return
        }
        let link = register(transport: SyncTransport(socket: fd), reader: FrameReader(fd: fd), label: "incoming \(theirs.name)",
                            ours: ours, theirs: theirs, incoming: true)
        logger.info("sync: \(theirs.name) joined (\(link.sends && link.receives ? "both ways" : link.sends ? "we send only" : "we receive only"), \(link.selections.map { SelectionNames.selection(for: $0) }.sorted().joined(separator: ", ")))")
    }

    private func linkClosed(_ link: SyncLink, reason: String) {
        perform(state.withLock { state -> [TransferTable.Effect] in
            state.links.removeValue(forKey: link.id)
            state.incoming.remove(link.id)
            state.namesBrought.removeValue(forKey: link.id)
            state.overNameBudget.remove(link.id)
            state.ledger.linkDown(link.id)
            return state.transfers.linkDown(link.id, message: "the link to \(link.label) closed: \(reason)")
        })
        if link.label.hasPrefix("incoming") {
            logger.info("sync: \(link.theirs.name) left: \(reason)")
        }
    }

    /// Every 0.25 s: pings, silent links dropped, transfers without progress failed.
    private func tick() {
        let now = Date()
        let links = state.withLock { Array($0.links.values) }
        for link in links {
            let (silent, ping) = link.stats.withLock { stats -> (Bool, Int?) in
                if now.timeIntervalSince(stats.lastReceived) > configuration.deadAfter { return (true, nil) }
                guard now.timeIntervalSince(stats.lastPing) >= configuration.heartbeat else { return (false, nil) }
                stats.lastPing = now
                stats.pingSeq += 1
                stats.pingSentAt = stats.pingSentAt.filter { now.timeIntervalSince($0.value) < configuration.deadAfter }
                stats.pingSentAt[stats.pingSeq] = now
                return (false, stats.pingSeq)
            }
            if silent {
                link.close("no word from the peer for \(Int(configuration.deadAfter)) s")
            } else if let ping {
                link.send(.ping(seq: ping))
            }
        }
        failStalled(now: now)
    }

    // MARK: Frames from a link

    private func handle(_ frame: Frame, from link: SyncLink) {
        switch frame.kind {
        case .data:
            guard let (id, bytes) = SyncData.decode(frame.payload) else { return link.close("a malformed data frame") }
            deliver(bytes, to: id, from: link)
        case .sync:
            switch try? SyncIncoming.decode(frame.payload) {
            case nil:
                link.close("a malformed sync message")
            case let .message(message, unknownFields):
                if !unknownFields.isEmpty { link.stats.withLock { $0.ignoredFields += unknownFields.count } }
                handle(message, from: link)
            case let .unknown(kind):
                // A newer peer's message: ignored, counted, and named in the log once per kind.
                let first = link.stats.withLock { stats in
                    stats.ignoredMessages += 1
                    return stats.ignoredKindsLogged.count < 16 && stats.ignoredKindsLogged.insert(kind).inserted
                }
                if first { logger.info("sync: \(link.label) sent a '\(LogThrottle.printable(String(kind.prefix(64))))' message, which this version does not know: ignored") }
            }
        case .error:
            let message = (try? ControlCoding.decode(ControlFailure.self, from: frame.payload))?.message ?? "(no reason)"
            link.close("the peer reported: \(message)")
        default:
            link.close("an unexpected frame (kind \(frame.kind.rawValue))")
        }
    }

    private func handle(_ message: SyncMessage, from link: SyncLink) {
        switch message {
        case let .announce(announce):
            link.stats.withLock {
                $0.announcesReceived += 1
                $0.lastAnnounce = Date()
            }
            remoteAnnounce(announce, from: link)
        case let .withdraw(selection, stamp):
            remoteWithdraw(selection: selection, stamp: stamp, from: link)
        case let .fetch(id, selection, stamp, target, window, limit):
            serveFetch(id: id, selection: selection, stamp: stamp, target: target, window: window, limit: limit, for: link)
        case .begin, .end, .failed, .credit, .cancel:
            handleTransfer(message, from: link)
        case let .ping(seq):
            link.send(.pong(seq: seq))
        case let .pong(seq):
            link.stats.withLock { stats in
                if let sent = stats.pingSentAt.removeValue(forKey: seq) { stats.roundTrip = Date().timeIntervalSince(sent) }
            }
        }
    }
}
