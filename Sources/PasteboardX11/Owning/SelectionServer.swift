internal import CX11
import Dispatch
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections

/// The owner of our selections: what we serve (``OwnedSelection``), the conversion requests
/// waiting their turn (``RequestScheduler``), the work they wait for on workers, the INCR sends
/// (``OutgoingSends``), the requests served from a sync peer, and the fast path's listener. The
/// loop hands it every `SelectionRequest` and `SelectionClear`, and each requestor that goes.
final class SelectionServer {
    private unowned let session: X11Session
    private let wire: X11Wire
    /// What we serve, per selection we own.
    private(set) var owned: [X11Atom: OwnedSelection] = [:]
    /// Conversion requests waiting their turn, and the flood rules.
    private var scheduler = RequestScheduler()
    /// Whether conversions are reported to the delegate (``X11SessionDelegate/served(selection:type:)``):
    /// only while the backend has a handler for them.
    var reportsServed = false
    /// While the backend listens (``X11PasteboardBackend/onPasted(_:)``), which conversions of what
    /// we own are reported to the delegate as pastes (``X11SessionDelegate/pasted(selection:reader:)``);
    /// nil: none are.
    var pasteReports: PasteReports?
    /// The readers refused what we serve marked secret (``X11PasteboardBackend/refuseSecrets(_:)``).
    var secretRefusal = SecretRefusal(apps: [])
    /// How often a secret's readers are looked up while a refusal rule names any app: a reader
    /// past it goes unnamed, and is refused (a flood of readers costs a few look-ups a second).
    private var secretLookUps = LookUpBudget.secretReaders
    /// The requestor windows whose events we ask for while something of ours concerns them.
    let requestors: RequestorWatch
    /// The INCR sends under way.
    let sends: OutgoingSends
    /// Requests waiting for work on a worker (providers, large conversions): how many of their
    /// targets are not ready yet, and what to do then.
    private var waitingForPreparation: [Int: (remaining: Int, requestor: X11Window?, answer: @Sendable (X11Session) -> Void, timedOut: @Sendable (X11Session) -> Void)] = [:]
    /// The work under way per target: the requests waiting for it, and its deadline timer.
    private var preparations: [PreparationKey: (waiters: [Int], timer: TimerHandle)] = [:]
    /// Requests for targets served from elsewhere (a sync peer), waiting for the first bytes.
    private var pendingRemote: [Int: (request: ConversionRequest, stream: ByteStream)] = [:]
    /// The paste queues we serve, per selection (``QueuedSelection``).
    private var queued: [X11Atom: QueuedSelection] = [:]
    /// The last paste queue's ``QueuedSelection/id``.
    private var queueIDs = 0
    /// The same-host fast path's listener, once this process owns something.
    private(set) var fastPath: FastPathServer?
    /// A window of a client whose conversion requests are refused, whatever they ask: a
    /// compositor's XWayland window manager, which would carry what we own back to Wayland, where
    /// a bridge carries it already (``X11ManagerPort/refuseRequests(fromClientOf:)``).
    var refusedClient: X11Window?

    init(session: X11Session) {
        self.session = session
        wire = session.wire
        requestors = RequestorWatch(session: session)
        sends = OutgoingSends(session: session, requestors: requestors)
        sends.ended = { [unowned self] key, whole in queueTransferEnded(by: key.requestor, whole: whole) }
    }

    /// Whether conversion requests wait for their turn.
    var hasQueuedRequests: Bool { !scheduler.isEmpty }

    /// The session is finishing: nothing more is served.
    func finish() {
        sends.removeAll()
        queued.removeAll()
        owned.removeAll()
        let server = fastPath
        fastPath = nil
        server?.close()
    }

    /// The fast-path listener's name, started on first use; nil when disabled or unavailable.
    private func fastPathName() -> String? {
        guard session.configuration.fastPath else { return nil }
        if let fastPath { return fastPath.name }
        guard let server = try? FastPathServer(session: session) else { return nil }
        fastPath = server
        server.listen()
        return server.name
    }

    /// Builds what we serve for `items`: the first item's types as ordinary targets through the
    /// registry, the manifest, and one target per representation of every item.
    func makeOwnedSelection(items: [PasteboardItem], options: PasteboardOptions, timestamp: X11Timestamp, registry: TypeRegistry) -> OwnedSelection {
        let plan = TargetPlan(items: items, options: options, registry: registry)
        var manifest = plan.manifest
        manifest.fastPath = fastPathName()
        let entries = plan.firstItem + plan.itemTargets
        let names = entries.flatMap { [$0.name, $0.replyType] }
        let atomOf = Dictionary(zip(names, wire.atoms(names)), uniquingKeysWith: { first, _ in first })
        var served: [X11Atom: ServedTarget] = [wire.known[.manifest]: .manifest]
        for entry in entries {
            guard let target = atomOf[entry.name], let reply = atomOf[entry.replyType] else { continue }
            switch entry.source {
            case let .urlList(codec): served[target] = .urlList(codec: codec, replyType: reply)
            case let .representation(item, type, codec): served[target] = .representation(item: item, type: type, codec: codec, replyType: reply)
            }
        }
        let advertised = WellKnown.ownerTargets.map { wire.known[$0] } + plan.firstItem.compactMap { atomOf[$0.name] } + [wire.known[.manifest]]
        let hasProviders = items.contains { item in
            item.representations.contains { if case .lazy = $0.representation { return true } else { return false } }
        }
        return OwnedSelection(items: items, options: options, timestamp: timestamp, advertised: advertised,
                              served: served, manifest: manifest.encoded(), registry: registry, hasProviders: hasProviders,
                              credit: session.configuration.copiedBy)
    }

