import Dispatch
import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// Transfers, the driver of ``TransferTable``: fetches this node asks for (for a reader on this
/// display, or relayed for another link), and fetches it serves from this display's owners or
/// what the keeper kept. The table decides (credit, caps, cancels, ends); this performs.
extension SyncHub {
    /// A transfer message from a link: `begin`, `end`, `failed` answer a fetch of ours; `credit`
    /// and `cancel` go with one we serve.
    func handleTransfer(_ message: SyncMessage, from link: SyncLink) {
        let now = Date()
        perform(state.withLock { state -> [TransferTable.Effect] in
            switch message {
            case let .begin(id, type, size): return state.transfers.begin(id, type: type, size: size, from: link.id, now: now)
            case let .end(id, total): return state.transfers.end(id, total: total, from: link.id)
            case let .failed(id, message): return state.transfers.failed(id, message: message, from: link.id)
            case let .credit(id, bytes): return state.transfers.credit(id, bytes: bytes, from: link.id)
            case let .cancel(id): return state.transfers.cancel(id, from: link.id)
            default: return []
            }
        })
    }

    /// Bytes of a transfer, from a data frame: to the reader's stream or down the relay, within
    /// the caps and the credit.
    func deliver(_ bytes: Data, to id: UInt64, from link: SyncLink) {
        perform(state.withLock { $0.transfers.data(id, count: bytes.count, from: link.id, now: Date()) }, bytes: bytes)
    }

    func link(_ id: Int) -> SyncLink? { state.withLock { $0.links[id] } }

    /// Carries out what the transfer table decided; `bytes` are the data frame's, for the
    /// effects that pass them on.
    func perform(_ effects: [TransferTable.Effect], bytes: Data? = nil) {
        for effect in effects {
            switch effect {
            case let .send(message, id):
                link(id)?.send(message)
            case let .streamBegin(id, type, size):
                state.withLock { $0.streams[id] }?.begin(type: type, size: size)
            case let .streamAppend(id):
                if let bytes { state.withLock { $0.streams[id] }?.append(bytes) }
            case let .streamFinish(id, total):
                state.withLock { $0.streams.removeValue(forKey: id) }?.finish()
                logger.debug("sync: fetch \(id) done: \(ByteCount.format(total))")
            case let .streamFail(id, message):
                state.withLock { $0.streams.removeValue(forKey: id) }?.fail(message)
                let (log, left) = state.withLock { $0.fetchFailures.admit(now: Date().timeIntervalSince1970) }
                if log { logger.warning("sync: \(message)\(left > 0 ? " (and \(left) more failed fetches since the last one logged)" : "")") }
            case let .relayData(id, fetchID):
                if let bytes { link(id)?.sendData(id: fetchID, bytes) }
            case let .wake(key):
                state.withLock { $0.senders[key] }?.wake()
            case let .stopServing(key):
                state.withLock { $0.senders.removeValue(forKey: key) }?.cancel()
            case let .closeLink(id, reason):
                logger.warning("sync: closing the link \(link(id)?.label ?? "\(id)"): \(reason)")
                link(id)?.close(reason)
            }
        }
    }

    package struct Failure: Error, CustomStringConvertible {
        package let message: String
        package init(_ message: String) { self.message = message }
        package var description: String { message }
    }

    // MARK: Fetches of this display's readers

    /// A reader on this display converts a target of another node's copy (on the X thread: only
    /// bookkeeping and a queued frame here).
    func openRemote(_ name: Pasteboard.Name, stamp: SyncStamp, target: SyncTarget) -> ByteStream? {
        let selection = SelectionNames.selection(for: name)
        let what = "\(selection) \(target.target)"
        let opened = state.withLock { state -> Result<(ByteStream, [TransferTable.Effect]), TransferRefusal> in
            guard !state.isStopped, let shared = state.ledger.sharedCopy(selection, stamp: stamp),
                  let source = shared.source else { return .failure(TransferRefusal("\(what): the copy is gone")) }
            guard let link = state.links[source] else {
                return .failure(TransferRefusal("\(what): the peer that holds the data is not connected"))
            }
            let fetch = { (id: UInt64) in
                SyncMessage.fetch(id: id, selection: selection, stamp: stamp, target: target.target, window: self.configuration.window,
                                  limit: self.configuration.maxTransferBytes)
            }
            return state.transfers.openLocal(what: "\(what) from \(link.label)", size: target.size, link: link.id, fetch: fetch, now: Date())
                .map { id, effects in
                    let stream = ByteStream(sizeHint: target.size, consumed: { [weak self] count in self?.consumed(id, count) },
                                            cancelled: { [weak self] in self?.cancelRequest(id) })
                    state.streams[id] = stream
                    return (stream, effects)
                }
        }
        switch opened {
        case let .failure(refusal):
            logger.warning("sync: \(refusal.message); the reader is refused")
            return nil
        case let .success((stream, effects)):
            perform(effects)
            return stream
        }
    }

    /// The reader took `count` bytes: once a quarter window is taken, the sender may send it again.
    func consumed(_ id: UInt64, _ count: Int) {
        perform(state.withLock { $0.transfers.consumed(id, count: count, now: Date()) })
    }

    /// The reader gave up: the peer stops sending.
    func cancelRequest(_ id: UInt64) {
        perform(state.withLock { state in
            state.streams.removeValue(forKey: id)
            return state.transfers.readerCancelled(id)
        })
    }

