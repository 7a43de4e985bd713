import FoundationEssentials

/// The default backend when no platform backend can be used: every read and write throws
/// ``PasteboardError/unavailable(_:)`` with the reason, so that a program never mistakes "no
/// clipboard" for an empty clipboard or a private in-memory one.
public final class UnavailablePasteboardBackend: PasteboardBackend {
    /// Why no backend can be used.
    public let reason: String
    /// The type table.
    public let registry: TypeRegistry
    /// Where changes would be published (there are none).
    public let changeCenter = ChangeCenter()

    /// A backend that refuses everything with `reason`.
    public init(reason: String, registry: TypeRegistry = .standard) {
        self.reason = reason
        self.registry = registry
        changeCenter.attach(self)
    }

    private var failure: PasteboardError { .unavailable(reason) }

    public func exists(_ name: Pasteboard.Name) -> Bool { name.isSystem }
    public func create(_ name: Pasteboard.Name) throws { throw failure }
    public func remove(_ name: Pasteboard.Name) {}
    public func isPersistent(_ name: Pasteboard.Name) -> Bool { false }
    public func setPersistent(_ isPersistent: Bool, for name: Pasteboard.Name) {}
    public func changeCount(of name: Pasteboard.Name) -> Int { 0 }
    public func itemTypes(of name: Pasteboard.Name) throws -> [[PasteboardType]] { throw failure }
    public func data(of name: Pasteboard.Name, item: Int, type: PasteboardType) throws -> Data? { throw failure }
    public func items(of name: Pasteboard.Name) throws -> [PasteboardItem] { throw failure }
    public func options(of name: Pasteboard.Name) -> PasteboardOptions { PasteboardOptions() }
    public func setItems(_ items: [PasteboardItem], options: PasteboardOptions, on name: Pasteboard.Name) throws { throw failure }
    public func addItems(_ items: [PasteboardItem], to name: Pasteboard.Name) throws { throw failure }
    public func flushToClipboardManager() throws -> Bool { throw failure }
}
