import Dispatch
import Foundation
import Logging
import PasteboardKit
import PasteboardWire
import PasteboardX11
import Synchronization

/// What the sync hub asks of the clipboard manager it runs in.
struct SyncHooks: Sendable {
    /// The kept contents of a selection, if they came from `owner` (or are served by us for it).
    let kept: @Sendable (Pasteboard.Name, X11Window) -> Snapshot?
    /// One target of `owner`'s contents, if the keeper has it (kept, or fetched so far).
    let keptTarget: @Sendable (Pasteboard.Name, X11Window, String) -> CapturedTarget?
}

/// One node of the sync mesh: announces this display's copies to the links, owns the display's
/// selections for copies made elsewhere (their bytes fetched only when a reader converts a
/// target), serves and relays fetches, and keeps every node on the newest change.
///
/// Ordering: every change carries a ``SyncStamp`` (hybrid logical clock and origin node). A node
/// takes an announce only if its stamp is newer than what it has, and forwards only what it
/// took: nothing echoes, nothing loops, and simultaneous copies settle on the greater stamp
/// everywhere. Copies that must not leave the machine (secret, local-only) get a local stamp
/// (so that older contents do not come back over them) and are never announced.
///
/// Threads: link readers route transfer messages at once (no X work); announces, withdraws and
/// local changes run on `queue`, which does the X work; each served fetch runs on a worker.
/// Nothing here waits on a peer while holding anything another link or the X thread needs.
final class SyncHub: Sendable {
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
    }

    let configuration: SyncConfiguration
    let node: String
    let nodeName: String
    let ourWindow: X11Window
    let synced: [Pasteboard.Name]
    let backend: X11PasteboardBackend
    /// What this display's new owners offer (read once, for the keeper and sync), and the turns
    /// at each owner that a served fetch takes like the keeper's capture.
    let offers: OwnerOffers
    let logger: Logger
    private let hookSlot = Mutex<SyncHooks?>(nil)
    let state: Mutex<State>
    /// Owning and clearing this display's selections for other nodes' changes (X round trips).
    private let queue = DispatchQueue(label: "xpbd.sync")
    /// Reading what this display's new owners offer: an owner slow to answer delays only its own
    /// announce, not what comes from elsewhere.
    private let localQueue = DispatchQueue(label: "xpbd.sync.local")
    let workers = DispatchQueue(label: "xpbd.sync.serve", attributes: .concurrent)
    private let dialers = Mutex<[PeerDialer]>([])

    init(configuration: SyncConfiguration, backend: X11PasteboardBackend, ourWindow: X11Window, displayName: String, offers: OwnerOffers,
         logger: Logger) {
        self.configuration = configuration
        self.backend = backend
        self.offers = offers
        self.ourWindow = ourWindow
        self.logger = logger
        var random = SystemRandomNumberGenerator()
        node = String(random.next(), radix: 16)
        state = Mutex(State(ledger: SyncLedger(node: node), transfers: TransferTable(caps: TransferTable.Caps(
            maxTransfer: configuration.maxTransferBytes, maxTotal: configuration.maxTotalBytes, window: configuration.window))))
        // gethostname, not ProcessInfo.hostName (which may ask DNS and wait).
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count - 1)
        nodeName = "\(String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) \(displayName)"
        synced = configuration.selections(for: nil)
    }

    /// What the hub asks of its daemon (set once, before ``start()``).
    func setHooks(_ hooks: SyncHooks) {
        hookSlot.withLock { $0 = hooks }
    }

    func kept(_ name: Pasteboard.Name, _ owner: X11Window) -> Snapshot? {
        hookSlot.withLock { $0 }?.kept(name, owner)
    }

    func keptTarget(_ name: Pasteboard.Name, _ owner: X11Window, target: String) -> CapturedTarget? {
        hookSlot.withLock { $0 }?.keptTarget(name, owner, target)
    }

    /// Dials the configured links, starts the heartbeat, and announces what this display holds.
    func start() {
        // Writes to an ssh that died must fail with EPIPE, not kill the daemon.
        signal(SIGPIPE, SIG_IGN)
        let heartbeat = Thread { [weak self] in
            while let hub = self, !hub.state.withLock({ $0.isStopped }) {
                hub.tick()
                usleep(250_000)
            }
        }
        heartbeat.name = "xpbd.sync.tick"
        heartbeat.start()
        for name in synced {
            if let owner = try? backend.owner(of: name), owner.window != ourWindow {
                let selection = X11PasteboardBackend.selectionName(for: name)
                perform(state.withLock { $0.ledger.ownerChanged(selection, owner: owner.window.rawValue, event: .copied, now: Self.wallClock) })
            }
        }
        let made = configuration.links.map { PeerDialer(spec: $0, hub: self, logger: logger) }
        dialers.withLock { $0 = made }
        for dialer in made { dialer.start() }
    }

    func stop() {
        let links = state.withLock { state -> [SyncLink] in
            state.isStopped = true
            return Array(state.links.values)
        }
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
                  selections: configuration.selections(for: spec).map(X11PasteboardBackend.selectionName(for:)))
    }

    /// Checks the other side's hello: nil when the link can go on, else why not.
    func refusal(of theirs: SyncHello, ours: SyncHello) -> String? {
        if let mismatch = ours.mismatch(with: theirs) { return mismatch }
        if theirs.node == node { return "the link leads back to this daemon" }
        return nil
    }

    /// A link whose hellos were exchanged starts carrying changes.
    @discardableResult
    func register(transport: SyncTransport, reader: FrameReader, label: String, ours: SyncHello, theirs: SyncHello) -> SyncLink {
        let selections = Set(ours.selections).intersection(theirs.selections).compactMap(Self.name(ofSelection:))
        let names = { (names: Set<Pasteboard.Name>) in Set(names.map(X11PasteboardBackend.selectionName(for:))) }
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
            let sends = link.sends ? names(link.selections) : []
            let receives = link.receives ? names(link.selections) : []
            return (link, state.ledger.linkUp(link.id, sends: sends, receives: receives, now: Date()))
        }
        perform(effects)
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
                             selections: synced.map(X11PasteboardBackend.selectionName(for:)))
        if let refusal = refusal(of: theirs, ours: ours) ?? (state.withLock { $0.isStopped } ? "the daemon is stopping" : nil) {
            logger.warning("sync: refused a link from \(theirs.name): \(refusal)")
            try? channel.send(.error, ControlFailure(refusal))
            close(fd)
            return
        }
        do {
            try channel.send(.hello, ours)
        } catch {
            close(fd)
            return
        }
        let link = register(transport: SyncTransport(socket: fd), reader: FrameReader(fd: fd), label: "incoming \(theirs.name)",
                            ours: ours, theirs: theirs)
        logger.info("sync: \(theirs.name) joined (\(link.sends && link.receives ? "both ways" : link.sends ? "we send only" : "we receive only"), \(link.selections.map { X11PasteboardBackend.selectionName(for: $0) }.sorted().joined(separator: ", ")))")
    }

    private func linkClosed(_ link: SyncLink, reason: String) {
        perform(state.withLock { state -> [TransferTable.Effect] in
            state.links.removeValue(forKey: link.id)
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
            guard let message = try? ControlCoding.decode(SyncMessage.self, from: frame.payload) else {
                return link.close("a malformed sync message")
            }
            handle(message, from: link)
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

    // MARK: Ordering (the driver of SyncLedger)

    /// Now, in the clock's unit (ms since 1970).
    static var wallClock: UInt64 { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) }

    /// The most targets an announce may list, and the longest target name (an owner's TARGETS is
    /// read with the same bound): each becomes an atom of this display.
    static let maxTargets = 1024
    static let maxTargetName = 1024

    /// On the X thread, as an ownership change's event is read (the daemon's hook calls it):
    /// stamped now, before anything the X thread does next (such as taking the selection for
    /// another node's copy).
    func ownerChangeRead(_ change: SelectionOwnerChange) {
        guard synced.contains(change.name) else { return }
        let event: SyncLedger.OwnerEvent
        if change.isOurs || change.owner == ourWindow {
            event = .ours
        } else if change.owner.isNone {
            event = change.reason == .setOwner ? .cleared : .gone
        } else {
            event = .copied
        }
        let selection = X11PasteboardBackend.selectionName(for: change.name)
        let effects = state.withLock { state -> [SyncLedger.Effect] in
            guard !state.isStopped else { return [] }
            return state.ledger.ownerChanged(selection, owner: change.owner.rawValue, event: event, now: Self.wallClock)
        }
        if event == .cleared { logger.debug("sync: \(selection) was cleared by its owner") }
        perform(effects)
    }

    /// A history entry became the selection (`xpb history select`): announced like a copy.
    func selectedFromHistory(_ name: Pasteboard.Name) {
        guard synced.contains(name) else { return }
        let selection = X11PasteboardBackend.selectionName(for: name)
        perform(state.withLock { $0.ledger.selectedAgain(selection, owner: ourWindow.rawValue, now: Self.wallClock) })
    }

    private func remoteAnnounce(_ announce: SyncAnnounce, from link: SyncLink) {
        if let problem = SyncLedger.malformation(of: announce, maxTargets: Self.maxTargets, maxTargetName: Self.maxTargetName) {
            logger.warning("sync: ignored a malformed announce from \(link.label): \(problem)")
            return
        }
        if announce.stamp.clock > Self.wallClock + SyncLedger.maxClockSkew {
            logger.warning("sync: ignored an announce from \(link.label) stamped more than a day ahead of this machine's clock (\(announce.stamp)); check the clocks")
            return
        }
        perform(state.withLock { state -> [SyncLedger.Effect] in
            guard !state.isStopped else { return [] }
            return state.ledger.announced(announce, from: link.id, now: Self.wallClock, wall: Date())
        }, via: link)
    }

    private func remoteWithdraw(selection: String, stamp: SyncStamp, from link: SyncLink) {
        perform(state.withLock { state -> [SyncLedger.Effect] in
            guard !state.isStopped else { return [] }
            return state.ledger.withdrawn(selection, stamp: stamp, from: link.id, now: Self.wallClock)
        }, via: link)
    }

    /// Carries out what the ledger decided. Nothing here waits: X work goes to `queue`, offers are
    /// read on `localQueue`, frames are queued on their links.
    private func perform(_ effects: [SyncLedger.Effect], via source: SyncLink? = nil) {
        for effect in effects {
            switch effect {
            case let .send(message, ids):
                let links = state.withLock { state in ids.compactMap { state.links[$0] } }
                for link in links {
                    if case .announce = message { link.stats.withLock { $0.announcesSent += 1 } }
                    link.send(message)
                }
            case let .readOffer(selection, stamp, owner):
                localQueue.async { [self] in readOffer(selection, stamp: stamp, owner: X11Window(rawValue: owner)) }
            case let .own(announce):
                queue.async { [self] in own(announce, via: source?.label ?? "a link") }
            case let .clear(selection, stamp):
                queue.async { [self] in clear(selection, stamp: stamp) }
            case let .expireAt(date, selection, stamp):
                queue.asyncAfter(deadline: .now() + min(max(0, date.timeIntervalSinceNow), 1e9)) { [self] in
                    perform(state.withLock { $0.ledger.expired(selection, stamp: stamp) })
                }
            }
        }
    }

    /// Compare-and-own: takes the selection for another node's copy only if, on the X thread at
    /// that moment, the ledger still holds that copy as the newest and the selection's owner is
    /// one it has seen (a newer copy whose event is not read yet is never replaced).
    private func own(_ announce: SyncAnnounce, via label: String) {
        guard let name = Self.name(ofSelection: announce.selection) else { return }
        let stamp = announce.stamp
        let ours = ourWindow.rawValue
        let targets = announce.targets.map { target in
            RemoteTarget(target: target.target, size: target.size) { [weak self] in
                self?.openRemote(name, stamp: stamp, target: target)
            }
        }
        do {
            let owned = try backend.proxy(name, targets: targets, if: { [weak self] actual in
                self?.state.withLock { $0.ledger.mayOwn(announce.selection, stamp: stamp, actualOwner: actual.rawValue, ours: ours) } ?? false
            })
            if owned {
                logger.info("sync: \(announce.selection) is now the copy from \(announce.origin) (\(announce.targets.count) targets, via \(label))")
            } else {
                logger.debug("sync: \(announce.selection): the copy from \(announce.origin) (\(stamp)) is no longer the newest here: not taken")
            }
        } catch {
            logger.warning("sync: could not take \(announce.selection) for the copy from \(announce.origin): \(error)")
        }
    }

    /// Compare-and-clear, for a newer clear (or a withdrawn copy) from elsewhere, or a proxy
    /// taken after this display's own clear.
    private func clear(_ selection: String, stamp: SyncStamp) {
        guard let name = Self.name(ofSelection: selection) else { return }
        let ours = ourWindow.rawValue
        do {
            let cleared = try backend.clear(name, if: { [weak self] actual in
                self?.state.withLock { $0.ledger.mayClear(selection, stamp: stamp, actualOwner: actual.rawValue, ours: ours) } ?? false
            })
            if cleared { logger.info("sync: \(selection) was cleared or withdrawn elsewhere (\(stamp)): dropped") }
        } catch {
            logger.warning("sync: could not clear \(selection): \(error)")
        }
    }

    /// Reads what the owner of this display's change `stamp` offers, and tells the ledger whether
    /// it may leave the machine (secret, local-only and expired contents stay).
    private func readOffer(_ selection: String, stamp: SyncStamp, owner: X11Window) {
        guard let name = Self.name(ofSelection: selection) else { return }
        let isCurrent = { [self] in state.withLock { !$0.isStopped && $0.ledger.isCurrentLocal(selection, stamp: stamp) } }
        if name == .find, !backend.waitForPointerRelease(while: isCurrent) { return }
        guard isCurrent() else { return }
        let verdict = offerVerdict(name, owner: owner)
        if case let .notShared(reason) = verdict { logger.log(level: reason.hasPrefix("marked") || reason == "local-only" ? .info : .debug, "sync: \(selection) is \(reason): not shared") }
        let effects = state.withLock { $0.ledger.offerRead(selection, stamp: stamp, verdict: verdict) }
        perform(effects)
        if case let .send(.announce(announce), links)? = effects.first {
            logger.debug("sync: announced \(selection) (\(announce.targets.count) targets, stamp \(announce.stamp)) to \(links.count) links")
        }
    }

    private func offerVerdict(_ name: Pasteboard.Name, owner: X11Window) -> SyncLedger.Verdict {
        let offer: OwnerOffer
        if owner == ourWindow {
            // Kept contents this daemon serves (a history entry selected again).
            guard let kept = kept(name, owner) else { return .notShared("no longer kept") }
            offer = OwnerOffer(kept: kept, servedBy: ourWindow)
        } else {
            // Read once for the keeper and sync; nil when the owner is no longer the one whose
            // change this is.
            guard let read = offers.offer(name, owner: owner) else { return .notShared("replaced before it was read") }
            offer = read
        }
        if let reason = offer.verdict.notSharedReason { return .notShared(reason) }
        let targets = offer.dataTargets.prefix(Self.maxTargets).map { SyncTarget(target: $0, size: offer.sizes[$0]) }
        guard !targets.isEmpty else { return .notShared("without data targets") }
        let ownerName = owner == ourWindow ? "history" : offer.owner.name ?? "window \(owner)"
        return .shareable(targets: Array(targets), expires: offer.expires, origin: "\(nodeName) (\(ownerName))")
    }

    // MARK: Status

    /// Per synced selection: the shared value (stamp, origin, link) and this display's own change.
    func valueStatuses() -> [SyncValueStatus] {
        state.withLock { state in
            synced.map { name in
                let selection = X11PasteboardBackend.selectionName(for: name)
                let slot = state.ledger.slots[selection]
                let shared = slot?.shared
                let via = shared?.source.flatMap { state.links[$0]?.label } ?? shared?.source.map { "link \($0) (closed)" }
                let localState: String? = slot?.local.map { local in
                    switch local.state {
                    case .pending: return "pending"
                    case .shared: return "shared"
                    case let .notShared(reason): return "not shared: \(reason)"
                    case .cleared: return "cleared"
                    }
                }
                return SyncValueStatus(selection: selection, stamp: shared.map { "\($0.stamp)" }, origin: shared?.announce?.origin,
                                       state: shared == nil ? "none" : shared?.announce == nil ? "cleared" : "copy", via: via,
                                       localStamp: slot?.local.map { "\($0.stamp)" }, localState: localState)
            }
        }
    }

    func peerStatuses() -> [PeerStatus] {
        let (links, dialed) = state.withLock { state in (Array(state.links.values), dialers.withLock { $0 }) }
        var statuses = dialed.map { $0.status() }
        for link in links.sorted(by: { $0.id < $1.id }) where link.label.hasPrefix("incoming") {
            var status = PeerStatus(name: link.label, state: "connected",
                                    direction: PeerStatus.direction(sends: link.sends, receives: link.receives),
                                    selections: link.selections.map { X11PasteboardBackend.selectionName(for: $0) }.sorted(),
                                    remote: link.theirs.name, since: Date())
            Self.merge(link, into: &status)
            statuses.append(status)
        }
        return statuses
    }

    /// A link's counters in a status.
    static func merge(_ link: SyncLink, into status: inout PeerStatus) {
        let stats = link.stats.withLock { $0 }
        status.roundTripMilliseconds = stats.roundTrip.map { ($0 * 10_000).rounded() / 10 }
        status.lastAnnounce = stats.lastAnnounce
        status.announcesSent = stats.announcesSent
        status.announcesReceived = stats.announcesReceived
        status.bytesSent = stats.bytesSent
        status.bytesReceived = stats.bytesReceived
    }
}
