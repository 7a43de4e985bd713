internal import CX11
import Dispatch
import FoundationEssentials
import Glibc
import ImageCodecs
import PasteboardKit
import PasteboardSelections
import Synchronization

/// How one target of an owned selection is served.
enum ServedTarget: Sendable {
    /// One representation of one item, converted by the alias's codec.
    case representation(item: Int, type: PasteboardType, codec: TargetCodec, replyType: X11Atom)
    /// Every URL item at once, as a list (`text/uri-list`, `x-special/gnome-copied-files`).
    case urlList(codec: TargetCodec, replyType: X11Atom)
    /// The manifest of all items.
    case manifest
    /// Bytes taken from another owner (a clipboard manager's kept contents), served as they came.
    case captured(Data, replyType: X11Atom)
    /// A target the owner offered and the manager did not fetch, made from one it kept: an image
    /// in another format, the text in another encoding. Converted on the first request
    /// (``OwnedSelection/convertedBytes(_:)``).
    case capturedConversion(Data, TargetCodec, replyType: X11Atom)
    /// Bytes that live elsewhere (a sync peer), streamed when a requestor converts the target
    /// (``X11Session/serveRemote(_:_:)``). Not served in `MULTIPLE` or over the fast path.
    case remote(RemoteTarget)
}

/// A selection we own: the items, when we got it, and the targets we serve, built from one table.
struct OwnedSelection: Sendable {
    let items: [PasteboardItem]
    let options: PasteboardOptions
    let timestamp: X11Timestamp
    /// The `TARGETS` reply, in order.
    let advertised: [X11Atom]
    let served: [X11Atom: ServedTarget]
    let manifest: Data
    let registry: TypeRegistry
    /// Whether any representation is a lazy provider: without one (every `xpb copy`), requests
    /// are answered at once, with no look for pending providers.
    let hasProviders: Bool
    /// Conversions computed once and shared by every requestor, by what they make: the targets
    /// that name one format (`image/bmp`, `image/x-bmp`, `IMAGE/BMP` …) share one.
    let conversions = ConversionCache()
    /// Who made the copy, published beside the selection while we own it (``CopyCredit``).
    var credit: CopyCredit? = nil

    /// What converting `target` makes, the key its bytes are kept under; nil for a target served
    /// as it is.
    func conversionKey(_ target: X11Atom) -> ConversionKey? {
        switch served[target] {
        case let .representation(item, type, codec, _)? where codec != .identity:
            return .representation(item: item, type: type.identifier, codec: codec)
        case let .capturedConversion(_, conversion, _)?:
            return .captured(conversion)
        case let .urlList(codec, _)?:
            return .urlList(codec)
        default:
            return nil
        }
    }

    /// Converted bytes of a large source are computed on a worker, not on the X thread.
    static let inlineConversionLimit = 256 << 10

    /// Whether a request for `target` must wait for work off the X thread first: a provider that
    /// has not run, or a conversion of a large representation not computed yet.
    func needsPreparation(_ target: X11Atom) -> Bool {
        if hasProviders, !pendingProviders(for: target).isEmpty { return true }
        guard let key = conversionKey(target), conversions[key] == nil else { return false }
        switch served[target] {
        case let .representation(item, type, codec, _)? where codec != .identity:
            return codec.isHeavy || items[item].representation(for: type).map(Self.sourceSize) ?? 0 > Self.inlineConversionLimit
        case let .capturedConversion(source, conversion, _)?:
            return conversion.isHeavy || source.count > Self.inlineConversionLimit
        case let .urlList(codec, _)?:
            return urlRepresentations(codec).reduce(0) { $0 + Self.sourceSize($1) } > Self.inlineConversionLimit
        default:
            return false
        }
    }

    private static func sourceSize(_ representation: Representation) -> Int {
        switch representation {
        case let .data(data): return data.count
        case let .file(file): return file.size
        case .lazy: return Int.max
        }
    }

