import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// `xpb history`'s requests on the control socket, in the words of the control protocol, over
/// the one ``HistoryService``.
enum HistoryRequests {
    /// The answer to `request`, nil when it is not about the history.
    static func answer(_ request: ControlRequest, history: HistoryService) throws -> Result<ControlReply, ControlFailure>? {
        do {
            switch request {
            case let .historyPage(search, offset, limit, _):
                guard offset >= 0, limit > 0 else { return .failure(ControlFailure("a history page needs an offset of 0 or more and a limit over 0")) }
                let page = try history.page(search: search, offset: offset, limit: limit)
                return .success(.historyPage(entries: page.entries, total: page.total, partial: page.partial ? true : nil))
            case let .history(search):
                return .success(.history(try history.listing(search: search)))
            case let .select(index):
                let snapshot = try history.select(.index(index))
                return .success(.done("entry \(index) is now \(SelectionNames.selection(for: snapshot.selection)) (\(snapshot.targets.count) targets, \(ByteCount.format(snapshot.size)))"))
            case let .delete(index):
                try history.delete(.index(index))
                return .success(.done("deleted entry \(index)"))
            case .clear:
                try history.clear()
                return .success(.done("history cleared (pinned entries kept)"))
            case .clearAll:
                try history.clear(includingPinned: true)
                return .success(.done("history cleared, pinned entries too"))
            case let .pin(index, pinned):
                try history.pin(.index(index), pinned)
                return .success(.done("\(pinned ? "pinned" : "unpinned") entry \(index)"))
            case .status, .offer, .read, .write, .clearPasteboard, .watch, .queue, .pastes, .pasted, .secretRule:
                return nil
            }
        } catch let refusal as HistoryService.Refusal {
            return .failure(ControlFailure(refusal.description))
        }
    }
}
