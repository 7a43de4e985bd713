import Dispatch
import Foundation
import PasteboardKit
import PasteboardWire
import PasteboardX11

/// Transfers: fetches this node asks for (for a reader on this display, or relayed for another
/// link), and fetches it serves from this display's owners or what the keeper kept.
extension SyncHub {
    /// A transfer message from a link: `begin`, `end`, `failed` answer a fetch of ours; `credit`
    /// and `cancel` go with one we serve.
    func handleTransfer(_ message: SyncMessage, from link: SyncLink) {
        switch message {
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
        default:
            break
        }
    }

    func link(_ id: Int) -> SyncLink? { state.withLock { $0.links[id] } }

    func request(_ id: UInt64, from link: SyncLink) -> Request? {
        state.withLock { state in
            guard let request = state.requests[id], request.link == link.id else { return nil }
            state.requests[id]?.lastProgress = Date()
            return request
        }
    }

    func removeRequest(_ id: UInt64, from link: SyncLink) -> Request? {
        state.withLock { state in
            guard let request = state.requests[id], request.link == link.id else { return nil }
            state.requests.removeValue(forKey: id)
            if case let .relay(linkID, fetchID) = request.sink { state.served.removeValue(forKey: ServedKey(link: linkID, id: fetchID)) }
            if case .local = request.sink { state.inFlight -= request.received }
            return request
        }
    }

    /// Bytes of a transfer: to the reader's stream or down the relay, within the caps.
    func deliver(_ bytes: Data, to id: UInt64, from link: SyncLink) {
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
    func failRequest(_ id: UInt64, _ message: String) {
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

    // MARK: Transfers

    /// A reader on this display converts a target of another node's copy (on the X thread: only
    /// bookkeeping and a queued frame here).
    func openRemote(_ name: Pasteboard.Name, stamp: SyncStamp, target: SyncTarget) -> ByteStream? {
        let selection = X11PasteboardBackend.selectionName(for: name)
        let what = "\(selection) \(target.target)"
        let opened = state.withLock { state -> Result<(UInt64, SyncLink), Failure> in
            guard !state.isStopped, let shared = state.ledger.sharedCopy(selection, stamp: stamp),
                  let source = shared.source else { return .failure(Failure("\(what): the copy is gone")) }
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
    func consumed(_ id: UInt64, _ count: Int) {
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
    func cancelRequest(_ id: UInt64) {
        let link = state.withLock { state -> SyncLink? in
            guard let request = state.requests.removeValue(forKey: id) else { return nil }
            state.inFlight -= request.received
            return state.links[request.link]
        }
        link?.send(.cancel(id: id))
    }

    /// Another node wants bytes of contents this node announced (or forwarded).
    func serveFetch(id: UInt64, selection: String, stamp: SyncStamp, target: String, window: Int, limit: Int, for link: SyncLink) {
        let limit = min(max(0, limit), configuration.maxTransferBytes)
        let window = min(max(64 << 10, window), 64 << 20)
        let plan = state.withLock { state -> Plan in
            guard let name = Self.name(ofSelection: selection), link.sends(name) else {
                return .refuse("this side does not send \(selection) on this link")
            }
            guard let shared = state.ledger.sharedCopy(selection, stamp: stamp), let announce = shared.announce else {
                return .refuse("\(selection) changed since that announce")
            }
            guard announce.targets.contains(where: { $0.target == target }) else { return .refuse("\(target) was not announced") }
            let key = ServedKey(link: link.id, id: id)
            guard state.served[key] == nil else { return .refuse("transfer \(id) is already under way") }
            if let source = shared.source {
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
            guard let local = state.ledger.slots[selection]?.local, local.stamp == stamp else {
                return .refuse("\(selection) changed since that announce")
            }
            let task = ServeTask(credit: window)
            state.served[key] = .local(task)
            return .local(task, stamp: stamp, owner: X11Window(rawValue: local.owner), name)
        }
        switch plan {
        case let .refuse(message):
            link.send(.failed(id: id, message: message))
        case let .relay(upstream, upstreamID):
            upstream.send(.fetch(id: upstreamID, selection: selection, stamp: stamp, target: target, window: window, limit: limit))
        case let .local(task, stamp, owner, name):
            state.withLock { $0.servingLocal[name, default: 0] += 1 }
            workers.async { [self] in
                serveLocal(id: id, name: name, target: target, stamp: stamp, owner: owner, limit: limit, task: task, to: link)
                state.withLock { state in
                    state.served.removeValue(forKey: ServedKey(link: link.id, id: id))
                    state.servingLocal[name, default: 1] -= 1
                }
            }
        }
    }

    /// Streams one target of this display's contents to a link, within the credit it grants.
    func serveLocal(id: UInt64, name: Pasteboard.Name, target: String, stamp: SyncStamp, owner: X11Window, limit: Int,
                            task: ServeTask, to link: SyncLink) {
        let selection = X11PasteboardBackend.selectionName(for: name)
        // The bytes must be the announced contents': a newer copy (maybe a secret) is never sent
        // under an older stamp.
        let isCurrent = { [self] in
            state.withLock { $0.ledger.sharedCopy(selection, stamp: stamp) != nil && $0.ledger.isCurrentLocal(selection, stamp: stamp) }
        }
        let sender = ChunkSender(id: id, link: link, task: task, limit: limit, what: "\(selection) \(target)", isCurrent: isCurrent)
        let send: (Data) throws -> Void = { try sender.send($0) }
        do {
            if let value = keptAfterKeeper(name, owner, target: target, timeout: configuration.fetchTimeout * 0.6) {
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
                guard owner != ourWindow else { throw Failure("\(selection) \(target) is no longer kept") }
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

}
