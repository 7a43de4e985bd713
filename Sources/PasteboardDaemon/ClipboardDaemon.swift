import Dispatch
import Foundation
import Logging
import PasteboardKit
import PasteboardWire
import PasteboardX11
import Synchronization

/// The clipboard manager: holds `CLIPBOARD_MANAGER`, answers `SAVE_TARGETS`, keeps each kept
/// selection's contents (fetched once per owner change, after a short debounce, one target at a
/// time), serves them when their owner goes away, writes them to the history, publishes the
/// display's change counts, and answers `xpb` on its control socket.
///
/// Threads: the backend's X thread does the X work; ownership changes are handled on `events`
/// (quick), fetches run on `captures` (one at a time: a source app is asked for one target at a
/// time, never flooded), save requests on `saves`, disk writes on `storage`.
public final class ClipboardDaemon: Sendable {
    struct State {
        /// The newest contents kept per selection, and the owner they came from.
        var current: [Pasteboard.Name: Snapshot] = [:]
        /// The owner per selection as XFixes last reported it.
        var owners: [Pasteboard.Name: X11Window] = [:]
        /// Moves on every ownership change: a fetch for an older generation stops.
        var generations: [Pasteboard.Name: Int] = [:]
        /// The display's change counts (CLIPBOARD, PRIMARY), every change counted.
        var counts = [0, 0]
        var isStopped = false
        /// The keeper's fetch under way per selection: its owner and the targets fetched so far
        /// (a save request for the same owner takes them instead of asking the owner again).
        var inProgress: [Pasteboard.Name: (owner: X11Window, targets: [CapturedTarget])] = [:]
        /// The owner a target is being read from right now, per selection.
        var capturing: [Pasteboard.Name: X11Window] = [:]

        /// The kept contents of a selection if they are `owner`'s (taken from it, or served by us
        /// in its place).
        func kept(_ name: Pasteboard.Name, from owner: X11Window) -> Snapshot? {
            guard !owner.isNone, let snapshot = current[name], snapshot.owner == owner || snapshot.capturedFrom == owner else { return nil }
            return snapshot
        }
    }

    public let configuration: DaemonConfiguration
    let logger: Logger
    let backend: X11PasteboardBackend
    let store: Mutex<HistoryStore>
    let state = Mutex(State())
    let ourWindow: X11Window
    let displayName: String
    let socketPath: String
    let startedAt = Date()
    private let events = DispatchQueue(label: "xpbd.events")
    private let captures = DispatchQueue(label: "xpbd.captures")
    private let saves = DispatchQueue(label: "xpbd.saves")
    private let storage = DispatchQueue(label: "xpbd.storage")
    private let control = Mutex<ControlServer?>(nil)
    /// Sync with other displays and machines (links dialed by us or by them).
    let hub: SyncHub
    /// Signalled once when the daemon must stop, with the reason (nil: asked to).
    private let stopped = Mutex<(done: Bool, failure: String?)>((false, nil))
    private let stopSignal = DispatchSemaphore(value: 0)

