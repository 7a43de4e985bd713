internal import CX11
import Dispatch
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections
import Synchronization

/// Pasteboards on an X server: general ↔ `CLIPBOARD`, find ↔ `PRIMARY`, a named pasteboard
/// ↔ the selection `XPB_PASTEBOARD:<name>`.
///
/// Writing makes this process the selection owner, serving every representation lazily (a
/// provider runs when a client first converts to its type); reading converts from whoever owns
/// the selection. Type queries move no data: `TARGETS`, or for xpb owners the manifest.
/// `changeCount` follows XFixes: every ownership change of a watched selection counts once.
public final class X11PasteboardBackend: PasteboardBackend {
    struct State {
        var changeCounts: [Pasteboard.Name: Int] = [:]
        var named: Set<Pasteboard.Name> = []
        /// Named pasteboards removed by this process and not created again: writes through old
        /// handles throw instead of reviving them.
        var removed: Set<Pasteboard.Name> = []
        /// What we own, mirrored here so that reading our own contents needs no X round trip.
        var owned: [Pasteboard.Name: (items: [PasteboardItem], options: PasteboardOptions, generation: Int)] = [:]
        /// The types last seen per pasteboard, for the added/removed lists of changes.
        var lastTypes: [Pasteboard.Name: [PasteboardType]] = [:]
        var selectionNames: [X11Atom: Pasteboard.Name] = [:]
        var generation = 0
        /// Ownership changes seen per pasteboard (ours included): a cached offer is good while
        /// this has not moved.
        var ownershipEpochs: [Pasteboard.Name: Int] = [:]
        /// The last offer read from a foreign owner, so that one paste asks for TARGETS once.
        var offers: [Pasteboard.Name: CachedOffer] = [:]
        var servedHandler: (@Sendable (Pasteboard.Name, PasteboardType) -> Void)?
        var pastedHandler: (@Sendable (Pasteboard.Name, PasteReading) -> Void)?
        var fastPathReads = 0
        /// The clipboard manager's hooks (the daemon's): every ownership change, save requests,
        /// and the loss of `CLIPBOARD_MANAGER`.
        var ownerChangeHandler: (@Sendable (SelectionOwnerChange) -> Void)?
        /// Called on the X thread as an ownership change is read (sync stamps it there).
        var ownerChangeReadHandler: (@Sendable (SelectionOwnerChange) -> Void)?
        var saveHandler: (@Sendable ([String], UInt) -> Void)?
        var managerLostHandler: (@Sendable () -> Void)?
        var stopHandler: (@Sendable (X11BackendError) -> Void)?
        /// Per pasteboard, the change of an owner that went away while a clipboard manager
        /// runs, held back for ``ownerGoneGrace``: its id, its timer, and how to deliver it.
        var heldGone: [Pasteboard.Name: HeldChange] = [:]
        var holds = 0
    }

    /// A change held back: withdrawn when another follows, delivered when its time is up or the
    /// connection stops.
    struct HeldChange {
        let id: Int
        let timer: TimerHandle
        let withdraw: @Sendable () -> Void
        let deliver: @Sendable () -> Void
    }

    /// How long the change of an owner that went away (its client closed, its window destroyed)
    /// is held back while a clipboard manager runs: the manager takes the selection over within
    /// milliseconds, and watchers then see its change alone, not an empty pasteboard first.
    static let ownerGoneGrace: Double = 0.3

    /// The type table.
    public let registry: TypeRegistry
    /// Where changes are published.
    public let changeCenter: ChangeCenter
    /// The tunables.
    public let configuration: X11Configuration
    /// The display this backend is connected to.
    public var displayName: String { connection.displayName }

    let connection: X11Connection
    /// Who owns a selection is looked up over a connection of its own, off the X thread.
    let attribution: AttributionLink
    let state = Mutex(State())
    /// Changes described on the X thread are handed to the change center from here, never from
    /// the X thread itself: observers run on the thread that delivers, and may read pasteboards.
    private let publisher = DispatchQueue(label: "xpb.x11.changes")

