import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardWire
import PasteboardX11
import Synchronization

/// `xpbd --headless`: the daemon of a host without a display (a server reached over ssh). Its
/// pasteboards live in memory (``HeadlessClipboard``); `xpb` on this host reads and writes them on
/// the control socket, and the sync hub shares CLIPBOARD (and PRIMARY with `--sync-primary`)
/// with the desktop daemons that link to it (`xpbd --peer THIS-HOST` there): a copy is announced,
/// its bytes move when someone pastes.
///
/// The copies made on this host go to the history (the state directory's, which every daemon of
/// the user shares), as the desktop daemon's do: `xpb history` lists them and selects one again.
/// Other nodes' copies are not kept here (their bytes would have to cross for it); their own
/// daemons keep them.
///
/// With no link and no client for `--idle-exit`, it exits: nothing lingers on a server for ever.
package final class HeadlessDaemon: Sendable {
    package let configuration: DaemonConfiguration
    let logger: Logger
    let clipboard = HeadlessClipboard()
    let hub: SyncHub
    let store: Mutex<HistoryStore>
    /// History writes, in order, off the clients' threads.
    private let storage = DispatchQueue(label: "xpbd.storage")
    /// `--on-copy`.
    let actions: CopyActions
    let socketPath: String
    let startedAt = Date()
    private let control = Mutex<ControlServer?>(nil)
    /// When the daemon last had a link, a client or a request.
    private let lastBusy = Mutex(Date())
    private let stopped = Mutex(false)
    private let stopSignal = DispatchSemaphore(value: 0)

    /// The name this node gives itself: the host's, and that it has no display.
    static let displayName = "headless"

    /// Opens the history (in memory when the state directory cannot be used, as the desktop
    /// daemon's). Nothing is served yet: see ``start()``.
    package init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        socketPath = configuration.socketPath ?? ControlEndpoint.headlessSocketPath(environment: ProcessInfo.processInfo.environment, uid: getuid())
        store = Mutex(try ClipboardDaemon.openHistory(configuration, logger: logger))
        actions = CopyActions(configuration.onCopy, logger: logger)
        hub = SyncHub(configuration: configuration.sync, surface: clipboard, displayName: Self.displayName, logger: logger)
        clipboard.onChange { [weak hub] name, owner, event in hub?.ownerChanged(name, owner: owner, event: event) }
        clipboard.onExpiry { [weak self] in
            guard let self else { return }
            storage.async {
                _ = try? self.store.withLock { try $0.prune() }
                self.logger.info("a copy expired: dropped from the pasteboard and the history")
            }
        }
    }

    /// Starts answering on the control socket, dials the configured peers, and starts the idle clock.
    ///
    /// - Throws: when another headless daemon of this user answers on the socket, or the socket
    ///   cannot be made.
    package func start() throws {
        if let fd = try? LocalSocket.connect(socketPath) {
            close(fd)
            throw ControlFailure("another headless xpbd of this user listens on \(socketPath)")
        }
        let server = try ControlServer(path: socketPath, logger: logger, handler: { [weak self] request, channel in
            guard let self else { return .failure(ControlFailure("the daemon is stopping")) }
            self.touch()
            defer { self.touch() }
            return self.answer(request, on: &channel)
        }, syncHandler: { [weak self] fd, hello in
            guard let self else {
                close(fd)
                return
            }
            self.touch()
            self.hub.accept(fd: fd, hello: hello)
        })
        control.withLock { $0 = server }
        logger.info("headless: holding the pasteboards in memory, history in \(configuration.stateDirectory.path); listening on \(socketPath)")
        hub.start()
        startIdleClock()
    }

    /// Blocks until the daemon stops; returns nil (a clean stop: nothing here fails the daemon
    /// once it runs), as ``ClipboardDaemon/run()`` returns its failure.
    package func run() -> String? {
        stopSignal.wait()
        stopServing(hub: hub, control: control, storage: storage, store: store)
        logger.info("stopped; history written")
        return nil
    }

    package func stop() {
        finish(reason: "asked to stop")
    }

    private func finish(reason: String) {
        let first = stopped.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        idleWake.signal()
        logger.notice("\(reason)")
        stopSignal.signal()
    }

    // MARK: Idle exit

    private func touch() {
        lastBusy.withLock { $0 = Date() }
    }

    /// Looks at links and clients eight times per `--idle-exit` period (at most every 50 ms, at
    /// least every minute): after a whole period with neither, and no request, the daemon stops.
    private func startIdleClock() {
        guard let idle = configuration.idleExit else { return }
        let period = min(max(idle / 8, 0.05), 60)
        let wake = idleWake
        do {
            try DetachedThread.start(name: "xpbd.idle") { [weak self] in
                while true {
                    _ = wake.wait(timeout: .now() + period)
                    guard let self, !stopped.withLock({ $0 }) else { return }
                    let busy = hub.peerStatuses().contains { $0.state == "connected" } || (control.withLock { $0?.clientCount } ?? 0) > 0
                    if busy {
                        touch()
                    } else if Date().timeIntervalSince(lastBusy.withLock { $0 }) >= idle {
                        return finish(reason: "no link and no client for \(Self.duration(idle)): exiting (--idle-exit)")
                    }
                }
            }
        } catch {
            logger.error("cannot start the idle clock's thread (--idle-exit will not apply): \(error)")
        }
    }

    /// Wakes the idle clock when the daemon stops.
    private let idleWake = DispatchSemaphore(value: 0)

    /// `1 h`, `90 s`, `0.5 s`.
    static func duration(_ seconds: Double) -> String {
        if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600)) h" }
        if seconds >= 60, seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60)) min" }
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    // MARK: Requests

    func answer(_ request: ControlRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        switch request {
        case .status:
            return .success(.reply(.status(status())))
        case let .offer(selection):
            guard HeadlessClipboard.isValid(selection) else { return .failure(Self.unknown(selection)) }
            let (entry, count) = clipboard.entry(selection)
            return .success(.reply(.offer(entry.map {
                PasteboardOffer(pasteboard: selection, targets: $0.targets, changeCount: count, origin: $0.origin,
                                ownerPID: $0.writer?.pid, ownerApp: $0.writer?.app, ownerExecutable: $0.writer?.executable,
                                copiedBy: $0.writer?.credit?.name, copiedByPID: $0.writer?.credit?.pid)
            })))
        case let .read(selection, target, limit):
            guard HeadlessClipboard.isValid(selection) else { return .failure(Self.unknown(selection)) }
            return read(selection, target: target, limit: limit, on: &channel)
        case let .write(write):
            guard HeadlessClipboard.isValid(write.pasteboard) else { return .failure(Self.unknown(write.pasteboard)) }
            return self.write(write, from: &channel)
        case let .clearPasteboard(selection):
            guard HeadlessClipboard.isValid(selection) else { return .failure(Self.unknown(selection)) }
            clipboard.clearForClient(selection)
            return .success(.reply(.done("\(selection) cleared")))
        case let .watch(selection):
            if let selection, !HeadlessClipboard.isValid(selection) { return .failure(Self.unknown(selection)) }
            return watch(selection, on: &channel)
        case .history, .historyPage, .select, .delete, .clear, .clearAll, .pin:
            do {
                let answer = try HistoryRequests.answer(request, store: store) { snapshot in
                    // Served from memory as the desktop serves it on X; a copy made here again.
                    let kept = KeptSelection(advertised: snapshot.advertised, targets: snapshot.targets.map(\.captured))
                    clipboard.write(X11PasteboardBackend.selectionName(for: snapshot.selection), contents: kept, size: snapshot.size,
                                    origin: "history (\(snapshot.app ?? snapshot.source ?? "?"))", expires: snapshot.expires, isLocalOnly: snapshot.isLocalOnly, writer: nil)
                }
                return answer.map { $0.map { .reply($0) } } ?? .failure(ControlFailure("not a history request"))
            } catch {
                return .failure(ControlFailure("\(error)"))
            }
        }
    }

    static func unknown(_ selection: String) -> ControlFailure {
        ControlFailure("'\(selection)' is not a pasteboard (CLIPBOARD, PRIMARY, SECONDARY or XPB_PASTEBOARD:<name>)")
    }

    /// The bytes of the client's copy, data frame by data frame, exactly the sizes announced;
    /// then held. Nothing is held of a write that breaks off or claims more than the cap.
    private func write(_ write: PasteboardWrite, from channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        // Who writes: the kernel's account of the connecting process, read before it can exit.
        var writer = Self.writer(of: channel.fd)
        let cap = configuration.maxSnapshotBytes
        guard !write.items.isEmpty, write.items.allSatisfy({ !$0.isEmpty }), write.items.joined().allSatisfy({ $0.size >= 0 }) else {
            return .failure(ControlFailure("a write needs at least one representation per item, with sizes of 0 or more"))
        }
        guard write.size <= cap else {
            return .failure(ControlFailure("the copy is \(ByteCount.format(write.size)), more than the \(ByteCount.format(cap)) a headless xpbd holds (--max-target-size)"))
        }
        if let refusal = clipboard.refusal(of: write.pasteboard, size: write.size, budget: configuration.maxBytes) {
            return .failure(ControlFailure(refusal + "; nothing was changed"))
        }
        var items: [PasteboardItem] = []
        do {
            for representations in write.items {
                var item = PasteboardItem()
                for representation in representations {
                    let type = try PasteboardType(representation.type)
                    // The size is a claim: memory grows with the bytes that come, never ahead of them.
                    var data = Data(capacity: min(representation.size, HeadlessProtocol.chunkSize))
                    while data.count < representation.size {
                        guard let frame = try channel.receive(within: ControlServer.frameDeadline) else {
                            return .failure(ControlFailure("the client went away during its write: nothing was changed"))
                        }
                        guard frame.kind == .data, data.count + frame.payload.count <= representation.size else {
                            return .failure(ControlFailure("the write's data did not match its announced sizes: nothing was changed"))
                        }
                        data.append(frame.payload)
                    }
                    item.setData(data, for: type)
                }
                items.append(item)
            }
        } catch {
            return .failure(ControlFailure("the write failed: \(error); nothing was changed"))
        }
        let options = PasteboardOptions(localOnly: write.isLocalOnly, expirationDate: write.expires)
        let held = HeldSelection(items: items, options: options)
        // The program that ran xpb, as xpb found it (a claim of the user's own process, as the
        // desktop's owners publish it): the history and `xpb info` name it, not xpb.
        // One printable line of a bounded length, a pid only if it could be one.
        if let maker = write.copiedBy.map({ LogThrottle.printable(String($0.prefix(256))) }), !maker.isEmpty {
            writer?.credit = (maker, write.copiedByPID.flatMap { $0 > 0 ? $0 : nil })
        }
        // Another process chose it: one printable line, as a peer's name is.
        let origin = LogThrottle.printable(write.origin)
        let owner = clipboard.write(write.pasteboard, contents: held, size: write.size, origin: origin.isEmpty ? "xpb" : origin, expires: write.expires,
                                    isLocalOnly: write.isLocalOnly, writer: writer)
        logger.debug("headless: \(write.pasteboard) holds \(items.count) items (\(ByteCount.format(write.size)))")
        record(held, in: write.pasteboard, owner: owner, writer: writer)
        return .success(.reply(.done("\(write.pasteboard) holds \(ByteCount.format(write.size))")))
    }

    /// The process at the other end of a client's connection, nil when the kernel does not say.
    static func writer(of fd: Int32) -> HeadlessClipboard.Writer? {
        var pid: pid_t = 0
        guard clinux_peer_pid(fd, &pid) == 0, pid > 0 else { return nil }
        let (name, path) = LocalProcess.executable(of: Int(pid))
        return HeadlessClipboard.Writer(pid: Int(pid), app: name.map { LogThrottle.printable($0) }, executable: path.map { LogThrottle.printable($0) })
    }

    /// Keeps a copy made on this host in the history, as the desktop daemon keeps a copy it
    /// takes from its owner (the same targets: those a manager fetches of what an X owner of
    /// the items offers), on the storage queue: the client has its answer already. Never a
    /// secret; a copy the content rules refuse is not kept, and if its text matches
    /// `--ignore-match` its announce is withdrawn.
    private func record(_ held: HeldSelection, in selection: String, owner: UInt, writer: HeadlessClipboard.Writer?) {
        guard !KeepPolicy.isSecret(held.targets), let name = X11PasteboardBackend.pasteboardName(forSelection: selection) else { return }
        storage.async { [self] in
            // Every item's targets, as the desktop's keeper fetches them of an xpb owner.
            let wanted = KeepPolicy.fetchedTargets(KeepPolicy.keptTargets(held.targets, manifest: held.manifest), manifest: held.manifest)
            let captured = wanted.map { target -> CapturedTarget? in
                guard let (type, data) = try? held.bytes(for: target) else { return nil }
                return CapturedTarget(target: target, type: type, data: data)
            }
            guard var snapshot = Snapshot(name, advertised: held.targets, captured: captured, cap: configuration.maxSnapshotBytes) else { return }
            snapshot.source = "xpb"
            snapshot.pid = writer?.credit.map { $0.pid } ?? writer?.pid
            snapshot.app = writer?.credit?.name ?? writer?.app
            if let refusal = configuration.contentRules.refusal(snapshot) {
                logger.info("\(selection) from \(snapshot.app ?? "xpb") not kept: \(refusal.reason)")
                if !refusal.synced { hub.withdrawOwn(name, owner: owner) }
                return
            }
            actions.copied(snapshot)
            // Written after its expiry (a storage queue far behind), it would stay until the next.
            guard !snapshot.isExpired() else {
                logger.info("\(selection) from \(snapshot.app ?? "xpb") expired before it was written: not kept")
                return
            }
            do {
                _ = try store.withLock { try $0.add(snapshot, display: Self.displayName) }
                logger.info("\(selection) from \(snapshot.app ?? "xpb") kept in the history (\(ByteCount.format(snapshot.size)))")
            } catch {
                logger.error("history entry not written: \(error); the copy is still held in memory")
            }
        }
    }

    /// Streams a target's bytes: from memory for a copy made here, else fetched from the node
    /// that holds it as the client takes them (the peer is granted credit as they go).
    private func read(_ selection: String, target: String, limit: Int, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        let (entry, _) = clipboard.entry(selection)
        guard let entry else { return .failure(ControlFailure("\(selection) is empty")) }
        let limit = max(0, limit)
        let tooLarge = { (size: Int) in ControlFailure("the data is \(size) bytes, more than the \(limit)-byte limit") }
        do {
            switch entry.contents {
            case let .local(held):
                guard let (type, data) = try held.bytes(for: target) else { return .success(.reply(.refused("\(target) is not served"))) }
                guard data.count <= limit else { return .failure(tooLarge(data.count)) }
                try channel.send(.reply, ControlReply.transfer(type: type, size: data.count))
                var offset = 0
                while offset < data.count {
                    let end = min(data.count, offset + HeadlessProtocol.chunkSize)
                    try channel.send(Frame(kind: .data, payload: data.subdata(in: data.startIndex + offset ..< data.startIndex + end)))
                    offset = end
                }
                try channel.send(.reply, ControlReply.end(total: data.count))
            case let .remote(targets):
                guard let remote = targets.first(where: { $0.target == target }) else { return .success(.reply(.refused("\(target) is not served"))) }
                guard let stream = remote.open() else { return .success(.reply(.refused("the peer that holds \(selection) cannot be reached"))) }
                defer { stream.cancel() }
                var total = 0
                var begun = false
                while true {
                    let snapshot = stream.snapshot()
                    if let failure = snapshot.failure { return .failure(ControlFailure(failure)) }
                    if !begun, let header = snapshot.header {
                        if let size = header.size, size > limit { return .failure(tooLarge(size)) }
                        try channel.send(.reply, ControlReply.transfer(type: header.type, size: header.size))
                        begun = true
                    }
                    if begun, let chunk = stream.take(upTo: HeadlessProtocol.chunkSize) {
                        total += chunk.count
                        guard total <= limit else { return .failure(tooLarge(total)) }
                        try channel.send(Frame(kind: .data, payload: chunk))
                        continue
                    }
                    if snapshot.isEnded, snapshot.buffered == 0 {
                        if !begun { try channel.send(.reply, ControlReply.transfer(type: target, size: 0)) }
                        try channel.send(.reply, ControlReply.end(total: total))
                        break
                    }
                    // Nothing to pass on: wait for the peer (its silence is bounded by the hub's
                    // fetch timeout, which fails the stream).
                    let moved = DispatchSemaphore(value: 0)
                    stream.observe(after: snapshot.version) { moved.signal() }
                    _ = moved.wait(timeout: .now() + 1)
                }
            }
        } catch {
            logger.debug("headless: a read of \(selection) \(target) ended: \(error)")
            return .success(.answered)
        }
        return .success(.answered)
    }

    /// Sends each change as it comes until the client closes the connection.
    private func watch(_ selection: String?, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        guard let watcher = Watcher(selection: selection) else { return .failure(ControlFailure("cannot watch: no pipe")) }
        let id = clipboard.watch(watcher)
        defer { clipboard.unwatch(id) }
        do {
            try channel.send(.reply, ControlReply.done("watching"))
            var descriptors = [pollfd(fd: channel.fd, events: Int16(POLLIN), revents: 0),
                               pollfd(fd: watcher.wakeRead, events: Int16(POLLIN), revents: 0)]
            while true {
                let ready = poll(&descriptors, 2, -1)
                if ready < 0, errno == EINTR { continue }
                guard ready > 0 else { break }
                // The client says nothing after its request: anything readable is its end.
                if descriptors[0].revents != 0 { break }
                for change in watcher.take() { try channel.send(.reply, ControlReply.changed(change)) }
            }
        } catch {
            logger.debug("headless: a watcher left: \(error)")
        }
        return .success(.answered)
    }

    func status() -> DaemonStatus {
        let counts = clipboard.changeCounts()
        let peers = hub.peerStatuses()
        let (totals, database, maxEntries, maxBytes) = store.withLock { ($0.totals(), $0.databasePath, $0.maxEntries, $0.maxBytes) }
        return DaemonStatus(
            pid: Int(getpid()), version: ClipboardDaemon.version, display: Self.displayName,
            keeps: ["CLIPBOARD", "PRIMARY", "SECONDARY", "XPB_PASTEBOARD:*"], entryCount: totals.count, bytes: totals.bytes,
            maxEntries: maxEntries, maxBytes: maxBytes, stateDirectory: configuration.stateDirectory.path, database: database,
            socket: socketPath, startedAt: startedAt, changeCounts: counts,
            peers: peers, syncValues: peers.isEmpty ? nil : hub.valueStatuses())
    }
}