    /// Connects to the display and opens the history. Nothing is owned yet: see ``start()``.
    public init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        var x11 = X11Configuration()
        x11.readTimeout = configuration.targetTimeout
        x11.transferDeadline = configuration.targetDeadline
        x11.maxReadSize = configuration.maxTargetBytes
        // Our own readers never meet our own owner through the fast path; kept contents are served
        // through the X server like any owner's.
        x11.fastPath = false
        backend = try X11PasteboardBackend(display: configuration.display, configuration: x11)
        displayName = backend.displayName
        ourWindow = backend.window
        store = Mutex(try HistoryStore(directory: configuration.stateDirectory, maxEntries: configuration.maxEntries,
                                       maxBytes: configuration.maxBytes, logger: logger))
        socketPath = configuration.socketPath ?? ControlEndpoint.socketPath(
            display: displayName, environment: ProcessInfo.processInfo.environment, uid: getuid())
        hub = SyncHub(configuration: configuration.sync, backend: backend, ourWindow: ourWindow, displayName: displayName, logger: logger)
        hub.setHooks(SyncHooks(kept: { [weak self] name, owner in
            self?.state.withLock { $0.kept(name, from: owner) }
        }, keptTarget: { [weak self] name, owner, target in
            self?.state.withLock { state -> CapturedTarget? in
                if let snapshot = state.kept(name, from: owner) { return snapshot.targets.first { $0.target == target }?.captured }
                guard !owner.isNone, let partial = state.inProgress[name], partial.owner == owner else { return nil }
                return partial.targets.first { $0.target == target }
            }
        }, isKeeping: { [weak self] name, owner in
            self?.state.withLock { $0.capturing[name] == owner } ?? false
        }))
    }

    /// Becomes the display's clipboard manager, restores the last contents where nobody owns a
    /// kept selection, and starts answering on the control socket.
    ///
    /// - Throws: ``PasteboardX11/ClipboardManagerError`` when another manager runs (without
    ///   `replace`), or the socket cannot be made.
    public func start() throws {
        backend.onOwnerChange { [weak self] change in self?.ownerChanged(change) }
        for name in configuration.keptNames { try backend.watch(name) }
        try backend.becomeClipboardManager(replace: configuration.replace, onSave: { [weak self] targets, time in
            guard let self else { return }
            self.saves.async { self.save(listed: targets, time: time) }
        }, onLost: { [weak self] in
            self?.finish(failure: nil, reason: "another clipboard manager took CLIPBOARD_MANAGER: stopping")
        })
        backend.publishChangeCounts([0, 0])
        logger.info("clipboard manager of display \(displayName) (window \(ourWindow)), keeping \(configuration.keptSelections.map { X11PasteboardBackend.selectionName(for: $0) }.joined(separator: ", ")); history in \(configuration.stateDirectory.path)")
        for name in configuration.keptSelections {
            let owner = try? backend.owner(of: name)
            if let owner {
                state.withLock { $0.owners[name] = owner.window }
                schedule(name)
            } else if configuration.restoresAtStart {
                captures.async { self.restoreLast(name) }
            }
        }
        let server = try ControlServer(path: socketPath, logger: logger, handler: { [weak self] request in
            guard let self else { return .failure(ControlFailure("the daemon is stopping")) }
            return self.answer(request)
        }, syncHandler: { [weak self] fd, hello in
            guard let self else {
                close(fd)
                return
            }
            self.hub.accept(fd: fd, hello: hello)
        })
        control.withLock { $0 = server }
        logger.info("listening on \(socketPath)")
        hub.start()
        // A lost X connection ends the daemon (systemd restarts it, Restart=on-failure).
        backend.onConnectionStop { [weak self] reason in
            self?.finish(failure: "lost the connection to the X server (\(reason))", reason: "lost the connection to the X server (\(reason))")
        }
        if !backend.isConnected { finish(failure: "lost the connection to the X server", reason: "lost the connection to the X server") }
    }

    /// Blocks until the daemon stops (``stop()``, a replacing manager, or a lost X server), then
    /// writes its state and closes. Returns the failure, nil for a clean stop.
    public func run() -> String? {
        stopSignal.wait()
        shutDown()
        return stopped.withLock { $0.failure }
    }

    /// Asks the daemon to stop (SIGTERM, SIGINT).
    public func stop() {
        finish(failure: nil, reason: "asked to stop")
    }

    private func finish(failure: String?, reason: String) {
        let first = stopped.withLock { value -> Bool in
            guard !value.done else { return false }
            value = (true, failure)
            return true
        }
        guard first else { return }
        if failure != nil { logger.error("\(reason)") } else { logger.notice("\(reason)") }
        stopSignal.signal()
    }

    /// Stops answering, finishes the writes under way, checkpoints the history, closes the display.
    private func shutDown() {
        state.withLock { $0.isStopped = true }
        hub.stop()
        control.withLock { server in
            server?.stop()
            server = nil
        }
        storage.sync {}
        store.withLock { $0.checkpoint() }
        backend.close(handOff: false)
        logger.info("stopped; history written")
    }

    // MARK: Ownership changes

    private func ownerChanged(_ change: SelectionOwnerChange) {
        events.async { [self] in
            let counts = state.withLock { state -> [Int]? in
                switch change.name {
                case .general: state.counts[0] += 1
                case .find: state.counts[1] += 1
                default: return nil
                }
                return state.counts
            }
            if let counts { backend.publishChangeCounts(counts) }
            guard configuration.keptSelections.contains(change.name) else { return }
            let selection = X11PasteboardBackend.selectionName(for: change.name)
            if change.isOurs || change.owner == ourWindow {
                state.withLock { $0.owners[change.name] = ourWindow }
                return
            }
            if !change.owner.isNone {
                state.withLock { $0.owners[change.name] = change.owner }
                schedule(change.name)
                return
            }
            // Nobody owns it now.
            let (previous, kept) = state.withLock { state -> (X11Window?, Snapshot?) in
                state.generations[change.name, default: 0] += 1
                let previous = state.owners.removeValue(forKey: change.name)
                if change.reason == .setOwner {
                    // Cleared on purpose (xsel --clear, a password manager): never brought back.
                    state.current.removeValue(forKey: change.name)
                    return (previous, nil)
                }
                return (previous, state.current[change.name])
            }
            if change.reason == .setOwner {
                logger.info("\(selection) was cleared by its owner: not brought back")
                return
            }
            guard let kept, kept.owner == previous, !kept.targets.isEmpty, !kept.isExpired() else {
                logger.info("the owner of \(selection) went away; nothing of it was kept")
                return
            }
            captures.async { [self] in
                do {
                    guard try serve(kept, ifUnowned: true) else {
                        logger.info("the owner of \(selection) went away; a newer copy took \(selection) meanwhile: its kept contents stay in the history")
                        return
                    }
                    logger.info("the owner of \(selection) went away; serving its \(kept.targets.count) kept targets (\(ByteCount.format(kept.size)))")
                } catch {
                    logger.warning("the owner of \(selection) went away; could not serve its kept contents: \(error)")
                }
            }
        }
    }

    /// Fetches a selection's contents after the debounce, unless its owner changes meanwhile.
    private func schedule(_ name: Pasteboard.Name) {
        let generation = state.withLock { state -> Int in
            state.generations[name, default: 0] += 1
            return state.generations[name]!
        }
        captures.asyncAfter(deadline: .now() + configuration.debounce) { [self] in
            guard isCurrent(name, generation) else { return }
            capture(name, generation: generation)
        }
    }

    private func isCurrent(_ name: Pasteboard.Name, _ generation: Int) -> Bool {
        state.withLock { !$0.isStopped && $0.generations[name] == generation }
    }

    /// Fetches what the owner of `name` offers (on `captures`) and keeps it, unless it is secret.
    private func capture(_ name: Pasteboard.Name, generation: Int) {
        let selection = X11PasteboardBackend.selectionName(for: name)
        if name == .find, !backend.waitForPointerRelease(while: { self.isCurrent(name, generation) }) { return }
        guard let owner = try? backend.owner(of: name), owner.window != ourWindow,
              state.withLock({ $0.owners[name] }) == owner.window else { return }
        // From here a save request of this owner waits for this fetch instead of starting its own.
        state.withLock { $0.inProgress[name] = (owner.window, []) }
        defer { state.withLock { _ = $0.inProgress.removeValue(forKey: name) } }
        let started = Date()
        let advertised: [String]
        do {
            advertised = try backend.targets(of: name)
        } catch {
            logger.debug("\(selection): could not read TARGETS: \(error)")
            return
        }
        if KeepPolicy.isSecret(advertised) {
            state.withLock { _ = $0.current.removeValue(forKey: name) }
            logger.info("\(selection) holds data marked secret (\(describe(owner))): not fetched, not kept")
            return
        }
        let fetched = fetch(name, advertised: advertised, owner: owner, isCurrent: { self.isCurrent(name, generation) },
                            progress: { target in
                                self.state.withLock { state in
                                    if state.inProgress[name]?.owner == owner.window { state.inProgress[name]?.targets.append(target) }
                                }
                            })
        guard let snapshot = fetched else { return }
        guard isCurrent(name, generation) else { return }
        if snapshot.isExpired() { return }
        state.withLock { $0.current[name] = snapshot }
        let elapsed = Int(Date().timeIntervalSince(started) * 1000)
        logger.info("kept \(selection) from \(describe(owner)): \(snapshot.targets.count) targets, \(ByteCount.format(snapshot.size)) in \(elapsed) ms\(snapshot.isComplete ? "" : " (some targets left out: caps, timeouts or refusals)")")
        record(snapshot)
    }

    /// Fetches the kept targets of `advertised`, one at a time, within the caps (and the
    /// `TARGET_SIZES` the owner announces); identical bytes are kept once. Nil when nothing
    /// could be fetched or the owner changed.
    ///
    /// With `deadline` (a save request, whose app waits), targets not fetched by then are left out.
    private func fetch(_ name: Pasteboard.Name, advertised: [String], owner: SelectionOwnerInfo, isCurrent: () -> Bool,
                       useMultiple: Bool = false, deadline: Date? = nil, progress: ((CapturedTarget) -> Void)? = nil) -> Snapshot? {
        let wanted = KeepPolicy.keptTargets(advertised)
        let sizes = advertised.contains("TARGET_SIZES") ? (try? backend.targetSizes(of: name)) ?? [:] : [:]
        var complete = true
        var planned: [String] = []
        var announced = 0
        for target in wanted {
            if let size = sizes[target], size > configuration.maxTargetBytes || announced + size > configuration.maxSnapshotBytes {
                complete = false
                continue
            }
            announced += sizes[target] ?? 0
            planned.append(target)
        }
        var captured: [CapturedTarget?] = []
        if useMultiple, advertised.contains("MULTIPLE"),
           let values = try? backend.captureMultiple(name, targets: planned, limit: configuration.maxTargetBytes,
                                                     deadline: deadline.map { max(0.1, $0.timeIntervalSinceNow / 2) }) {
            captured = values
            // Replies that did not finish in half the budget (all of them streaming at once from
            // an owner of huge data): one at a time, in the owner's order, with what is left.
            for (index, value) in values.enumerated() where value == nil {
                guard let deadline, Date() < deadline else { break }
                captured[index] = try? backend.capture(name, target: planned[index], limit: configuration.maxTargetBytes)
            }
            logger.debug("\(X11PasteboardBackend.selectionName(for: name)): fetched \(planned.count) targets with one MULTIPLE request")
        } else {
            for target in planned {
                guard isCurrent() else { return nil }
                // A peer's fetch reading from this owner goes first (one INCR at a time, for many owners).
                let waitEnd = Date().addingTimeInterval(configuration.targetDeadline)
                while deadline == nil, hub.isServing(name), isCurrent(), Date() < waitEnd { usleep(5_000) }
                if let deadline, Date() >= deadline {
                    captured.append(nil)
                    continue
                }
                do {
                    state.withLock { $0.capturing[name] = owner.window }
                    defer { state.withLock { _ = $0.capturing.removeValue(forKey: name) } }
                    let value = try backend.capture(name, target: target, limit: configuration.maxTargetBytes)
                    if let value { progress?(value) }
                    captured.append(value)
                } catch {
                    logger.debug("\(X11PasteboardBackend.selectionName(for: name)): \(target) not kept: \(error)")
                    captured.append(nil)
                }
            }
        }
        return makeSnapshot(name, advertised: advertised, owner: owner, captured: captured, complete: complete)
    }

    /// A snapshot of fetched targets (nil entries: not fetched): identical bytes shared, the
    /// per-clipboard cap applied, the xpb manifest's options read and its fast-path field dropped.
    private func makeSnapshot(_ name: Pasteboard.Name, advertised: [String], owner: SelectionOwnerInfo, captured: [CapturedTarget?],
                              complete: Bool) -> Snapshot? {
        var complete = complete
        var kept: [KeptTarget] = []
        var total = 0
        var seen: [Digest: Data] = [:]
        for value in captured {
            guard let value else {
                complete = false
                continue
            }
            var target = KeptTarget(target: value.target, type: value.type, data: value.data)
            if let data = seen[target.digest] {
                target.data = data
            } else {
                guard total + value.data.count <= configuration.maxSnapshotBytes else {
                    complete = false
                    continue
                }
                total += value.data.count
                seen[target.digest] = value.data
            }
            kept.append(target)
        }
        guard !kept.isEmpty else { return nil }
        var snapshot = Snapshot(selection: name, advertised: advertised, targets: kept, source: owner.name, pid: owner.processID)
        snapshot.isComplete = complete
        snapshot.owner = owner.window
        snapshot.capturedFrom = owner.window
        if let index = kept.firstIndex(where: { $0.target == "XPB_MANIFEST" }) {
            if let manifest = X11PasteboardBackend.keptManifest(kept[index].data) {
                snapshot.expires = manifest.options.expirationDate
                snapshot.isLocalOnly = manifest.options.isLocalOnly
                snapshot.targets[index] = KeptTarget(target: "XPB_MANIFEST", type: kept[index].type, data: manifest.manifest)
            } else {
                snapshot.targets.remove(at: index)
            }
        }
        return snapshot
    }

    /// Serves kept contents on their selection (from this process, through the X server).
    /// `ifUnowned`: only if nobody owns the selection at that moment on the X thread
    /// (compare-and-own: a copy that came since, from this display or through sync, is never
    /// replaced by older kept contents). Returns whether it serves them.
    @discardableResult
    private func serve(_ snapshot: Snapshot, timestamp: UInt? = nil, ifUnowned: Bool = false) throws -> Bool {
        let unowned: @Sendable (X11Window) -> Bool = { owner in owner.isNone }
        let precondition = ifUnowned ? unowned : nil
        guard try backend.keep(snapshot.selection, advertised: snapshot.advertised, targets: snapshot.targets.map(\.captured),
                               timestamp: timestamp, if: precondition) else { return false }
        var served = snapshot
        served.owner = ourWindow
        state.withLock {
            $0.current[snapshot.selection] = served
            $0.owners[snapshot.selection] = ourWindow
        }
        scheduleExpiry(served)
        return true
    }

    /// Writes a snapshot to the history (on `storage`); a failed write is logged and the
    /// daemon goes on serving from memory.
    private func record(_ snapshot: Snapshot) {
        scheduleExpiry(snapshot)
        storage.async { [self] in
            do {
                let id = try store.withLock { try $0.add(snapshot, display: displayName) }
                state.withLock { state -> Void in
                    if state.current[snapshot.selection]?.time == snapshot.time { state.current[snapshot.selection]?.id = id }
                }
            } catch let error as POSIXFailure where error.isDiskFull {
                logger.error("the disk is full: history entry not written (\(error)); still serving the clipboard from memory")
            } catch let error as SQLiteError where error.isFull {
                logger.error("the disk is full: history entry not written (\(error)); still serving the clipboard from memory")
            } catch {
                logger.error("history entry not written: \(error)")
            }
        }
    }

    /// At a snapshot's expiration date: stop serving it, and forget it everywhere.
    private func scheduleExpiry(_ snapshot: Snapshot) {
        guard let expires = snapshot.expires else { return }
        let delay = min(max(0, expires.timeIntervalSinceNow), 1e9)
        events.asyncAfter(deadline: .now() + delay) { [self] in
            let (isCurrent, weServe) = state.withLock { state -> (Bool, Bool) in
                guard state.current[snapshot.selection]?.time == snapshot.time else { return (false, false) }
                state.current.removeValue(forKey: snapshot.selection)
                return (true, state.owners[snapshot.selection] == ourWindow)
            }
            if weServe { try? backend.clear(snapshot.selection) }
            if isCurrent { logger.info("\(X11PasteboardBackend.selectionName(for: snapshot.selection)) contents expired: dropped") }
            storage.async { [self] in _ = try? store.withLock { try $0.prune() } }
        }
    }

    /// Serves the newest history entry of a selection nobody owns (at start).
    private func restoreLast(_ name: Pasteboard.Name) {
        let selection = X11PasteboardBackend.selectionName(for: name)
        guard (try? backend.owner(of: name)) == nil else { return }
        do {
            guard let snapshot = try store.withLock({ try $0.latest(selection: name, display: displayName) }) else { return }
            guard !snapshot.targets.isEmpty, try serve(snapshot, ifUnowned: true) else { return }
            logger.info("restored \(selection) from the history: \(snapshot.preview.isEmpty ? "\(snapshot.targets.count) targets" : "“\(snapshot.preview)”")")
        } catch {
            logger.warning("could not restore \(selection) from the history: \(error)")
        }
    }

    // MARK: SAVE_TARGETS

    /// A client asks us to save the clipboard (it is about to exit): fetch what it listed (or
    /// what it offers), take CLIPBOARD with its request's timestamp, then reply.
    private func save(listed: [String], time: UInt) {
        let started = Date()
        guard let owner = try? backend.owner(of: .general), owner.window != ourWindow else {
            // Nothing to save, or we hold it already: nothing is lost either way.
            backend.answerSave(saved: true)
            return
        }
        let advertised = (try? backend.targets(of: .general)) ?? listed
        let requested = listed.isEmpty ? advertised : listed
        if KeepPolicy.isSecret(advertised + requested) {
            backend.answerSave(saved: false)
            logger.info("\(describe(owner)) asked to save CLIPBOARD, which holds data marked secret: refused")
            return
        }
        let wanted = Set(KeepPolicy.keptTargets(requested))
        let deadline = started.addingTimeInterval(configuration.saveBudget)
        // The keeper is fetching this owner already: wait for it (within the budget) rather than
        // make the owner send everything twice, then take what it has.
        while state.withLock({ $0.inProgress[.general]?.owner == owner.window }), Date() < deadline { usleep(10_000) }
        var snapshot = state.withLock { state -> Snapshot? in
            if let current = state.current[.general], current.owner == owner.window, current.isComplete,
               wanted.isSubset(of: Set(current.targets.map(\.target))) {
                return current
            }
            return nil
        }
        if snapshot == nil, let partial = state.withLock({ $0.inProgress[.general] }), partial.owner == owner.window, !partial.targets.isEmpty {
            snapshot = makeSnapshot(.general, advertised: advertised, owner: owner, captured: partial.targets, complete: false)
        }
        if snapshot == nil {
            // The keeper's own fetch of this owner stops after its current target: the owner's
            // bytes move once, for the save. The app waits (Qt 5 s, GTK 10 s): what is not fetched
            // within the budget is left out rather than the reply late.
            state.withLock { $0.generations[.general, default: 0] += 1 }
            snapshot = fetch(.general, advertised: advertised.isEmpty ? ["TARGETS"] + requested : advertised, owner: owner,
                             isCurrent: { true }, useMultiple: true, deadline: deadline)
        }
        guard let snapshot, !snapshot.isExpired() else {
            backend.answerSave(saved: false)
            logger.warning("\(describe(owner)) asked to save CLIPBOARD; nothing could be fetched")
            return
        }
        do {
            try serve(snapshot, timestamp: time)
            backend.answerSave(saved: true)
            // A keeper fetch still under way would now ask us.
            state.withLock { $0.generations[.general, default: 0] += 1 }
        } catch {
            backend.answerSave(saved: false)
            logger.warning("\(describe(owner)) asked to save CLIPBOARD; could not take it: \(error)")
            return
        }
        let elapsed = Int(Date().timeIntervalSince(started) * 1000)
        logger.info("saved CLIPBOARD for \(describe(owner)) as it exits: \(snapshot.targets.count) targets, \(ByteCount.format(snapshot.size)), answered in \(elapsed) ms")
        if snapshot.id == nil { record(snapshot) }
    }

    private func describe(_ owner: SelectionOwnerInfo) -> String {
        var text = owner.name.map { "'\($0)'" } ?? "window \(owner.window)"
        if let pid = owner.processID { text += " (pid \(pid))" }
        return text
    }

    // MARK: Control

    func answer(_ request: ControlRequest) -> Result<ControlReply, ControlFailure> {
        do {
            switch request {
            case .status:
                return .success(.status(status()))
            case let .history(search):
                return .success(.history(try store.withLock { try $0.summaries(search: search) }))
            case let .select(index):
                guard let snapshot = try store.withLock({ try $0.snapshot(at: index) }) else {
                    return .failure(ControlFailure("no history entry \(index)"))
                }
                guard !snapshot.targets.isEmpty else { return .failure(ControlFailure("history entry \(index) has no payload left")) }
                try serve(snapshot)
                hub.selectedFromHistory(snapshot.selection)
                if let id = snapshot.id { try store.withLock { try $0.touch(id) } }
                return .success(.done("entry \(index) is now \(X11PasteboardBackend.selectionName(for: snapshot.selection)) (\(snapshot.targets.count) targets, \(ByteCount.format(snapshot.size)))"))
            case let .delete(index):
                guard try store.withLock({ try $0.delete(index: index) }) else { return .failure(ControlFailure("no history entry \(index)")) }
                return .success(.done("deleted entry \(index)"))
            case .clear:
                try store.withLock { try $0.clear() }
                return .success(.done("history cleared"))
            }
        } catch {
            return .failure(ControlFailure("\(error)"))
        }
    }

    func status() -> DaemonStatus {
        let (totals, database, maxEntries, maxBytes) = store.withLock { ($0.totals(), $0.databasePath, $0.maxEntries, $0.maxBytes) }
        let counts = state.withLock { $0.counts }
        let peers = hub.peerStatuses()
        return DaemonStatus(
            pid: Int(getpid()), version: Self.version, display: displayName,
            keeps: configuration.keptSelections.map { X11PasteboardBackend.selectionName(for: $0) }, entryCount: totals.count,
            bytes: totals.bytes, maxEntries: maxEntries, maxBytes: maxBytes, stateDirectory: configuration.stateDirectory.path,
            database: database, socket: socketPath, startedAt: startedAt, changeCounts: ["CLIPBOARD": counts[0], "PRIMARY": counts[1]],
            peers: peers, syncValues: peers.isEmpty ? nil : hub.valueStatuses())
    }

    /// The version `xpbd --version` prints (the same as xpb's).
    public static let version = "0.3.0"
}