    /// Becomes owner of `selection` with a real server timestamp and checks that it won.
    func own(_ selection: X11Atom, items: [PasteboardItem], options: PasteboardOptions, registry: TypeRegistry,
             completion: @escaping (Result<X11Timestamp, any Error>) -> Void) {
        own(selection, at: nil, making: { session, time in
            session.owner.makeOwnedSelection(items: items, options: options, timestamp: time, registry: registry)
        }, completion: completion)
    }

    /// Becomes owner of `selection`, serving what `making` builds, at `time` (a timestamp a
    /// client gave us, such as a `SAVE_TARGETS` request's) or else at a fresh server timestamp;
    /// checks that it won.
    ///
    /// With `precondition`, it is asked (here, on the X thread, after the timestamp is taken)
    /// with the selection's owner at that moment: false declines (``OwnDeclined``), so that a
    /// caller can take the selection only from an owner it knows (compare-and-own).
    func own(_ selection: X11Atom, at time: X11Timestamp?, if precondition: ((X11Window) -> Bool)? = nil,
             making: @escaping (X11Session, X11Timestamp) -> OwnedSelection,
             completion: @escaping (Result<X11Timestamp, any Error>) -> Void) {
        let attempt: (X11Timestamp) -> Result<X11Timestamp, any Error>? = { [weak self] time in
            guard let self else { return nil }
            // Built before: the server is grabbed only for the look and the change.
            let state = making(self.session, time)
            if let precondition {
                // One step: with the server grabbed, no client can own the selection between the
                // look at its owner and our change (a copy made in the same millisecond as our
                // timestamp would otherwise lose to older contents).
                return self.wire.withServerGrabbed {
                    guard precondition(self.session.currentOwnerAfterQueuedChanges(selection)) else { return .failure(OwnDeclined()) }
                    return self.becomeOwner(selection, state, at: time)
                }
            }
            return self.becomeOwner(selection, state, at: time)
        }
        let acquire: (X11Timestamp) -> Void = { time in attempt(time).map(completion) }
        if let time, !time.isCurrentTime { return acquire(time) }
        session.ownershipTime { [weak self] result, isStartTime in
            switch result {
            case let .failure(error): completion(.failure(error))
            case let .success(time):
                guard isStartTime else { return acquire(time) }
                // The connection's start time lost to an owner that came after it: again at a
                // fresh timestamp, as every ownership but the first soon after connecting is.
                guard let result = attempt(time) else { return }
                guard case .failure(X11BackendError.ownershipRefused) = result, let self else { return completion(result) }
                self.session.serverTime { fresh in
                    switch fresh {
                    case let .failure(error): completion(.failure(error))
                    case let .success(time): acquire(time)
                    }
                }
            }
        }
    }

    /// Becomes owner of `selection` serving a paste queue: the items `making` builds, each
    /// served to the readers whose turn it is (``PasteTurns``); `onPaste` hears each item pasted.
    func ownQueue(_ selection: X11Atom, making: @escaping (X11Session, X11Timestamp) -> [OwnedSelection],
                  onPaste: @escaping @Sendable (Int) -> Void, completion: @escaping (Result<X11Timestamp, any Error>) -> Void) {
        let box = QueuedItemsBox()
        own(selection, at: nil, making: { session, time in
            box.items = making(session, time)
            return box.items[0]
        }, completion: { [weak self] result in
            if case let .success(time) = result, let self, !box.items.isEmpty {
                self.queueIDs += 1
                self.queued[selection] = QueuedSelection(id: self.queueIDs, items: box.items, turns: PasteTurns(count: box.items.count),
                                                         since: time, onPaste: onPaste)
            }
            completion(result)
        })
    }

    /// The queue clock: seconds of the X thread's monotonic clock.
    private var queueNow: Double { Double(session.configuration.clock()) / 1e9 }

    /// A request on a queued selection takes its turn: the selection serves the item it names.
    /// Returns whether the request asks for data (its transfer's end tells the turns whether the
    /// item was pasted: ``queueTransferEnded(by:whole:)``).
    private func takeQueueTurn(_ request: ConversionRequest) -> Bool {
        guard var queue = queued[request.selection], owned[request.selection] != nil else { return false }
        let metadata = [wire.known[.targets], wire.known[.timestamp], wire.known[.manifest]]
        let isData = !metadata.contains(request.target)
        let turn = queue.turns.request(request.requestor.rawValue, isData ? .data : .metadata, at: queueNow)
        owned[request.selection] = queue.served(turn.item)
        let holder = turn.holder.map { X11Window(rawValue: $0) }
        var announce: Int?
        if holder != queue.watched {
            if let watched = queue.watched { requestors.release(watched) }
            queue.watched = nil
            if let holder {
                // A window known gone already ends its paste now.
                if requestors.watch(holder) { queue.watched = holder } else { announce = queue.turns.requestorGone(holder.rawValue, at: queueNow) }
            }
        }
        scheduleQueueTick(&queue, on: request.selection)
        queued[request.selection] = queue
        if announce != nil { announceQueueItem(request.selection, id: queue.id) }
        return isData
    }

    /// A queued selection's data conversion for `requestor` was answered (`sending`: an INCR
    /// transfer goes on, and its end tells) or refused.
    private func queueConversionAnswered(by requestor: X11Window, succeeded: Bool, sending: Bool) {
        guard !sending else { return }
        queueTransferEnded(by: requestor, whole: succeeded)
    }

