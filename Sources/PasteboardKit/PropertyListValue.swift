import FoundationEssentials

/// A property-list value: what ``Pasteboard/setValue(_:forPasteboardType:)`` accepts and
/// ``Pasteboard/value(forPasteboardType:)`` returns.
public enum PropertyListValue: Sendable, Hashable {
    /// Text.
    case string(String)
    /// Bytes.
    case data(Data)
    /// A whole number.
    case integer(Int)
    /// A floating-point number.
    case double(Double)
    /// A truth value.
    case bool(Bool)
    /// A point in time.
    case date(Date)
    /// A URL.
    case url(URL)
    /// An ordered list of values.
    case array([PropertyListValue])
    /// A dictionary with string keys.
    case dictionary([String: PropertyListValue])

    /// Converts a Swift value into a property-list value.
    ///
    /// - Throws: ``PasteboardError/notAPropertyList(typeName:path:)`` naming the first value,
    ///   however deeply nested, that is not a property list.
    public init(converting value: Any) throws {
        self = try Self.convert(value, path: "the top level")
    }

    private static func convert(_ value: Any, path: String) throws -> PropertyListValue {
        switch value {
        case let value as PropertyListValue: return value
        case let value as String: return .string(value)
        case let value as Substring: return .string(String(value))
        case let value as Data: return .data(value)
        case let value as [UInt8]: return .data(Data(value))
        case let flag as Bool where Swift.type(of: value) == Bool.self: return .bool(flag)
        case let value as Int: return .integer(value)
        case let value as Int8: return .integer(Int(value))
        case let value as Int16: return .integer(Int(value))
        case let value as Int32: return .integer(Int(value))
        case let value as Int64: return .integer(Int(value))
        case let value as UInt8: return .integer(Int(value))
        case let value as UInt16: return .integer(Int(value))
        case let value as UInt32: return .integer(Int(value))
        case let value as UInt:
            guard let exact = Int(exactly: value) else {
                throw PasteboardError.notAPropertyList(typeName: "UInt (\(value), too large)", path: path)
            }
            return .integer(exact)
        case let value as Double: return .double(value)
        case let value as Float: return .double(Double(value))
        case let value as Date: return .date(value)
        case let value as URL: return .url(value)
        case let value as [Any]:
            return .array(try value.enumerated().map { try convert($0.element, path: "\(path)[\($0.offset)]") })
        case let value as [String: Any]:
            var result = [String: PropertyListValue]()
            for (key, element) in value { result[key] = try convert(element, path: "\(path)[\"\(key)\"]") }
            return .dictionary(result)
        default:
            throw PasteboardError.notAPropertyList(typeName: String(describing: type(of: value)), path: path)
        }
    }
}

/// A property-list value is coded as the property list it stands for: with
/// `PropertyListEncoder` and `PropertyListDecoder` it reads and writes plist bytes. A URL is
/// written as its absolute string (property lists have no URL type) and reads back as
/// `.string`.
extension PropertyListValue: Codable {
    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case let .array(values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        case let .dictionary(values):
            var container = encoder.container(keyedBy: Key.self)
            for (key, value) in values { try container.encode(value, forKey: Key(stringValue: key)) }
        case let .string(value): var container = encoder.singleValueContainer(); try container.encode(value)
        case let .data(value): var container = encoder.singleValueContainer(); try container.encode(value)
        case let .integer(value): var container = encoder.singleValueContainer(); try container.encode(value)
        case let .double(value): var container = encoder.singleValueContainer(); try container.encode(value)
        case let .bool(value): var container = encoder.singleValueContainer(); try container.encode(value)
        case let .date(value): var container = encoder.singleValueContainer(); try container.encode(value)
        case let .url(value): var container = encoder.singleValueContainer(); try container.encode(value.absoluteString)
        }
    }

    /// Reads whichever value the property list holds: a dictionary, an array, or a scalar
    /// (a boolean, an integer, a real, a date, data or a string, tried in that order, so that
    /// each comes back as the case it was written from).
    public init(from decoder: any Decoder) throws {
        if let container = try? decoder.container(keyedBy: Key.self) {
            var values = [String: PropertyListValue]()
            for key in container.allKeys { values[key.stringValue] = try container.decode(PropertyListValue.self, forKey: key) }
            self = .dictionary(values)
        } else if var container = try? decoder.unkeyedContainer() {
            var values = [PropertyListValue]()
            while !container.isAtEnd { values.append(try container.decode(PropertyListValue.self)) }
            self = .array(values)
        } else {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Bool.self) { self = .bool(value) }
            else if let value = try? container.decode(Int.self) { self = .integer(value) }
            else if let value = try? container.decode(Double.self) { self = .double(value) }
            else if let value = try? container.decode(Date.self) { self = .date(value) }
            else if let value = try? container.decode(Data.self) { self = .data(value) }
            else { self = .string(try container.decode(String.self)) }
        }
    }

    /// The value as a binary property list.
    ///
    /// `PropertyListEncoder` writes only arrays and dictionaries at the top level, while a
    /// pasteboard value may be a lone number or date. Such a value is encoded inside a
    /// one-element array and the trailer's top object is then pointed at the element: the
    /// bytes are a valid property list of the value alone (the array is left unreferenced).
    func binaryPropertyList() throws -> Data {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        switch self {
        case .array, .dictionary: return try encoder.encode(self)
        default: break
        }
        var bytes = try encoder.encode([self])
        // Trailer (last 32 bytes): 6 unused, offset size, reference size, object count (8),
        // top object (8), offset table offset (8). Object 0 is the array: marker 0xA1, then
        // the element's reference.
        let trailer = bytes.count - 32
        let referenceSize = Int(bytes[trailer + 7])
        guard bytes.count > 9 + referenceSize, bytes[8] == 0xA1, (1...8).contains(referenceSize) else {
            throw PasteboardError.malformedData(type: .data, reason: "unexpected property list layout")
        }
        var element: UInt64 = 0
        for byte in bytes[9..<(9 + referenceSize)] { element = element << 8 | UInt64(byte) }
        for index in 0..<8 { bytes[trailer + 16 + index] = UInt8(truncatingIfNeeded: element >> (56 - 8 * UInt64(index))) }
        return bytes
    }
}

