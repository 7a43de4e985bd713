import PasteboardKit

/// What a read of a pasteboard reads from: this process's own items, or the offer of the client
/// that owns the selection, or nothing. The one preamble of every read path (`itemTypes`,
/// `data`, `contents`, `items`, `stream`): owned or foreign, then the item checked.
enum ReadSource {
    case owned([PasteboardItem])
    case foreign(ForeignOffer, itemTypes: [[PasteboardType]])
    /// Nobody owns the selection.
    case empty

    /// The types of every item (nil when nobody owns the selection).
    var itemTypes: [[PasteboardType]]? {
        switch self {
        case let .owned(items): return items.map(\.types)
        case let .foreign(_, itemTypes): return itemTypes
        case .empty: return nil
        }
    }

    var itemCount: Int { itemTypes?.count ?? 0 }

    /// Throws ``PasteboardError/itemIndexOutOfRange(_:count:)`` unless `item` is an item's index.
    func check(_ item: Int) throws {
        guard item >= 0, item < itemCount else { throw PasteboardError.itemIndexOutOfRange(item, count: itemCount) }
    }
}

extension X11PasteboardBackend {
    /// Our own items when we own the pasteboard (no round trip), else the owner's offer (cached
    /// while the owner stays the same). `speculation` is asked of a foreign owner with its offer
    /// (``SpeculativeRead``), and skipped otherwise.
    func readSource(_ name: Pasteboard.Name, speculation: SpeculativeRead? = nil) throws -> ReadSource {
        if let items = ownedItems(name) {
            speculation?.skip()
            return .owned(items)
        }
        guard let offer = try foreignOffer(name, speculation: speculation) else { return .empty }
        return .foreign(offer, itemTypes: offer.itemTypes(registry))
    }
}