    /// `requestor`'s data transfer ended: whole, its item is pasted (reported once); cut short,
    /// the item stays for the next paste.
    private func queueTransferEnded(by requestor: X11Window, whole: Bool) {
        for (selection, var queue) in queued {
            if whole {
                guard let pasted = queue.turns.delivered(requestor.rawValue, at: queueNow) else { continue }
                let onPaste = queue.onPaste
                Background.run("xpb.x11.pasted", qos: .userInitiated) { onPaste(pasted) }
            } else if !queue.turns.undelivered(requestor.rawValue, at: queueNow) {
                continue
            }
            scheduleQueueTick(&queue, on: selection)
            queued[selection] = queue
        }
    }

    /// Sets the timer that tells the queue's turns when the paste under way is over by silence.
    private func scheduleQueueTick(_ queue: inout QueuedSelection, on selection: X11Atom) {
        if let timer = queue.timer { session.cancelTimer(timer) }
        queue.timer = nil
        // A paste already over by silence (the timer's own tick) needs no other.
        guard let deadline = queue.turns.deadline, deadline >= queueNow else { return }
        let id = queue.id
        // A little past the deadline: the turns count silence longer than the grace.
        queue.timer = session.after(max(0, deadline - queueNow) + 0.02) { [weak self] in
            guard let self, var queue = self.queued[selection], queue.id == id else { return }
            queue.timer = nil
            let announce = queue.turns.tick(at: self.queueNow)
            self.scheduleQueueTick(&queue, on: selection)
            self.queued[selection] = queue
            if announce != nil { self.announceQueueItem(selection, id: id) }
        }
    }

    /// The queue moved on to its next item: takes the selection again at a new timestamp, serving
    /// that item, so that readers that read again only when the owner changes (Chromium) read
    /// it. Only while the selection is still ours (compare-and-own, the server grabbed) and the
    /// queue still the same; otherwise the change that took it ends the queue.
    private func announceQueueItem(_ selection: X11Atom, id: Int) {
        session.serverTime { [weak self] result in
            guard let self, case let .success(time) = result, var queue = self.queued[selection], queue.id == id,
                  self.owned[selection] != nil else { return }
            let announced = self.wire.withServerGrabbed { () -> Bool in
                guard self.session.currentOwnerAfterQueuedChanges(selection) == self.wire.window,
                      self.queued[selection]?.id == id else { return false }
                queue.since = time
                self.owned[selection] = queue.served(queue.turns.item)
                self.session.noteOurChange(selection, at: time)
                self.wire.setSelectionOwner(selection, self.wire.window, at: time)
                return true
            }
            if announced { self.queued[selection] = queue }
        }
    }

    /// The queue of `selection` ends (its ownership did).
    private func dropQueue(_ selection: X11Atom) {
        guard let queue = queued.removeValue(forKey: selection) else { return }
        if let watched = queue.watched { requestors.release(watched) }
        if let timer = queue.timer { session.cancelTimer(timer) }
    }

    /// Sets us as owner of `selection` serving `state`, and checks that it won.
    private func becomeOwner(_ selection: X11Atom, _ state: OwnedSelection, at time: X11Timestamp) -> Result<X11Timestamp, any Error> {
        dropQueue(selection)
        // Record first: the XFixes event for our own change must be recognised as ours.
        let previous = owned[selection]
        owned[selection] = state
        session.noteOurChange(selection, at: time)
        wire.setSelectionOwner(selection, wire.window, at: time)
        guard wire.selectionOwner(selection) == wire.window else {
            owned[selection] = previous
            _ = session.consumeOurChange(selection, at: time)
            return .failure(X11BackendError.ownershipRefused(selection: wire.name(of: selection) ?? "the selection"))
        }
        publishCredit(selection, state)
        return .success(time)
    }

    /// Publishes who made the copy we now own, or takes the last one's away (a daemon that kept
    /// an app's copy may own the selection next for a copy synced from elsewhere).
    private func publishCredit(_ selection: X11Atom, _ state: OwnedSelection) {
        guard let property = wire.creditProperty(selection) else { return }
        guard let credit = state.credit else { return wire.deleteProperty(wire.window, property) }
        credit.encoded.withUnsafeBytes { wire.writeBytes(wire.window, property, type: wire.known[.utf8String], $0, onError: { _ in }) }
    }

    /// What we serve for contents taken from another owner: exactly the targets listed in
    /// `advertised` that we can answer (protocol targets, those captured, and image formats and
    /// text encodings made from a captured one), in that order.
    /// A captured xpb manifest is served only for the item targets captured with it
    /// (``Manifest/restricted(to:)``), and not at all when none were.
    func makeCapturedSelection(advertised: [String], targets: [CapturedTarget], timestamp: X11Timestamp,
                               credit: CopyCredit? = nil) -> OwnedSelection {
        let plan = CapturedPlan(advertised: advertised, targets: targets)
        let names = plan.names + KeptTargets.derivedTextTargets.values.compactMap(\.replyType)
        let atomOf = Dictionary(zip(names, wire.atoms(names)), uniquingKeysWith: { first, _ in first })
        var served: [X11Atom: ServedTarget] = [:]
        for entry in plan.entries {
            guard let atom = atomOf[entry.name], let type = atomOf[entry.replyType], served[atom] == nil else { continue }
            switch entry.source {
            case let .kept(data): served[atom] = .captured(data, replyType: type)
            case let .conversion(source, conversion): served[atom] = .capturedConversion(source, conversion, replyType: type)
            }
        }
        let answered = Set(WellKnown.ownerTargets.map { wire.known[$0] })
        var listed: [X11Atom] = []
        for name in plan.advertised {
            guard let atom = atomOf[name], served[atom] != nil || answered.contains(atom), !listed.contains(atom) else { continue }
            listed.append(atom)
        }
        return OwnedSelection(items: [], options: PasteboardOptions(), timestamp: timestamp, advertised: listed, served: served,
                              manifest: Data(), registry: .standard, hasProviders: false, credit: credit)
    }

