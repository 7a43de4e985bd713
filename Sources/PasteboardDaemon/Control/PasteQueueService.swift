import FoundationEssentials
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// A host that serves a paste queue (`xpb queue`): the X display, where the X thread takes the
/// turns (``PasteboardSelections/PasteTurns``), and a Wayland session, where each receive is a
/// paste and the next item is set as a new source.
package protocol PasteQueueHost: AnyObject, Sendable {
    var daemon: ClipboardDaemon? { get }
    /// Serves `items` on CLIPBOARD, the first now; `onPaste` hears each item pasted, by index
    /// (after the next item is served, where the host sets it); `isServing` says whether this
    /// queue is still the one served (not ended, not served anew).
    func serveQueue(_ items: [Snapshot], isServing: @escaping @Sendable () -> Bool, onPaste: @escaping @Sendable (Int) -> Void) throws
    /// Serves one item as any copy (the queue is cleared: the clipboard keeps it).
    func serveAsCopy(_ snapshot: Snapshot) throws
    /// Forgets what the keeper held of CLIPBOARD: the queue serves it now.
    func queueTakesClipboard()
}

/// The paste queue's control requests and its items (``PasteQueue``), the same for every host
/// that has one (``PasteQueueHost``).
package final class PasteQueueService: Sendable {
    let queue = Mutex(PasteQueue())
    private let logger: Logger
    /// The most bytes the queue holds in all.
    private let maxBytes: Int

    package init(maxBytes: Int, logger: Logger) {
        self.maxBytes = maxBytes
        self.logger = logger
    }

    package func answer(_ request: QueueRequest, on channel: inout FrameChannel, host: some PasteQueueHost) -> Result<ControlAnswer, ControlFailure> {
        do {
            switch request {
            case .list:
                break
            case .clear:
                let dropped = queue.withLock { queue -> [Snapshot] in
                    defer { _ = queue.clear() }
                    return queue.items
                }
                // The clipboard keeps the item it serves now, as any copy.
                if let next = dropped.first { try host.serveAsCopy(next) }
                logger.info("paste queue cleared (\(dropped.count) items)")
                return .success(.reply(.queue(dropped.map(Self.listed))))
            case let .add(write):
                // Refused from its announcement, before a byte is read.
                let room = maxBytes - queue.withLock { $0.size }
                guard write.size <= room else {
                    throw ControlFailure("the paste queue holds at most \(ByteCount.format(maxBytes)) in all: \(ByteCount.format(write.size)) more do not fit; nothing was added")
                }
                let items = try ControlServer.receiveItems(of: write, on: &channel).get()
                let maker = write.copiedBy.map { LogThrottle.printable(String($0.prefix(256))) }
                let snapshots = try items.map { item -> Snapshot in
                    guard var snapshot = Snapshot(.general, of: HeldSelection(items: [item], options: PasteboardOptions()), cap: maxBytes) else {
                        throw ControlFailure("an item holds nothing xpbd can serve: nothing was queued")
                    }
                    snapshot.app = maker ?? "xpb"
                    snapshot.pid = write.copiedByPID
                    return snapshot
                }
                try enqueue(snapshots, host: host)
            case let .history(indexes):
                guard let daemon = host.daemon else { throw ControlFailure("xpbd is stopping") }
                let snapshots = try indexes.map { index -> Snapshot in
                    guard var snapshot = try daemon.store.withLock({ try $0.snapshot(at: index) }), !snapshot.targets.isEmpty else {
                        throw ControlFailure("no history entry \(index): nothing was queued")
                    }
                    snapshot.selection = .general
                    return snapshot
                }
                try enqueue(snapshots, host: host)
            }
            return .success(.reply(.queue(listing())))
        } catch let failure as ControlFailure {
            return .failure(failure)
        } catch {
            return .failure(ControlFailure("\(error)"))
        }
    }

    /// The items waiting, as `xpb queue` lists them.
    func listing() -> [QueuedItem] {
        queue.withLock { $0.items }.map(Self.listed)
    }

    /// An item as `xpb queue` lists it.
    private static func listed(_ snapshot: Snapshot) -> QueuedItem {
        let types = EntryDescription.describe(snapshot.targets.map { EntryDescription.Target(name: $0.target, size: $0.data.count) }) { index in
            snapshot.targets[index].data.prefix(64)
        }
        return QueuedItem(preview: snapshot.preview, types: types.types, size: types.size, app: snapshot.app)
    }

    /// Adds items and serves the queue anew from its first item.
    private func enqueue(_ snapshots: [Snapshot], host: some PasteQueueHost) throws {
        guard !snapshots.isEmpty else { return }
        let (items, generation) = try queue.withLock { try $0.add(snapshots, maxBytes: maxBytes) }
        // What the keeper held is not what CLIPBOARD serves now (a peer asking for it must not get it).
        host.queueTakesClipboard()
        try host.serveQueue(items, isServing: { [weak self] in
            self?.queue.withLock { $0.generation == generation } ?? false
        }, onPaste: { [weak self] index in
            self?.pasted(index, generation: generation)
        })
        logger.info("paste queue: \(items.count) items; CLIPBOARD serves the first")
    }

    /// Item `index` of the queue served as `generation` was pasted.
    private func pasted(_ index: Int, generation: Int) {
        let (gone, left) = queue.withLock { ($0.pasted(index, generation: generation), $0.items.count) }
        guard gone > 0 else { return }
        logger.info(left == 0 ? "paste queue: its last item was pasted; CLIPBOARD keeps it" : "paste queue: an item was pasted; \(left) left")
    }

    /// Another copy took CLIPBOARD (another app's, a history entry selected, a clear): the
    /// queue ends.
    package func end(because reason: String) {
        let dropped = queue.withLock { $0.items.isEmpty ? 0 : $0.clear() }
        if dropped > 0 { logger.info("paste queue: \(reason): its \(dropped) items are dropped") }
    }
}
