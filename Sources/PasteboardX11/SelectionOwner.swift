internal import CX11
import Foundation
import PasteboardKit

/// How one target of an owned selection is served.
enum ServedTarget: Sendable {
    /// One representation of one item, converted by the alias's codec.
    case representation(item: Int, type: PasteboardType, codec: TargetCodec, replyType: Atom)
    /// Every URL item at once, as a list (`text/uri-list`, `x-special/gnome-copied-files`).
    case urlList(codec: TargetCodec, replyType: Atom)
    /// The manifest of all items.
    case manifest
}

/// A selection we own: the items, when we got it, and the targets we serve, built from one table.
struct OwnedSelection: Sendable {
    let items: [PasteboardItem]
    let options: PasteboardOptions
    let timestamp: Time
    /// The `TARGETS` reply, in order.
    let advertised: [Atom]
    let served: [Atom: ServedTarget]
    let manifest: Data
    let registry: TypeRegistry

    /// The URL representation of each item a list target serves: every URL item, or for GNOME's
    /// copied-files list every file URL item.
    func urlRepresentations(_ codec: TargetCodec) -> [Representation] {
        let wanted: PasteboardType = codec == .gnomeCopiedFiles ? .fileURL : .url
        return items.compactMap { item in
            item.types.first { registry.conforms($0, to: wanted) }.flatMap { item.representation(for: $0) }
        }
    }

    /// The providers a conversion to `target` would run that have not run yet.
    func pendingProviders(for target: Atom) -> [LazyData] {
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
    let owner: Window
    let requestor: Window
    let selection: Atom
    let target: Atom
    /// The property as sent (None from obsolete clients).
    let property: Atom
    let time: Time

    init(_ event: XSelectionRequestEvent) {
        owner = event.owner
        requestor = event.requestor
        selection = event.selection
        target = event.target
        property = event.property
        time = event.time
    }

    /// Where the answer goes: the property, or for obsolete clients the target's name.
    var replyProperty: Atom { property == 0 ? target : property }
}

/// Identifies one transfer to a requestor: its window and the property it reads.
struct TransferKey: Hashable {
    let requestor: Window
    let property: Atom
}

/// An INCR transfer we are serving.
struct OutgoingState {
    var transfer: OutgoingTransfer
    let type: Atom
    var timer: Int?
}

/// Targets that are about the protocol rather than data; never shown as types.
let protocolTargets: Set<String> = [
    "TARGETS", "MULTIPLE", "TIMESTAMP", "SAVE_TARGETS", "DELETE", "INSERT_SELECTION", "INSERT_PROPERTY",
    "LENGTH", "ATOM_PAIR", "INCR", Manifest.target,
]

extension X11Session {
    /// Builds what we serve for `items`: the first item's types as ordinary targets through the
    /// registry, the manifest, and one target per representation of every item.
    func makeOwnedSelection(items: [PasteboardItem], options: PasteboardOptions, timestamp: Time, registry: TypeRegistry) -> OwnedSelection {
        var manifest = Manifest(items: items, options: options)
        manifest.fastPath = fastPathName()
        var names = ["TARGETS", "MULTIPLE", "TIMESTAMP", "SAVE_TARGETS", Manifest.target]
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

        var served: [Atom: ServedTarget] = [atomOf[Manifest.target]!: .manifest]
        var advertised = ["TARGETS", "MULTIPLE", "TIMESTAMP", "SAVE_TARGETS"].map { atomOf[$0]! }
        for (alias, type) in firstItemTargets {
            guard let target = atomOf[alias.name], served[target] == nil, let reply = atomOf[alias.replyType] else { continue }
            served[target] = alias.codec.isURLList
                ? .urlList(codec: alias.codec, replyType: reply)
                : .representation(item: 0, type: type, codec: alias.codec, replyType: reply)
            advertised.append(target)
        }
        advertised.append(atomOf[Manifest.target]!)
        for entry in manifest.entries {
            guard let target = atomOf[entry.target] else { continue }
            let reply = registry.targets(for: entry.type).first.flatMap { atomOf[$0.replyType] } ?? target
            served[target] = .representation(item: entry.item, type: entry.type, codec: .identity, replyType: reply)
        }
        return OwnedSelection(items: items, options: options, timestamp: timestamp, advertised: advertised,
                              served: served, manifest: manifest.encoded(), registry: registry)
    }

