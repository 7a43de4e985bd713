import Dispatch
import FoundationEssentials

/// Async forms of every read and write. Each runs its synchronous twin on a worker thread outside
/// Swift's cooperative pool and resumes the caller when it is done, so a call from an actor or
/// the main actor never blocks a cooperative thread while an owner takes its time (a stopped X
/// owner takes up to the read timeout, 5 s by default). In an async context these overloads are
/// the ones chosen: `try await board.readString()`.
extension Pasteboard {
    /// Runs `body` on a worker thread and waits for it without blocking the caller's thread.
    func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Result { try body() })
            }
        }
    }

    // MARK: Items and types

    /// The types of every item, without moving data.
    public func itemTypes() async throws -> [[PasteboardType]] { try await offload { try self.itemTypes() } }
    /// The types of the first item, without moving data.
    public func readTypes() async throws -> [PasteboardType] { try await offload { try self.readTypes() } }
    /// The number of items.
    public func readNumberOfItems() async throws -> Int { try await offload { try self.readNumberOfItems() } }
    /// The items, whose representations are read only when asked for.
    public func readItems() async throws -> [PasteboardItem] { try await offload { try self.readItems() } }
    /// Whether any item of `itemSet` (every item for nil) has one of `types` or a type conforming to one.
    public func readContains(pasteboardTypes types: [PasteboardType], inItemSet itemSet: [Int]? = nil) async throws -> Bool {
        try await offload { try self.readContains(pasteboardTypes: types, inItemSet: itemSet) }
    }
    /// The items that have one of `types` or a type conforming to one.
    public func readItemSet(withPasteboardTypes types: [PasteboardType]) async throws -> [Int] {
        try await offload { try self.readItemSet(withPasteboardTypes: types) }
    }
    /// Whether any item holds plain text.
    public func readHasStrings() async throws -> Bool { try await offload { try self.readHasStrings() } }
    /// Whether any item holds a URL.
    public func readHasURLs() async throws -> Bool { try await offload { try self.readHasURLs() } }
    /// Whether any item holds an image.
    public func readHasImages() async throws -> Bool { try await offload { try self.readHasImages() } }
    /// Whether any item holds a color.
    public func readHasColors() async throws -> Bool { try await offload { try self.readHasColors() } }

    // MARK: Data and values

    /// The bytes of `type` from the first item that has it (or a type conforming to it).
    public func data(forPasteboardType type: PasteboardType) async throws -> Data? {
        try await offload { try self.data(forPasteboardType: type) }
    }
    /// The bytes of `type` from each item of `itemSet` (every item for nil) that has it.
    public func data(forPasteboardType type: PasteboardType, inItemSet itemSet: [Int]?) async throws -> [Data] {
        try await offload { try self.data(forPasteboardType: type, inItemSet: itemSet) }
    }
    /// The value of `type` from the first item that has it.
    public func value(forPasteboardType type: PasteboardType) async throws -> PropertyListValue? {
        try await offload { try self.value(forPasteboardType: type) }
    }
    /// The values of `type` from each item of `itemSet` (every item for nil) that has it.
    public func values(forPasteboardType type: PasteboardType, inItemSet itemSet: [Int]?) async throws -> [PropertyListValue] {
        try await offload { try self.values(forPasteboardType: type, inItemSet: itemSet) }
    }

    // MARK: Conveniences

    /// The plain text of the first item; nil when it has none.
    public func readString() async throws -> String? { try await offload { try self.readString() } }
    /// The plain text of every item that has some.
    public func readStrings() async throws -> [String] { try await offload { try self.readStrings() } }
    /// The first URL of the first item; nil when it has none.
    public func readURL() async throws -> URL? { try await offload { try self.readURL() } }
    /// The URLs of every item.
    public func readURLs() async throws -> [URL] { try await offload { try self.readURLs() } }
    /// The image of the first item; nil when it has none.
    public func readImage() async throws -> PasteboardImage? { try await offload { try self.readImage() } }
    /// The image of every item that has one.
    public func readImages() async throws -> [PasteboardImage] { try await offload { try self.readImages() } }
    /// The color of the first item; nil when it has none.
    public func readColor() async throws -> PasteboardColor? { try await offload { try self.readColor() } }
    /// The color of every item that has one.
    public func readColors() async throws -> [PasteboardColor] { try await offload { try self.readColors() } }

    // MARK: Writes

    /// Replaces the whole contents with `items`.
    public func setItems(_ items: [PasteboardItem], options: PasteboardOptions = PasteboardOptions()) async throws {
        try await offload { try self.setItems(items, options: options) }
    }
    /// Replaces the whole contents with items whose representations are produced only when read.
    public func setItemProviders(_ providers: [ItemProvider], localOnly: Bool = false, expirationDate: Date? = nil) async throws {
        try await offload { try self.setItemProviders(providers, localOnly: localOnly, expirationDate: expirationDate) }
    }
    /// Appends items after the current ones, keeping the current options.
    public func addItems(_ items: [PasteboardItem]) async throws { try await offload { try self.addItems(items) } }
    /// Removes every item.
    public func removeAllItems() async throws { try await offload { try self.removeAllItems() } }
    /// Replaces the contents with one item holding `data` under `type`.
    public func setData(_ data: Data, forPasteboardType type: PasteboardType) async throws {
        try await offload { try self.setData(data, forPasteboardType: type) }
    }
    /// Replaces the contents with one text item (nil clears).
    public func setString(_ string: String?) async throws { try await offload { try self.setString(string) } }
    /// Replaces the contents with one text item per string.
    public func setStrings(_ strings: [String]) async throws { try await offload { try self.setStrings(strings) } }
    /// Replaces the contents with one URL item (nil clears).
    public func setURL(_ url: URL?) async throws { try await offload { try self.setURL(url) } }
    /// Replaces the contents with one item per URL.
    public func setURLs(_ urls: [URL]) async throws { try await offload { try self.setURLs(urls) } }
    /// Replaces the contents with one image item (nil clears).
    public func setImage(_ image: PasteboardImage?) async throws { try await offload { try self.setImage(image) } }
    /// Replaces the contents with one item per image.
    public func setImages(_ images: [PasteboardImage]) async throws { try await offload { try self.setImages(images) } }
    /// Replaces the contents with one color item (nil clears).
    public func setColor(_ color: PasteboardColor?) async throws { try await offload { try self.setColor(color) } }
    /// Replaces the contents with one item per color.
    public func setColors(_ colors: [PasteboardColor]) async throws { try await offload { try self.setColors(colors) } }

    // MARK: Pattern detection (UIPasteboard's async names)

    /// The patterns among `patterns` that the first item's text matches.
    public func detectedPatterns(for patterns: Set<DetectionPattern>) async throws -> Set<DetectionPattern> {
        try await offload { try self.detectPatterns(for: patterns) }
    }
    /// The patterns each item of `itemSet` (every item for nil) matches, in item order.
    public func detectedPatterns(for patterns: Set<DetectionPattern>, inItemSet itemSet: [Int]?) async throws -> [Set<DetectionPattern>] {
        try await offload { try self.detectPatterns(for: patterns, inItemSet: itemSet) }
    }
    /// The values of the kinds in `patterns` in the first item's text.
    public func detectedValues(for patterns: Set<ValueDetectionPattern>) async throws -> DetectedValues {
        try await offload { try self.detectValues(for: patterns) }
    }
    /// The values found in each item of `itemSet` (every item for nil), in item order.
    public func detectedValues(for patterns: Set<ValueDetectionPattern>, inItemSet itemSet: [Int]?) async throws -> [DetectedValues] {
        try await offload { try self.detectValues(for: patterns, inItemSet: itemSet) }
    }
}

extension Pasteboard {
    /// Hands the default backend's contents to a clipboard manager and closes the backend,
    /// without blocking a cooperative thread (``flushToClipboardManager()``).
    @discardableResult
    public static func flushToClipboardManager() async throws -> Bool {
        try await Pasteboard.general.offload { try PasteboardSystem.backend.flushToClipboardManager() }
    }
}
