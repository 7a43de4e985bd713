import FoundationEssentials

/// An encoded image: its bytes and the type that says their format (PNG, JPEG, …).
public struct PasteboardImage: Sendable, Hashable {
    /// The encoded bytes.
    public let data: Data
    /// The image type, e.g. ``PasteboardType/png``.
    public let type: PasteboardType

    /// An image of a known type.
    public init(data: Data, type: PasteboardType) {
        self.data = data
        self.type = type
    }

    /// An image whose format is recognised from its first bytes; nil if they are no image format
    /// the registry knows.
    public init?(data: Data) {
        guard let type = ContentSniffer.sniff(data), TypeRegistry.standard.conforms(type, to: .image) else { return nil }
        self.init(data: data, type: type)
    }

    /// The image in another format (``ImageCodec``): PNG, JPEG, BMP, TIFF or WebP, from any
    /// format xpb reads. Itself when it already is. Throws ``ImageError`` for a format xpb does
    /// not write, malformed bytes, or more pixels than the limit.
    public func converted(to type: PasteboardType, registry: TypeRegistry = .standard) throws -> PasteboardImage {
        guard let format = registry.imageFormat(of: type) else {
            throw ImageError(.unsupported, "\(type.identifier) is not an image format xpb writes")
        }
        if registry.imageFormat(of: self.type) == format { return self }
        return PasteboardImage(data: try ImageConversion.convert(data, to: format), type: type)
    }

    /// The image's width and height in pixels, from its header.
    public func pixelSize() throws -> (width: Int, height: Int) { try ImageConversion.size(of: data) }
}

/// A color with red, green, blue and alpha between 0 and 1, stored as `application/x-color`:
/// four little-endian 16-bit channels.
public struct PasteboardColor: Sendable, Hashable {
    /// Red, 0 to 1.
    public var red: Double
    /// Green, 0 to 1.
    public var green: Double
    /// Blue, 0 to 1.
    public var blue: Double
    /// Opacity, 0 (transparent) to 1 (opaque).
    public var alpha: Double

    /// A color; channels outside 0…1 are clamped.
    public init(red: Double, green: Double, blue: Double, alpha: Double = 1) {
        func clamp(_ value: Double) -> Double { value.isNaN ? 0 : min(max(value, 0), 1) }
        self.red = clamp(red)
        self.green = clamp(green)
        self.blue = clamp(blue)
        self.alpha = clamp(alpha)
    }

    /// The eight bytes of `application/x-color`.
    public var encoded: Data {
        var out = Data(capacity: 8)
        for channel in [red, green, blue, alpha] {
            let value = UInt16((channel * 65535).rounded())
            out.append(UInt8(value & 0xff))
            out.append(UInt8(value >> 8))
        }
        return out
    }

    /// Reads `application/x-color` bytes.
    ///
    /// - Throws: ``PasteboardError/malformedData(type:reason:)`` unless there are exactly 8 bytes.
    public init(encoded data: Data) throws {
        guard data.count == 8 else {
            throw PasteboardError.malformedData(type: .color, reason: "expected 8 bytes (four 16-bit channels), got \(data.count)")
        }
        let bytes = [UInt8](data)
        func channel(_ index: Int) -> Double { Double(UInt16(bytes[index * 2]) | UInt16(bytes[index * 2 + 1]) << 8) / 65535 }
        self.init(red: channel(0), green: channel(1), blue: channel(2), alpha: channel(3))
    }
}

/// The UIPasteboard-shaped properties and their throwing forms.
///
/// Every property has a throwing form: `string` ↔ ``readString()`` and ``setString(_:)``,
/// `types` ↔ ``readTypes()``, `hasStrings` ↔ ``readHasStrings()`` and so on. The throwing forms
/// say why a read or write failed (a stopped owner, a lost X connection, no display); the
/// properties cannot: a failed read returns nil, empty or false, as for an empty pasteboard, and
/// a failed write leaves the contents as they were. Use the properties where "nothing" is an
/// acceptable answer, the throwing forms everywhere else. Each throwing form also has an `async`
/// overload that waits without blocking a cooperative thread.
///
/// The singular reads (`string`, `url`, `image`, `color`) look at the first item only and read
/// one representation of it; the plural ones read one representation of every item.
extension Pasteboard {
    static let textTypes: [PasteboardType] = [.utf8PlainText, .plainText]

