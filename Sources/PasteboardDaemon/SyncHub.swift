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
    /// Whether the keeper is reading a target from `owner` right now.
    let isKeeping: @Sendable (Pasteboard.Name, X11Window) -> Bool
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
    struct Entry {
        let stamp: SyncStamp
        /// Nil: contents that are not shared (secret, local-only, cleared).
        let announce: SyncAnnounce?
        /// The link the contents came from; nil when they are this node's.
        var source: Int?
        /// This node's: the owner and the change's generation.
        let owner: X11Window
        let generation: Int
    }

    /// A change of this display's selection: its new owner (None: cleared), the generation that
    /// tells it from later changes, and its stamp, taken when it happened.
    struct LocalChange {
        let owner: X11Window
        let generation: Int
        let stamp: SyncStamp
    }

    enum Sink {
        /// A reader on this display.
        case local(ByteStream)
        /// Another link's fetch, relayed: its link and id.
        case relay(link: Int, id: UInt64)
    }

    struct Request {
        let link: Int
        let sink: Sink
        let limit: Int
        let what: String
        var received = 0
        var pendingCredit = 0
        var lastProgress = Date()
    }

    enum Served {
        case local(ServeTask)
        case relay(link: Int, id: UInt64)
    }

    /// How a fetch is answered.
    enum Plan {
        case refuse(String)
        case local(ServeTask, Entry, Pasteboard.Name)
        case relay(SyncLink, UInt64)
    }

    struct ServedKey: Hashable {
        let link: Int
        let id: UInt64
    }

    struct State {
        var clock: UInt64 = 0
        var entries: [Pasteboard.Name: Entry] = [:]
        var generations: [Pasteboard.Name: Int] = [:]
        var links: [Int: SyncLink] = [:]
        var nextLink = 1
        var nextFetch: UInt64 = 1
        var requests: [UInt64: Request] = [:]
        var served: [ServedKey: Served] = [:]
        /// Bytes received by this display's transfers under way (the total cap).
        var inFlight = 0
        /// Fetches being served from this display's owners, per selection.
        var servingLocal: [Pasteboard.Name: Int] = [:]
        /// This display's newest change per selection while no link is up: read and announced
        /// when one comes (no X round trip per copy for a daemon that syncs with nobody).
        var deferred: [Pasteboard.Name: LocalChange] = [:]
        var isStopped = false
    }

    let configuration: SyncConfiguration
    let node: String
    let nodeName: String
    let ourWindow: X11Window
    let synced: [Pasteboard.Name]
    private let backend: X11PasteboardBackend
    private let logger: Logger
    private let hookSlot = Mutex<SyncHooks?>(nil)
    let state = Mutex(State())
    /// Other nodes' announces and withdraws (owning this display's selection).
    private let queue = DispatchQueue(label: "xpbd.sync")
    /// This display's changes (reading the new owner's targets): an owner slow to answer delays
    /// only its own announce, not what comes from elsewhere.
    private let localQueue = DispatchQueue(label: "xpbd.sync.local")
    private let workers = DispatchQueue(label: "xpbd.sync.serve", attributes: .concurrent)
    private let dialers = Mutex<[PeerDialer]>([])

    init(configuration: SyncConfiguration, backend: X11PasteboardBackend, ourWindow: X11Window, displayName: String, logger: Logger) {
        self.configuration = configuration
        self.backend = backend
        self.ourWindow = ourWindow
        self.logger = logger
        var random = SystemRandomNumberGenerator()
        node = String(random.next(), radix: 16)
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

    private func kept(_ name: Pasteboard.Name, _ owner: X11Window) -> Snapshot? {
        hookSlot.withLock { $0 }?.kept(name, owner)
    }

    /// The kept contents of `owner`, after waiting (at most `timeout` seconds) for a fetch of the
    /// keeper's under way: many owners (xclip) serve one INCR transfer at a time, and the keeper
    /// and a peer's fetch asking at once would stall each other.
    private func keptAfterKeeper(_ name: Pasteboard.Name, _ owner: X11Window, target: String, timeout: Double) -> CapturedTarget? {
        guard let hooks = hookSlot.withLock({ $0 }) else { return nil }
        let end = Date().addingTimeInterval(timeout)
        while hooks.isKeeping(name, owner), Date() < end { usleep(5_000) }
        return hooks.keptTarget(name, owner, target)
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
            if let owner = try? backend.owner(of: name), owner.window != ourWindow { localOwnerChanged(name, owner: owner.window) }
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
        let link = state.withLock { state -> SyncLink in
            let link = SyncLink(id: state.nextLink, transport: transport, label: label, theirs: theirs,
                                sends: ours.sends && theirs.receives, receives: ours.receives && theirs.sends,
                                selections: Set(selections).intersection(synced))
            state.nextLink += 1
            state.links[link.id] = link
            return link
        }
        link.start(reader: reader, handler: { [weak self] link, frame in self?.handle(frame, from: link) },
                   onClose: { [weak self] link, reason in self?.linkClosed(link, reason: reason) })
        // Changes of this display made while no link was up are read and announced now.
        let deferred = state.withLock { state -> [Pasteboard.Name: LocalChange] in
            defer { state.deferred.removeAll() }
            return state.deferred
        }
        for (name, change) in deferred { localQueue.async { [self] in handleLocal(name, change) } }
        // Catch the other side up with what this node holds (after those, on the same queue, so
        // that an announce they replace is not sent first).
        localQueue.async { [self] in
            let announces = state.withLock { state in
                synced.compactMap { name -> SyncAnnounce? in
                    guard link.sends(name), let entry = state.entries[name], entry.source != link.id,
                          let announce = entry.announce, !(announce.expires.map { $0 <= Date() } ?? false) else { return nil }
                    return announce
                }
            }
            for announce in announces { sendAnnounce(announce, on: link) }
        }
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
        var streams: [(ByteStream, String)] = []
        var downstream: [(SyncLink, UInt64)] = []
        var upstream: [(SyncLink, UInt64)] = []
        var tasks: [ServeTask] = []
        state.withLock { state in
            state.links.removeValue(forKey: link.id)
            for (id, request) in state.requests where request.link == link.id {
                state.requests.removeValue(forKey: id)
                switch request.sink {
                case let .local(stream):
                    state.inFlight -= request.received
                    streams.append((stream, "the link to \(link.label) closed: \(reason)"))
                case let .relay(linkID, fetchID):
                    state.served.removeValue(forKey: ServedKey(link: linkID, id: fetchID))
                    if let other = state.links[linkID] { downstream.append((other, fetchID)) }
                }
            }
            for (key, served) in state.served where key.link == link.id {
                state.served.removeValue(forKey: key)
                switch served {
                case let .local(task): tasks.append(task)
                case let .relay(linkID, fetchID):
                    state.requests.removeValue(forKey: fetchID)
                    if let other = state.links[linkID] { upstream.append((other, fetchID)) }
                }
            }
        }
        for (stream, message) in streams { stream.fail(message) }
        for (other, id) in downstream { other.send(.failed(id: id, message: "the link that holds the data closed")) }
        for (other, id) in upstream { other.send(.cancel(id: id)) }
        for task in tasks { task.cancel() }
        if link.label.hasPrefix("incoming") {
            logger.info("sync: \(link.theirs.name) left: \(reason)")
        }
    }

    /// Every 0.25 s: pings, silent links dropped, transfers without progress failed.
    private func tick() {
        let now = Date()
        let (links, stalled) = state.withLock { state -> ([SyncLink], [(UInt64, Request)]) in
            let stalled = state.requests.filter { _, request in
                guard case let .local(stream) = request.sink else { return false }
                let snapshot = stream.snapshot()
                return snapshot.buffered == 0 && !snapshot.isEnded && now.timeIntervalSince(request.lastProgress) > configuration.fetchTimeout
            }
            return (Array(state.links.values), stalled.map { ($0.key, $0.value) })
        }
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
        for (id, request) in stalled {
            failRequest(id, "no data from \(request.what) for \(configuration.fetchTimeout) s: the peer is stalled or gone")
        }
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
            queue.async { [self] in applyRemote(announce, from: link) }
        case let .withdraw(selection, stamp):
            queue.async { [self] in applyWithdraw(selection: selection, stamp: stamp, from: link) }
        case let .fetch(id, selection, stamp, target, window, limit):
            serveFetch(id: id, selection: selection, stamp: stamp, target: target, window: window, limit: limit, for: link)
        case let .begin(id, type, size):
            guard let request = request(id, from: link) else { return }
            if let size, size > request.limit {
                return failRequest(id, "\(request.what) is \(ByteCount.format(size)), over the \(ByteCount.format(request.limit)) cap per transfer (--sync-max-transfer)")
            }
            switch request.sink {
            case let .local(stream): stream.begin(type: type, size: size)
            case let .relay(linkID, fetchID): self.link(linkID)?.send(.begin(id: fetchID, type: type, size: size))
            }
        case let .end(id, total):
            guard let request = removeRequest(id, from: link) else { return }
            switch request.sink {
            case let .local(stream):
                stream.finish()
                logger.debug("sync: fetched \(request.what): \(ByteCount.format(total))")
            case let .relay(linkID, fetchID): self.link(linkID)?.send(.end(id: fetchID, total: total))
            }
        case let .failed(id, message):
            guard let request = removeRequest(id, from: link) else { return }
            switch request.sink {
            case let .local(stream):
                stream.fail(message)
                logger.warning("sync: \(request.what) could not be fetched: \(message)")
            case let .relay(linkID, fetchID): self.link(linkID)?.send(.failed(id: fetchID, message: message))
            }
        case let .credit(id, bytes):
            switch state.withLock({ $0.served[ServedKey(link: link.id, id: id)] }) {
            case let .local(task)?: task.grant(bytes)
            case let .relay(linkID, fetchID)?: self.link(linkID)?.send(.credit(id: fetchID, bytes: bytes))
            case nil: break
            }
        case let .cancel(id):
            switch state.withLock({ $0.served.removeValue(forKey: ServedKey(link: link.id, id: id)) }) {
            case let .local(task)?: task.cancel()
            case let .relay(linkID, fetchID)?:
                state.withLock { _ = $0.requests.removeValue(forKey: fetchID) }
                self.link(linkID)?.send(.cancel(id: fetchID))
            case nil: break
            }
        case let .ping(seq):
            link.send(.pong(seq: seq))
        case let .pong(seq):
            link.stats.withLock { stats in
                if let sent = stats.pingSentAt.removeValue(forKey: seq) { stats.roundTrip = Date().timeIntervalSince(sent) }
            }
        }
    }

    private func link(_ id: Int) -> SyncLink? { state.withLock { $0.links[id] } }

    private func request(_ id: UInt64, from link: SyncLink) -> Request? {
        state.withLock { state in
            guard let request = state.requests[id], request.link == link.id else { return nil }
            state.requests[id]?.lastProgress = Date()
            return request
        }
    }

    private func removeRequest(_ id: UInt64, from link: SyncLink) -> Request? {
        state.withLock { state in
            guard let request = state.requests[id], request.link == link.id else { return nil }
            state.requests.removeValue(forKey: id)
            if case let .relay(linkID, fetchID) = request.sink { state.served.removeValue(forKey: ServedKey(link: linkID, id: fetchID)) }
            if case .local = request.sink { state.inFlight -= request.received }
            return request
        }
    }

    /// Bytes of a transfer: to the reader's stream or down the relay, within the caps.
    private func deliver(_ bytes: Data, to id: UInt64, from link: SyncLink) {
        let outcome = state.withLock { state -> Result<Sink, Failure>? in
            guard var request = state.requests[id], request.link == link.id else { return nil }
            request.received += bytes.count
            request.lastProgress = Date()
            if request.received > request.limit {
                return .failure(Failure("\(request.what) is larger than the \(ByteCount.format(request.limit)) cap per transfer (--sync-max-transfer)"))
            }
            if case .local = request.sink {
                state.inFlight += bytes.count
                if state.inFlight > configuration.maxTotalBytes {
                    state.requests[id] = request
                    return .failure(Failure("\(request.what) would take the transfers under way past the \(ByteCount.format(configuration.maxTotalBytes)) total cap (--sync-max-total)"))
                }
            }
            state.requests[id] = request
            return .success(request.sink)
        }
        switch outcome {
        case nil:
            break
        case let .failure(failure)?:
            failRequest(id, failure.message)
        case let .success(.local(stream))?:
            stream.append(bytes)
        case let .success(.relay(linkID, fetchID))?:
            self.link(linkID)?.sendData(id: fetchID, bytes)
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let message: String
        init(_ message: String) { self.message = message }
        var description: String { message }
    }

    /// Ends a transfer this node asked for: the peer is told to stop, the reader (or the relay's
    /// asker) learns why.
    private func failRequest(_ id: UInt64, _ message: String) {
        guard let request = state.withLock({ state -> Request? in
            guard let request = state.requests.removeValue(forKey: id) else { return nil }
            if case .local = request.sink { state.inFlight -= request.received }
            if case let .relay(linkID, fetchID) = request.sink { state.served.removeValue(forKey: ServedKey(link: linkID, id: fetchID)) }
            return request
        }) else { return }
        link(request.link)?.send(.cancel(id: id))
        switch request.sink {
        case let .local(stream):
            stream.fail(message)
            logger.warning("sync: \(message)")
        case let .relay(linkID, fetchID):
            link(linkID)?.send(.failed(id: fetchID, message: message))
        }
    }

    // MARK: This display's changes

    /// An ownership change of a synced selection on this display (from the daemon's events).
    func ownerChanged(_ change: SelectionOwnerChange) {
        guard synced.contains(change.name), !change.isOurs, change.owner != ourWindow else { return }
        if change.owner.isNone && change.reason != .setOwner {
            // The owner went away: the daemon serves what it kept, under the same stamp.
            return
        }
        localOwnerChanged(change.name, owner: change.owner)
    }

    /// A change of this display: stamped now (its time orders it against other nodes' copies),
    /// then read and announced (or kept here), at once or, with no link up, when one comes.
    private func localOwnerChanged(_ name: Pasteboard.Name, owner: X11Window) {
        let change = state.withLock { state -> LocalChange? in
            state.generations[name, default: 0] += 1
            let change = LocalChange(owner: owner, generation: state.generations[name]!, stamp: nextStamp(&state))
            guard !state.links.isEmpty else {
                state.deferred[name] = change
                return nil
            }
            return change
        }
        if let change { localQueue.async { [self] in handleLocal(name, change) } }
    }

    private func handleLocal(_ name: Pasteboard.Name, _ change: LocalChange) {
        if change.owner.isNone {
            keepLocal(name, change, reason: "cleared by its owner")
        } else {
            announceLocal(name, change)
        }
    }

    /// A history entry became the selection (`xpb history select`): announced like a copy.
    func selectedFromHistory(_ name: Pasteboard.Name) {
        guard synced.contains(name) else { return }
        localOwnerChanged(name, owner: ourWindow)
    }

    private func isCurrent(_ name: Pasteboard.Name, _ generation: Int) -> Bool {
        state.withLock { !$0.isStopped && $0.generations[name] == generation }
    }

    /// Now, in the clock's unit (ms since 1970).
    private static var wallClock: UInt64 { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) }

    /// How far ahead of this machine's clock an announce may be: clocks of machines differ, but a
    /// stamp a day ahead would win over every copy for a day.
    static let maxClockSkew: UInt64 = 24 * 3600 * 1000

    private func nextStamp(_ state: inout State) -> SyncStamp {
        state.clock = max(Self.wallClock, state.clock + 1)
        return SyncStamp(clock: state.clock, node: node)
    }

    /// Reads what the new owner offers and announces it, unless it must stay here.
    private func announceLocal(_ name: Pasteboard.Name, _ change: LocalChange) {
        let owner = change.owner
        let generation = change.generation
        let selection = X11PasteboardBackend.selectionName(for: name)
        if name == .find, !backend.waitForPointerRelease(while: { self.isCurrent(name, generation) }) { return }
        guard isCurrent(name, generation) else { return }
        var advertised: [String]
        var sizes: [String: Int] = [:]
        var expires: Date?
        var isLocalOnly = false
        if owner == ourWindow {
            guard let kept = kept(name, owner) else { return }
            advertised = kept.targets.map(\.target)
            for target in kept.targets { sizes[target.target] = target.data.count }
            expires = kept.expires
            isLocalOnly = kept.isLocalOnly
            if KeepPolicy.isSecret(kept.advertised) { advertised += kept.advertised }
        } else {
            do {
                advertised = try backend.targets(of: name)
            } catch {
                logger.debug("sync: \(selection): could not read TARGETS: \(error)")
                return
            }
            if !KeepPolicy.isSecret(advertised), advertised.contains("XPB_MANIFEST") {
                guard let manifest = try? backend.capture(name, target: "XPB_MANIFEST", limit: 1 << 20),
                      let kept = X11PasteboardBackend.keptManifest(manifest.data) else { return }
                isLocalOnly = kept.options.isLocalOnly
                expires = kept.options.expirationDate
            }
            if advertised.contains("TARGET_SIZES") { sizes = (try? backend.targetSizes(of: name)) ?? [:] }
        }
        if KeepPolicy.isSecret(advertised) { return keepLocal(name, change, reason: "marked secret") }
        if isLocalOnly { return keepLocal(name, change, reason: "local-only") }
        if let expires, expires <= Date() { return keepLocal(name, change, reason: "expired") }
        let targets = KeepPolicy.keptTargets(advertised).map { SyncTarget(target: $0, size: sizes[$0]) }
        guard !targets.isEmpty else { return keepLocal(name, change, reason: "no data targets") }
        let ownerName = owner == ourWindow ? "history" : ((try? backend.owner(of: name))?.flatMap { $0.name } ?? "window \(owner)")
        let (announce, links) = state.withLock { state -> (SyncAnnounce?, [SyncLink]) in
            // Not if the selection changed since, or a newer copy from elsewhere came meanwhile.
            guard !state.isStopped, state.generations[name] == generation,
                  state.entries[name].map({ $0.stamp < change.stamp }) ?? true else { return (nil, []) }
            let announce = SyncAnnounce(selection: selection, stamp: change.stamp, origin: "\(nodeName) (\(ownerName))",
                                        targets: targets, expires: expires)
            state.entries[name] = Entry(stamp: announce.stamp, announce: announce, source: nil, owner: owner, generation: generation)
            return (announce, state.links.values.filter { $0.sends(name) })
        }
        guard let announce else { return }
        for link in links { sendAnnounce(announce, on: link) }
        logger.debug("sync: announced \(selection) (\(targets.count) targets, stamp \(announce.stamp)) to \(links.count) links")
        scheduleExpiry(name, announce)
    }

    private func sendAnnounce(_ announce: SyncAnnounce, on link: SyncLink) {
        link.stats.withLock { $0.announcesSent += 1 }
        link.send(.announce(announce))
    }

    /// This display's selection now holds contents that are not shared: they get a stamp (so
    /// that older contents are not brought back over them) and this node's earlier announce, if
    /// any, is withdrawn everywhere.
    private func keepLocal(_ name: Pasteboard.Name, _ change: LocalChange, reason: String) {
        let selection = X11PasteboardBackend.selectionName(for: name)
        let (withdrawn, links) = state.withLock { state -> (SyncStamp?, [SyncLink]) in
            guard !state.isStopped, state.generations[name] == change.generation,
                  state.entries[name].map({ $0.stamp < change.stamp }) ?? true else { return (nil, []) }
            let previous = state.entries[name]
            state.entries[name] = Entry(stamp: change.stamp, announce: nil, source: nil, owner: .none, generation: change.generation)
            guard let previous, previous.source == nil, previous.announce != nil else { return (nil, []) }
            return (previous.stamp, state.links.values.filter { $0.sends(name) })
        }
        logger.log(level: withdrawn == nil ? .debug : .info, "sync: \(selection) is \(reason): not shared")
        guard let withdrawn else { return }
        for link in links { link.send(.withdraw(selection: selection, stamp: withdrawn)) }
    }

    // MARK: Other nodes' changes

    /// The most targets an announce may list, and the longest target name (an owner's TARGETS is
    /// read with the same bound): each becomes an atom of this display.
    static let maxTargets = 1024
    static let maxTargetName = 1024

    private func applyRemote(_ announce: SyncAnnounce, from link: SyncLink) {
        guard let name = Self.name(ofSelection: announce.selection), link.receives(name) else { return }
        guard announce.targets.count <= Self.maxTargets,
              announce.targets.allSatisfy({ target in
                  !target.target.isEmpty && target.target.utf8.count <= Self.maxTargetName && (target.size ?? 0) >= 0
                      && !target.target.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
              }) else {
            logger.warning("sync: ignored a malformed announce from \(link.label) (\(announce.targets.count) targets)")
            return
        }
        if let expires = announce.expires, expires <= Date() { return }
        guard announce.stamp.clock <= Self.wallClock + Self.maxClockSkew else {
            logger.warning("sync: ignored an announce from \(link.label) stamped more than a day ahead of this machine's clock (\(announce.stamp)); check the clocks")
            return
        }
        let accepted = state.withLock { state -> Bool in
            guard !state.isStopped else { return false }
            state.clock = max(state.clock, announce.stamp.clock)
            if let current = state.entries[name] {
                if announce.stamp < current.stamp { return false }
                if announce.stamp == current.stamp {
                    // The same change again (a link came back): take the data from here now.
                    if let source = current.source, state.links[source] == nil { state.entries[name]?.source = link.id }
                    return false
                }
            }
            state.entries[name] = Entry(stamp: announce.stamp, announce: announce, source: link.id, owner: .none, generation: -1)
            state.generations[name, default: 0] += 1
            return true
        }
        guard accepted else { return }
        let stamp = announce.stamp
        do {
            try backend.proxy(name, targets: announce.targets.map { target in
                RemoteTarget(target: target.target, size: target.size) { [weak self] in
                    self?.openRemote(name, stamp: stamp, target: target)
                }
            })
        } catch {
            logger.warning("sync: could not take \(announce.selection) for the copy from \(announce.origin): \(error)")
            return
        }
        let forward = state.withLock { state in
            state.entries[name]?.stamp == stamp ? state.links.values.filter { $0.id != link.id && $0.sends(name) } : []
        }
        for other in forward { sendAnnounce(announce, on: other) }
        logger.info("sync: \(announce.selection) is now the copy from \(announce.origin) (\(announce.targets.count) targets, via \(link.label))")
        scheduleExpiry(name, announce)
    }

    private func applyWithdraw(selection: String, stamp: SyncStamp, from link: SyncLink) {
        guard let name = Self.name(ofSelection: selection), link.receives(name) else { return }
        let forward = state.withLock { state -> [SyncLink]? in
            guard let current = state.entries[name], current.stamp == stamp, current.announce != nil else { return nil }
            state.entries[name] = Entry(stamp: stamp, announce: nil, source: current.source, owner: .none, generation: -1)
            return state.links.values.filter { $0.id != link.id && $0.sends(name) }
        }
        guard let forward else { return }
        dropProxy(name)
        for other in forward { other.send(.withdraw(selection: selection, stamp: stamp)) }
        logger.info("sync: \(selection) was withdrawn by its origin: dropped")
    }

    /// Gives up the display's selection if we hold it for another node's copy.
    private func dropProxy(_ name: Pasteboard.Name) {
        if (try? backend.owner(of: name))?.window == ourWindow { try? backend.clear(name) }
    }

    /// At an announce's expiration date: dropped here, and withdrawn on every link.
    private func scheduleExpiry(_ name: Pasteboard.Name, _ announce: SyncAnnounce) {
        guard let expires = announce.expires else { return }
        queue.asyncAfter(deadline: .now() + min(max(0, expires.timeIntervalSinceNow), 1e9)) { [self] in
            let (links, remote) = state.withLock { state -> ([SyncLink], Bool) in
                guard let current = state.entries[name], current.stamp == announce.stamp, current.announce != nil else { return ([], false) }
                state.entries[name] = Entry(stamp: current.stamp, announce: nil, source: current.source, owner: .none, generation: -1)
                return (state.links.values.filter { $0.sends(name) }, current.source != nil)
            }
            if remote { dropProxy(name) }
            for link in links { link.send(.withdraw(selection: announce.selection, stamp: announce.stamp)) }
        }
    }

    // MARK: Transfers

    /// A reader on this display converts a target of another node's copy (on the X thread: only
    /// bookkeeping and a queued frame here).
    private func openRemote(_ name: Pasteboard.Name, stamp: SyncStamp, target: SyncTarget) -> ByteStream? {
        let selection = X11PasteboardBackend.selectionName(for: name)
        let what = "\(selection) \(target.target)"
        let opened = state.withLock { state -> Result<(UInt64, SyncLink), Failure> in
            guard !state.isStopped, let entry = state.entries[name], entry.stamp == stamp, entry.announce != nil,
                  let source = entry.source else { return .failure(Failure("\(what): the copy is gone")) }
            guard let link = state.links[source] else {
                return .failure(Failure("\(what): the peer that holds the data is not connected"))
            }
            if let size = target.size, size > configuration.maxTransferBytes {
                return .failure(Failure("\(what) is \(ByteCount.format(size)), over the \(ByteCount.format(configuration.maxTransferBytes)) cap per transfer (--sync-max-transfer)"))
            }
            if let size = target.size, state.inFlight + size > configuration.maxTotalBytes {
                return .failure(Failure("\(what) (\(ByteCount.format(size))) would take the transfers under way past the \(ByteCount.format(configuration.maxTotalBytes)) total cap (--sync-max-total)"))
            }
            let id = state.nextFetch
            state.nextFetch += 1
            return .success((id, link))
        }
        let id: UInt64
        let link: SyncLink
        switch opened {
        case let .failure(failure):
            logger.warning("sync: \(failure.message); the reader is refused")
            return nil
        case let .success(value):
            (id, link) = value
        }
        let stream = ByteStream(sizeHint: target.size, consumed: { [weak self] count in self?.consumed(id, count) },
                                cancelled: { [weak self] in self?.cancelRequest(id) })
        state.withLock { state in
            state.requests[id] = Request(link: link.id, sink: .local(stream), limit: configuration.maxTransferBytes,
                                         what: "\(what) from \(link.label)")
        }
        link.send(.fetch(id: id, selection: selection, stamp: stamp, target: target.target, window: configuration.window,
                         limit: configuration.maxTransferBytes))
        return stream
    }

    /// The reader took `count` bytes: once a quarter window is taken, the sender may send it again.
    private func consumed(_ id: UInt64, _ count: Int) {
        let grant = state.withLock { state -> (SyncLink, Int)? in
            guard var request = state.requests[id] else { return nil }
            request.pendingCredit += count
            request.lastProgress = Date()
            var grant: Int?
            if request.pendingCredit >= configuration.window / 4 {
                grant = request.pendingCredit
                request.pendingCredit = 0
            }
            state.requests[id] = request
            guard let grant, let link = state.links[request.link] else { return nil }
            return (link, grant)
        }
        if let (link, bytes) = grant { link.send(.credit(id: id, bytes: bytes)) }
    }

    /// The reader gave up: the peer stops sending.
    private func cancelRequest(_ id: UInt64) {
        let link = state.withLock { state -> SyncLink? in
            guard let request = state.requests.removeValue(forKey: id) else { return nil }
            state.inFlight -= request.received
            return state.links[request.link]
        }
        link?.send(.cancel(id: id))
    }

    /// Another node wants bytes of contents this node announced (or forwarded).
    private func serveFetch(id: UInt64, selection: String, stamp: SyncStamp, target: String, window: Int, limit: Int, for link: SyncLink) {
        let limit = min(max(0, limit), configuration.maxTransferBytes)
        let window = min(max(64 << 10, window), 64 << 20)
        let plan = state.withLock { state -> Plan in
            guard let name = Self.name(ofSelection: selection), link.sends(name) else {
                return .refuse("this side does not send \(selection) on this link")
            }
            guard let entry = state.entries[name], entry.stamp == stamp, let announce = entry.announce else {
                return .refuse("\(selection) changed since that announce")
            }
            guard announce.targets.contains(where: { $0.target == target }) else { return .refuse("\(target) was not announced") }
            let key = ServedKey(link: link.id, id: id)
            guard state.served[key] == nil else { return .refuse("transfer \(id) is already under way") }
            if let source = entry.source {
                guard source != link.id, let upstream = state.links[source] else {
                    return .refuse("the peer that holds the data is not connected")
                }
                let upstreamID = state.nextFetch
                state.nextFetch += 1
                state.requests[upstreamID] = Request(link: source, sink: .relay(link: link.id, id: id), limit: limit,
                                                     what: "\(selection) \(target) for \(link.label)")
                state.served[key] = .relay(link: source, id: upstreamID)
                return .relay(upstream, upstreamID)
            }
            let task = ServeTask(credit: window)
            state.served[key] = .local(task)
            return .local(task, entry, name)
        }
        switch plan {
        case let .refuse(message):
            link.send(.failed(id: id, message: message))
        case let .relay(upstream, upstreamID):
            upstream.send(.fetch(id: upstreamID, selection: selection, stamp: stamp, target: target, window: window, limit: limit))
        case let .local(task, entry, name):
            state.withLock { $0.servingLocal[name, default: 0] += 1 }
            workers.async { [self] in
                serveLocal(id: id, name: name, target: target, entry: entry, limit: limit, task: task, to: link)
                state.withLock { state in
                    state.served.removeValue(forKey: ServedKey(link: link.id, id: id))
                    state.servingLocal[name, default: 1] -= 1
                }
            }
        }
    }

    /// Streams one target of this display's contents to a link, within the credit it grants.
    private func serveLocal(id: UInt64, name: Pasteboard.Name, target: String, entry: Entry, limit: Int, task: ServeTask, to link: SyncLink) {
        let selection = X11PasteboardBackend.selectionName(for: name)
        // The bytes must be the announced contents': a newer copy (maybe a secret) is never sent
        // under an older stamp.
        let isCurrent = { [self] in state.withLock { $0.entries[name]?.stamp == entry.stamp && $0.generations[name] == entry.generation } }
        let sender = ChunkSender(id: id, link: link, task: task, limit: limit, what: "\(selection) \(target)", isCurrent: isCurrent)
        let send: (Data) throws -> Void = { try sender.send($0) }
        do {
            if let value = keptAfterKeeper(name, entry.owner, target: target, timeout: configuration.fetchTimeout * 0.6) {
                // Kept by the daemon (the owner is gone, or a history entry): from memory.
                let data = target == "XPB_MANIFEST" ? (X11PasteboardBackend.keptManifest(value.data)?.manifest ?? value.data) : value.data
                guard data.count <= limit else { throw Failure("\(selection) \(target) is \(ByteCount.format(data.count)), over the \(ByteCount.format(limit)) cap per transfer") }
                link.send(.begin(id: id, type: value.type, size: data.count))
                try send(data)
            } else if target == "XPB_MANIFEST" {
                // Without the fast-path field: it names a socket of this display's owner.
                guard let value = try backend.capture(name, target: target, limit: 1 << 20),
                      let manifest = X11PasteboardBackend.keptManifest(value.data) else { throw Failure("the owner refused \(target)") }
                link.send(.begin(id: id, type: value.type, size: manifest.manifest.count))
                try send(manifest.manifest)
            } else {
                guard entry.owner != ourWindow else { throw Failure("\(selection) \(target) is no longer kept") }
                // The cap is the sender's to enforce (with a message that names it); the stream holds
                // at most its high-water mark whatever the size.
                let converted = try backend.stream(name, target: target, limit: .max, begin: { type, size in
                    guard isCurrent() else { throw Failure("\(selection) changed during the transfer") }
                    link.send(.begin(id: id, type: type, size: size))
                }, chunk: { try send($0) })
                guard converted else { throw Failure("the owner refused \(target)") }
            }
            guard isCurrent() else { throw Failure("\(selection) changed during the transfer") }
            link.send(.end(id: id, total: sender.total))
            logger.debug("sync: sent \(selection) \(target) to \(link.label): \(ByteCount.format(sender.total))")
        } catch let failure as Failure {
            if !task.isCancelled { link.send(.failed(id: id, message: failure.message)) }
        } catch {
            if !task.isCancelled { link.send(.failed(id: id, message: "\(error)")) }
        }
    }

    /// Whether a peer's fetch is reading from this display's owner of `name` now (the keeper
    /// waits: an owner such as xclip serves one INCR transfer at a time).
    func isServing(_ name: Pasteboard.Name) -> Bool {
        state.withLock { $0.servingLocal[name, default: 0] > 0 }
    }

    // MARK: Status

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