    /// Connects to `display` (nil: `$DISPLAY`).
    ///
    /// - Throws: ``X11BackendError/noDisplay`` or ``X11BackendError/cannotOpenDisplay(_:)``.
    public init(display: String? = nil, registry: TypeRegistry = .standard,
                changeCenter: ChangeCenter = ChangeCenter(), configuration: X11Configuration = X11Configuration()) throws {
        self.registry = registry
        self.changeCenter = changeCenter
        self.configuration = configuration
        connection = try X11Connection(displayName: display, configuration: configuration)
        attribution = AttributionLink(displayName: connection.displayName, configuration: configuration)
        connection.onStop { [weak self, changeCenter, publisher] reason in
            // No more changes can come: end the streams after those already reserved. Waiting here
            // cannot deadlock (an observer's call into the backend fails at once: the connection
            // has stopped) and spares a short-lived process a thread started just to exit.
            // A change held back is delivered first: no manager took over.
            let held: [HeldChange] = self?.state.withLock { state in
                defer { state.heldGone.removeAll() }
                return Array(state.heldGone.values)
            } ?? []
            held.forEach { $0.deliver() }
            publisher.sync { changeCenter.finish() }
            if let handler = self?.state.withLock({ $0.stopHandler }) { Background.run("xpb.x11.stopped") { handler(reason) } }
        }
        changeCenter.attach(self)
        // The X thread runs jobs in order: everything asked of it later finds this done. No
        // wait for it here (a thread hop a start need not pay).
        let submitted = connection.submit { [self] session in
            session.delegate = self
            for atom in [session.wire.known[.clipboard], session.wire.known[.primary]] { session.watch(atom) }
            self.state.withLock {
                $0.selectionNames[session.wire.known[.clipboard]] = .general
                $0.selectionNames[session.wire.known[.primary]] = .find
            }
        }
        guard submitted else { throw connection.stopReason ?? X11BackendError.connectionLost }
    }

    /// Whether an X target name belongs to the selection protocol (``SelectionNames/isReservedTarget(_:)``).
    public static func isReservedTarget(_ name: String) -> Bool { SelectionNames.isReservedTarget(name) }

    /// The X selection that holds a pasteboard (``SelectionNames/selection(for:)``).
    public static func selectionName(for name: Pasteboard.Name) -> String { SelectionNames.selection(for: name) }

    /// Stops serving and closes the connection. With `handOff`, a clipboard manager (the owner of
    /// `CLIPBOARD_MANAGER`) is first asked to take the clipboard's contents (`SAVE_TARGETS`), with
    /// a bounded wait; contents marked secret are never handed off.
    ///
    /// - Returns: whether a clipboard manager took the contents.
    @discardableResult
    public func close(handOff: Bool = true) -> Bool {
        // The process exits next (``X11Configuration/exitsAfterClose``): the backend, its
        // connection and session are left to the exit with Xlib's memory, never taken apart
        // (freeing them was 6 % of a one-shot paste's instructions).
        if configuration.exitsAfterClose { _ = Unmanaged.passRetained(self) }
        let general = state.withLock { $0.owned[.general]?.items }
        let shouldHandOff = handOff && !(general ?? []).isEmpty && !(general ?? []).contains(where: SecretMarking.isSecret)
        let timeout = configuration.handOffTimeout
        let saved = Mutex(false)
        connection.close(timeout: timeout + 2) { session, done in
            guard shouldHandOff else { return done() }
            session.reader.handOff(session.wire.known[.clipboard], timeout: timeout) { ok in
                saved.withLock { $0 = ok }
                done()
            }
        }
        return saved.withLock { $0 }
    }