    /// The bytes a converting target serves (nil for identity targets, served from the
    /// representation itself, and for a conversion that failed), computed once, a failure too:
    /// a malformed image or a bomb is decoded once, not for every request. Throws when a
    /// provider fails.
    func convertedBytes(_ target: X11Atom) throws -> Data? {
        guard let key = conversionKey(target) else { return nil }
        if let cached = conversions[key] { return cached.bytes }
        let bytes: Data
        switch served[target] {
        case let .representation(item, type, codec, _)? where codec != .identity:
            guard let source = try items[item].data(for: type) else { return nil }
            guard let converted = try? ConversionBudget.convert(isHeavy: codec.isHeavy, { try codec.encode(source) }) else {
                conversions[key] = .failed
                return nil
            }
            bytes = converted
        case let .capturedConversion(source, conversion, _)?:
            guard let converted = try? ConversionBudget.convert(isHeavy: conversion.isHeavy, { try conversion.encode(source) }) else {
                conversions[key] = .failed
                return nil
            }
            bytes = converted
        case let .urlList(codec, _)?:
            guard let list = try TargetPlan.urlList(items, codec, registry: registry) else { return nil }
            bytes = list
        default:
            return nil
        }
        return conversions.keep(bytes, for: key).bytes
    }

    /// Runs what `target` needs before it can be answered without blocking: its providers, and
    /// its conversion. On a worker thread; failures show when the request is answered.
    func prepare(_ target: X11Atom) {
        for provider in pendingProviders(for: target) { _ = try? provider.value() }
        _ = try? convertedBytes(target)
    }

    /// The URL representation of each item a list target serves (``TargetPlan/urlRepresentations(_:_:registry:)``).
    func urlRepresentations(_ codec: TargetCodec) -> [Representation] {
        TargetPlan.urlRepresentations(items, codec, registry: registry)
    }

    /// The providers a conversion to `target` would run that have not run yet.
    func pendingProviders(for target: X11Atom) -> [LazyData] {
        switch served[target] {
        case nil, .manifest?, .captured?, .capturedConversion?, .remote?:
            return []
        case let .representation(item, type, _, _)?:
            return items[item].representation(for: type)?.pendingProvider.map { [$0] } ?? []
        case let .urlList(codec, _)?:
            return urlRepresentations(codec).compactMap(\.pendingProvider)
        }
    }
}

/// A `SelectionRequest` event as plain values, to answer now or after its providers ran.
struct ConversionRequest: Sendable {
    let owner: X11Window
    let requestor: X11Window
    let selection: X11Atom
    let target: X11Atom
    /// The property as sent (None from obsolete clients).
    let property: X11Atom
    let time: X11Timestamp
    /// The serial of the last request of ours the server had processed when it sent this one:
    /// it tells a request made before a request of ours from one made after it.
    let serial: UInt

    init(owner: X11Window, requestor: X11Window, selection: X11Atom, target: X11Atom, property: X11Atom, time: X11Timestamp, serial: UInt) {
        self.owner = owner
        self.requestor = requestor
        self.selection = selection
        self.target = target
        self.property = property
        self.time = time
        self.serial = serial
    }

    /// A SelectionRequest event, with its sequence widened to the full `serial`.
    init(_ event: WireEvent, serial: UInt) {
        self.init(owner: X11Window(rawValue: UInt(event.owner)), requestor: X11Window(rawValue: UInt(event.window)),
                  selection: X11Atom(rawValue: UInt(event.selection)), target: X11Atom(rawValue: UInt(event.target)),
                  property: X11Atom(rawValue: UInt(event.property)), time: X11Timestamp(rawValue: UInt(event.time)), serial: serial)
    }

    /// Where the answer goes: the property, or for obsolete clients the target's name.
    var replyProperty: X11Atom { property.isNone ? target : property }
}

extension X11Session {
    /// Builds what we serve for `items`: the first item's types as ordinary targets through the
    /// registry, the manifest, and one target per representation of every item.
    func makeOwnedSelection(items: [PasteboardItem], options: PasteboardOptions, timestamp: X11Timestamp, registry: TypeRegistry) -> OwnedSelection {
        let plan = TargetPlan(items: items, options: options, registry: registry)
        var manifest = plan.manifest
        manifest.fastPath = fastPathName()
        let entries = plan.firstItem + plan.itemTargets
        let names = entries.flatMap { [$0.name, $0.replyType] }
        let atomOf = Dictionary(zip(names, atoms(names)), uniquingKeysWith: { first, _ in first })
        var served: [X11Atom: ServedTarget] = [known[.manifest]: .manifest]
        for entry in entries {
            guard let target = atomOf[entry.name], let reply = atomOf[entry.replyType] else { continue }
            switch entry.source {
            case let .urlList(codec): served[target] = .urlList(codec: codec, replyType: reply)
            case let .representation(item, type, codec): served[target] = .representation(item: item, type: type, codec: codec, replyType: reply)
            }
        }
        let advertised = WellKnown.ownerTargets.map { known[$0] } + plan.firstItem.compactMap { atomOf[$0.name] } + [known[.manifest]]
        let hasProviders = items.contains { item in
            item.representations.contains { if case .lazy = $0.representation { return true } else { return false } }
        }
        return OwnedSelection(items: items, options: options, timestamp: timestamp, advertised: advertised,
                              served: served, manifest: manifest.encoded(), registry: registry, hasProviders: hasProviders,
                              credit: configuration.copiedBy)
    }

