import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWayland
import PasteboardWire
import Synchronization

/// The host of a Wayland session's daemon: the compositor, through data-control. The keeper
/// fetches each new copy's kept types right after it is made (a Wayland source lasts only as
/// long as its client), hands it to the record pipeline, and when the selection empties (its
/// source's client went, or a client cleared it: data-control does not tell them apart) offers
/// the kept copy again as a source of its own, byte for byte and every type. Sync shares the
/// selections as on X (``WaylandSyncSurface``).
///
/// Data-control names no client: a copy's app is unknown, and shown so.
package final class WaylandHost: KeepingHost {
    struct State {
        /// The newest contents kept per selection, and the ownership they came from.
        var current = KeptCopies()
        /// The ownership each kept snapshot was fetched from.
        var keptFrom: [Pasteboard.Name: UInt] = [:]
        /// The selections' ownerships as the last events said (nil: empty).
        var owners: [Pasteboard.Name: UInt] = [:]
        /// Ownerships that are the compositor's echo of a copy the bridge knows (not kept).
        var echoes: Set<UInt> = []
        /// Selections a client asked xpbd to clear: their next emptying is a clear, not a source gone.
        var clearing: Set<Pasteboard.Name> = []
        var isStopped = false
    }

    let configuration: DaemonConfiguration
    package let logger: Logger
    package let backend: WaylandPasteboardBackend
    let state = Mutex(State())
    package let nodeName: String
    package let events = DispatchQueue(label: "xpbd.wayland.events")
    private let captureQueues: [Pasteboard.Name: DispatchQueue] = Dictionary(
        uniqueKeysWithValues: [Pasteboard.Name.general, .find].map { ($0, DispatchQueue(label: "xpbd.captures.\($0.rawValue)")) })
    package let surface: any SyncSurface
    private let served = Mutex<ClipboardDaemon?>(nil)
    /// In a bridge: what tells the compositor's echoes of copies from copies (set before
    /// ``connect(_:)``).
    package let bridgeMemory = Mutex<BridgeMemory?>(nil)
    /// The paste queue (`xpb queue`).
    let pasteQueue: PasteQueueService
    /// The hub its ownership changes go to when it is not its daemon's: a bridge's Wayland port
    /// has one of its own, linked to the X port's (set before ``start(_:)``).
    package let portHub = Mutex<SyncHub?>(nil)

    package init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        pasteQueue = PasteQueueService(maxBytes: configuration.maxSnapshotBytes, logger: logger)
        ConversionBudget.process.limits = .init(perConversion: configuration.maxTargetBytes, total: configuration.maxSnapshotBytes)
        var wayland = WaylandPasteboardBackend.Configuration()
        wayland.readTimeout = configuration.targetTimeout
        wayland.maxReadSize = configuration.maxTargetBytes
        do {
            backend = try WaylandPasteboardBackend(configuration: wayland)
        } catch let error as PasteboardError where !SessionPlan.isUnserved(error) {
            // A compositor without data-control stays what SessionPlan knows: DaemonSession
            // then keeps XWayland's display.
            throw ControlFailure("\(error)")
        }
        nodeName = URL(fileURLWithPath: backend.socketPath).lastPathComponent
        let surface = WaylandSyncSurface(backend: backend)
        self.surface = surface
        surface.isEcho = { [weak self] owner in self?.state.withLock { $0.echoes.contains(owner) } ?? false }
        surface.kept = { [weak self] name, owner in
            self?.state.withLock { state in state.keptFrom[name] == owner || owner == WaylandPasteboardBackend.ourOwner ? state.current[name] : nil }
        }
    }

    package var daemon: ClipboardDaemon? { served.withLock { $0 } }

    package var defaultSocketPath: String {
        ControlEndpoint.socketPath(display: nodeName, environment: ProcessInfo.processInfo.environment, uid: getuid())
    }

    /// The clipboard, and the primary selection where the compositor carries it.
    var keptNames: [Pasteboard.Name] {
        configuration.keptSelections.filter { $0 == .general || ($0 == .find && backend.hasPrimarySelection) }
    }

    package var keeps: [String] { keptNames.map { SelectionNames.selection(for: $0) } }

    package var stopsWhenIdle: Bool { false }

    package func start(_ daemon: ClipboardDaemon) throws {
        if let fd = try? LocalSocket.connect(daemon.socketPath) {
            Glibc.close(fd)
            throw ControlFailure("another xpbd keeps this Wayland session (it listens on \(daemon.socketPath))")
        }
        served.withLock { $0 = daemon }
        backend.onPasted { [weak self] name, reading in self?.pasted(name, by: reading) }
        logger.info("clipboard manager of the Wayland compositor at \(backend.socketPath) (data-control), keeping \(keeps.joined(separator: ", ")); history in \(configuration.stateDirectory.path)")
        for name in keptNames {
            if let owner = backend.currentOwner(of: name) {
                state.withLock { $0.owners[name] = owner }
                capture(name, owner: owner)
            } else if configuration.restoresAtStart {
                captures(name).async { self.restoreLast(name) }
            }
        }
    }

    /// The hub its changes go to: its own as a bridge's port, else its daemon's.
    private func hub(of daemon: ClipboardDaemon?) -> SyncHub? {
        portHub.withLock { $0 } ?? daemon?.hub
    }

    package func connect(_ daemon: ClipboardDaemon) {
        let hub = hub(of: daemon)
        backend.onSelectionChange { [weak self, weak hub] name, owner in
            guard let self else { return }
            let previous = self.state.withLock { state -> UInt? in
                defer { state.owners[name] = owner }
                return state.owners[name]
            }
            let event: SyncLedger.OwnerEvent
            if owner == WaylandPasteboardBackend.ourOwner {
                event = .ours
            } else if owner == nil {
                // A source whose client went, or a clear: data-control says the same for both;
                // xpb clear tells xpbd first.
                event = self.state.withLock { $0.clearing.remove(name) != nil } ? .cleared : .gone
            } else {
                event = .copied
            }
            guard let memory = self.bridgeMemory.withLock({ $0 }) else {
                hub?.ownerChanged(name, owner: owner ?? 0, event: event)
                self.events.async { self.selectionChanged(name, owner: owner, previous: previous) }
                return
            }
            // In a bridge, a new copy may be the compositor's echo: its text is read first, and
            // every change reaches sync in order, on `events`.
            let hub = hub
            self.events.async {
                var event = event
                if event == .copied, let owner {
                    let selection = SelectionNames.selection(for: name)
                    let take = BridgeRules.judge(owner, current: self.backend.currentOwner(of: name)) {
                        memory.kind(name, text: self.text(of: name, owner: owner))
                    }
                    // Only a copy is carried: the rest reach sync as gone, and an echo's ownership
                    // is not kept either.
                    if take != .judged(.copy) { event = .gone }
                    if take.isEcho { self.state.withLock { _ = $0.echoes.insert(owner) } }
                    switch take {
                    case .judged(.copy):
                        break
                    case .passedOver:
                        self.logger.debug("\(selection): an ownership replaced before the bridge judged it: passed over")
                    case .judged(.echo):
                        self.logger.info("\(selection) is the compositor's own bridge carrying a copy the bridge knows: not carried back")
                    case .judged(.secretEcho):
                        self.logger.info("\(selection) is the compositor's own bridge carrying an X copy marked secret, without its mark: secret here too, not kept, not carried")
                    }
                }
                hub?.ownerChanged(name, owner: owner ?? 0, event: event)
                self.selectionChanged(name, owner: owner, previous: previous)
            }
        }
        // The compositor gone (or dropping xpbd) ends this daemon; xpbd connects again
        // (``ReconnectingDaemon``).
        backend.onConnectionEnd { [weak daemon] reason in
            daemon?.lost("the connection to the Wayland compositor (\(reason))")
        }
    }

    package func clearSelection(_ name: Pasteboard.Name) throws {
        var channel = FrameChannel(fd: -1)
        if case let .failure(failure) = answer(.clearPasteboard(pasteboard: SelectionNames.selection(for: name)), on: &channel) { throw failure }
    }

    package func serveSelected(_ snapshot: Snapshot) throws {
        if snapshot.selection == .general { pasteQueue.end(because: "a history entry was selected") }
        try serve(snapshot, ifEmpty: false)
        hub(of: daemon)?.selectedFromHistory(snapshot.selection)
    }

    package func answer(_ request: ControlRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        guard case let .clearPasteboard(selection) = request, let name = SelectionNames.pasteboard(forSelection: selection),
              name == .general || name == .find else {
            return .failure(ControlFailure("this xpbd keeps the Wayland session at \(backend.socketPath): ask the compositor for its selections (xpb does)"))
        }
        // A deliberate clear (xpb clear): not a source that went, so nothing is brought back.
        state.withLock { state in
            state.current.drop(name)
            state.keptFrom.removeValue(forKey: name)
            if backend.currentOwner(of: name) != nil { state.clearing.insert(name) }
        }
        do {
            _ = try backend.clear(name, if: { _ in true })
        } catch {
            return .failure(ControlFailure("\(selection) could not be cleared: \(error)"))
        }
        logger.info("\(selection) cleared on request: not brought back")
        return .success(.reply(.done("\(selection) cleared")))
    }

    package func changeCounts() -> [String: Int] {
        ["CLIPBOARD": backend.changeCount(of: .general), "PRIMARY": backend.changeCount(of: .find)]
    }

    package func reload(_ fresh: DaemonConfiguration) {}

    package func stopping() {
        state.withLock { $0.isStopped = true }
    }

    package func close() {
        backend.close(handOff: false)
        served.withLock { $0 = nil }
    }

    private func captures(_ name: Pasteboard.Name) -> DispatchQueue {
        captureQueues[name] ?? events
    }

    // MARK: Keeping

    /// The text an ownership's offer gives (its first text type), nil when it has none.
    private func text(of name: Pasteboard.Name, owner: UInt) -> Data? {
        guard let offered = backend.offeredTypes(of: name, owner: owner),
              let type = ["text/plain;charset=utf-8", "UTF8_STRING", "text/plain"].first(where: offered.contains) else { return nil }
        return read(name, owner: owner, type: type, limit: BridgeMemory.limit)?.data
    }

    private func selectionChanged(_ name: Pasteboard.Name, owner: UInt?, previous: UInt?) {
        if name == .general, owner != WaylandPasteboardBackend.ourOwner {
            pasteQueue.end(because: owner == nil ? "CLIPBOARD was emptied" : "another app copied")
        }
        guard keptNames.contains(name), owner != WaylandPasteboardBackend.ourOwner else { return }
        if let owner, state.withLock({ $0.echoes.contains(owner) }) { return }
        if let owner {
            capture(name, owner: owner)
            return
        }
        let selection = SelectionNames.selection(for: name)
        let kept = state.withLock { state -> Snapshot? in
            guard let previous, state.keptFrom[name] == previous else { return nil }
            return state.current[name]
        }
        guard let kept, !kept.targets.isEmpty, !kept.isExpired() else {
            if previous != nil, previous != WaylandPasteboardBackend.ourOwner {
                logger.info("\(selection) emptied (its source went, or a client cleared it); nothing of it was kept")
            }
            return
        }
        captures(name).async { [self] in
            do {
                guard try serve(kept, ifEmpty: true) else {
                    logger.info("\(selection) emptied; a newer copy came meanwhile: the kept contents stay in the history")
                    return
                }
                logger.info("\(selection) emptied (its source went, or a client cleared it); serving its \(kept.targets.count) kept types (\(ByteCount.format(kept.size)))")
            } catch {
                logger.warning("\(selection) emptied; could not serve its kept contents: \(error)")
            }
        }
    }

    private func isCurrent(_ name: Pasteboard.Name, _ owner: UInt) -> Bool {
        state.withLock { !$0.isStopped } && backend.currentOwner(of: name) == owner
    }

    /// Fetches the kept types of ownership `owner` (on the selection's capture queue), right
    /// away: the source may go with its client at any moment.
    private func capture(_ name: Pasteboard.Name, owner: UInt) {
        captures(name).async { [self] in
            let selection = SelectionNames.selection(for: name)
            guard isCurrent(name, owner), let offered = backend.offeredTypes(of: name, owner: owner) else { return }
            if SecretMarking.isSecret(offered) {
                state.withLock { _ = $0.current.drop(name) }
                logger.info("\(selection) holds data marked secret: not fetched, not kept")
                return
            }
            let started = Date()
            var manifest: CapturedTarget?
            if offered.contains(Manifest.target) {
                manifest = read(name, owner: owner, type: Manifest.target, limit: 1 << 20)
            }
            if let manifest, let expires = Manifest.kept(manifest.data)?.options.expirationDate, expires <= Date() { return }
            let wanted = KeepPolicy.fetchedTargets(KeepPolicy.keptTargets(offered, manifest: manifest?.data), manifest: manifest?.data)
            var captured: [CapturedTarget?] = []
            var total = 0
            var complete = true
            for target in wanted {
                guard isCurrent(name, owner) else { return }
                if target == Manifest.target, let manifest {
                    captured.append(manifest)
                    continue
                }
                let value = read(name, owner: owner, type: target, limit: min(configuration.maxTargetBytes, configuration.maxSnapshotBytes - total))
                if value == nil { complete = false }
                total += value?.data.count ?? 0
                captured.append(value)
            }
            guard var snapshot = Snapshot(name, advertised: offered, captured: captured, complete: complete, cap: configuration.maxSnapshotBytes),
                  isCurrent(name, owner), !snapshot.isExpired() else {
                logger.debug("\(selection): nothing kept (nothing fetched, a newer change, or expired)")
                return
            }
            snapshot.source = "unknown app (Wayland)"
            guard daemon?.admits(snapshot, from: "a Wayland client", owner: owner, hub: hub(of: daemon)) == true else {
                state.withLock { _ = $0.current.drop(name) }
                return
            }
            guard state.withLock({ state -> Bool in
                guard state.owners[name] == owner else { return false }
                state.current[name] = snapshot
                state.keptFrom[name] = owner
                return true
            }) else { return }
            // The bridge carries it to X: the compositor's copy of it back is an echo.
            bridgeMemory.withLock { $0 }?.carried(name, text: snapshot.text(limit: BridgeMemory.limit).map { Data($0.utf8) })
            let elapsed = Int(Date().timeIntervalSince(started) * 1000)
            // Handed to the history's writes before it is said: a history request after the
            // line lists it (the control socket's reads wait for the writes handed in before them).
            record(snapshot)
            logger.info("kept \(selection) from a Wayland client: \(snapshot.targets.count) types, \(ByteCount.format(snapshot.size)) in \(elapsed) ms\(snapshot.isComplete ? "" : " (some types left out: caps, timeouts or refusals)")")
        }
    }

    /// One type of an ownership's offer, nil when refused, failed, over the limit or replaced.
    private func read(_ name: Pasteboard.Name, owner: UInt, type: String, limit: Int) -> CapturedTarget? {
        var data = Data()
        do {
            guard try backend.read(name, owner: owner, type: type, limit: limit, bytes: { data.append($0) }) != nil else { return nil }
        } catch {
            logger.debug("\(SelectionNames.selection(for: name)): \(type) not kept: \(error)")
            return nil
        }
        return CapturedTarget(target: type, type: type, data: data)
    }

    /// Serves kept contents as a source of ours; `ifEmpty`: only while nobody holds the selection
    /// (a copy made meanwhile is never replaced by older kept contents).
    @discardableResult
    func serve(_ snapshot: Snapshot, ifEmpty: Bool) throws -> Bool {
        let kept = KeptSelection(advertised: snapshot.advertised, targets: snapshot.targets.map(\.captured))
        guard try backend.serve(kept, on: snapshot.selection, if: { !ifEmpty || $0 == nil }) else { return false }
        state.withLock { state in
            state.current[snapshot.selection] = snapshot
            state.keptFrom[snapshot.selection] = WaylandPasteboardBackend.ourOwner
        }
        scheduleExpiry(snapshot)
        return true
    }

    /// A paste of the copy this host serves of `name`: noted on its history entry.
    private func pasted(_ name: Pasteboard.Name, by reading: PasteReading) {
        guard let copy = state.withLock({ $0.keptFrom[name] == WaylandPasteboardBackend.ourOwner ? $0.current[name] : nil }) else { return }
        let record = PasteRecord(time: reading.time, app: reading.appName, pid: reading.processID,
                                 unknown: "Wayland's data-control names no reader, and no process of this user holds the pipe")
        recordPaste(record, of: name, madeAt: copy.time)
    }

    /// An owner's word of a paste of its copy: data-control names no owner, so an `xpb` owner
    /// names its copy by its content (``OwnerName/content(_:)``). Noted on the copy kept of
    /// `name` when it is another client's and has a target of those bytes (a copy made since,
    /// of other bytes, is not noted on).
    package func ownerPasted(_ record: PasteRecord, of name: Pasteboard.Name, by owner: String) {
        guard let digest = OwnerName.contentDigest(owner) else { return }
        let copy = state.withLock { state -> Snapshot? in
            guard state.keptFrom[name] != WaylandPasteboardBackend.ourOwner, let copy = state.current[name],
                  copy.targets.contains(where: { $0.digest == digest }) else { return nil }
            return copy
        }
        if let copy { recordPaste(record, of: name, madeAt: copy.time) }
    }

    package func servedEntry(of name: Pasteboard.Name) -> Int64? {
        let ours = WaylandPasteboardBackend.ourOwner
        return state.withLock { $0.owners[name] == ours && $0.keptFrom[name] == ours ? $0.current[name]?.id : nil }
    }

    package func withKept<T>(_ body: (inout KeptCopies) -> T) -> T {
        state.withLock { body(&$0.current) }
    }

    /// An expired copy this host serves is given up (a copy another client made since stays).
    package func withdrawExpired(_ name: Pasteboard.Name) {
        _ = try? backend.clear(name, if: { $0 == WaylandPasteboardBackend.ourOwner })
    }

    /// Serves the newest history entry of a selection nobody holds (at start).
    private func restoreLast(_ name: Pasteboard.Name) {
        restoreLast(name, isEmpty: { backend.currentOwner(of: name) == nil }, serve: { try serve($0, ifEmpty: true) })
    }
}