    /// A backend made with ``X11Configuration/runsOnCallersThread`` gets an X thread of its own
    /// from now on, and serves what it owns between calls: `xpb copy` owns the selection on its
    /// one thread, forks, and its child calls this (xclip's order: one process start, one
    /// connection, and the copy returns as soon as the selection is owned).
    package func startThread() throws {
        try connection.startThread()
        // The window names the process that made it (_NET_WM_PID, what owner look-ups use where
        // the server cannot say): after a fork, this one.
        _ = connection.submit { session in
            session.wire.writeLongs(session.wire.window, session.wire.known[.netWMPID], type: .cardinal, [UInt(getpid())], onError: { _ in })
        }
    }

    /// In the parent, after a fork whose child took the connection over (``startThread()``):
    /// this process's descriptors of it are closed with nothing sent, and the backend may not
    /// be used again. The caller must keep the backend alive to the end of the process (its
    /// deinit would close the connection, which is the child's).
    package func leaveToChild() {
        connection.leaveToChild()
    }

    /// Hands the clipboard to a clipboard manager and closes the connection (``close(handOff:)``).
    public func flushToClipboardManager() throws -> Bool {
        if let reason = connection.stopReason { throw reason }
        return close(handOff: true)
    }

    /// A backend nobody holds any more stops its X thread and closes its connection (without a
    /// hand-off: call ``close(handOff:)`` for that).
    deinit {
        connection.close(timeout: 2)
    }

    // MARK: Owning and inspecting

    /// Called (on a background queue) each time a client receives a representation of a
    /// pasteboard this process owns; `xpb copy --paste-once` gives the selection up on the first.
    public func onServed(_ handler: (@Sendable (Pasteboard.Name, PasteboardType) -> Void)?) {
        state.withLock { $0.servedHandler = handler }
        // Counting pastes costs a round trip per conversion (is the requestor the clipboard
        // manager?): the X thread makes it only while someone counts.
        let counts = handler != nil
        _ = connection.submit { session in session.owner.reportsServed = counts }
    }

    public func onPasted(_ handler: (@Sendable (Pasteboard.Name, PasteReading) -> Void)?) {
        state.withLock { $0.pastedHandler = handler }
        let reports = handler != nil
        _ = connection.submit { session in session.owner.pasteReports = reports ? PasteReports() : nil }
    }

    public func refuseSecrets(_ rule: SecretRefusal) {
        _ = connection.submit { session in session.owner.secretRefusal = rule }
    }

    /// How many reads came over the same-host fast path (``X11Configuration/fastPath``) instead
    /// of through the X server: for diagnostics and tests.
    package var fastPathReadCount: Int { state.withLock { $0.fastPathReads } }

    /// Whether the connection to the X server is up (false once closed or lost).
    public var isConnected: Bool { connection.stopReason == nil }

    /// Whether this process owns the pasteboard's selection now.
    public func isOwner(of name: Pasteboard.Name) -> Bool {
        state.withLock { $0.owned[name] != nil }
    }

    /// How many INCR transfers this process is still serving (they go on after ownership ends).
    public func activeTransferCount() throws -> Int {
        try connection.sync(timeout: timeout) { session, done in done(.success(session.owner.sends.count)) }
    }

    /// Who owns a pasteboard's selection: the owner's window, and its name and process id where
    /// it publishes them; nil when nobody does.
    ///
    /// Where several processes hold connections handed down from gone ones (an xclip that forked
    /// after it connected, an `xpb copy` owner forked after it took its selection and still
    /// exiting after it lost it), one of them the owner's, the owner is asked for its targets to
    /// tell which (``SelectionOwnerInfo/resolved(exitWait:asking:)``). The owner itself is
    /// asked, never the offer cached since it took the selection (which a reader of its types,
    /// `xpb watch`, has just filled): an answer from the cache runs no candidate but the one
    /// exiting. No process is named where that cannot be told: never a guess.
    public func owner(of name: Pasteboard.Name) throws -> SelectionOwnerInfo? {
        try accountedOwner(of: name)?.resolved { _ = try? foreignOffer(name, fresh: true) }
    }