    /// Becomes owner of `selection` with a real server timestamp and checks that it won.
    func own(_ selection: X11Atom, items: [PasteboardItem], options: PasteboardOptions, registry: TypeRegistry,
             completion: @escaping (Result<X11Timestamp, any Error>) -> Void) {
        own(selection, at: nil, making: { session, time in
            session.makeOwnedSelection(items: items, options: options, timestamp: time, registry: registry)
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
        let acquire: (X11Timestamp) -> Void = { [weak self] time in
            guard let self else { return }
            // Built before: the server is grabbed only for the look and the change.
            let state = making(self, time)
            let result: Result<X11Timestamp, any Error>
            if let precondition {
                // One step: with the server grabbed, no client can own the selection between the
                // look at its owner and our change (a copy made in the same millisecond as our
                // timestamp would otherwise lose to older contents).
                result = self.withServerGrabbed {
                    guard precondition(self.currentOwnerAfterQueuedChanges(selection)) else { return .failure(OwnDeclined()) }
                    return self.becomeOwner(selection, state, at: time)
                }
            } else {
                result = self.becomeOwner(selection, state, at: time)
            }
            completion(result)
        }
        if let time, !time.isCurrentTime { return acquire(time) }
        serverTime { result in
            switch result {
            case let .failure(error): completion(.failure(error))
            case let .success(time): acquire(time)
            }
        }
    }

    /// Sets us as owner of `selection` serving `state`, and checks that it won.
    private func becomeOwner(_ selection: X11Atom, _ state: OwnedSelection, at time: X11Timestamp) -> Result<X11Timestamp, any Error> {
        // Record first: the XFixes event for our own change must be recognised as ours.
        let previous = owned[selection]
        owned[selection] = state
        ourChangeTimes[selection, default: []].append(time)
        setSelectionOwner(selection, window, at: time)
        guard selectionOwner(selection) == window else {
            owned[selection] = previous
            _ = consumeOurChange(selection, at: time)
            return .failure(X11BackendError.ownershipRefused(selection: name(of: selection) ?? "the selection"))
        }
        publishCredit(selection, state)
        return .success(time)
    }

    /// The window property that names who made the copy of `selection` we own
    /// (``CopyCredit``): `_XPB_COPIED_BY_<SELECTION>`.
    func creditProperty(_ selection: X11Atom) -> X11Atom? {
        name(of: selection).map { atom("_XPB_COPIED_BY_" + $0) }
    }

    /// Publishes who made the copy we now own, or takes the last one's away (a daemon that kept
    /// an app's copy may own the selection next for a copy synced from elsewhere).
    private func publishCredit(_ selection: X11Atom, _ state: OwnedSelection) {
        guard let property = creditProperty(selection) else { return }
        guard let credit = state.credit else { return deleteProperty(window, property) }
        credit.encoded.withUnsafeBytes { writeBytes(window, property, type: known[.utf8String], $0, onError: { _ in }) }
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
        let atomOf = Dictionary(zip(names, atoms(names)), uniquingKeysWith: { first, _ in first })
        var served: [X11Atom: ServedTarget] = [:]
        for entry in plan.entries {
            guard let atom = atomOf[entry.name], let type = atomOf[entry.replyType], served[atom] == nil else { continue }
            switch entry.source {
            case let .kept(data): served[atom] = .captured(data, replyType: type)
            case let .conversion(source, conversion): served[atom] = .capturedConversion(source, conversion, replyType: type)
            }
        }
        let answered = Set(WellKnown.ownerTargets.map { known[$0] })
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
        guard let state = owned.removeValue(forKey: selection) else { return }
        if selectionOwner(selection) == window {
            ourChangeTimes[selection, default: []].append(state.timestamp)
            setSelectionOwner(selection, .none, at: state.timestamp)
        }
    }

    func handleSelectionClear(window: X11Window, selection: X11Atom, time: X11Timestamp) {
        guard window == self.window, let state = owned[selection] else { return }
        // A clear older than our latest acquisition belongs to an earlier ownership. So does one
        // of the same millisecond (the server takes an owner change at the selection's own time)
        // if the server still names us: the server's word decides.
        if !time.isCurrentTime, time.isBefore(state.timestamp) { return }
        if !time.isCurrentTime, !state.timestamp.isBefore(time), selectionOwner(selection) == window { return }
        owned.removeValue(forKey: selection)
        if selection == known[.clipboardManager], isClipboardManager {
            isClipboardManager = false
            if let save = pendingSave {
                pendingSave = nil
                if !save.abandoned { notify(save.request, succeeded: false) }
            }
            delegate?.clipboardManagerLost()
        }
        delegate?.ownershipLost(selection: selection)
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
        guard let state = owned[request.selection], request.owner == window,
              request.time.isCurrentTime || !request.time.isBefore(state.timestamp) else {
            return notify(request, succeeded: false)
        }
        // (Requests naming our own or the root window never get here: see isForgedRequestor.)
        // An xpb reader's guess, asked with TARGETS before it saw our manifest: it reads through
        // the manifest and never takes the guess. Refused before any work, it costs nothing (no
        // fetch from a sync peer) and is no paste (--paste-once).
        if request.property == known[.guess], request.target != known[.targets] {
            return notify(request, succeeded: false)
        }
        if isClipboardManager, request.selection == known[.clipboardManager], request.target == known[.saveTargets] {
            return handleSaveTargets(request)
        }
        if case let .remote(remote)? = state.served[request.target] {
            return serveRemote(request, remote)
        }
        let pairs: [(target: X11Atom, property: X11Atom)]
        let targets: [X11Atom]
        if request.target == known[.multiple] {
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
            if request.target == session.known[.multiple] {
                session.notify(request, succeeded: session.serveMultiple(request, pairs: pairs, state))
            } else {
                session.notify(request, succeeded: session.serve(target: request.target, to: request.requestor,
                                                                  property: request.replyProperty, state, selection: request.selection))
            }
        }
        afterPreparing(targets, in: state, requestor: request.requestor, answer: answer, timedOut: { session in
            session.notify(request, succeeded: false)
        })
    }

    /// The (target, property) pairs of a `MULTIPLE` request; nil for a list that is malformed,
    /// absent, or longer than ``maxMultiplePairs`` (read no further than that).
    private func multiplePairs(_ request: ConversionRequest) -> [(target: X11Atom, property: X11Atom)]? {
        guard !request.property.isNone,
              let value = try? readProperty(request.requestor, request.property, delete: false, limit: Self.maxMultiplePairs * 8),
              value.format == 32 else { return nil }
        return MultiplePairs.parse(value.atoms, maxPairs: Self.maxMultiplePairs)
    }

    /// Whether a request names one of our own windows or the root window as its requestor (or
    /// none): a requestor is another client's window, and ours (whose event mask we must never
    /// change on anybody's behalf, and whose reads our own conversions make) or the root is a
    /// forged request, refused without being watched or queued.
    func isForgedRequestor(_ request: ConversionRequest) -> Bool {
        isSameClient(request.requestor, window) || request.requestor == root || request.requestor.isNone
    }

    /// Whether `requestor` is a window of the clipboard manager's client (it reads each target
    /// on a window of its own, not on the window that owns `CLIPBOARD_MANAGER`).
    func isClipboardManagersWindow(_ requestor: X11Window) -> Bool {
        let manager = selectionOwner(known[.clipboardManager])
        return !manager.isNone && isSameClient(manager, requestor)
    }

    func notify(_ request: ConversionRequest, succeeded: Bool) {
        sendSelectionNotify(to: request.requestor, selection: request.selection, target: request.target,
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
        guard !work.isEmpty, let enqueue else { return answer(self) }
        if let requestor, !watchRequestor(requestor) { return }
        let id = makeOperationID()
        waitingForPreparation[id] = (remaining: work.count, requestor: requestor, answer: answer, timedOut: timedOut)
        for target in work {
            // Targets that make the same conversion share its work: it runs once.
            let key = PreparationKey(conversions: ObjectIdentifier(state.conversions),
                                     work: state.conversionKey(target).map { .conversion($0) } ?? .target(target))
            if preparations[key] != nil {
                preparations[key]?.waiters.append(id)
                continue
            }
            let timer = after(configuration.providerTimeout) { [weak self] in
                self?.finishPreparation(key, ready: false)
            }
            preparations[key] = (waiters: [id], timer: timer)
            DispatchQueue.global(qos: .userInitiated).async {
                state.prepare(target)
                _ = enqueue { session in session.finishPreparation(key, ready: true) }
            }
        }
    }

    /// One target's work is done (or timed out): requests waiting for nothing else are answered.
    private func finishPreparation(_ key: PreparationKey, ready: Bool) {
        guard let preparation = preparations.removeValue(forKey: key) else { return }
        cancelTimer(preparation.timer)
        for id in preparation.waiters {
            guard var waiting = waitingForPreparation[id] else { continue }
            if !ready {
                waitingForPreparation.removeValue(forKey: id)
                waiting.timedOut(self)
                if let requestor = waiting.requestor { releaseRequestor(requestor) }
                continue
            }
            waiting.remaining -= 1
            if waiting.remaining > 0 {
                waitingForPreparation[id] = waiting
            } else {
                waitingForPreparation.removeValue(forKey: id)
                waiting.answer(self)
                if let requestor = waiting.requestor { releaseRequestor(requestor) }
            }
        }
    }

    /// Serves each pair of a `MULTIPLE` request; pairs that fail get their target set to None.
    /// What the pairs write straight into properties is bounded by ``multipleByteBudget``.
    private func serveMultiple(_ event: ConversionRequest, pairs: [(target: X11Atom, property: X11Atom)], _ state: OwnedSelection) -> Bool {
        var values: [X11Atom] = []
        var budget = Self.multipleByteBudget
        for pair in pairs {
            let ok = !pair.property.isNone && pair.target != known[.multiple]
                && serve(target: pair.target, to: event.requestor, property: pair.property, state, selection: event.selection, budget: &budget)
            values += [ok ? pair.target : .none, pair.property]
        }
        var failed = false
        writeAtoms(event.requestor, event.property, type: known[.atomPair], values, onError: { _ in failed = true })
        return !failed
    }

    /// Converts one target into the requestor's property; false when we cannot.
    private func serve(target: X11Atom, to requestor: X11Window, property: X11Atom, _ state: OwnedSelection, selection: X11Atom) -> Bool {
        var unlimited = Int.max
        return serve(target: target, to: requestor, property: property, state, selection: selection, budget: &unlimited)
    }

    /// Converts one target; a direct write larger than what is left of `budget` is refused.
    private func serve(target: X11Atom, to requestor: X11Window, property: X11Atom, _ state: OwnedSelection, selection: X11Atom,
                       budget: inout Int) -> Bool {
        var failed = false
        let onError: (XErrorRecord) -> Void = { _ in failed = true }
        switch target {
        case known[.targets]:
            writeAtoms(requestor, property, state.advertised, onError: onError)
            return !failed
        case known[.timestamp]:
            writeLongs(requestor, property, type: .integer, [state.timestamp.rawValue], onError: onError)
            return !failed
        case known[.saveTargets]:
            // Listing SAVE_TARGETS says we hand off to a clipboard manager; converting it directly
            // has no data: reply with an empty NULL property (ICCCM clipboard-manager protocol).
            writeLongs(requestor, property, type: known[.null], [], onError: onError)
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
        let succeeded: Bool
        if content.source.count <= chunkSize {
            guard content.source.count <= budget else { return false }
            budget -= content.source.count
            do {
                try writeBytes(requestor, property, type: content.type, from: content.source, range: 0..<content.source.count, onError: onError)
                succeeded = !failed
            } catch {
                return false
            }
        } else {
            // In chunks: a file is read piece by piece, never whole in memory.
            succeeded = startOutgoing(content.source, type: content.type, to: requestor, property: property)
        }
        // A clipboard manager keeping a copy is not a paste (`xpb copy --paste-once` must not be
        // used up by it).
        if succeeded, reportsServed, let served = content.served, !isClipboardManagersWindow(requestor) {
            delegate?.served(selection: selection, type: served)
        }
        return succeeded
    }

    /// What a data target of an owned selection converts to: the bytes (or the file), the
    /// reply's type, and the type to report as served (none for the manifest); nil for a target
    /// we do not serve. Throws when a provider fails. Both the X conversions and the fast path
    /// serve from here.
    func content(of target: X11Atom, in state: OwnedSelection) throws -> (source: TransferSource, type: X11Atom, served: PasteboardType?)? {
        guard let served = state.served[target] else { return nil }
        switch served {
        case .manifest:
            return (.data(state.manifest), known[.utf8String], nil)
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
    private func startOutgoing(_ source: TransferSource, type: X11Atom, to requestor: X11Window, property: X11Atom) -> Bool {
        let send = OutgoingSend(type: type, supply: .source(OutgoingTransfer(source: source, chunkSize: chunkSize)))
        return openOutgoing(TransferKey(requestor: requestor, property: property), send, announcing: source.count, watched: false) == .opened
    }

    /// Asks for a requestor window's property changes and destruction while something of ours
    /// concerns it (counted). A window destroyed before the server took the request sends no
    /// DestroyNotify: the server answers BadWindow instead, and that answer drops what concerns
    /// the window as its destruction would (a reader killed as its INCR transfer started, whose
    /// transfer otherwise waited out the serve timeout). The answer comes later, so this returns
    /// true unless an earlier answer is already in.
    ///
    /// By the time the answer is read, the X server may have given the window's id to a new
    /// client's window (it reuses a departed client's ids), whose requests came after ours: they
    /// are the new window's, and are kept (a reader started just after a stopped owner went on
    /// got no answer at all, its request dropped with the dead window's).
    func watchRequestor(_ requestor: X11Window) -> Bool {
        var alive = true
        if watchedRequestors[requestor, default: 0] == 0 {
            routeErrors({ XSelectInput(display, requestor.rawValue, PropertyChangeMask | StructureNotifyMask) },
                        onError: { [weak self] record in
                            alive = false
                            if record.errorCode == UInt8(BadWindow) { self?.requestorGone(requestor, asOf: record.serial) }
                        })
        }
        watchedRequestors[requestor, default: 0] += 1
        return alive
    }

    func releaseRequestor(_ requestor: X11Window) {
        let remaining = watchedRequestors[requestor, default: 1] - 1
        if remaining <= 0 {
            watchedRequestors.removeValue(forKey: requestor)
            selectInput(requestor, NoEventMask)
        } else {
            watchedRequestors[requestor] = remaining
        }
    }

    /// A requestor window was destroyed: the one call that tells every part holding something
    /// of it (sends, remote requests, requests waiting for a worker, the save, the queue), each of
    /// which drops its own. With `serial` (a request of ours that found the window gone), requests
    /// that came after the server processed it are another window's, of the same id: they stay
    /// queued.
    func requestorGone(_ requestor: X11Window, asOf serial: UInt? = nil) {
        for waiter in windowGoneWaiters.removeValue(forKey: requestor) ?? [] { waiter() }
        if pendingSave?.request.requestor == requestor { pendingSave?.abandoned = true }
        dropOutgoing(of: requestor)
        dropRemoteRequests(of: requestor)
        dropPreparationWaits(of: requestor)
        watchedRequestors.removeValue(forKey: requestor)
        scheduler.requestorGone(requestor, asOf: serial)
    }

    /// The requests of a requestor that is gone no longer wait for a worker's preparation (the
    /// preparation itself goes on: other requests may share it).
    private func dropPreparationWaits(of requestor: X11Window) {
        for (id, waiting) in waitingForPreparation where waiting.requestor == requestor {
            waitingForPreparation.removeValue(forKey: id)
        }
    }
}

extension X11Session {
    /// Offers an owned selection to the clipboard manager (`CLIPBOARD_MANAGER`, `SAVE_TARGETS`,
    /// the freedesktop clipboard-manager protocol) and waits at most `timeout` seconds for it to
    /// copy the data, serving its requests meanwhile. Completes with whether the manager answered
    /// that it saved.
    func handOff(_ selection: X11Atom, timeout: Double, completion: @escaping (Bool) -> Void) {
        let manager = known[.clipboardManager]
        guard let state = owned[selection], !selectionOwner(manager).isNone else { return completion(false) }
        let skipped = known.protocolTargets
        let property = known[.saveTargetsProperty]
        writeAtoms(window, property, state.advertised.filter { !skipped.contains($0) }, onError: { _ in })
        let target = known[.saveTargets]
        requestConversion(manager, to: target, property: property, at: state.timestamp)
        XFlush(display)
        let id = makeOperationID()
        var finished = false
        let timer = after(timeout) { [weak self] in
            self?.conversions.removeAll { $0.id == id }
            if !finished { finished = true; completion(false) }
        }
        conversions.append(PendingConversion(id: id, selection: manager, target: target, slot: ReplySlot(window: window, property: property), timer: timer) { result in
            if !finished {
                finished = true
                completion((try? result.get()) != nil)
            }
        })
    }
}

extension X11Session {
    /// Empties `selection` if `precondition` holds for its owner at this moment (compare-and-clear):
    /// relinquished if ours, else set to None at a server timestamp, recorded as our change so
    /// that its XFixes event is known as ours. Completes with whether it was cleared (true when
    /// nobody owned it).
    func clear(_ selection: X11Atom, if precondition: @escaping (X11Window) -> Bool, completion: @escaping (Result<Bool, any Error>) -> Void) {
        let owner = currentOwnerAfterQueuedChanges(selection)
        guard precondition(owner) else { return completion(.success(false)) }
        if owner.isNone { return completion(.success(true)) }
        if owner == window, owned[selection] != nil {
            relinquish(selection)
            return completion(.success(true))
        }
        serverTime { [weak self] result in
            guard let self else { return }
            completion(result.map { time in
                // One step, as for compare-and-own.
                self.withServerGrabbed {
                    guard precondition(self.currentOwnerAfterQueuedChanges(selection)) else { return false }
                    self.owned.removeValue(forKey: selection)
                    self.ourChangeTimes[selection, default: []].append(time)
                    self.setSelectionOwner(selection, .none, at: time)
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
        serverTime { [weak self] result in
            guard let self else { return }
            completion(result.map { time in
                self.setSelectionOwner(selection, .none, at: time)
                XFlush(self.display)
            })
        }
    }

}

/// What a conversion makes, whatever target names it: one representation through one codec,
/// a kept target converted one way, or the URL list in one flavour.
enum ConversionKey: Hashable, Sendable {
    case representation(item: Int, type: String, codec: TargetCodec)
    case captured(TargetCodec)
    case urlList(TargetCodec)
}

/// Conversions of an owned selection's representations (Latin-1 text, URL lists, images), by
/// what they make (``ConversionKey``), computed once and shared by every requestor; computed on a
/// worker thread when large (images always). A failed conversion is kept as failed. What is kept
/// counts against the process's ``ConversionBudget`` until the selection goes.
final class ConversionCache: Sendable {
    enum Conversion: Sendable {
        case done(Data)
        case failed

        var bytes: Data? {
            if case let .done(bytes) = self { return bytes }
            return nil
        }
    }

    private let storage = Mutex<(conversions: [ConversionKey: Conversion], bytes: Int)>(([:], 0))

    subscript(_ key: ConversionKey) -> Conversion? {
        get { storage.withLock { $0.conversions[key] } }
        set { storage.withLock { $0.conversions[key] = newValue } }
    }

    /// Keeps `bytes` as `key`'s conversion if the budget has room for them, else keeps the
    /// conversion as failed (the target is refused; what the process holds stays bounded).
    /// Returns what is kept: a conversion that raced this one keeps its result.
    func keep(_ bytes: Data, for key: ConversionKey) -> Conversion {
        storage.withLock { state in
            if let existing = state.conversions[key] { return existing }
            let kept: Conversion = ConversionBudget.reserve(bytes.count) ? .done(bytes) : .failed
            if case .done = kept { state.bytes += bytes.count }
            state.conversions[key] = kept
            return kept
        }
    }

    deinit {
        ConversionBudget.release(storage.withLock { $0.bytes })
    }
}


/// One target's preparation (providers, conversion) for one ownership: by the conversion it
/// makes, so that targets naming the same one share it.
struct PreparationKey: Hashable {
    enum Work: Hashable {
        case conversion(ConversionKey)
        case target(X11Atom)
    }

    let conversions: ObjectIdentifier
    let work: Work
}

/// The untrusted list of a `MULTIPLE` request.
enum MultiplePairs {
    /// (target, property) pairs from a requestor's ATOM_PAIR values; nil for an empty or odd
    /// list, or one of more than `maxPairs` pairs.
    static func parse(_ atoms: [X11Atom], maxPairs: Int) -> [(target: X11Atom, property: X11Atom)]? {
        guard !atoms.isEmpty, atoms.count % 2 == 0, atoms.count / 2 <= maxPairs else { return nil }
        return stride(from: 0, to: atoms.count, by: 2).map { (atoms[$0], atoms[$0 + 1]) }
    }
}

