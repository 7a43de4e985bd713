import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// The history's requests (`xpb history`), answered the same by the desktop daemon and the
/// headless one: only how an entry selected again is served differs.
enum HistoryRequests {
    /// The answer to `request`, nil when it is not about the history. `select` serves an entry
    /// selected again (on the display, or in the headless daemon's memory).
    static func answer(_ request: ControlRequest, store: HistoryLock,
                       select: (Snapshot) throws -> Void) throws -> Result<ControlReply, ControlFailure>? {
        switch request {
        case let .historyPage(search, offset, limit):
            guard offset >= 0, limit > 0 else { return .failure(ControlFailure("a history page needs an offset of 0 or more and a limit over 0")) }
            var listing = try store.withLock { try $0.listing(search: search, offset: offset, limit: limit) }
            return .success(.historyPage(entries: listing.finished(), total: listing.total))
        case let .history(search):
            // Thumbnails still to make are made after the lock: a slow image holds up nobody else.
            var listing = try store.withLock { try $0.listing(search: search) }
            return .success(.history(listing.finished()))
        case let .select(index):
            guard let snapshot = try store.withLock({ try $0.snapshot(at: index) }) else {
                return .failure(ControlFailure("no history entry \(index)"))
            }
            guard !snapshot.targets.isEmpty else { return .failure(ControlFailure("history entry \(index) has no payload left")) }
            try select(snapshot)
            if let id = snapshot.id { try store.withLock { try $0.touch(id) } }
            return .success(.done("entry \(index) is now \(SelectionNames.selection(for: snapshot.selection)) (\(snapshot.targets.count) targets, \(ByteCount.format(snapshot.size)))"))
        case let .delete(index):
            guard try store.withLock({ try $0.delete(index: index) }) else { return .failure(ControlFailure("no history entry \(index)")) }
            return .success(.done("deleted entry \(index)"))
        case .clear:
            try store.withLock { try $0.clear() }
            return .success(.done("history cleared (pinned entries kept)"))
        case .clearAll:
            try store.withLock { try $0.clear(includingPinned: true) }
            return .success(.done("history cleared, pinned entries too"))
        case let .pin(index, pinned):
            guard try store.withLock({ try $0.pin(index: index, pinned) }) else { return .failure(ControlFailure("no history entry \(index)")) }
            return .success(.done("\(pinned ? "pinned" : "unpinned") entry \(index)"))
        case .status, .offer, .read, .write, .clearPasteboard, .watch, .queue:
            return nil
        }
    }
}