    /// Who owns a pasteboard's selection as the server and this host account for it, without
    /// the request ``owner(of:)`` makes of the owner where several processes may serve it
    /// (their ``SelectionOwnerInfo/candidates``): for a caller that asks the owner in its own turn.
    package func accountedOwner(of name: Pasteboard.Name) throws -> SelectionOwnerInfo? {
        if let reason = connection.stopReason { throw reason }
        return try attribution.ownerInfo(ofSelection: Self.selectionName(for: name))
    }

    /// The window that owns a pasteboard's selection (`.none` when nobody does): one round trip,
    /// without the look at who the owner is that ``owner(of:)`` takes.
    package func ownerWindow(of name: Pasteboard.Name) throws -> X11Window {
        try connection.sync(timeout: timeout) { [self] session, done in
            done(.success(session.wire.selectionOwner(self.selectionAtom(name, in: session))))
        }
    }

    /// The raw `TARGETS` of whoever owns the selection (empty when nobody does).
    public func targets(of name: Pasteboard.Name) throws -> [String] {
        if ownedItems(name) != nil {
            return try connection.sync(timeout: timeout) { session, done in
                let state = session.owner.owned[session.wire.atom(Self.selectionName(for: name))]
                done(.success(session.wire.names(of: state?.advertised ?? []).compactMap { $0 }))
            }
        }
        return try foreignOffer(name)?.targets ?? []
    }

    /// Empties a pasteboard whoever owns it: its selection gets no owner.
    public func clear(_ name: Pasteboard.Name) throws {
        try connection.sync(timeout: timeout) { [self] session, done in
            session.owner.clear(self.selectionAtom(name, in: session)) { done($0) }
        }
        let change = state.withLock { state -> (PasteboardChange, ChangeCenter.Slot)? in
            guard state.owned.removeValue(forKey: name) != nil else { return nil }
            return bump(&state, name, typesAfter: [])
        }
        if let (change, slot) = change { changeCenter.publish(change, in: slot) }
    }

    // MARK: Names

    func selectionAtom(_ name: Pasteboard.Name, in session: X11Session) -> X11Atom {
        let atom = session.wire.atom(Self.selectionName(for: name))
        state.withLock { $0.selectionNames[atom] = name }
        session.watch(atom)
        return atom
    }

    var timeout: Double { configuration.readTimeout * 2 + 5 }

    public func exists(_ name: Pasteboard.Name) -> Bool {
        if name.isSystem || state.withLock({ $0.named.contains(name) }) { return true }
        if state.withLock({ $0.removed.contains(name) }) { return false }
        return hasOwner { [self] session in self.selectionAtom(name, in: session) }
    }

    /// Whether a selection (chosen on the X thread) has an owner now; false when the server
    /// cannot be asked.
    private func hasOwner(_ selection: @escaping @Sendable (X11Session) -> X11Atom) -> Bool {
        let owner = try? connection.sync(timeout: timeout) { session, done in
            done(.success(session.wire.selectionOwner(selection(session))))
        }
        return owner.map { !$0.isNone } ?? false
    }

    public func create(_ name: Pasteboard.Name) throws {
        state.withLock {
            $0.named.insert(name)
            $0.removed.remove(name)
        }
        try connection.sync(timeout: timeout) { [self] session, done in
            _ = self.selectionAtom(name, in: session)
            done(.success(()))
        }
    }

