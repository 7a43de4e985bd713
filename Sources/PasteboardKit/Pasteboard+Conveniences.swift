import Foundation

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

extension Pasteboard {
    /// Reads, from each item that has one, the representation that `accepted` prefers, and
    /// converts it; items without an accepted type are skipped. Only the chosen type is read.
    func readEach<T>(accepting accepted: [PasteboardType], _ convert: (Data, PasteboardType) throws -> T?) throws -> [T] {
        try itemTypes().enumerated().compactMap { index, types in
            guard let best = registry.bestType(among: types, accepting: accepted),
                  let data = try backend.data(of: name, item: index, type: best) else { return nil }
            return try convert(data, best)
        }
    }

    /// Replaces the contents with one item per element, each holding one representation.
    func writeEach<T>(_ values: [T]?, _ encode: (T) -> (PasteboardType, Data)) {
        let items = (values ?? []).map { value -> PasteboardItem in
            var item = PasteboardItem()
            let (type, data) = encode(value)
            item.setData(data, for: type)
            return item
        }
        try? setItems(items)
    }

    static let textTypes: [PasteboardType] = [.utf8PlainText, .plainText]

    /// The plain text of every item that has some; nil when none has.
    public var strings: [String]? {
        get {
            let found = (try? readEach(accepting: Self.textTypes) { ValueCoding.decodeText($0, as: $1) }) ?? []
            return found.isEmpty ? nil : found
        }
        set { writeEach(newValue) { (.utf8PlainText, Data($0.utf8)) } }
    }

    /// The plain text of the first item that has some; setting replaces the contents (nil clears).
    public var string: String? {
        get { strings?.first }
        set { strings = newValue.map { [$0] } }
    }

    /// The URLs of every item that has one; nil when none has.
    public var urls: [URL]? {
        get {
            let found = (try? readEach(accepting: [.url]) { data, _ in
                URL(string: String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
            }) ?? []
            return found.isEmpty ? nil : found
        }
        set { writeEach(newValue) { ($0.isFileURL ? .fileURL : .url, Data($0.absoluteString.utf8)) } }
    }

    /// The URL of the first item that has one; setting replaces the contents (nil clears).
    public var url: URL? {
        get { urls?.first }
        set { urls = newValue.map { [$0] } }
    }

    /// The images of every item that has one, each in the item's preferred format; nil when none has.
    public var images: [PasteboardImage]? {
        get {
            let found = (try? readEach(accepting: ReaderPreference.image) { PasteboardImage(data: $0, type: $1) }) ?? []
            return found.isEmpty ? nil : found
        }
        set { writeEach(newValue) { ($0.type, $0.data) } }
    }

    /// The image of the first item that has one; setting replaces the contents (nil clears).
    public var image: PasteboardImage? {
        get { images?.first }
        set { images = newValue.map { [$0] } }
    }

    /// The colors of every item that has one; nil when none has.
    public var colors: [PasteboardColor]? {
        get {
            let found = (try? readEach(accepting: [.color]) { data, _ in try? PasteboardColor(encoded: data) }) ?? []
            return found.isEmpty ? nil : found
        }
        set { writeEach(newValue) { (.color, $0.encoded) } }
    }

    /// The color of the first item that has one; setting replaces the contents (nil clears).
    public var color: PasteboardColor? {
        get { colors?.first }
        set { colors = newValue.map { [$0] } }
    }
}