/// Converts values to and from the bytes stored for a type, so that every representation is data
/// and any backend can carry it.
///
/// Text types hold the string in the type's encoding, URL types the UTF-8 absolute string, raw
/// data is stored as is, and every other value becomes a binary property list, which reads back as
/// the same value.
public enum ValueCoding {
    static let binaryPlistMagic = Data(utf8Of: "bplist00")

    /// The bytes stored for `value` under `type`.
    public static func encode(_ value: PropertyListValue, as type: PasteboardType, registry: TypeRegistry = .standard) throws -> Data {
        switch value {
        case let .data(bytes):
            return bytes
        case let .string(text) where registry.conforms(type, to: .text):
            return encodeText(text, as: type)
        case let .string(text) where registry.conforms(type, to: .url):
            return Data(utf8Of: text)
        case let .url(url) where registry.conforms(type, to: .url) || registry.conforms(type, to: .text):
            return Data(utf8Of: url.absoluteString)
        default:
            do {
                return try value.binaryPropertyList()
            } catch {
                throw PasteboardError.malformedData(type: type, reason: "cannot serialize the value: \(error)")
            }
        }
    }

    /// The value that `data` stored under `type` stands for.
    public static func decode(_ data: Data, as type: PasteboardType, registry: TypeRegistry = .standard) -> PropertyListValue {
        if registry.conforms(type, to: .url) {
            let text = String(decoding: data, as: UTF8.self).trimmingWhitespace()
            if let url = URL(string: text) { return .url(url) }
        }
        if registry.conforms(type, to: .text) {
            if let text = decodeText(data, as: type) { return .string(text) }
            return .data(data)
        }
        if data.starts(with: binaryPlistMagic), let value = try? PropertyListDecoder().decode(PropertyListValue.self, from: data) {
            return value
        }
        return .data(data)
    }

    /// Text in the encoding a text type implies: UTF-16LE for `public.utf16-plain-text`, UTF-8 for
    /// the rest.
    public static func encodeText(_ text: String, as type: PasteboardType) -> Data {
        type == .utf16PlainText ? UTF16LE.encode(text) : Data(utf8Of: text)
    }

    /// Text stored under a text type, or nil when the bytes are not valid in its encoding.
    public static func decodeText(_ data: Data, as type: PasteboardType) -> String? {
        if type == .utf16PlainText {
            guard data.count % 2 == 0 else { return nil }
            return String(validating: UTF16LE.units(data), as: UTF16.self)
        }
        return String(validating: data, as: UTF8.self)
    }
}

/// UTF-16 little-endian without a byte-order mark: `public.utf16-plain-text` and Mozilla's
/// `text/x-moz-url`.
enum UTF16LE {
    /// The text's code units, low byte first.
    static func encode(_ text: String) -> Data {
        var out = Data(capacity: text.utf16.count * 2)
        for unit in text.utf16 {
            out.append(UInt8(unit & 0xff))
            out.append(UInt8(unit >> 8))
        }
        return out
    }

    /// The code units of the bytes; an odd last byte is left out.
    static func units(_ data: Data) -> [UInt16] {
        var units = [UInt16]()
        units.reserveCapacity(data.count / 2)
        var index = data.startIndex
        while index + 1 < data.endIndex {
            units.append(UInt16(data[index]) | UInt16(data[index + 1]) << 8)
            index += 2
        }
        return units
    }
}