    public func remove(_ name: Pasteboard.Name) {
        guard !name.isSystem else { return }
        _ = try? connection.sync(timeout: timeout) { [self] session, done in
            session.owner.relinquish(self.selectionAtom(name, in: session))
            done(.success(()))
        }
        let (count, types, slot) = state.withLock { state -> (Int, [PasteboardType], ChangeCenter.Slot) in
            state.named.remove(name)
            state.removed.insert(name)
            state.owned.removeValue(forKey: name)
            return (state.changeCounts[name] ?? 0, state.lastTypes.removeValue(forKey: name) ?? [], changeCenter.reserve())
        }
        changeCenter.publish(PasteboardChange(name: name, kind: .removed, changeCount: count, typesAdded: [], typesRemoved: types), in: slot)
    }

    /// True only for the general pasteboard while a clipboard manager (the owner of
    /// `CLIPBOARD_MANAGER`) runs to keep it: X11 itself keeps nothing once the owner exits. No
    /// manager keeps the find or named pasteboards, so they are never persistent.
    public func isPersistent(_ name: Pasteboard.Name) -> Bool {
        name == .general && hasOwner { $0.wire.known[.clipboardManager] }
    }

    /// Does nothing on X11: whether contents outlive their writer is up to the clipboard manager,
    /// and none keeps named pasteboards yet.
    public func setPersistent(_ isPersistent: Bool, for name: Pasteboard.Name) {}

    /// While a clipboard manager that publishes counts (xpbd) runs, the general and find
    /// pasteboards' counts are the display's, the same in every process; otherwise, and for named
    /// pasteboards, each process counts the changes it has seen since it connected.
    public func changeCount(of name: Pasteboard.Name) -> Int {
        if let shared = sharedChangeCount(of: name) { return shared }
        return state.withLock { $0.changeCounts[name] ?? 0 }
    }

    // MARK: Reading

    /// The types of each item, or nil when nobody (neither this process nor another client) owns
    /// the pasteboard's selection: tells an empty pasteboard from one whose owner offers nothing,
    /// in the same round trips as ``itemTypes(of:)``.
    public func itemTypesIfOwned(of name: Pasteboard.Name) throws -> [[PasteboardType]]? {
        try readSource(name).itemTypes
    }

    func ownedItems(_ name: Pasteboard.Name) -> [PasteboardItem]? {
        state.withLock { $0.owned[name]?.items }
    }

    public func itemTypes(of name: Pasteboard.Name) throws -> [[PasteboardType]] {
        try readSource(name).itemTypes ?? []
    }

    public func data(of name: Pasteboard.Name, item: Int, type: PasteboardType) throws -> Data? {
        let source = try readSource(name)
        try source.check(item)
        switch source {
        case let .owned(items): return try items[item].data(for: type)
        case let .foreign(offer, _): return try fetch(name, item: item, type: type, offer: offer)
        case .empty: return nil
        }
    }

    /// One representation in the cheapest form at hand: a file when an xpb owner on this host
    /// passed one over the fast path (streamable without entering memory), else the bytes, or
    /// this process's own representation. Nil when the owner does not offer the type.
    public func contents(of name: Pasteboard.Name, item: Int, type: PasteboardType) throws -> Representation? {
        let source = try readSource(name)
        try source.check(item)
        switch source {
        case let .owned(items):
            return items[item].representation(for: type)
        case let .foreign(offer, _):
            if let file = try overFastPath(name, item: item, type: type, offer: offer, FastPathClient.open) {
                return .file(file)
            }
            return try fetch(name, item: item, type: type, offer: offer, fastPath: false).map { .data($0) }
        case .empty:
            return nil
        }
    }

    public func items(of name: Pasteboard.Name) throws -> [PasteboardItem] {
        let offer: ForeignOffer, itemTypes: [[PasteboardType]]
        switch try readSource(name) {
        case let .owned(items): return items
        case .empty: return []
        case let .foreign(foreign, types): (offer, itemTypes) = (foreign, types)
        }
        return itemTypes.enumerated().map { index, types in
            var item = PasteboardItem()
            for type in types {
                item.setProvider(for: type) { [self] in
                    guard let data = try self.fetch(name, item: index, type: type, offer: offer) else {
                        throw PasteboardError.backendFailure("the selection owner no longer offers \(type)")
                    }
                    return data
                }
            }
            return item
        }
    }

