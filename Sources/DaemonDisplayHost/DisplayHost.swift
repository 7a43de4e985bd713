import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import PasteboardX11
import Synchronization

/// The host of a desktop daemon: an X display. Holds `CLIPBOARD_MANAGER`, answers
/// `SAVE_TARGETS`, keeps each kept selection's contents (fetched once per owner change, after a
/// short debounce, one target at a time), serves them when their owner goes away, hands them to
/// the daemon's record pipeline, publishes the display's change counts, and carries PRIMARY and
/// CLIPBOARD across (`--primary-to-clipboard`, `--clipboard-to-primary`).
///
/// Threads: the backend's X thread does the X work; ownership changes are handled on `events`
/// (quick), fetches run on one queue per selection (``captures(_:)``: a source app is asked for one
/// target at a time, never flooded, and a slow owner of one selection never delays another's),
/// save requests on `saves`.
package final class DisplayHost: KeepingHost {
    struct State {
        /// The newest contents kept per selection, and the owner they came from.
        var current = KeptCopies()
        /// The owner per selection as XFixes last reported it.
        var owners: [Pasteboard.Name: X11Window] = [:]
        /// Moves on every ownership change: a fetch for an older generation stops.
        var generations: [Pasteboard.Name: Int] = [:]
        /// The display's change counts (CLIPBOARD, PRIMARY), every change counted.
        var counts = [0, 0]
        var isStopped = false
        /// The keeper's fetch under way per selection: its owner and the targets fetched so far
        /// (a save request for the same owner takes them instead of asking the owner again).
        var inProgress: [Pasteboard.Name: (owner: X11Window, epoch: Int, targets: [CapturedTarget])] = [:]
        /// Moves (on the X thread) whenever another client takes a selection or clears it: an
        /// ownership is told apart by it, since the X server reuses window ids of clients gone.
        var epochs: [Pasteboard.Name: Int] = [:]
        /// The ownership (epoch) whose capture the keeper finished last, per selection, kept or
        /// not (``CaptureSettling``).
        var settled: [Pasteboard.Name: Int] = [:]

        /// The kept contents of a selection if they are `owner`'s (taken from it, or served by us
        /// in its place).
        func kept(_ name: Pasteboard.Name, from owner: X11Window) -> Snapshot? {
            guard !owner.isNone, let snapshot = current[name], snapshot.ownerWindow == owner || snapshot.capturedFromWindow == owner else { return nil }
            return snapshot
        }
    }

    let configuration: DaemonConfiguration
    package let logger: Logger
    package let backend: X11PasteboardBackend
    let state = Mutex(State())
    let ourWindow: X11Window
    package let nodeName: String
    package let events = DispatchQueue(label: "xpbd.events")
    /// The keeper's work per selection (fetches, serving kept contents), in order.
    private let captureQueues: [Pasteboard.Name: DispatchQueue] = Dictionary(
        uniqueKeysWithValues: [Pasteboard.Name.general, .find, .secondary].map { ($0, DispatchQueue(label: "xpbd.captures.\($0.rawValue)")) })
    private let otherCaptures = DispatchQueue(label: "xpbd.captures")
    let saves = DispatchQueue(label: "xpbd.saves")
    /// `--primary-to-clipboard`, `--clipboard-to-primary`: waits for a finished selection.
    let bridges = DispatchQueue(label: "xpbd.bridges")
    /// The selections we serve carried from the other one, with the source's owner.
    let bridged = Mutex<[Pasteboard.Name: X11Window]>([:])
    /// Copies of what the bridge carried, made by another syncer (``BridgeEchoes``).
    let echoes = Mutex(BridgeEchoes())
    /// Turns at each owner: the keeper, a peer's fetch and a save request read one at a time.
    let gate = OwnerGate()
    /// What each new owner offers, read once for the keeper and sync.
    let offers: OwnerOffers
    package let surface: any SyncSurface
    /// The daemon this host serves, from ``start(_:)`` to ``close()``.
    private let served = Mutex<ClipboardDaemon?>(nil)
    /// In a bridge: what the Wayland side compares its copies with (set before ``connect(_:)``).
    package let bridgeMemory = Mutex<BridgeMemory?>(nil)
    /// The paste queue (`xpb queue`).
    let pasteQueue: PasteQueueService
    /// The bridge's reads of each X copy's text.
    private let textReads = DispatchQueue(label: "xpbd.bridge.text")
    /// In a bridge: the base of the window ids of the compositor's own X client (its XWayland
    /// window manager), once ``start(_:)`` found it.
    let compositorClient = Mutex<UInt?>(nil)
    /// In a bridge: where a selection the compositor took is taken back.
    let takeBacks = DispatchQueue(label: "xpbd.bridge.takeback")
    /// In a bridge: what the Wayland selection of a name holds now (set by ``BridgeHost``).
    package let waylandSelection = Mutex<(@Sendable (Pasteboard.Name) -> BridgeRules.WaylandSelection)?>(nil)
    /// The keeper's captures that ended, for a bridge's announces (``CaptureSettling``).
    let settling = CaptureSettling()

    /// Connects to the display. Nothing is owned yet: see ``start(_:)``.
    package init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        pasteQueue = PasteQueueService(maxBytes: configuration.maxSnapshotBytes, logger: logger)
        // What the kept copies' conversions (other image formats, other text encodings) may hold:
        // one of them at most --max-target-size, all of them at most a snapshot's cap.
        ConversionBudget.process.limits = .init(perConversion: configuration.maxTargetBytes, total: configuration.maxSnapshotBytes)
        var x11 = X11Configuration()
        x11.readTimeout = configuration.targetTimeout
        x11.transferDeadline = configuration.targetDeadline
        x11.maxReadSize = configuration.maxTargetBytes
        // Our own readers never meet our own owner through the fast path; kept contents are served
        // through the X server like any owner's.
        x11.fastPath = false
        // Every read is of one ownership: a new copy ends it (the keeper moves on to the new one).
        x11.abandonsReadsOnOwnerChange = true
        // An owner busy with another reader's INCR transfer (xclip drops what comes meanwhile) is
        // asked again until it answers, changes, or the target deadline passes.
        x11.asksSilentOwnersAgain = true
        // What `xpb info` and a second manager's refusal name.
        x11.windowName = "xpbd"
        x11.warning = { [logger] message in logger.warning("\(message)") }
        x11.debug = { [logger] message in logger.debug("\(message)") }
        backend = try X11PasteboardBackend(display: configuration.display, configuration: x11)
        nodeName = backend.displayName
        ourWindow = backend.window
        offers = OwnerOffers(backend: backend, gate: gate, turnDeadline: configuration.targetDeadline, rules: configuration.appRules)
        let surface = X11SyncSurface(backend: backend, ourWindow: ourWindow, offers: offers)
        self.surface = surface
        // In a bridge an X copy is announced to Wayland once the keeper holds it: the Wayland
        // side's taking the Wayland selection for it makes the compositor take the X selection
        // from the app, which then stops serving it.
        let settling = self.settling
        let deadline = configuration.targetDeadline
        let captured = Set(configuration.capturedSelections)
        let ours = ourWindow
        let waitForCapture: @Sendable (Pasteboard.Name, X11Window, @escaping @Sendable () -> Bool) -> Void = { [weak self] name, owner, isCurrent in
            // Our own ownership (a history entry selected again) is kept already.
            guard owner != ours, captured.contains(name) else { return }
            _ = settling.wait(until: Date().addingTimeInterval(deadline), hasEnded: {
                self?.state.withLock { $0.settled[name] != nil && $0.settled[name] == $0.epochs[name, default: 0] } ?? true
            }, while: isCurrent)
        }
        surface.setHooks(SyncHooks(captured: configuration.compositorPID == nil ? nil : waitForCapture, kept: { [weak self] name, owner in
            self?.state.withLock { $0.kept(name, from: owner) }
        }, keptTarget: { [weak self] name, owner, target in
            self?.state.withLock { state -> CapturedTarget? in
                if let snapshot = state.kept(name, from: owner) { return snapshot.targets.first { $0.target == target }?.captured }
                guard !owner.isNone, let partial = state.inProgress[name], partial.owner == owner else { return nil }
                return partial.targets.first { $0.target == target }
            }
        }, heldElsewhere: { [weak self] name, owner in
            guard let self, let memory = bridgeMemory.withLock({ $0 }) else { return nil }
            let carriedBack = memory.isCarriedBack(name) {
                // What the keeper read of it, else a read of its text now.
                state.withLock { $0.kept(name, from: owner)?.targets.first { $0.target == "UTF8_STRING" }?.data }
                    ?? (try? backend.managerPort.capture(name, target: "UTF8_STRING", limit: BridgeMemory.limit))?.data
            }
            return carriedBack ? "the Wayland copy the bridge just carried, made again on X (a script copying Wayland to X): Wayland has it" : nil
        }))
    }

    /// The bits of a window id that a client chooses; the rest is the X server's base for the
    /// client (Xorg's and Xwayland's mask).
    static let clientResourceMask: UInt = 0x1F_FFFF

    /// The daemon served, while it runs.
    package var daemon: ClipboardDaemon? { served.withLock { $0 } }

    package var defaultSocketPath: String {
        ControlEndpoint.socketPath(display: nodeName, environment: ProcessInfo.processInfo.environment, uid: getuid())
    }

    package var keeps: [String] { configuration.keptSelections.map { SelectionNames.selection(for: $0) } }

    package var stopsWhenIdle: Bool { false }
    /// It reads every change of ownership, and the clears (XFixes).
    package var seesTakeBacks: Bool { true }

    /// Becomes the display's clipboard manager and restores the last contents where nobody owns
    /// a kept selection.
    ///
    /// - Throws: ``PasteboardX11/ClipboardManagerError`` when another manager runs (without
    ///   `replace`).
    package func start(_ daemon: ClipboardDaemon) throws {
        served.withLock { $0 = daemon }
        backend.managerPort.onOwnerChange { [weak self] change in self?.ownerChanged(change) }
        for name in configuration.keptNames { try backend.managerPort.watch(name) }
        let replaced = try backend.managerPort.becomeClipboardManager(replace: configuration.replace, yielding: configuration.compositorPID,
                                                                      onSave: { [weak self] targets, time in
            guard let self else { return }
            self.saves.async { self.save(listed: targets, time: time) }
        }, onLost: { [weak self] in
            self?.daemon?.finish(failure: nil, reason: "another clipboard manager took CLIPBOARD_MANAGER: stopping")
        })
        backend.managerPort.publishChangeCounts([0, 0])
        backend.onPasted { [weak self] name, reading in self?.pasted(name, by: reading) }
        logger.info("clipboard manager of display \(nodeName) (window \(ourWindow)), keeping \(keeps.joined(separator: ", ")); history in \(configuration.stateDirectory.path)")
        if let pid = configuration.compositorPID, let window = replaced ?? backend.managerPort.compositorClient(pid: pid) {
            compositorClient.withLock { $0 = window.rawValue & ~Self.clientResourceMask }
            backend.managerPort.refuseRequests(fromClientOf: window)
            if replaced != nil {
                logger.info("took CLIPBOARD_MANAGER over from the compositor's XWayland window manager (pid \(pid)): the bridge keeps X copies")
            }
        }
        for name in configuration.capturedSelections {
            let owner = (try? backend.ownerWindow(of: name)).flatMap { $0.isNone ? nil : $0 }
            if let owner, isCompositor(owner) {
                state.withLock { $0.owners[name] = owner }
                compositorTook(name, window: owner)
            } else if let owner {
                state.withLock { $0.owners[name] = owner }
                schedule(name)
            } else if configuration.restoresAtStart, configuration.keptSelections.contains(name) {
                captures(name).async { self.restoreLast(name) }
            }
        }
    }

    package func connect(_ daemon: ClipboardDaemon) {
        // On the X thread, as each ownership change's event is read: the previous owner's offer
        // is forgotten, and sync stamps the change before the X thread does anything else.
        let hub = daemon.hub
        backend.managerPort.onOwnerChangeRead { [weak self, weak hub] change in
            self?.count(change)
            self?.ownershipRead(change)
            self?.offers.ownerChanged(change.name)
            if self?.isCompositor(change.owner) == true {
                // The compositor's bridge holds a Wayland copy here: the same copy, not a new one.
                hub?.ownerChanged(change.name, owner: change.owner.rawValue, event: .gone)
            } else {
                hub?.ownerChangeRead(change)
                if let self, let memory = self.bridgeMemory.withLock({ $0 }), !change.isOurs, change.owner != self.ourWindow, !change.owner.isNone {
                    // The bridge compares the next Wayland copy with this one's text: read now.
                    memory.xChanged(change.name)
                    self.textReads.async {
                        // A copy marked secret is never read: only noted.
                        if SecretMarking.isSecret((try? self.backend.targets(of: change.name)) ?? []) {
                            memory.xSecret(change.name)
                            return
                        }
                        let text = try? self.backend.managerPort.capture(change.name, target: "UTF8_STRING", limit: BridgeMemory.limit)
                        memory.xText(change.name, text?.data)
                    }
                }
            }
        }
        // A lost X connection ends this daemon; xpbd connects again while the server comes
        // back soon (``ReconnectingDaemon``), and exits otherwise (systemd restarts it,
        // Restart=on-failure).
        backend.managerPort.onConnectionStop { [weak daemon] reason in
            daemon?.lost("the connection to the X server (\(reason))")
        }
        if !backend.isConnected { daemon.lost("the connection to the X server") }
    }

    package func clearSelection(_ name: Pasteboard.Name) throws {
        // Kept contents are dropped first: the clear (a SetSelectionOwner to None) is not a gone owner.
        state.withLock { _ = $0.current.drop(name) }
        try backend.clear(name)
    }

    package func forgetKept(_ name: Pasteboard.Name, time: Date) {
        var dropped = state.withLock { $0.current.drop(name, madeAt: time) }
        dropped?.wipe()
    }

    package func serveSelected(_ snapshot: Snapshot) throws {
        if snapshot.selection == .general { pasteQueue.end(because: "a history entry was selected") }
        try serve(snapshot)
        daemon?.hub.selectedFromHistory(snapshot.selection)
    }

    package func answer(_ request: ControlRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        // `xpb clear` of a kept selection: the user's clear, which forgets nothing.
        if case let .clearPasteboard(selection) = request, let name = SelectionNames.pasteboard(forSelection: selection),
           configuration.keptSelections.contains(name), let daemon {
            do {
                try daemon.userClears(name)
                return .success(.reply(.done("\(selection) cleared")))
            } catch {
                return .failure(ControlFailure("\(selection) could not be cleared: \(error)"))
            }
        }
        return .failure(ControlFailure("this xpbd serves display \(nodeName): ask the X server for its selections (only 'xpbd --headless' holds pasteboards itself)"))
    }

    package func changeCounts() -> [String: Int] {
        let counts = state.withLock { $0.counts }
        return ["CLIPBOARD": counts[0], "PRIMARY": counts[1]]
    }

    package func reload(_ fresh: DaemonConfiguration) {
        offers.rules = fresh.appRules
    }

    package func stopping() {
        state.withLock { $0.isStopped = true }
    }

    package func close() {
        backend.close(handOff: false)
        served.withLock { $0 = nil }
    }

    /// The queue of the keeper's work on `name`.
    func captures(_ name: Pasteboard.Name) -> DispatchQueue {
        captureQueues[name] ?? otherCaptures
    }

    // MARK: Ownership changes

    /// On the X thread, as an ownership change's event is read: a copy of another client, or a
    /// clear, begins a new ownership. What the keeper kept or is fetching is no longer any
    /// window's contents (the new owner may have a window id an earlier, gone owner had).
    private func ownershipRead(_ change: SelectionOwnerChange) {
        // A fetch waiting for its turn at an owner looks again at whether that owner still owns.
        defer { gate.ownershipChanged() }
        guard !change.isOurs, change.owner != ourWindow, !change.owner.isNone || change.reason == .setOwner else { return }
        // The compositor's bridge took it for the newest copy: what was kept is still that of
        // the owner it was taken from.
        guard !isCompositor(change.owner) else { return }
        state.withLock { state in
            state.epochs[change.name, default: 0] += 1
            state.inProgress.removeValue(forKey: change.name)
            if var snapshot = state.current[change.name] {
                snapshot.ownerWindow = .none
                snapshot.capturedFromWindow = .none
                state.current[change.name] = snapshot
            }
        }
    }

    /// On the X thread, as an ownership change's event is read: the display's count of the
    /// selection goes up, and is published in the X loop's next turn. A library process's
    /// write waits for it to pass (an `xpb copy` returns then): counted here, it waits for no
    /// other thread of ours (counted after the change's delivery, it waited for two: the
    /// delivery's and the events' queue, and a job back to the X thread).
    private func count(_ change: SelectionOwnerChange) {
        let counts = state.withLock { state -> [Int]? in
            guard let index = SelectionNames.sharedCountIndex(of: change.name) else { return nil }
            state.counts[index] += 1
            return state.counts
        }
        if let counts { backend.managerPort.publishChangeCounts(counts) }
    }

    private func ownerChanged(_ change: SelectionOwnerChange) {
        events.async { [self] in
            bridge(change)
            guard configuration.capturedSelections.contains(change.name) else { return }
            let selection = SelectionNames.selection(for: change.name)
            if change.isOurs || change.owner == ourWindow {
                state.withLock { $0.owners[change.name] = ourWindow }
                return
            }
            if isCompositor(change.owner) {
                state.withLock { $0.owners[change.name] = change.owner }
                compositorTook(change.name, window: change.owner)
                return
            }
            if change.name == .general { pasteQueue.end(because: change.owner.isNone ? "CLIPBOARD was cleared" : "another app copied") }
            if !change.owner.isNone {
                state.withLock { $0.owners[change.name] = change.owner }
                schedule(change.name)
                return
            }
            // Nobody owns it now.
            let (previous, kept, epoch) = state.withLock { state -> (X11Window?, Snapshot?, Int) in
                state.generations[change.name, default: 0] += 1
                let previous = state.owners.removeValue(forKey: change.name)
                if change.reason == .setOwner {
                    // Cleared on purpose (xsel --clear, a password manager): never brought back.
                    return (previous, state.current.drop(change.name), 0)
                }
                return (previous, state.current[change.name], state.epochs[change.name, default: 0])
            }
            // PRIMARY captured for a bridge alone (no --primary) is not brought back.
            guard configuration.keptSelections.contains(change.name) else { return }
            if change.reason == .setOwner {
                logger.info("\(selection) was cleared by its owner: not brought back")
                // A secret taken back: the bytes kept of it are zeroed as they go.
                if daemon?.selectionCleared(change.name) == true, var dropped = kept { dropped.wipe() }
                return
            }
            daemon?.ownerGone(change.name)
            guard let kept, kept.ownerWindow == previous, !kept.targets.isEmpty, !kept.isExpired() else {
                logger.info("the owner of \(selection) went away; nothing of it was kept")
                return
            }
            captures(change.name).async { [self] in
                do {
                    // Only if no copy was made since (a copy that is gone already too, perhaps
                    // with this window id, is newer than these contents: not brought back).
                    guard try serve(kept, ifUnowned: true, since: epoch) else {
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


    /// Serves kept contents on their selection (from this process, through the X server).
    /// `ifUnowned`: only if nobody owns the selection at that moment on the X thread
    /// (compare-and-own: a copy that came since, from this display or through sync, is never
    /// replaced by older kept contents); `since`: only if no other client's ownership was read
    /// after that epoch. Returns whether it serves them.
    ///
    /// The keeper's state is brought up to date only if no other client's copy was read after
    /// ours: such a copy owns the selection now, and its event (handled on `events`, perhaps
    /// before this returns) set the owner the keeper waits for. The owner recorded for our own
    /// ownership is set by its event too, in order.
    /// `replacing`: only if that window owns the selection at that moment, or nobody does.
    @discardableResult
    func serve(_ snapshot: Snapshot, timestamp: UInt? = nil, ifUnowned: Bool = false, replacing: X11Window? = nil, since: Int? = nil) throws -> Bool {
        let name = snapshot.selection
        // The ownerships read before ours, taken on the X thread as ours begins.
        let epochAtOwn = Mutex<Int?>(nil)
        let check: @Sendable (X11Window) -> Bool = { [self] owner in
            let epoch = state.withLock { $0.epochs[name, default: 0] }
            epochAtOwn.withLock { $0 = epoch }
            return (!ifUnowned || owner.isNone) && (replacing.map { owner == $0 || owner.isNone } ?? true) && (since == nil || since == epoch)
        }
        let credit = snapshot.app.map { CopyCredit(name: $0, pid: snapshot.pid) }
        guard try backend.managerPort.keep(name, advertised: snapshot.advertised, targets: snapshot.targets.map(\.captured),
                                           timestamp: timestamp, credit: credit, if: check) else { return false }
        var served = snapshot
        served.ownerWindow = ourWindow
        let epoch = epochAtOwn.withLock { $0 }
        state.withLock { state in
            if state.epochs[name, default: 0] == epoch { state.current[name] = served }
        }
        scheduleExpiry(served)
        return true
    }

    /// A paste of the copy this host serves of `name`: noted on its history entry.
    private func pasted(_ name: Pasteboard.Name, by reading: PasteReading) {
        guard let copy = state.withLock({ $0.current[name] }), copy.ownerWindow == ourWindow else { return }
        let record = PasteRecord(time: reading.time, app: reading.appName, pid: reading.processID,
                                 unknown: "the X server did not name the reading process (a client of another host?)")
        recordPaste(record, of: name, madeAt: copy.time)
    }

    package func ownerPasted(_ record: PasteRecord, of name: Pasteboard.Name, by owner: String) {
        guard owner.hasPrefix("0x"), let raw = UInt(owner.dropFirst(2), radix: 16),
              let copy = state.withLock({ $0.kept(name, from: X11Window(rawValue: raw)) }) else { return }
        recordPaste(record, of: name, madeAt: copy.time)
    }

    package func servedEntry(of name: Pasteboard.Name) -> Int64? {
        state.withLock { $0.owners[name] == ourWindow ? $0.current[name]?.id : nil }
    }

    package func withKept<T>(_ body: (inout KeptCopies) -> T) -> T {
        state.withLock { body(&$0.current) }
    }

    /// An expired copy this host serves is given up (a copy another client made since stays).
    package func withdrawExpired(_ name: Pasteboard.Name) {
        if state.withLock({ $0.owners[name] == ourWindow }) { try? backend.clear(name) }
    }

    /// Serves the newest history entry of a selection nobody owns (at start).
    private func restoreLast(_ name: Pasteboard.Name) {
        let epoch = state.withLock { $0.epochs[name, default: 0] }
        restoreLast(name, isEmpty: { (try? backend.ownerWindow(of: name))?.isNone ?? true }, serve: { try serve($0, ifUnowned: true, since: epoch) })
    }

    // MARK: The compositor's own bridge

    /// Whether `window` is the compositor's own X client's (in a bridge).
    func isCompositor(_ window: X11Window) -> Bool {
        guard !window.isNone, let base = compositorClient.withLock({ $0 }) else { return false }
        return window.rawValue & ~Self.clientResourceMask == base
    }

    /// How long after the compositor took a selection the bridge looks at what it took it for
    /// (the compositor's Wayland event reaches the Wayland side by then).
    static let takeBackDelay = 0.2

    /// The compositor's window manager took `name` on X, with `window`, for the newest Wayland
    /// copy. It serves it only while an X window has the focus, and its take ended the X owner's:
    /// the bridge takes the selection back (``BridgeRules/takeBack(_:elapsed:hubTakesBack:)``).
    /// - For a Wayland client's copy: as its announce comes (compare-and-own, at once, as any
    ///   announce is); a copy never announced (secret, local-only) is left to the compositor.
    /// - For the bridge's own carry of an X copy: the X copy the keeper holds, whose owner's
    ///   ownership the compositor ended; else the newest copy from Wayland the ledger knows.
    /// Each take is compare-and-own: never over another client's copy.
    func compositorTook(_ name: Pasteboard.Name, window: X11Window) {
        logger.debug("\(SelectionNames.selection(for: name)): the compositor's XWayland window manager took it (window \(window)) for the newest Wayland copy")
        let started = Date()
        takeBacks.asyncAfter(deadline: .now() + Self.takeBackDelay) { [self] in takeBack(name, from: window, since: started) }
    }

    /// One look at what the compositor took `name` for (``compositorTook(_:window:)``), and what
    /// the rule says of it carried out: taken back, left, or looked at again in a moment.
    private func takeBack(_ name: Pasteboard.Name, from window: X11Window, since started: Date) {
        let selection = SelectionNames.selection(for: name)
        guard state.withLock({ !$0.isStopped && $0.owners[name] == window }) else { return }
        let wayland = waylandSelection.withLock({ $0 })?(name) ?? .bridges
        switch BridgeRules.takeBack(wayland, elapsed: Date().timeIntervalSince(started), hubTakesBack: { daemon?.hub.takeBack(name) == true }) {
        case .taken:
            return
        case let .lookAgain(after):
            takeBacks.asyncAfter(deadline: .now() + after) { [self] in takeBack(name, from: window, since: started) }
        case .gaveUp:
            logger.debug("\(selection): no announce came of the Wayland copy the compositor's XWayland window manager took it for: left to it")
        case .leftNotShared:
            logger.info("\(selection): the compositor's XWayland window manager holds a Wayland copy that is not shared (secret or local-only): left to it")
        case .leftQueue:
            logger.info("\(selection): the compositor's XWayland window manager holds the paste queue's item: left to it (X apps that paste take their turns through it)")
        case .serveKept:
            serveKeptAgain(name, replacing: window)
        }
    }

    /// The bridge's own carry of this display's copy, taken by the compositor: the keeper's bytes
    /// of it served again.
    private func serveKeptAgain(_ name: Pasteboard.Name, replacing window: X11Window) {
        let selection = SelectionNames.selection(for: name)
        let kept = state.withLock { $0.current[name] }
        guard let kept, !kept.targets.isEmpty, !kept.isExpired() else {
            logger.info("the compositor's XWayland window manager took \(selection), and nothing is kept to take it back with: it answers only while an X window has the focus")
            return
        }
        do {
            if try serve(kept, replacing: window) {
                logger.info("the compositor's XWayland window manager took \(selection): serving its kept copy again (\(kept.targets.count) targets, \(ByteCount.format(kept.size)))")
            }
        } catch {
            logger.warning("the compositor's XWayland window manager took \(selection); could not serve its kept copy again: \(error)")
        }
    }

    func describe(_ owner: SelectionOwnerInfo) -> String {
        // The window's name and the executable's are the owner's to choose: escaped, so that no
        // control character reaches the log (a forged second line, an escape for the terminal).
        var text = owner.name.map { "'\(printable($0))'" } ?? "window \(owner.window)"
        if let pid = owner.processID { text += " (pid \(pid)\(owner.executableName.map { ", \(printable($0))" } ?? ""))" }
        if let credit = owner.copiedBy { text += " for \(printable(credit.name))\(credit.pid.map { " (pid \($0))" } ?? "")" }
        return text
    }
}
