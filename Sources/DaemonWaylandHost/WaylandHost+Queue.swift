import Dispatch
import FoundationEssentials
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWayland
import PasteboardWire
import Synchronization

/// The paste queue on a Wayland session (``WaylandPasteQueue``): each item is set as a source
/// of its own when the paste of the one before ends.
extension WaylandHost: PasteQueueHost {
    package func answerQueue(_ request: QueueRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        pasteQueue.answer(request, on: &channel, host: self)
    }

    package func serveQueue(_ items: [Snapshot], isServing: @escaping @Sendable () -> Bool, onPaste: @escaping @Sendable (Int) -> Void) throws {
        let kept = items.map { KeptSelection(advertised: $0.advertised, targets: $0.targets.map(\.captured)) }
        let logger = self.logger
        let queue = WaylandPasteQueue(kept, isServing: isServing, onPaste: onPaste, onReceive: { target, reader, item in
            logger.debug("paste queue: \(target) received by \(reader.map { "pid \($0) (\(LocalProcess.executable(of: $0).name ?? "?"))" } ?? "a reader not found"): item \(item + 1)")
        }) { [weak self] next, isNewSource in
            self?.announce(next, isNewSource: isNewSource)
        }
        _ = try backend.serveQueued(queue.item(0), on: .general, if: { _ in true })
    }

    /// The queue serves its next item: set as the selection (a new source, while the selection is
    /// still ours: a copy made meanwhile stays) where its types differ from the source's.
    private func announce(_ item: WaylandPasteQueue.Item, isNewSource: Bool) {
        guard isNewSource else {
            return logger.info("paste queue: item \(item.index + 1) of \(item.queue.items.count) is served")
        }
        do {
            if try backend.serveQueued(item, on: .general, if: { $0 == WaylandPasteboardBackend.ourOwner }) {
                logger.info("paste queue: item \(item.index + 1) of \(item.queue.items.count) is served")
            } else {
                logger.info("paste queue: another copy took CLIPBOARD before its next item was served")
            }
        } catch {
            logger.warning("paste queue: the next item could not be served: \(error)")
        }
    }

    package func serveAsCopy(_ snapshot: Snapshot) throws {
        try serve(snapshot, ifEmpty: false)
    }

    package func queueTakesClipboard() {
        state.withLock { state in
            state.current.drop(.general)
            state.keptFrom.removeValue(forKey: .general)
        }
    }
}

/// A paste queue served on a Wayland session. Data-control names no reader: the reader of a
/// receive is the process holding the other end of its pipe (``LocalProcess/readerOfPipe(_:)``),
/// and one reader's receives are one paste (``PasteTurns``): Chromium receives twice for one
/// ctrl+v, xpb reads the manifest (a receive that pastes nothing) before the data. A paste ends
/// when its reader ends or is silent past the grace; the queue then serves the next item. Items
/// of the types the source offers are served by that source, with no selection change: a reader
/// whose paste began meanwhile (it has the offer, and asks next) still gets a whole item, where a
/// new source would leave its offer dead. An item of other types is set as a new source. A
/// second reader that asks before a paste ends takes the next item from the source it sees, if
/// that item has the type it asks. A reader that is not found (another user's process) pastes
/// with each receive.
final class WaylandPasteQueue: Sendable {
    /// One item set as a source: its types are the item's; each receive takes its turn.
    final class Item: TurnTakingTargets {
        let queue: WaylandPasteQueue
        let index: Int

        init(_ queue: WaylandPasteQueue, _ index: Int) {
            self.queue = queue
            self.index = index
        }

        private var kept: KeptSelection { queue.items[index] }
        var targets: [String] { kept.targets }
        var manifest: Data? { kept.manifest }
        func size(of target: String) -> Int? { kept.size(of: target) }
        func bytes(for target: String) throws -> (type: String, data: Data)? { try kept.bytes(for: target) }
        func receive(_ target: String, by reader: Int?) -> (contents: any HeldTargets, receipt: Int) { queue.receive(target, by: reader) }
        func received(_ receipt: Int, delivered: Bool) { queue.received(receipt, delivered: delivered) }
    }

    private struct State {
        var turns: PasteTurns
        /// The item whose types the source offers.
        var sourceItem = 0
        /// The receives under way: who reads, and whether it reads data (not the manifest).
        var receipts: [Int: (requestor: UInt, reader: Int?, isData: Bool)] = [:]
        var lastReceipt = 0
        /// Numbers for readers not found, above any process id: each one a paste of its own.
        var lastUnknown: UInt = 1 << 40
    }