    public func options(of name: Pasteboard.Name) -> PasteboardOptions {
        state.withLock { $0.owned[name]?.options } ?? PasteboardOptions()
    }

    // MARK: Writing

    private func checkNotRemoved(_ name: Pasteboard.Name) throws {
        if state.withLock({ $0.removed.contains(name) }) { throw PasteboardError.pasteboardRemoved(name.rawValue) }
    }

    public func setItems(_ items: [PasteboardItem], options: PasteboardOptions, on name: Pasteboard.Name) throws {
        try checkNotRemoved(name)
        if items.isEmpty {
            try relinquish(name)
            return
        }
        let registry = self.registry
        // The manager's count is followed from before our change, in the same job as the change:
        // its read is sent here and answered before the change's own check (the change itself
        // goes out after this job, when its timestamp or the start time is taken), so it costs no
        // round trip of its own.
        let countIndex = SelectionNames.sharedCountIndex(of: name)
        let written: (change: PasteboardChange, slot: ChangeCenter.Slot, generation: Int, countWatch: Int?)
        written = try connection.sync(timeout: timeout) { [self] session, done in
            let watch = XThreadConfined(XThreadCell<Int?>(nil))
            session.owner.own(self.selectionAtom(name, in: session), items: items, options: options, registry: registry) { result in
                // A change that failed is not counted: nothing waits for its watch.
                if case .failure = result, let id = watch.value.value { session.manager.endSharedCountWatch(id) }
                // Recorded and counted on the X thread, as the selection is won: a SelectionClear
                // that follows at once finds this ownership to end (recorded later, by the
                // caller, it would outlive the clear, and the owner would never learn it lost).
                done(result.map { _ in
                    let (change, slot, generation) = self.state.withLock { state -> (PasteboardChange, ChangeCenter.Slot, Int) in
                        state.generation += 1
                        state.owned[name] = (items, options, state.generation)
                        let (change, slot) = self.bump(&state, name, typesAfter: items.flatMap(\.types))
                        return (change, slot, state.generation)
                    }
                    return (change, slot, generation, watch.value.value)
                })
            }
            if let countIndex { watch.value.value = session.manager.watchSharedCount(index: countIndex) }
        }
        if let id = written.countWatch { waitForSharedCount(id) }
        let (change, slot, generation) = (written.change, written.slot, written.generation)
        changeCenter.publish(change, in: slot)
        if let date = options.expirationDate { scheduleExpiry(name, at: date, generation: generation) }
    }

    public func addItems(_ items: [PasteboardItem], to name: Pasteboard.Name) throws {
        try checkNotRemoved(name)
        guard !items.isEmpty else { return }
        let current = try self.items(of: name)
        let options = self.options(of: name)
        // Items another client owns must be read now: that client loses the selection to us.
        let kept = try ownedItems(name) != nil ? current : current.map { item in
            var copy = PasteboardItem()
            for type in item.types { copy.setData(try item.data(for: type) ?? Data(), for: type) }
            return copy
        }
        try setItems(kept + items, options: options, on: name)
    }

    /// Gives the selection up (the pasteboard becomes empty), counting it as one change.
    private func relinquish(_ name: Pasteboard.Name) throws {
        try connection.sync(timeout: timeout) { [self] session, done in
            session.owner.relinquish(self.selectionAtom(name, in: session))
            done(.success(()))
        }
        let (change, slot) = state.withLock { state -> (PasteboardChange, ChangeCenter.Slot) in
            state.owned.removeValue(forKey: name)
            return bump(&state, name, typesAfter: [])
        }
        changeCenter.publish(change, in: slot)
    }