    /// Gives a selection up if we own it.
    func relinquish(_ selection: X11Atom) {
        dropQueue(selection)
        guard let state = owned.removeValue(forKey: selection) else { return }
        if wire.selectionOwner(selection) == wire.window {
            session.noteOurChange(selection, at: state.timestamp)
            wire.setSelectionOwner(selection, .none, at: state.timestamp)
        }
    }

    func handleSelectionClear(window: X11Window, selection: X11Atom, time: X11Timestamp) {
        guard window == self.wire.window, let state = owned[selection] else { return }
        // A clear older than our latest acquisition belongs to an earlier ownership. So does one
        // of the same millisecond (the server takes an owner change at the selection's own time)
        // if the server still names us: the server's word decides.
        if !time.isCurrentTime, time.isBefore(state.timestamp) { return }
        if !time.isCurrentTime, !state.timestamp.isBefore(time), wire.selectionOwner(selection) == window { return }
        owned.removeValue(forKey: selection)
        dropQueue(selection)
        if selection == wire.known[.clipboardManager] { session.manager.managerSelectionLost() }
        session.delegate?.ownershipLost(selection: selection, announced: session.isWatched(selection))
    }

    /// The most pairs one `MULTIPLE` request may list; a longer list is refused whole.
    static let maxMultiplePairs = 256
    /// The most bytes the pairs of one `MULTIPLE` request may have written straight into
    /// properties (what the X server must hold at once); pairs past it are refused.
    static let multipleByteBudget = 8 << 20
    /// The most INCR transfers served at once to one requestor window, and in all.
    static let maxTransfersPerRequestor = 16
    static let maxTransfers = 512

    func handleSelectionRequest(_ request: ConversionRequest) {
        // A paste queue's announces take the selection again: a reader's request made before the
        // latest (its paste began before it) is still the queue's.
        guard let owned = owned[request.selection], request.owner == wire.window,
              request.time.isCurrentTime || !request.time.isBefore(queued[request.selection]?.items.first?.timestamp ?? owned.timestamp) else {
            return notify(request, succeeded: false)
        }
        // The same selection and target into a property a send of ours fills now: that send
        // answers it (``OutgoingSends/answers(_:selection:target:)``).
        if request.target != wire.known[.multiple],
           sends.answers(TransferKey(requestor: request.requestor, property: request.replyProperty), selection: request.selection, target: request.target) {
            return
        }
        // (Requests naming our own or the root window never get here: see isForgedRequestor.)
        if let refused = refusedClient, wire.isSameClient(request.requestor, refused) {
            return notify(request, succeeded: false)
        }
        // An xpb reader's guess, asked with TARGETS before it saw our manifest: answered where
        // the reader takes it (``answersGuess(_:in:selection:)``), else refused before any work.
        // Those answered are served as any request, so their property's name is not looked up.
        if request.target != wire.known[.targets], !answersGuess(request.target, in: owned, selection: request.selection),
           wire.isGuessProperty(request.property) {
            return notify(request, succeeded: false)
        }
        // A secret is refused, before any work, to the readers the rule refuses.
        if !secretRefusal.isEmpty, request.target == wire.known[.multiple] || owned.served[request.target]?.isPaste == true,
           refusesSecret(in: owned, toProcess: { self.wire.clientProcessID(of: request.requestor) }) {
            return notify(request, succeeded: false)
        }
        // A paste queue's request takes its turn first: it is served the item the turn names.
        let queuedData = queued[request.selection] != nil && takeQueueTurn(request)
        guard let state = self.owned[request.selection] else { return notify(request, succeeded: false) }
        if session.manager.isClipboardManager, request.selection == wire.known[.clipboardManager], request.target == wire.known[.saveTargets] {
            return session.manager.handleSaveTargets(request)
        }
        if case let .remote(remote)? = state.served[request.target] {
            return serveRemote(request, remote)
        }
        let pairs: [(target: X11Atom, property: X11Atom)]
        let targets: [X11Atom]
        if request.target == wire.known[.multiple] {
            guard let parsed = multiplePairs(request) else { return notify(request, succeeded: false) }
            pairs = parsed
            targets = parsed.map(\.target)
        } else {
            pairs = []
            targets = [request.target]
        }
        // The work some targets need first (providers, large conversions) runs on a worker;
        // the answer uses the contents as they were when the request came, even if the
        // selection changed hands meanwhile.
        let answer: @Sendable (X11Session) -> Void = { session in
            let server = session.owner
            let succeeded: Bool
            if request.target == session.wire.known[.multiple] {
                succeeded = server.serveMultiple(request, pairs: pairs, state)
            } else {
                succeeded = server.serve(target: request.target, to: request.requestor, property: request.replyProperty, state, selection: request.selection)
            }
            server.notify(request, succeeded: succeeded)
            if queuedData {
                let sending = server.sends.isOpen(TransferKey(requestor: request.requestor, property: request.replyProperty))
                    || pairs.contains { server.sends.isOpen(TransferKey(requestor: request.requestor, property: $0.property)) }
                server.queueConversionAnswered(by: request.requestor, succeeded: succeeded, sending: sending)
            }
        }
        afterPreparing(targets, in: state, requestor: request.requestor, answer: answer, timedOut: { session in
            session.owner.notify(request, succeeded: false)
            if queuedData { session.owner.queueConversionAnswered(by: request.requestor, succeeded: false, sending: false) }
        })
    }