/// Sends a served transfer's bytes in data frames of at most 256 KiB, each within the credit.
final class ChunkSender {
    static let frameBytes = 256 << 10
    let id: UInt64
    let link: SyncLink
    let task: ServeTask
    let limit: Int
    let what: String
    let isCurrent: () -> Bool
    private(set) var total = 0

    init(id: UInt64, link: SyncLink, task: ServeTask, limit: Int, what: String, isCurrent: @escaping () -> Bool) {
        self.id = id
        self.link = link
        self.task = task
        self.limit = limit
        self.what = what
        self.isCurrent = isCurrent
    }

    func send(_ data: Data) throws {
        var offset = 0
        while offset < data.count {
            guard isCurrent() else { throw SyncHub.Failure("the contents changed during the transfer") }
            let piece = min(Self.frameBytes, data.count - offset)
            guard total + piece <= limit else {
                throw SyncHub.Failure("\(what) is larger than the \(ByteCount.format(limit)) cap per transfer (--sync-max-transfer)")
            }
            try task.acquire(piece, timeout: 60)
            link.sendData(id: id, data.subdata(in: data.startIndex + offset ..< data.startIndex + offset + piece))
            offset += piece
            total += piece
        }
    }
}

/// One fetch served from this display: the credit the reading side granted, and whether it gave up.
final class ServeTask: Sendable {
    private let state: Mutex<(credit: Int, cancelled: Bool)>
    private let signal = DispatchSemaphore(value: 0)

    init(credit: Int) {
        state = Mutex((credit, false))
    }

    func grant(_ bytes: Int) {
        state.withLock { $0.credit += max(0, bytes) }
        signal.signal()
    }

    func cancel() {
        state.withLock { $0.cancelled = true }
        signal.signal()
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Takes `bytes` of credit, waiting for grants; throws when cancelled or after `timeout`
    /// seconds without enough.
    func acquire(_ bytes: Int, timeout: Double) throws {
        let end = DispatchTime.now() + timeout
        while true {
            let outcome = state.withLock { state -> Bool? in
                if state.cancelled { return false }
                guard state.credit >= bytes else { return nil }
                state.credit -= bytes
                return true
            }
            if outcome == false { throw SyncHub.Failure("the reading side gave the transfer up") }
            if outcome == true { return }
            if signal.wait(timeout: end) == .timedOut {
                throw SyncHub.Failure("the reading side took nothing for \(Int(timeout)) s")
            }
        }
    }
}