    /// Waits (at most 250 ms) until the clipboard manager has counted our change, so that this
    /// process's `changeCount` after a write is the one every other process sees: woken by the
    /// PropertyNotify of the manager's new count (followed since before the change: `watch`), not
    /// by looking again and again.
    private func waitForSharedCount(_ watch: Int) {
        _ = try? connection.sync(timeout: 1) { (session, done: @escaping @Sendable (Result<Bool, any Error>) -> Void) in
            session.manager.awaitSharedCount(watch, within: 0.25) { done(.success($0)) }
        }
    }

    private func scheduleExpiry(_ name: Pasteboard.Name, at date: Date, generation: Int) {
        Background.run("xpb.x11.expiry", after: date.timeIntervalSinceNow) { [weak self] in
            guard let self, self.state.withLock({ $0.owned[name]?.generation == generation }) else { return }
            try? self.relinquish(name)
        }
    }

    /// Counts one change, describes it and reserves its place in the order of deliveries (under
    /// the state lock: places follow change counts).
    private func bump(_ state: inout State, _ name: Pasteboard.Name, typesAfter: [PasteboardType]) -> (PasteboardChange, ChangeCenter.Slot) {
        state.changeCounts[name, default: 0] += 1
        let before = state.lastTypes[name] ?? []
        state.lastTypes[name] = typesAfter
        let change = PasteboardChange(name: name, changeCount: state.changeCounts[name]!, typesBefore: before, typesAfter: typesAfter)
        return (change, changeCenter.reserve())
    }
}


extension X11PasteboardBackend: X11SessionDelegate {
    func selectionOwnerChanged(selection: X11Atom, owner: X11Window, timestamp: X11Timestamp, reason: OwnerChangeReason, isOurs: Bool,
                               session: X11Session) {
        let (name, handler, readHandler) = state.withLock { state -> (Pasteboard.Name?, (@Sendable (SelectionOwnerChange) -> Void)?, (@Sendable (SelectionOwnerChange) -> Void)?) in
            guard let name = state.selectionNames[selection] else { return (nil, nil, nil) }
            state.ownershipEpochs[name, default: 0] += 1
            state.offers.removeValue(forKey: name)
            return (name, state.ownerChangeHandler, state.ownerChangeReadHandler)
        }
        // A change held back (its owner went away while a clipboard manager runs) is dropped by
        // the change that follows: watchers see the manager's taking over alone.
        if let name, let held = state.withLock({ $0.heldGone.removeValue(forKey: name) }) {
            session.cancelTimer(held.timer)
            held.withdraw()
        }
        if let name, handler != nil || readHandler != nil {
            let change = SelectionOwnerChange(name: name, owner: owner, timestamp: timestamp.rawValue, reason: reason, isOurs: isOurs)
            readHandler?(change)
            if let handler { publisher.async { handler(change) } }
        }
        guard !isOurs, let name else { return }
        // Count now, so changeCount is right as soon as the event is in; describe the change once
        // the new owner's types are known.
        let (count, slot, epoch) = state.withLock { state -> (Int, ChangeCenter.Slot, Int) in
            state.changeCounts[name, default: 0] += 1
            if owner != session.wire.window { state.owned.removeValue(forKey: name) }
            return (state.changeCounts[name]!, changeCenter.reserve(), state.ownershipEpochs[name] ?? 0)
        }
        let publish: @Sendable ([PasteboardType]) -> Void = { [self] types in
            let before = self.state.withLock { state -> [PasteboardType] in
                defer { state.lastTypes[name] = types }
                return state.lastTypes[name] ?? []
            }
            let change = PasteboardChange(name: name, changeCount: count, typesBefore: before, typesAfter: types)
            self.deliver(change, in: slot)
        }
        guard !owner.isNone else {
            // Gone (not cleared on purpose) while another client is the clipboard manager: held
            // back for a moment; the manager's taking over (or any change) withdraws it.
            guard reason != .setOwner, !session.manager.isClipboardManager,
                  !session.wire.selectionOwner(session.wire.known[.clipboardManager]).isNone else { return publish([]) }
            let id = state.withLock { state -> Int in
                state.holds += 1
                return state.holds
            }
            let timer = session.after(Self.ownerGoneGrace) { [self] in
                let due = state.withLock { state -> Bool in
                    guard state.heldGone[name]?.id == id else { return false }
                    state.heldGone.removeValue(forKey: name)
                    return true
                }
                if due { publish([]) }
            }
            state.withLock {
                $0.heldGone[name] = HeldChange(id: id, timer: timer, withdraw: { [changeCenter] in changeCenter.withdraw(slot) },
                                               deliver: { publish([]) })
            }
            return
        }
        let registry = self.registry
        // Read as a paste reads it (the manifest too), and kept for the reads that follow.
        session.reader.readOffer(of: selection, owner: { owner }) { result in
            guard case let .success(offer) = result else { return publish([]) }
            self.state.withLock { state in
                if state.ownershipEpochs[name] == epoch { state.offers[name] = CachedOffer(epoch: epoch, owner: owner, offer: offer) }
            }
            publish(offer.itemTypes(registry).flatMap { $0 })
        }
    }