    let items: [KeptSelection]
    private let state: Mutex<State>
    private let isServing: @Sendable () -> Bool
    private let onPaste: @Sendable (Int) -> Void
    private let announce: @Sendable (Item, Bool) -> Void
    /// Hears each receive: its target, its reader, the item it gets (for the log).
    private let onReceive: @Sendable (String, Int?, Int) -> Void

    /// `onPaste` hears each item pasted, once its reader has every byte; `announce` hears each
    /// item served next, and whether it is to be set as a new source (its types differ), while
    /// `isServing` (the queue is still the daemon's).
    init(_ items: [KeptSelection], isServing: @escaping @Sendable () -> Bool, onPaste: @escaping @Sendable (Int) -> Void,
         onReceive: @escaping @Sendable (String, Int?, Int) -> Void = { _, _, _ in }, announce: @escaping @Sendable (Item, Bool) -> Void) {
        self.items = items
        state = Mutex(State(turns: PasteTurns(count: items.count)))
        self.isServing = isServing
        self.onPaste = onPaste
        self.announce = announce
        self.onReceive = onReceive
    }

    func item(_ index: Int) -> Item { Item(self, index) }

    private static var now: Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    fileprivate func receive(_ target: String, by reader: Int?) -> (contents: any HeldTargets, receipt: Int) {
        let taken = state.withLock { state -> (item: Int, receipt: Int) in
            let requestor: UInt
            if let reader {
                requestor = UInt(reader)
            } else {
                state.lastUnknown += 1
                requestor = state.lastUnknown
            }
            let next = state.turns.item + 1
            let nextServes = next < items.count && (items[next].targets == items[state.turns.item].targets || items[next].targets.contains(target))
            let kind: PasteTurns.Kind = target == Manifest.target ? .metadata : .data
            let turn = state.turns.request(requestor, kind, at: Self.now, nextServes: nextServes)
            state.lastReceipt += 1
            state.receipts[state.lastReceipt] = (requestor, reader, kind == .data)
            return (turn.item, state.lastReceipt)
        }
        onReceive(target, reader, taken.item)
        return (items[taken.item], taken.receipt)
    }

    fileprivate func received(_ receipt: Int, delivered: Bool) {
        guard let entry = state.withLock({ $0.receipts.removeValue(forKey: receipt) }) else { return }
        // Data read whole pastes its item (once, however many receives the paste makes); a read
        // cut short leaves the item for the next paste.
        let pasted = state.withLock { state -> Int? in
            guard entry.isData else { return nil }
            if delivered { return state.turns.delivered(entry.requestor, at: Self.now) }
            _ = state.turns.undelivered(entry.requestor, at: Self.now)
            return nil
        }
        if let pasted { onPaste(pasted) }
        guard let reader = entry.reader else {
            // Nobody to watch: the receive was the paste.
            return settle(unlessReading: entry.requestor) { $0.requestorGone(entry.requestor, at: Self.now) }
        }
        // The paste ends when its reader does (wl-paste, xpb paste), or with its silence (a
        // browser stays). A reader whose other receive is still being written is not gone for
        // it yet: that receive's end says whether the item was pasted (xpb's manifest receive
        // saw it exit before its data receive's writer had told its end: the item was lost).
        Background.run("xpbd.queue.reader") {
            if LocalProcess.waitForExit(of: reader, timeout: PasteTurns.grace + 0.05) {
                self.settle(unlessReading: entry.requestor) { $0.requestorGone(entry.requestor, at: Self.now) }
            }
        }
        Background.run("xpbd.queue.silence", after: PasteTurns.grace + 0.05) {
            self.settle { $0.tick(at: Self.now) }
        }
    }

    /// Tells the turns an event; announces the item they name, as a new source where its types
    /// differ from the source's.
    /// `unlessReading`: nothing happens while a receive of that requestor is still open.
    private func settle(unlessReading requestor: UInt? = nil, _ event: (inout PasteTurns) -> Int?) {
        let next = state.withLock { state -> (index: Int, isNewSource: Bool)? in
            if let requestor, state.receipts.values.contains(where: { $0.requestor == requestor }) { return nil }
            guard let next = event(&state.turns) else { return nil }
            let isNewSource = items[next].targets != items[state.sourceItem].targets
            if isNewSource { state.sourceItem = next }
            return (next, isNewSource)
        }
        guard let next, isServing() else { return }
        announce(item(next.index), next.isNewSource)
    }
}