    /// Whether an xpb reader's guess for `target` (``SpeculativeRead``) is answered: only where
    /// its bytes are, as they are, the first item's first representation, what the manifest's
    /// first item target (`XPB_ITEM_0_0`) serves. A reader that chooses that type takes the guess
    /// and reads nothing more (``X11PasteboardBackend/stream(of:item:limit:likely:choosing:file:bytes:)``);
    /// one that chooses another reads that through the manifest, in the same paste.
    ///
    /// Refused, before any work: bytes not at hand (a provider, a file, a sync peer's), more than
    /// ``maxGuessAnswer`` (a larger read is quicker over the fast path, and one the reader drops
    /// is sent for nothing), and any guess while conversions are counted (`--paste-once`, the
    /// paste queue: a guess the reader then drops would use up a paste).
    private func answersGuess(_ target: X11Atom, in state: OwnedSelection, selection: X11Atom) -> Bool {
        guard !reportsServed, queued[selection] == nil,
              case let .representation(item, type, codec, _)? = state.served[target], item == 0, codec == .identity,
              let first = state.items.first, type == first.types.first,
              case let .data(data)? = first.representation(for: type) else { return false }
        return data.count <= min(Self.maxGuessAnswer, wire.chunkSize)
    }

    /// The most bytes a guess is answered with.
    static let maxGuessAnswer = 64 << 10

    /// The (target, property) pairs of a `MULTIPLE` request; nil for a list that is malformed,
    /// absent, or longer than ``maxMultiplePairs`` (read no further than that).
    private func multiplePairs(_ request: ConversionRequest) -> [(target: X11Atom, property: X11Atom)]? {
        guard !request.property.isNone,
              let value = try? wire.readProperty(request.requestor, request.property, delete: false, limit: Self.maxMultiplePairs * 8),
              value.format == 32 else { return nil }
        return MultiplePairs.parse(value.atoms, maxPairs: Self.maxMultiplePairs)
    }

    /// Whether a request names one of our own windows or the root window as its requestor (or
    /// none): a requestor is another client's window, and ours (whose event mask we must never
    /// change on anybody's behalf, and whose reads our own conversions make) or the root is a
    /// forged request, refused without being watched or queued.
    func isForgedRequestor(_ request: ConversionRequest) -> Bool {
        wire.isSameClient(request.requestor, wire.window) || request.requestor == wire.root || request.requestor.isNone
    }

    /// Whether `requestor` is a window of the clipboard manager's client (it reads each target
    /// on a window of its own, not on the window that owns `CLIPBOARD_MANAGER`).
    private func isClipboardManagersWindow(_ requestor: X11Window) -> Bool {
        let manager = wire.selectionOwner(wire.known[.clipboardManager])
        return !manager.isNone && wire.isSameClient(manager, requestor)
    }

    func notify(_ request: ConversionRequest, succeeded: Bool) {
        wire.sendSelectionNotify(to: request.requestor, selection: request.selection, target: request.target,
                                 property: succeeded ? request.replyProperty : .none, time: request.time)
    }

    /// Runs `answer` on the X thread once every target in `targets` can be converted without
    /// blocking: at once when none needs work, else after a worker ran their providers and
    /// computed their conversions, so that a slow provider or a large conversion never holds up
    /// the X thread (other requestors, other conversions). The work for one target runs once
    /// however many requests wait for it. When it takes longer than the configured provider
    /// timeout, `timedOut` runs instead.
    ///
    /// A request parked meanwhile watches its requestor window: if the window is destroyed the
    /// request is dropped unanswered. Its id may belong to another client's window by the time
    /// the work is done (the server reuses a departed client's ids), and that window must not
    /// get properties it never asked for.
    func afterPreparing(_ targets: [X11Atom], in state: OwnedSelection, requestor: X11Window? = nil,
                        answer: @escaping @Sendable (X11Session) -> Void,
                        timedOut: @escaping @Sendable (X11Session) -> Void) {
        let work = Array(Set(targets.filter { state.needsPreparation($0) }))
        guard !work.isEmpty, let enqueue = session.enqueue else { return answer(session) }
        if let requestor, !requestors.watch(requestor) { return }
        let id = session.makeOperationID()
        waitingForPreparation[id] = (remaining: work.count, requestor: requestor, answer: answer, timedOut: timedOut)
        for target in work {
            // Targets that make the same conversion share its work: it runs once.
            let key = PreparationKey(conversions: ObjectIdentifier(state.conversions),
                                     work: state.conversionKey(target).map { .conversion($0) } ?? .target(target))
            if preparations[key] != nil {
                preparations[key]?.waiters.append(id)
                continue
            }
            let timer = session.after(session.configuration.providerTimeout) { [weak self] in
                self?.finishPreparation(key, ready: false)
            }
            preparations[key] = (waiters: [id], timer: timer)
            Background.run("xpb.x11.prepare", qos: .userInitiated) {
                state.prepare(target)
                _ = enqueue { session in session.owner.finishPreparation(key, ready: true) }
            }
        }
    }

    /// One target's work is done (or timed out): requests waiting for nothing else are answered.
    func finishPreparation(_ key: PreparationKey, ready: Bool) {
        guard let preparation = preparations.removeValue(forKey: key) else { return }
        session.cancelTimer(preparation.timer)
        for id in preparation.waiters {
            guard var waiting = waitingForPreparation[id] else { continue }
            if !ready {
                waitingForPreparation.removeValue(forKey: id)
                waiting.timedOut(session)
                if let requestor = waiting.requestor { requestors.release(requestor) }
                continue
            }
            waiting.remaining -= 1
            if waiting.remaining > 0 {
                waitingForPreparation[id] = waiting
            } else {
                waitingForPreparation.removeValue(forKey: id)
                waiting.answer(session)
                if let requestor = waiting.requestor { requestors.release(requestor) }
            }
        }
    }

