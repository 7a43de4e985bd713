internal import CX11
import Foundation
import PasteboardKit

/// How one target of an owned selection is served.
enum ServedTarget: Sendable {
    /// One representation of one item, converted by the alias's codec.
    case representation(item: Int, type: PasteboardType, codec: TargetCodec, replyType: X11Atom)
    /// Every URL item at once, as a list (`text/uri-list`, `x-special/gnome-copied-files`).
    case urlList(codec: TargetCodec, replyType: X11Atom)
    /// The manifest of all items.
    case manifest
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

    /// The URL representation of each item a list target serves: every URL item, or for GNOME's
    /// copied-files list every file URL item.
    func urlRepresentations(_ codec: TargetCodec) -> [Representation] {
        let wanted: PasteboardType = codec == .gnomeCopiedFiles ? .fileURL : .url
        return items.compactMap { item in
            item.types.first { registry.conforms($0, to: wanted) }.flatMap { item.representation(for: $0) }
        }
    }

    /// The providers a conversion to `target` would run that have not run yet.
    func pendingProviders(for target: X11Atom) -> [LazyData] {
        switch served[target] {
        case nil, .manifest?:
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

    init(_ event: XSelectionRequestEvent) {
        owner = X11Window(rawValue: event.owner)
        requestor = X11Window(rawValue: event.requestor)
        selection = X11Atom(rawValue: event.selection)
        target = X11Atom(rawValue: event.target)
        property = X11Atom(rawValue: event.property)
        time = X11Timestamp(rawValue: event.time)
    }

    /// Where the answer goes: the property, or for obsolete clients the target's name.
    var replyProperty: X11Atom { property.isNone ? target : property }
}

/// Identifies one transfer to a requestor: its window and the property it reads.
struct TransferKey: Hashable {
    let requestor: X11Window
    let property: X11Atom
}

/// An INCR transfer we are serving.
struct OutgoingState {
    var transfer: OutgoingTransfer
    let type: X11Atom
    var timer: Int?
}

extension X11Session {
    /// Builds what we serve for `items`: the first item's types as ordinary targets through the
    /// registry, the manifest, and one target per representation of every item.
    func makeOwnedSelection(items: [PasteboardItem], options: PasteboardOptions, timestamp: X11Timestamp, registry: TypeRegistry) -> OwnedSelection {
        var manifest = Manifest(items: items, options: options)
        manifest.fastPath = fastPathName()
        var names: [String] = []
        var firstItemTargets: [(alias: TargetAlias, type: PasteboardType)] = []
        if let first = items.first {
            for type in first.types {
                for alias in registry.targets(for: type) { firstItemTargets.append((alias, type)) }
            }
        }
        names += firstItemTargets.flatMap { [$0.alias.name, $0.alias.replyType] }
        names += manifest.entries.flatMap { [$0.target] + registry.targets(for: $0.type).prefix(1).map(\.replyType) }
        let atomList = atoms(names)
        let atomOf = Dictionary(zip(names, atomList), uniquingKeysWith: { first, _ in first })

        var served: [X11Atom: ServedTarget] = [known[.manifest]: .manifest]
        var advertised = WellKnown.ownerTargets.map { known[$0] }
        for (alias, type) in firstItemTargets {
            guard let target = atomOf[alias.name], served[target] == nil, let reply = atomOf[alias.replyType] else { continue }
            served[target] = alias.codec.isURLList
                ? .urlList(codec: alias.codec, replyType: reply)
                : .representation(item: 0, type: type, codec: alias.codec, replyType: reply)
            advertised.append(target)
        }
        advertised.append(known[.manifest])
        for entry in manifest.entries {
            guard let target = atomOf[entry.target] else { continue }
            let reply = registry.targets(for: entry.type).first.flatMap { atomOf[$0.replyType] } ?? target
            served[target] = .representation(item: entry.item, type: entry.type, codec: .identity, replyType: reply)
        }
        let hasProviders = items.contains { item in
            item.representations.contains { if case .lazy = $0.representation { return true } else { return false } }
        }
        return OwnedSelection(items: items, options: options, timestamp: timestamp, advertised: advertised,
                              served: served, manifest: manifest.encoded(), registry: registry, hasProviders: hasProviders)
    }

    /// Becomes owner of `selection` with a real server timestamp and checks that it won.
    func own(_ selection: X11Atom, items: [PasteboardItem], options: PasteboardOptions, registry: TypeRegistry,
             completion: @escaping (Result<X11Timestamp, any Error>) -> Void) {
        serverTime { [weak self] result in
            guard let self else { return }
            switch result {
            case let .failure(error):
                completion(.failure(error))
            case let .success(time):
                let state = self.makeOwnedSelection(items: items, options: options, timestamp: time, registry: registry)
                // Record first: the XFixes event for our own change must be recognised as ours.
                let previous = self.owned[selection]
                self.owned[selection] = state
                self.ourChangeTimes[selection, default: []].append(time)
                self.setSelectionOwner(selection, self.window, at: time)
                guard self.selectionOwner(selection) == self.window else {
                    self.owned[selection] = previous
                    _ = self.consumeOurChange(selection, at: time)
                    completion(.failure(X11BackendError.ownershipRefused(selection: self.name(of: selection) ?? "the selection")))
                    return
                }
                completion(.success(time))
            }
        }
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
        // A clear older than our latest acquisition belongs to an earlier ownership.
        if !time.isCurrentTime, time.isBefore(state.timestamp) { return }
        owned.removeValue(forKey: selection)
        delegate?.ownershipLost(selection: selection)
    }

    func handleSelectionRequest(_ request: ConversionRequest) {
        guard let state = owned[request.selection], request.owner == window,
              request.time.isCurrentTime || !request.time.isBefore(state.timestamp) else {
            return notify(request, succeeded: false)
        }
        guard state.hasProviders else { return answer(request, state) }
        // The providers behind the request run on a worker first; the answer uses the contents
        // as they were when the request came, even if the selection changed hands meanwhile.
        var targets = [request.target]
        if request.target == known[.multiple], !request.property.isNone,
           let pairs = readProperty(request.requestor, request.property, delete: false), pairs.format == 32 {
            let atoms = pairs.atoms
            targets = stride(from: 0, to: atoms.count - 1, by: 2).map { atoms[$0] }
        }
        afterProviders(of: targets, in: state, answer: { session in
            session.answer(request, state)
        }, timedOut: { session in
            session.notify(request, succeeded: false)
        })
    }

    /// Converts and tells the requestor how it went.
    private func answer(_ request: ConversionRequest, _ state: OwnedSelection) {
        let succeeded: Bool
        if request.target == known[.multiple] {
            succeeded = !request.property.isNone && serveMultiple(request, state)
        } else {
            succeeded = serve(target: request.target, to: request.requestor, property: request.replyProperty, state, selection: request.selection)
        }
        notify(request, succeeded: succeeded)
    }

    private func notify(_ request: ConversionRequest, succeeded: Bool) {
        sendSelectionNotify(to: request.requestor, selection: request.selection, target: request.target,
                            property: succeeded ? request.replyProperty : .none, time: request.time)
    }

    /// Runs `answer` on the X thread once every provider that converting `targets` needs has
    /// run: at once when none is pending, else after a worker thread ran them, so that a slow
    /// provider never holds up the X thread (other requestors, other conversions). When they take
    /// longer than the configured provider timeout, `timedOut` runs instead.
    func afterProviders(of targets: [X11Atom], in state: OwnedSelection,
                        answer: @escaping @Sendable (X11Session) -> Void,
                        timedOut: @escaping @Sendable (X11Session) -> Void) {
        var seen = Set<ObjectIdentifier>()
        let pending = targets.flatMap { state.pendingProviders(for: $0) }.filter { seen.insert(ObjectIdentifier($0)).inserted }
        guard !pending.isEmpty, let enqueue else { return answer(self) }
        let id = makeOperationID()
        waitingForProviders[id] = after(configuration.providerTimeout) { [weak self] in
            guard let self, self.waitingForProviders.removeValue(forKey: id) != nil else { return }
            timedOut(self)
        }
        DispatchQueue.global(qos: .userInitiated).async {
            // A provider that throws fails its conversion when the answer asks for its bytes.
            for provider in pending { _ = try? provider.value() }
            _ = enqueue { session in
                guard let timer = session.waitingForProviders.removeValue(forKey: id) else { return }
                session.cancelTimer(timer)
                answer(session)
            }
        }
    }

    /// Serves each pair of a `MULTIPLE` request; pairs that fail get their target set to None.
    private func serveMultiple(_ event: ConversionRequest, _ state: OwnedSelection) -> Bool {
        guard let pairs = readProperty(event.requestor, event.property, delete: false), pairs.format == 32 else { return false }
        var values = pairs.atoms
        guard !values.isEmpty, values.count % 2 == 0 else { return false }
        for index in stride(from: 0, to: values.count, by: 2) {
            let target = values[index]
            let property = values[index + 1]
            let ok = !property.isNone && target != known[.multiple]
                && serve(target: target, to: event.requestor, property: property, state, selection: event.selection)
            if !ok { values[index] = .none }
        }
        var failed = false
        writeAtoms(event.requestor, event.property, type: pairs.type, values, onError: { _ in failed = true })
        return !failed
    }

    /// Converts one target into the requestor's property; false when we cannot.
    private func serve(target: X11Atom, to requestor: X11Window, property: X11Atom, _ state: OwnedSelection, selection: X11Atom) -> Bool {
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
        if succeeded, let served = content.served { delegate?.served(selection: selection, type: served) }
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
        case let .representation(item, representationType, codec, replyType):
            if codec == .identity, case let .file(file)? = state.items[item].representation(for: representationType) {
                return (.file(file), replyType, representationType)
            }
            guard let bytes = try state.items[item].data(for: representationType) else { return nil }
            return (.data(codec.encode(bytes)), replyType, representationType)
        case let .urlList(codec, replyType):
            let urls = try state.urlRepresentations(codec).flatMap { TargetCodec.uriListEntries(try $0.resolve()) }
            guard !urls.isEmpty else { return nil }
            return (.data(codec.encodeList(urls)), replyType, codec == .gnomeCopiedFiles ? .fileURL : .url)
        }
    }

    /// Announces an INCR transfer; chunks follow each time the requestor deletes the property.
    private func startOutgoing(_ source: TransferSource, type: X11Atom, to requestor: X11Window, property: X11Atom) -> Bool {
        let key = TransferKey(requestor: requestor, property: property)
        if let previous = outgoing.removeValue(forKey: key) {
            // The requestor reused the property for a new request: the old transfer is void.
            cancelTimer(previous.timer)
            releaseRequestor(requestor)
        }
        var failed = false
        if watchedRequestors[requestor, default: 0] == 0 {
            failed = !selectInput(requestor, PropertyChangeMask | StructureNotifyMask)
        }
        watchedRequestors[requestor, default: 0] += 1
        writeLongs(requestor, property, type: known[.incr], [UInt(min(source.count, Int(Int32.max)))], onError: { _ in failed = true })
        outgoing[key] = OutgoingState(transfer: OutgoingTransfer(source: source, chunkSize: chunkSize), type: type, timer: nil)
        armOutgoingTimer(key)
        if failed {
            dropOutgoing(key)
            return false
        }
        return true
    }

    private func armOutgoingTimer(_ key: TransferKey) {
        cancelTimer(outgoing[key]?.timer)
        outgoing[key]?.timer = after(configuration.serveTimeout) { [weak self] in
            // The requestor stopped reading: give up on this transfer only.
            self?.dropOutgoing(key)
        }
    }

    /// The requestor deleted the property: write the next chunk (an empty one ends the transfer).
    func continueOutgoing(_ key: TransferKey) {
        guard var state = outgoing[key], let range = state.transfer.nextRange() else { return }
        outgoing[key] = state
        var failed = false
        do {
            try writeBytes(key.requestor, key.property, type: state.type, from: state.transfer.source, range: range, onError: { [weak self] _ in
                failed = true
                self?.dropOutgoing(key)
            })
        } catch {
            // The file went away or shrank: end this transfer; the requestor's read times out.
            dropOutgoing(key)
            return
        }
        if state.transfer.isFinished || failed {
            dropOutgoing(key)
        } else {
            state.timer = outgoing[key]?.timer
            armOutgoingTimer(key)
        }
    }

    func dropOutgoing(_ key: TransferKey) {
        guard let state = outgoing.removeValue(forKey: key) else { return }
        cancelTimer(state.timer)
        releaseRequestor(key.requestor)
    }

    private func releaseRequestor(_ requestor: X11Window) {
        let remaining = watchedRequestors[requestor, default: 1] - 1
        if remaining <= 0 {
            watchedRequestors.removeValue(forKey: requestor)
            selectInput(requestor, NoEventMask)
        } else {
            watchedRequestors[requestor] = remaining
        }
    }

    /// A requestor window was destroyed: drop its transfers.
    func handleRequestorGone(_ requestor: X11Window) {
        for key in outgoing.keys where key.requestor == requestor {
            if let state = outgoing.removeValue(forKey: key) { cancelTimer(state.timer) }
        }
        watchedRequestors.removeValue(forKey: requestor)
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
        conversions.append(PendingConversion(id: id, selection: manager, target: target, property: property, timer: timer) { result in
            if !finished {
                finished = true
                completion((try? result.get()) != nil)
            }
        })
    }
}

extension X11Session {
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

    /// Who owns a selection: its window, and the window's name and `_NET_WM_PID` where set.
    func ownerInfo(_ selection: X11Atom) -> (window: X11Window, name: String?, pid: Int?)? {
        let owner = selectionOwner(selection)
        guard !owner.isNone else { return nil }
        var name: String?
        if let value = readProperty(owner, known[.netWMName], delete: false) ?? readProperty(owner, known[.wmName], delete: false),
           value.format == 8 {
            name = String(decoding: value.data, as: UTF8.self)
        }
        let pid = readProperty(owner, known[.netWMPID], delete: false)?.longs.first.map { Int($0) }
        return (owner, name, pid)
    }
}