    func served(selection: X11Atom, type: PasteboardType) {
        let (name, handler) = state.withLock { ($0.selectionNames[selection], $0.servedHandler) }
        guard let name, let handler else { return }
        publisher.async { handler(name, type) }
    }

    func pasted(selection: X11Atom, reader: PasteReader) {
        let (name, handler) = state.withLock { ($0.selectionNames[selection], $0.pastedHandler) }
        guard let name, let handler else { return }
        let reading = PasteReading(time: Date(), processID: reader.processID, appName: reader.executableName, ownerID: reader.owner.description)
        publisher.async { handler(name, reading) }
    }

    func ownershipLost(selection: X11Atom, announced: Bool) {
        let unannounced = state.withLock { state -> (PasteboardChange, ChangeCenter.Slot)? in
            guard let name = state.selectionNames[selection] else { return nil }
            state.owned.removeValue(forKey: name)
            // Without XFixes (an owner that follows no other changes), the clear is counted here:
            // who took the selection, and what it holds, this connection does not read.
            return announced ? nil : bump(&state, name, typesAfter: [])
        }
        if let (change, slot) = unannounced { deliver(change, in: slot) }
    }

    /// Hands a counted change to its watchers: from the publisher's queue when the program's
    /// observer runs on delivery, else at once, on this thread (the streams' and queues' hand-off
    /// does not wait). A background owner learns of its loss without the publisher's thread,
    /// which libdispatch would start for that one delivery (a thread, its stack and a malloc
    /// arena made and torn down as the next copy starts).
    private func deliver(_ change: PasteboardChange, in slot: ChangeCenter.Slot) {
        if changeCenter.hasObserver {
            publisher.async { [changeCenter] in changeCenter.publish(change, in: slot) }
        } else {
            changeCenter.publish(change, in: slot)
        }
    }

    func clipboardManagerLost() {
        guard let handler = state.withLock({ $0.managerLostHandler }) else { return }
        publisher.async { handler() }
    }

    func saveRequested(targets: [String], time: X11Timestamp) {
        guard let handler = state.withLock({ $0.saveHandler }) else { return }
        Background.run("xpb.x11.save") { handler(targets, time.rawValue) }
    }
}


extension X11PasteboardBackend: OwningPasteboardBackend {
    /// The selection's owner as ``PasteboardKit/PasteboardOwner``: its window, process and application.
    public func contentsOwner(of name: Pasteboard.Name) throws -> PasteboardOwner? {
        try owner(of: name).map { owner in
            PasteboardOwner(id: owner.window.description, name: owner.name, processID: owner.processID, appName: owner.appName,
                            executablePath: owner.executablePath, windowClass: owner.windowClass, copiedBy: owner.copiedBy)
        }
    }
}