    /// Serves each pair of a `MULTIPLE` request; pairs that fail get their target set to None.
    /// What the pairs write straight into properties is bounded by ``multipleByteBudget``.
    func serveMultiple(_ event: ConversionRequest, pairs: [(target: X11Atom, property: X11Atom)], _ state: OwnedSelection) -> Bool {
        var values: [X11Atom] = []
        var budget = Self.multipleByteBudget
        for pair in pairs {
            let ok = !pair.property.isNone && pair.target != wire.known[.multiple]
                && serve(target: pair.target, to: event.requestor, property: pair.property, state, selection: event.selection, budget: &budget)
            values += [ok ? pair.target : .none, pair.property]
        }
        var failed = false
        wire.writeAtoms(event.requestor, event.property, type: wire.known[.atomPair], values, onError: { _ in failed = true })
        return !failed
    }

    /// Converts one target into the requestor's property; false when we cannot.
    func serve(target: X11Atom, to requestor: X11Window, property: X11Atom, _ state: OwnedSelection, selection: X11Atom) -> Bool {
        var unlimited = Int.max
        return serve(target: target, to: requestor, property: property, state, selection: selection, budget: &unlimited)
    }

    /// Converts one target; a direct write larger than what is left of `budget` is refused.
    private func serve(target: X11Atom, to requestor: X11Window, property: X11Atom, _ state: OwnedSelection, selection: X11Atom,
                       budget: inout Int) -> Bool {
        var failed = false
        let onError: (XErrorRecord) -> Void = { _ in failed = true }
        switch target {
        case wire.known[.targets]:
            wire.writeAtoms(requestor, property, state.advertised, onError: onError)
            return !failed
        case wire.known[.timestamp]:
            wire.writeLongs(requestor, property, type: .integer, [state.timestamp.rawValue], onError: onError)
            return !failed
        case wire.known[.saveTargets]:
            // Listing SAVE_TARGETS says we hand off to a clipboard manager; converting it directly
            // has no data: reply with an empty NULL property (ICCCM clipboard-manager protocol).
            wire.writeLongs(requestor, property, type: wire.known[.null], [], onError: onError)
            return !failed
        default:
            break
        }
        let content: (source: TransferSource, type: X11Atom, served: PasteboardType?)?
        do {
            content = try self.content(of: target, in: state)
        } catch {
            // A provider failed: this conversion fails, the owner keeps serving.
            return false
        }
        guard let content else { return false }
        // A clipboard manager keeping a copy is not a paste (`xpb copy --paste-once` must not be
        // used up by it), and its INCR transfer gives way to pastes (``OutgoingSends``). Asked of
        // the server once, and only when one of the two needs it.
        let isLarge = content.source.count > wire.chunkSize
        let byManager = (isLarge || (reportsServed && content.served != nil)) && isClipboardManagersWindow(requestor)
        let succeeded: Bool
        if !isLarge {
            guard content.source.count <= budget else { return false }
            budget -= content.source.count
            do {
                try wire.writeBytes(requestor, property, type: content.type, from: content.source, range: 0..<content.source.count, onError: onError)
                succeeded = !failed
            } catch {
                return false
            }
        } else {
            // In chunks: a file is read piece by piece, never whole in memory.
            succeeded = startOutgoing(content.source, type: content.type, to: requestor, property: property, yields: byManager,
                                      answering: (selection, target))
        }
        if succeeded, reportsServed, let served = content.served, !byManager {
            session.delegate?.served(selection: selection, type: served)
        }
        if succeeded, !byManager, pasteReports != nil, state.served[target]?.isPaste == true {
            reportPaste(of: selection, to: requestor)
        }
        return succeeded
    }

    /// Whether a read of `state` (a data target) is refused by ``secretRefusal``: only a secret,
    /// and only while the rule names an app. `reader` names the reading process (asked only then,
    /// within ``secretLookUps``; past them, nobody is named, and the read is refused).
    func refusesSecret(in state: OwnedSelection, toProcess reader: () -> Int?) -> Bool {
        guard !secretRefusal.isEmpty, state.isSecret else { return false }
        guard secretLookUps.take(now: session.configuration.clock()) else { return true }
        return secretRefusal.refuses(process: reader())
    }

    /// Tells the delegate who pasted, where ``PasteReports`` says this conversion begins a paste.
    /// The reader is looked up now, before it has its answer: a one-shot reader (`xclip -o`)
    /// exits right after, and its process with it.
    private func reportPaste(of selection: X11Atom, to requestor: X11Window) {
        let now = session.configuration.clock()
        guard pasteReports?.mayLookUp(now: now) == true else { return }
        // The clipboard manager keeping a copy of ours is no paste (a manager's own requests,
        // from its own windows, never get here).
        if !session.manager.isClipboardManager, isClipboardManagersWindow(requestor) { return }
        let pid = wire.clientProcessID(of: requestor).flatMap { LocalProcess.isRunning($0) ? $0 : nil }
        notePaste(of: selection, by: pid, client: wire.clientBase(of: requestor), window: requestor, now: now)
    }

    /// A fast path read (``FastPathServer``) of what we own by process `pid` (its socket's peer),
    /// looked up before the reader has its answer, where a look-up is allowed now: call the
    /// returned closure once the answer went, to report the paste if it begins one.
    func fastPathPaste(of selection: X11Atom, byProcess pid: Int) -> (() -> Void)? {
        let now = session.configuration.clock()
        guard pasteReports?.mayLookUp(now: now) == true, LocalProcess.isRunning(pid) else { return nil }
        let executable = LocalProcess.executable(of: pid).name
        return { [self] in notePaste(of: selection, by: pid, executable: executable, client: 0, window: .none, now: now) }
    }