    /// Reads, from each item that has one (only the first item with `firstItemOnly`), the
    /// representation that `accepted` prefers, and converts it; items without an accepted type
    /// are skipped. Only the chosen type of those items is read: no other provider runs.
    func readEach<T>(accepting accepted: [PasteboardType], firstItemOnly: Bool = false,
                     _ convert: (Data, PasteboardType) throws -> [T]) throws -> [T] {
        let all = try itemTypes()
        var found: [T] = []
        for (index, types) in all.enumerated() {
            if firstItemOnly && index > 0 { break }
            guard let best = registry.bestType(among: types, accepting: accepted),
                  let data = try backend.data(of: name, item: index, type: best) else { continue }
            found += try convert(data, best)
        }
        return found
    }

    /// Replaces the contents with one item per element, each holding one representation (no
    /// items clears).
    func writeEach<T>(_ values: [T], _ encode: (T) -> (PasteboardType, Data)) throws {
        let items = values.map { value -> PasteboardItem in
            var item = PasteboardItem()
            let (type, data) = encode(value)
            item.setData(data, for: type)
            return item
        }
        try setItems(items)
    }

    static func decodeText(_ data: Data, _ type: PasteboardType) -> [String] {
        ValueCoding.decodeText(data, as: type).map { [$0] } ?? []
    }

    /// The URLs a URL representation holds: one per line (a foreign `text/uri-list` may carry
    /// several, as Qt's `setUrls` and file managers write).
    static func decodeURLs(_ data: Data, _ type: PasteboardType) -> [URL] {
        TargetCodec.uriListEntries(data).compactMap { URL(string: $0) }
    }

    static func decodeImage(_ data: Data, _ type: PasteboardType) -> [PasteboardImage] {
        [PasteboardImage(data: data, type: type)]
    }

    static func decodeColor(_ data: Data, _ type: PasteboardType) -> [PasteboardColor] {
        (try? PasteboardColor(encoded: data)).map { [$0] } ?? []
    }

    // MARK: Throwing forms

    /// The plain text of every item that has some (empty when none has).
    public func readStrings() throws -> [String] { try readEach(accepting: Self.textTypes, Self.decodeText) }
    /// The plain text of the first item; nil when it has none.
    public func readString() throws -> String? { try readEach(accepting: Self.textTypes, firstItemOnly: true, Self.decodeText).first }
    /// The URLs of every item that has any (empty when none has).
    public func readURLs() throws -> [URL] { try readEach(accepting: [.url], Self.decodeURLs) }
    /// The first URL of the first item; nil when it has none.
    public func readURL() throws -> URL? { try readEach(accepting: [.url], firstItemOnly: true, Self.decodeURLs).first }
    /// The image of every item that has one, each in the item's preferred format.
    public func readImages() throws -> [PasteboardImage] { try readEach(accepting: ReaderPreference.image, Self.decodeImage) }
    /// The image of the first item; nil when it has none.
    public func readImage() throws -> PasteboardImage? { try readEach(accepting: ReaderPreference.image, firstItemOnly: true, Self.decodeImage).first }
    /// The image of the first item in `type`'s format (`.jpeg`, `.png` …): the item's own
    /// representation of that format, else its best image converted (``PasteboardImage/converted(to:registry:)``);
    /// nil when it has no image.
    public func readImage(as type: PasteboardType) throws -> PasteboardImage? {
        if let own = try readEach(accepting: [type], firstItemOnly: true, Self.decodeImage).first { return own }
        return try readImage()?.converted(to: type)
    }
    /// The color of every item that has one.
    public func readColors() throws -> [PasteboardColor] { try readEach(accepting: [.color], Self.decodeColor) }
    /// The color of the first item; nil when it has none (or its bytes are not a color).
    public func readColor() throws -> PasteboardColor? { try readEach(accepting: [.color], firstItemOnly: true, Self.decodeColor).first }