    /// Fetches of this display's readers with no progress for the fetch timeout, while their
    /// reader has taken all it was given: failed (the peer is stalled or gone).
    func failStalled(now: Date) {
        perform(state.withLock { state in
            let streams = state.streams
            return state.transfers.stalled(before: now.addingTimeInterval(-configuration.fetchTimeout), idle: { id in
                guard let snapshot = streams[id]?.snapshot() else { return false }
                return snapshot.buffered == 0 && !snapshot.isEnded
            }, message: { what in "no data from \(what) for \(self.configuration.fetchTimeout) s: the peer is stalled or gone" })
        })
    }

    // MARK: Fetches this node serves

    /// How a fetch is answered.
    enum Plan {
        case refuse(String)
        /// From this display's owner of the change `stamp` (or what the keeper kept of it).
        case local(ServeTask, stamp: SyncStamp, owner: UInt, Pasteboard.Name)
        case relay([TransferTable.Effect])
    }

    /// The most transfers this node serves from its own selections at once.
    static let maxServing = 32

    /// Another node wants bytes of contents this node announced (or forwarded).
    func serveFetch(id: UInt64, selection: String, stamp: SyncStamp, target: String, window: Int, limit: Int, for link: SyncLink) {
        let limit = min(max(0, limit), configuration.maxTransferBytes)
        let plan = state.withLock { state -> Plan in
            guard let name = Self.name(ofSelection: selection), link.sends(name) else {
                return .refuse("this side does not send \(selection) on this link")
            }
            guard let shared = state.ledger.sharedCopy(selection, stamp: stamp), let announce = shared.announce else {
                return .refuse("\(selection) changed since that announce")
            }
            guard announce.targets.contains(where: { $0.target == target }) else { return .refuse("\(target) was not announced") }
            if let source = shared.source {
                guard source != link.id, state.links[source] != nil else {
                    return .refuse("the peer that holds the data is not connected")
                }
                let fetch = { (upstreamID: UInt64) in
                    SyncMessage.fetch(id: upstreamID, selection: selection, stamp: stamp, target: target,
                                      window: TransferTable.clampWindow(window), limit: limit)
                }
                guard let effects = state.transfers.serveRelay(id, on: link.id, upstream: source, window: window, limit: limit,
                                                               what: "\(selection) \(target) for \(link.label)", fetch: fetch, now: Date()) else {
                    return .refuse("transfer \(id) is already under way")
                }
                return .relay(effects)
            }
            guard let local = state.ledger.slots[selection]?.local, local.stamp == stamp else {
                return .refuse("\(selection) changed since that announce")
            }
            // Each transfer served from here holds a thread of its own while it runs: a peer that
            // asks for many at once is refused past a bound, not given a thread each.
            guard state.senders.count < Self.maxServing else {
                return .refuse("\(Self.maxServing) transfers from this node are under way; ask again once one ends")
            }
            guard let key = state.transfers.serveLocal(id, on: link.id, window: window) else {
                return .refuse("transfer \(id) is already under way")
            }
            let task = ServeTask(key: key, selection: selection)
            state.senders[key] = task
            return .local(task, stamp: stamp, owner: local.owner, name)
        }
        switch plan {
        case let .refuse(message):
            link.send(.failed(id: id, message: message))
        case let .relay(effects):
            perform(effects)
        case let .local(task, stamp, owner, name):
            Background.run("xpbd.sync.serve") { [self] in
                serveLocal(id: id, name: name, target: target, stamp: stamp, owner: owner, limit: limit,
                           window: TransferTable.clampWindow(window), task: task, to: link)
                state.withLock { state in
                    state.transfers.servedEnded(task.key)
                    if state.senders[task.key] === task { state.senders.removeValue(forKey: task.key) }
                }
            }
        }
    }

    /// Streams one target of this display's contents to a link, within the credit it grants.
    func serveLocal(id: UInt64, name: Pasteboard.Name, target: String, stamp: SyncStamp, owner: UInt, limit: Int,
                    window: Int, task: ServeTask, to link: SyncLink) {
        let selection = SelectionNames.selection(for: name)
        // The bytes must be the announced contents': a newer copy (maybe a secret) is never sent
        // under an older stamp.
        let isCurrent = { @Sendable [self] in
            state.withLock { $0.ledger.sharedCopy(selection, stamp: stamp) != nil && $0.ledger.isCurrentLocal(selection, stamp: stamp) }
        }
        let sender = ChunkSender(id: id, link: link, task: task, limit: limit, window: window, what: "\(selection) \(target)", isCurrent: isCurrent,
                                 take: { [self] bytes in takeCredit(task.key, bytes: bytes) })
        do {
            let turn = Date().addingTimeInterval(configuration.fetchTimeout * 0.6)
            let outcome = try surface.serve(name, owner: owner, target: target, limit: limit, turnDeadline: turn, isCurrent: isCurrent,
                                            begin: { type, size in link.send(.begin(id: id, type: type, size: size)) },
                                            chunk: { try sender.send($0) })
            switch outcome {
            case .served: break
            case .busy: throw Failure("the owner of \(selection) was busy with another transfer for \(Int(configuration.fetchTimeout * 0.6)) s")
            case let .refused(message): throw Failure(message)
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

    /// Takes `bytes` of a served transfer's credit: true if granted, false if short, nil once the
    /// reading side gave it up.
    func takeCredit(_ key: TransferTable.ServedKey, bytes: Int) -> Bool? {
        state.withLock { $0.transfers.takeCredit(key, bytes: bytes) }
    }
}