    private func notePaste(of selection: X11Atom, by pid: Int?, executable: String? = nil, client: UInt, window: X11Window, now: UInt64) {
        let reader = pid.map { PasteReports.Reader(selection: UInt(selection.rawValue), processID: $0) }
            ?? PasteReports.Reader(selection: UInt(selection.rawValue), client: client)
        guard pasteReports?.isNewPaste(reader, now: now) == true else { return }
        let name = executable ?? pid.flatMap { LocalProcess.executable(of: $0).name }
        session.delegate?.pasted(selection: selection, reader: PasteReader(owner: wire.window, window: window, processID: pid, executableName: name))
    }

    /// What a data target of an owned selection converts to: the bytes (or the file), the
    /// reply's type, and the type to report as served (none for the manifest); nil for a target
    /// we do not serve. Throws when a provider fails. Both the X conversions and the fast path
    /// serve from here.
    func content(of target: X11Atom, in state: OwnedSelection) throws -> (source: TransferSource, type: X11Atom, served: PasteboardType?)? {
        guard let served = state.served[target] else { return nil }
        switch served {
        case .manifest:
            return (.data(state.manifest), wire.known[.utf8String], nil)
        case let .captured(data, replyType):
            return (.data(data), replyType, nil)
        case let .capturedConversion(_, _, replyType):
            return try state.convertedBytes(target).map { (.data($0), replyType, nil) }
        case .remote:
            return nil
        case let .representation(item, representationType, codec, replyType):
            if codec == .identity {
                if case let .file(file)? = state.items[item].representation(for: representationType) {
                    // A file changed since the copy is refused, never served in part.
                    guard file.isUnchanged else { return nil }
                    return (.file(file), replyType, representationType)
                }
                return try state.items[item].data(for: representationType).map { (.data($0), replyType, representationType) }
            }
            return try state.convertedBytes(target).map { (.data($0), replyType, representationType) }
        case let .urlList(codec, replyType):
            return try state.convertedBytes(target).map { (.data($0), replyType, codec == .gnomeCopiedFiles ? .fileURL : .url) }
        }
    }

    /// Announces an INCR transfer; chunks follow each time the requestor deletes the property.
    /// `yields`: the requestor is the clipboard manager's (its chunks give way to pastes).
    private func startOutgoing(_ source: TransferSource, type: X11Atom, to requestor: X11Window, property: X11Atom, yields: Bool,
                               answering: (selection: X11Atom, target: X11Atom)) -> Bool {
        var send = OutgoingSend(type: type, supply: .source(OutgoingTransfer(source: source, chunkSize: wire.chunkSize)))
        send.yields = yields
        send.answering = answering
        return sends.open(TransferKey(requestor: requestor, property: property), send, announcing: source.count, watched: false) == .opened
    }

    /// A requestor window was destroyed: what of ours concerns it ends (sends, remote requests,
    /// requests waiting for a worker, the queue). With `serial`, see ``X11Session/requestorGone(_:asOf:)``.
    func requestorGone(_ requestor: X11Window, asOf serial: UInt?) {
        for (selection, var queue) in queued where queue.watched == requestor {
            let announce = queue.turns.requestorGone(requestor.rawValue, at: queueNow)
            queue.watched = nil
            scheduleQueueTick(&queue, on: selection)
            queued[selection] = queue
            if announce != nil { announceQueueItem(selection, id: queue.id) }
        }
        sends.drop(of: requestor)
        dropRemoteRequests(of: requestor)
        dropPreparationWaits(of: requestor)
        requestors.forget(requestor)
        scheduler.requestorGone(requestor, asOf: serial)
    }

    /// The requests of a requestor that is gone no longer wait for a worker's preparation (the
    /// preparation itself goes on: other requests may share it).
    private func dropPreparationWaits(of requestor: X11Window) {
        for (id, waiting) in waitingForPreparation where waiting.requestor == requestor {
            waitingForPreparation.removeValue(forKey: id)
        }
    }

    // MARK: Clearing
    /// Empties `selection` if `precondition` holds for its owner at this moment (compare-and-clear):
    /// relinquished if ours, else set to None at a server timestamp, recorded as our change so
    /// that its XFixes event is known as ours. Completes with whether it was cleared (true when
    /// nobody owned it).
    func clear(_ selection: X11Atom, if precondition: @escaping (X11Window) -> Bool, completion: @escaping (Result<Bool, any Error>) -> Void) {
        let owner = session.currentOwnerAfterQueuedChanges(selection)
        guard precondition(owner) else { return completion(.success(false)) }
        if owner.isNone { return completion(.success(true)) }
        if owner == wire.window, owned[selection] != nil {
            relinquish(selection)
            return completion(.success(true))
        }
        session.serverTime { [weak self] result in
            guard let self else { return }
            completion(result.map { time in
                // One step, as for compare-and-own.
                self.wire.withServerGrabbed {
                    guard precondition(self.session.currentOwnerAfterQueuedChanges(selection)) else { return false }
                    self.owned.removeValue(forKey: selection)
                    self.session.noteOurChange(selection, at: time)
                    self.wire.setSelectionOwner(selection, .none, at: time)
                    return true
                }
            })
        }
    }

    /// Makes a selection unowned, whoever owns it (any client may set the owner to None).
    func clear(_ selection: X11Atom, completion: @escaping (Result<Void, any Error>) -> Void) {
        if owned[selection] != nil {
            relinquish(selection)
            return completion(.success(()))
        }
        session.serverTime { [weak self] result in
            guard let self else { return }
            completion(result.map { time in
                self.wire.setSelectionOwner(selection, .none, at: time)
                self.wire.flush()
            })
        }
    }


    // MARK: Fair serving

