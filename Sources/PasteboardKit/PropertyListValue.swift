import Foundation

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
        case let value as NSNumber: return fromFoundation(value) ?? .double(value.doubleValue)
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

    /// The value as a Foundation property-list object, for serialization.
    var foundationObject: Any {
        switch self {
        case let .string(value): return value
        case let .data(value): return value
        case let .integer(value): return NSNumber(value: value)
        case let .double(value): return NSNumber(value: value)
        case let .bool(value): return NSNumber(value: value)
        case let .date(value): return value
        case let .url(value): return value.absoluteString
        case let .array(values): return values.map(\.foundationObject)
        case let .dictionary(values): return values.mapValues(\.foundationObject)
        }
    }

    /// Reads back a Foundation property-list object.
    static func fromFoundation(_ object: Any) -> PropertyListValue? {
        switch object {
        case let value as String: return .string(value)
        case let value as Data: return .data(value)
        case let value as Date: return .date(value)
        case let value as Bool where Swift.type(of: object) == Bool.self: return .bool(value)
        case let value as NSNumber:
            // Foundation reads booleans back as `Bool` and numbers as `NSNumber`; the number's
            // C type code tells integers ("q", "i", …) from floating point ("d", "f").
            switch String(cString: value.objCType) {
            case "c", "B": return .bool(value.boolValue)
            case "d", "f": return .double(value.doubleValue)
            default: return .integer(value.intValue)
            }
        case let value as [Any]:
            var result = [PropertyListValue]()
            for element in value {
                guard let converted = fromFoundation(element) else { return nil }
                result.append(converted)
            }
            return .array(result)
        case let value as [String: Any]:
            var result = [String: PropertyListValue]()
            for (key, element) in value {
                guard let converted = fromFoundation(element) else { return nil }
                result[key] = converted
            }
            return .dictionary(result)
        default:
            return nil
        }
    }
}

/// Converts values to and from the bytes stored for a type, so that every representation is data
/// and any backend can carry it.
///
/// Text types hold the string in the type's encoding, URL types the UTF-8 absolute string, raw
/// data is stored as is, and every other value becomes a binary property list, which reads back as
/// the same value.
public enum ValueCoding {
    static let binaryPlistMagic = Data("bplist00".utf8)

    /// The bytes stored for `value` under `type`.
    public static func encode(_ value: PropertyListValue, as type: PasteboardType, registry: TypeRegistry = .standard) throws -> Data {
        switch value {
        case let .data(bytes):
            return bytes
        case let .string(text) where registry.conforms(type, to: .text):
            return encodeText(text, as: type)
        case let .string(text) where registry.conforms(type, to: .url):
            return Data(text.utf8)
        case let .url(url) where registry.conforms(type, to: .url) || registry.conforms(type, to: .text):
            return Data(url.absoluteString.utf8)
        default:
            do {
                return try PropertyListSerialization.data(fromPropertyList: value.foundationObject, format: .binary, options: 0)
            } catch {
                throw PasteboardError.malformedData(type: type, reason: "cannot serialize the value: \(error)")
            }
        }
    }

    /// The value that `data` stored under `type` stands for.
    public static func decode(_ data: Data, as type: PasteboardType, registry: TypeRegistry = .standard) -> PropertyListValue {
        if registry.conforms(type, to: .url) {
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if let url = URL(string: text) { return .url(url) }
        }
        if registry.conforms(type, to: .text) {
            if let text = decodeText(data, as: type) { return .string(text) }
            return .data(data)
        }
        if data.starts(with: binaryPlistMagic),
           let object = try? PropertyListSerialization.propertyList(from: data, options: [], format: nil),
           let value = PropertyListValue.fromFoundation(object) {
            return value
        }
        return .data(data)
    }

    /// Text in the encoding a text type implies: UTF-16LE for `public.utf16-plain-text`, UTF-8 for
    /// the rest.
    public static func encodeText(_ text: String, as type: PasteboardType) -> Data {
        type == .utf16PlainText ? UTF16LE.encode(text) : Data(text.utf8)
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