    /// Replaces the contents with one text item per string (an empty array clears).
    public func setStrings(_ strings: [String]) throws { try writeEach(strings) { (.utf8PlainText, Data(utf8Of: $0)) } }
    /// Replaces the contents with one text item (nil clears).
    public func setString(_ string: String?) throws { try setStrings(string.map { [$0] } ?? []) }
    /// Replaces the contents with one item per URL, each `public.file-url` or `public.url`.
    public func setURLs(_ urls: [URL]) throws { try writeEach(urls) { ($0.isFileURL ? .fileURL : .url, Data(utf8Of: $0.absoluteString)) } }
    /// Replaces the contents with one URL item (nil clears).
    public func setURL(_ url: URL?) throws { try setURLs(url.map { [$0] } ?? []) }
    /// Replaces the contents with one item per image.
    public func setImages(_ images: [PasteboardImage]) throws { try writeEach(images) { ($0.type, $0.data) } }
    /// Replaces the contents with one image item (nil clears).
    public func setImage(_ image: PasteboardImage?) throws { try setImages(image.map { [$0] } ?? []) }
    /// Replaces the contents with one item per color.
    public func setColors(_ colors: [PasteboardColor]) throws { try writeEach(colors) { (.color, $0.encoded) } }
    /// Replaces the contents with one color item (nil clears).
    public func setColor(_ color: PasteboardColor?) throws { try setColors(color.map { [$0] } ?? []) }

    // MARK: Properties (failures read as nothing; see the extension's comment)

    /// The plain text of every item that has some; nil when none has, or the read failed
    /// (``readStrings()`` says why). Setting replaces the contents; a failed write changes nothing
    /// (``setStrings(_:)`` says why).
    public var strings: [String]? {
        get { (try? readStrings()).flatMap { $0.isEmpty ? nil : $0 } }
        set { try? setStrings(newValue ?? []) }
    }

    /// The plain text of the first item; nil when it has none or the read failed
    /// (``readString()`` says why). Setting replaces the contents (nil clears); a failed write
    /// changes nothing (``setString(_:)`` says why).
    public var string: String? {
        get { try? readString() }
        set { try? setString(newValue) }
    }

    /// The URLs of every item; nil when there are none or the read failed (``readURLs()``).
    /// Setting replaces the contents; a failed write changes nothing (``setURLs(_:)``).
    public var urls: [URL]? {
        get { (try? readURLs()).flatMap { $0.isEmpty ? nil : $0 } }
        set { try? setURLs(newValue ?? []) }
    }

    /// The first URL of the first item; nil when it has none or the read failed (``readURL()``).
    /// Setting replaces the contents (nil clears); a failed write changes nothing (``setURL(_:)``).
    public var url: URL? {
        get { try? readURL() }
        set { try? setURL(newValue) }
    }

    /// The images of every item; nil when there are none or the read failed (``readImages()``).
    /// Setting replaces the contents; a failed write changes nothing (``setImages(_:)``).
    public var images: [PasteboardImage]? {
        get { (try? readImages()).flatMap { $0.isEmpty ? nil : $0 } }
        set { try? setImages(newValue ?? []) }
    }

    /// The image of the first item; nil when it has none or the read failed (``readImage()``).
    /// Setting replaces the contents (nil clears); a failed write changes nothing (``setImage(_:)``).
    public var image: PasteboardImage? {
        get { try? readImage() }
        set { try? setImage(newValue) }
    }

    /// The colors of every item; nil when there are none or the read failed (``readColors()``).
    /// Setting replaces the contents; a failed write changes nothing (``setColors(_:)``).
    public var colors: [PasteboardColor]? {
        get { (try? readColors()).flatMap { $0.isEmpty ? nil : $0 } }
        set { try? setColors(newValue ?? []) }
    }

    /// The color of the first item; nil when it has none or the read failed (``readColor()``).
    /// Setting replaces the contents (nil clears); a failed write changes nothing (``setColor(_:)``).
    public var color: PasteboardColor? {
        get { try? readColor() }
        set { try? setColor(newValue) }
    }
}