    /// The most requests answered per turn of the loop.
    static let requestsPerTurn = 16

    /// The requestor whose conversion requests the event loop may drop before they are decoded
    /// (``RequestScheduler/flooderToDrop(now:)``), or none.
    func flooderToSkip(now: UInt64) -> X11Window {
        scheduler.flooderToDrop(now: now)
    }

    /// The loop dropped requests of ``flooderToSkip(now:)`` unseen.
    func skippedFloodRequests(of window: X11Window, now: UInt64) {
        scheduler.droppedUnseen(from: window, now: now)
    }

    /// A request joins the scheduler's rotation, or is dropped or refused (``RequestScheduler``).
    func queue(_ request: ConversionRequest, now: UInt64) {
        perform(scheduler.admit(request, now: now, isForged: isForgedRequestor(request)), for: request)
    }

    private func perform(_ admission: RequestScheduler.Admission, for request: ConversionRequest) {
        switch admission {
        case .queued, .dropped:
            return
        case .refused:
            notify(request, succeeded: false)
        case let .caughtFlooding(requestor, release):
            _ = requestors.watch(requestor)
            release.forEach(requestors.release)
        case let .forgave(window, then):
            requestors.release(window)
            perform(then, for: request)
        }
    }

    func serveQueuedRequests() {
        var budget = Self.requestsPerTurn
        while budget > 0, !session.isDead, let request = scheduler.next() {
            handleSelectionRequest(request)
            if scheduler.served(request.requestor) { requestors.release(request.requestor) }
            budget -= 1
        }
        for requestor in scheduler.takeUnwatchedWaiting() { _ = requestors.watch(requestor) }
    }


    // MARK: Remote targets

    /// Answers a request for a remote target.
    func serveRemote(_ request: ConversionRequest, _ remote: RemoteTarget) {
        // Watched until answered: a requestor destroyed meanwhile drops the request (and the stream).
        guard requestors.watch(request.requestor) else {
            requestors.release(request.requestor)
            return
        }
        guard let stream = remote.open() else {
            notify(request, succeeded: false)
            requestors.release(request.requestor)
            return
        }
        let id = session.makeOperationID()
        pendingRemote[id] = (request, stream)
        remoteProgress(id)
    }

    /// Something arrived for a waiting remote request: answer it once its form is known.
    func remoteProgress(_ id: Int) {
        guard let (request, stream) = pendingRemote[id] else { return }
        let now = stream.snapshot()
        if now.failure != nil {
            pendingRemote.removeValue(forKey: id)
            notify(request, succeeded: false)
            requestors.release(request.requestor)
            return
        }
        guard let header = now.header else { return observeRemote(id, stream, after: now.version) }
        let whole = now.isEnded && now.buffered <= wire.chunkSize
        let large = now.buffered > wire.chunkSize || (header.size ?? 0) > wire.chunkSize
        guard whole || large else { return observeRemote(id, stream, after: now.version) }
        pendingRemote.removeValue(forKey: id)
        let type = wire.atom(header.type)
        if whole {
            var data = Data()
            while let chunk = stream.take(upTo: .max) { data.append(chunk) }
            var failed = false
            data.withUnsafeBytes { wire.writeBytes(request.requestor, request.replyProperty, type: type, $0, onError: { _ in failed = true }) }
            notify(request, succeeded: !failed)
            requestors.release(request.requestor)
            return
        }
        // The watch taken in serveRemote now belongs to the transfer (released by dropOutgoing).
        let key = TransferKey(requestor: request.requestor, property: request.replyProperty)
        var send = OutgoingSend(type: type, supply: .stream(stream))
        send.answering = (request.selection, request.target)
        switch sends.open(key, send, announcing: header.size ?? stream.sizeHint ?? now.buffered, watched: true) {
        case .opened:
            notify(request, succeeded: true)
        case .refused:
            stream.cancel()
            notify(request, succeeded: false)
            requestors.release(request.requestor)
        case .failed:
            notify(request, succeeded: false)
        }
    }

    /// The requestor's window is gone: its requests still waiting for their first bytes end, and
    /// their streams stop.
    func dropRemoteRequests(of requestor: X11Window) {
        for (id, pending) in pendingRemote where pending.request.requestor == requestor {
            pendingRemote.removeValue(forKey: id)
            pending.stream.cancel()
        }
    }

    private func observeRemote(_ id: Int, _ stream: ByteStream, after version: Int) {
        let enqueue = session.enqueue
        stream.observe(after: version) {
            _ = enqueue? { session in session.owner.remoteProgress(id) }
        }
    }


    /// What we serve for contents that live elsewhere: `TARGETS`, `TIMESTAMP`, then the remote
    /// targets in their order (protocol names among them are left out, but xpb's manifest; its
    /// item targets are served and not listed, as their xpb owner serves them).
    func makeRemoteSelection(_ targets: [RemoteTarget], timestamp: X11Timestamp) -> OwnedSelection {
        let manifest = WellKnown.manifest.rawValue
        let usable = targets.filter { ($0.target == manifest || !WellKnown.protocolTargetNames.contains($0.target)) && !$0.target.isEmpty }
        let atomList = wire.atoms(usable.map(\.target))
        var served: [X11Atom: ServedTarget] = [:]
        var advertised = [wire.known[.targets], wire.known[.timestamp]]
        for (atom, target) in zip(atomList, usable) where served[atom] == nil {
            served[atom] = .remote(target)
            if !target.target.hasPrefix(Manifest.itemTargetPrefix) { advertised.append(atom) }
        }
        return OwnedSelection(items: [], options: PasteboardOptions(), timestamp: timestamp, advertised: advertised, served: served,
                              manifest: Data(), registry: .standard, hasProviders: false)
    }
}
