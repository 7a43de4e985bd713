import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The paste queue (`xpb queue`, ``PasteQueue``): while it holds items, xpbd owns CLIPBOARD and
/// each paste takes the next item (the X side counts the pastes: ``PasteboardSelections/PasteTurns``).
extension DisplayHost {
    func answerQueue(_ request: QueueRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        do {
            switch request {
            case .list:
                break
            case .clear:
                let (count, next) = pasteQueue.withLock { queue -> (Int, Snapshot?) in
                    let next = queue.items.first
                    return (queue.clear(), next)
                }
                // The clipboard keeps the item it serves now, as any copy.
                if let next, count > 0 { try serve(next) }
                logger.info("paste queue cleared (\(count) items)")
            case let .add(write):
                // Refused from its announcement, before a byte is read.
                let room = configuration.maxSnapshotBytes - pasteQueue.withLock { $0.size }
                guard write.size <= room else {
                    throw ControlFailure("the paste queue holds at most \(ByteCount.format(configuration.maxSnapshotBytes)) in all: \(ByteCount.format(write.size)) more do not fit; nothing was added")
                }
                let items = try ControlServer.receiveItems(of: write, on: &channel).get()
                let maker = write.copiedBy.map { LogThrottle.printable(String($0.prefix(256))) }
                let snapshots = try items.map { item -> Snapshot in
                    guard var snapshot = Snapshot(.general, of: HeldSelection(items: [item], options: PasteboardOptions()), cap: configuration.maxSnapshotBytes) else {
                        throw ControlFailure("an item holds nothing xpbd can serve: nothing was queued")
                    }
                    snapshot.app = maker ?? "xpb"
                    snapshot.pid = write.copiedByPID
                    return snapshot
                }
                try enqueue(snapshots)
            case let .history(indexes):
                guard let daemon else { throw ControlFailure("xpbd is stopping") }
                let snapshots = try indexes.map { index -> Snapshot in
                    guard let snapshot = try daemon.store.withLock({ try $0.snapshot(at: index) }), !snapshot.targets.isEmpty else {
                        throw ControlFailure("no history entry \(index): nothing was queued")
                    }
                    var queued = snapshot
                    queued.selection = .general
                    return queued
                }
                try enqueue(snapshots)
            }
            return .success(.reply(.queue(queueListing())))
        } catch let failure as ControlFailure {
            return .failure(failure)
        } catch {
            return .failure(ControlFailure("\(error)"))
        }
    }

    /// The items waiting, as `xpb queue` lists them.
    func queueListing() -> [QueuedItem] {
        pasteQueue.withLock { $0.items }.map { snapshot in
            let types = EntryDescription.describe(snapshot.targets.map { EntryDescription.Target(name: $0.target, size: $0.data.count) }) { index in
                snapshot.targets[index].data.prefix(64)
            }
            return QueuedItem(preview: snapshot.preview, types: types.types, size: types.size, app: snapshot.app)
        }
    }

    /// Adds items and serves the queue anew from its first item.
    private func enqueue(_ snapshots: [Snapshot]) throws {
        guard !snapshots.isEmpty else { return }
        let (items, generation) = try pasteQueue.withLock { try $0.add(snapshots, maxBytes: configuration.maxSnapshotBytes) }
        // What the keeper held is not what CLIPBOARD serves now (a peer asking for it must not get it).
        state.withLock { _ = $0.current.removeValue(forKey: .general) }
        try backend.managerPort.keepQueue(.general, items: items.map { ($0.advertised, $0.targets.map(\.captured)) },
                                          credit: CopyCredit(name: "xpb queue", pid: nil)) { [weak self] index in
            self?.queuePasted(index, generation: generation)
        }
        logger.info("paste queue: \(items.count) items; CLIPBOARD serves the first")
    }

    /// The X side counted a paste of item `index` of the queue served as `generation`.
    private func queuePasted(_ index: Int, generation: Int) {
        let (gone, left) = pasteQueue.withLock { ($0.pasted(index, generation: generation), $0.items.count) }
        guard gone > 0 else { return }
        logger.info(left == 0 ? "paste queue: its last item was pasted; CLIPBOARD keeps it" : "paste queue: an item was pasted; \(left) left")
    }

    /// Another copy took CLIPBOARD (another app's, a history entry selected, a clear): the
    /// queue ends.
    func endQueue(because reason: String) {
        let dropped = pasteQueue.withLock { $0.items.isEmpty ? 0 : $0.clear() }
        if dropped > 0 { logger.info("paste queue: \(reason): its \(dropped) items are dropped") }
    }
}