    /// Becomes owner of `selection` with a real server timestamp and checks that it won.
    func own(_ selection: Atom, items: [PasteboardItem], options: PasteboardOptions, registry: TypeRegistry,
             completion: @escaping (Result<Time, any Error>) -> Void) {
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
                XSetSelectionOwner(self.display, selection, self.window, time)
                guard XGetSelectionOwner(self.display, selection) == self.window else {
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
    func relinquish(_ selection: Atom) {
        guard let state = owned.removeValue(forKey: selection) else { return }
        if XGetSelectionOwner(display, selection) == window {
            ourChangeTimes[selection, default: []].append(state.timestamp)
            XSetSelectionOwner(display, selection, 0, state.timestamp)
        }
    }

    func handleSelectionClear(_ event: XSelectionClearEvent) {
        guard event.window == window, let state = owned[event.selection] else { return }
        // A clear older than our latest acquisition belongs to an earlier ownership.
        if event.time != 0, ServerTime.isBefore(event.time, state.timestamp) { return }
        owned.removeValue(forKey: event.selection)
        delegate?.ownershipLost(selection: event.selection)
    }

    func handleSelectionRequest(_ event: XSelectionRequestEvent) {
        let request = ConversionRequest(event)
        guard let state = owned[request.selection], request.owner == window,
              request.time == 0 || !ServerTime.isBefore(request.time, state.timestamp) else {
            return notify(request, succeeded: false)
        }
        // The providers behind the request run on a worker first; the answer uses the contents
        // as they were when the request came, even if the selection changed hands meanwhile.
        var targets = [request.target]
        if request.target == atom("MULTIPLE"), request.property != 0,
           let pairs = readProperty(request.requestor, request.property, delete: false), pairs.format == 32 {
            targets = stride(from: 0, to: pairs.longs.count - 1, by: 2).map { pairs.longs[$0] }
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
        if request.target == atom("MULTIPLE") {
            succeeded = request.property != 0 && serveMultiple(request, state)
        } else {
            succeeded = serve(target: request.target, to: request.requestor, property: request.replyProperty, state, selection: request.selection)
        }
        notify(request, succeeded: succeeded)
    }

    private func notify(_ request: ConversionRequest, succeeded: Bool) {
        var message = cx11_selection_notify(display, request.requestor, request.selection, request.target,
                                            succeeded ? request.replyProperty : 0, request.time)
        routeErrors({ _ = XSendEvent(display, request.requestor, 0, 0, &message) }, onError: { _ in })
    }

    /// Runs `answer` on the X thread once every provider that converting `targets` needs has
    /// run: at once when none is pending, else after a worker thread ran them, so that a slow
    /// provider never holds up the X thread (other requestors, other conversions). When they take
    /// longer than the configured provider timeout, `timedOut` runs instead.
    func afterProviders(of targets: [Atom], in state: OwnedSelection,
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
        var values = pairs.longs
        guard !values.isEmpty, values.count % 2 == 0 else { return false }
        for index in stride(from: 0, to: values.count, by: 2) {
            let target = values[index]
            let property = values[index + 1]
            let ok = property != 0 && target != atom("MULTIPLE")
                && serve(target: target, to: event.requestor, property: property, state, selection: event.selection)
            if !ok { values[index] = 0 }
        }
        var failed = false
        writeLongs(event.requestor, event.property, type: pairs.type, values, onError: { _ in failed = true })
        return !failed
    }

    /// Converts one target into the requestor's property; false when we cannot.
    private func serve(target: Atom, to requestor: Window, property: Atom, _ state: OwnedSelection, selection: Atom) -> Bool {
        var failed = false
        let onError: (XErrorRecord) -> Void = { _ in failed = true }
        switch target {
        case atom("TARGETS"):
            writeLongs(requestor, property, type: XA_ATOM_VALUE, state.advertised, onError: onError)
            return !failed
        case atom("TIMESTAMP"):
            writeLongs(requestor, property, type: XA_INTEGER_VALUE, [state.timestamp], onError: onError)
            return !failed
        case atom("SAVE_TARGETS"):
            // Listing SAVE_TARGETS says we hand off to a clipboard manager; converting it directly
            // has no data: reply with an empty NULL property (ICCCM clipboard-manager protocol).
            writeLongs(requestor, property, type: atom("NULL"), [], onError: onError)
            return !failed
        default:
            break
        }
        let content: (source: TransferSource, type: Atom, served: PasteboardType?)?
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
    func content(of target: Atom, in state: OwnedSelection) throws -> (source: TransferSource, type: Atom, served: PasteboardType?)? {
        guard let served = state.served[target] else { return nil }
        switch served {
        case .manifest:
            return (.data(state.manifest), atom("UTF8_STRING"), nil)
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
    private func startOutgoing(_ source: TransferSource, type: Atom, to requestor: Window, property: Atom) -> Bool {
        let key = TransferKey(requestor: requestor, property: property)
        if let previous = outgoing.removeValue(forKey: key) {
            // The requestor reused the property for a new request: the old transfer is void.
            cancelTimer(previous.timer)
            releaseRequestor(requestor)
        }
        var failed = false
        if watchedRequestors[requestor, default: 0] == 0 {
            routeErrors({ XSelectInput(display, requestor, PropertyChangeMask | StructureNotifyMask) }, onError: { _ in failed = true })
        }
        watchedRequestors[requestor, default: 0] += 1
        writeLongs(requestor, property, type: atom("INCR"), [UInt(min(source.count, Int(Int32.max)))], onError: { _ in failed = true })
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

    private func releaseRequestor(_ requestor: Window) {
        let remaining = watchedRequestors[requestor, default: 1] - 1
        if remaining <= 0 {
            watchedRequestors.removeValue(forKey: requestor)
            routeErrors({ XSelectInput(display, requestor, NoEventMask) }, onError: { _ in })
        } else {
            watchedRequestors[requestor] = remaining
        }
    }

    /// A requestor window was destroyed: drop its transfers.
    func handleRequestorGone(_ requestor: Window) {
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
    func handOff(_ selection: Atom, timeout: Double, completion: @escaping (Bool) -> Void) {
        let manager = atom("CLIPBOARD_MANAGER")
        guard let state = owned[selection], XGetSelectionOwner(display, manager) != 0 else { return completion(false) }
        let skipped = Set(["TARGETS", "MULTIPLE", "TIMESTAMP", "SAVE_TARGETS", Manifest.target].map { atom($0) })
        let property = atom("XPB_SAVE_TARGETS")
        writeLongs(window, property, type: XA_ATOM_VALUE, state.advertised.filter { !skipped.contains($0) }, onError: { _ in })
        let target = atom("SAVE_TARGETS")
        XConvertSelection(display, manager, target, property, window, state.timestamp)
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
    func clear(_ selection: Atom, completion: @escaping (Result<Void, any Error>) -> Void) {
        if owned[selection] != nil {
            relinquish(selection)
            return completion(.success(()))
        }
        serverTime { [weak self] result in
            guard let self else { return }
            completion(result.map { time in
                XSetSelectionOwner(self.display, selection, 0, time)
                XFlush(self.display)
            })
        }
    }

    /// Who owns a selection: its window, and the window's name and `_NET_WM_PID` where set.
    func ownerInfo(_ selection: Atom) -> (window: Window, name: String?, pid: Int?)? {
        let owner = XGetSelectionOwner(display, selection)
        guard owner != 0 else { return nil }
        var name: String?
        if let value = readProperty(owner, atom("_NET_WM_NAME"), delete: false) ?? readProperty(owner, atom("WM_NAME"), delete: false),
           value.format == 8 {
            name = String(decoding: value.data, as: UTF8.self)
        }
        let pid = readProperty(owner, atom("_NET_WM_PID"), delete: false)?.longs.first.map { Int($0) }
        return (owner, name, pid)
    }
}
