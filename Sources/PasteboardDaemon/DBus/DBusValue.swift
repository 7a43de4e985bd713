import CDBus
import FoundationEssentials
import Glibc

/// A D-Bus value, as xpbd's interfaces read and write them: the basic types they use, byte
/// arrays, arrays, dictionaries and structures.
package enum DBusValue {
    case string(String)
    case int32(Int32)
    case int64(Int64)
    case uint32(UInt32)
    case uint64(UInt64)
    case bool(Bool)
    case double(Double)
    /// `ay`.
    case bytes(Data)
    /// `a<element>`: the element's signature, for an empty array too.
    case array(String, [DBusValue])
    /// `a{<key><value>}`.
    case dictionary(key: String, value: String, [(DBusValue, DBusValue)])
    /// `(…)`.
    case structure([DBusValue])
    /// `o` (read back as a string).
    case objectPath(String)
    /// `v`, holding one value.
    indirect case variant(DBusValue)

    /// Its type signature.
    var signature: String {
        switch self {
        case .string: "s"
        case .int32: "i"
        case .int64: "x"
        case .uint32: "u"
        case .uint64: "t"
        case .bool: "b"
        case .double: "d"
        case .bytes: "ay"
        case let .array(element, _): "a" + element
        case let .dictionary(key, value, _): "a{\(key)\(value)}"
        case let .structure(fields): "(" + fields.map(\.signature).joined() + ")"
        case .objectPath: "o"
        case .variant: "v"
        }
    }

    /// At least the bytes it takes in a message: each item's length and padding counted at
    /// their most (8 bytes), so that a reply this allows never passes D-Bus's limits.
    var wireSize: Int {
        switch self {
        case let .string(text): 8 + text.utf8.count + 1
        case .int32, .uint32, .bool: 8
        case .int64, .uint64, .double: 8
        case let .bytes(data): 8 + data.count
        case let .array(_, elements): 8 + elements.reduce(0) { $0 + $1.wireSize }
        case let .dictionary(_, _, pairs): 8 + pairs.reduce(0) { $0 + 8 + $1.0.wireSize + $1.1.wireSize }
        case let .structure(fields): 8 + fields.reduce(0) { $0 + $1.wireSize }
        case let .objectPath(path): 8 + path.utf8.count + 1
        case let .variant(value): 8 + value.signature.utf8.count + value.wireSize
        }
    }

    private static func code(_ character: Character) -> Int32 { Int32(character.asciiValue ?? 0) }

    /// Appends the value to a message being written.
    func append(to iterator: inout DBusMessageIter) {
        func basic<T: BitwiseCopyable>(_ type: Character, _ value: T) {
            withUnsafeBytes(of: value) { bytes in
                _ = dbus_message_iter_append_basic(&iterator, Self.code(type), bytes.baseAddress)
            }
        }
        switch self {
        case let .string(text):
            // D-Bus strings are UTF-8 without NUL: what a copy's text holds otherwise is dropped.
            let clean = String(decoding: text.utf8.filter { $0 != 0 }, as: UTF8.self)
            clean.withCString { pointer in
                var pointer: UnsafePointer<CChar>? = pointer
                _ = dbus_message_iter_append_basic(&iterator, Self.code("s"), &pointer)
            }
        case let .int32(value): basic("i", value)
        case let .int64(value): basic("x", value)
        case let .uint32(value): basic("u", value)
        case let .uint64(value): basic("t", value)
        case let .bool(value): basic("b", dbus_bool_t(value ? 1 : 0))
        case let .double(value): basic("d", value)
        case let .bytes(data):
            var array = DBusMessageIter()
            _ = dbus_message_iter_open_container(&iterator, Self.code("a"), "y", &array)
            data.withUnsafeBytes { bytes in
                var pointer = bytes.baseAddress
                if pointer == nil { pointer = UnsafeRawPointer(bitPattern: 1) }
                _ = dbus_message_iter_append_fixed_array(&array, Self.code("y"), &pointer, Int32(bytes.count))
            }
            _ = dbus_message_iter_close_container(&iterator, &array)
        case let .array(element, values):
            var array = DBusMessageIter()
            _ = dbus_message_iter_open_container(&iterator, Self.code("a"), element, &array)
            for value in values { value.append(to: &array) }
            _ = dbus_message_iter_close_container(&iterator, &array)
        case let .dictionary(key, value, pairs):
            var array = DBusMessageIter()
            _ = dbus_message_iter_open_container(&iterator, Self.code("a"), "{\(key)\(value)}", &array)
            for (k, v) in pairs {
                var entry = DBusMessageIter()
                _ = dbus_message_iter_open_container(&array, Self.code("e"), nil, &entry)
                k.append(to: &entry)
                v.append(to: &entry)
                _ = dbus_message_iter_close_container(&array, &entry)
            }
            _ = dbus_message_iter_close_container(&iterator, &array)
        case let .structure(fields):
            var structure = DBusMessageIter()
            _ = dbus_message_iter_open_container(&iterator, Self.code("r"), nil, &structure)
            for field in fields { field.append(to: &structure) }
            _ = dbus_message_iter_close_container(&iterator, &structure)
        case let .objectPath(path):
            path.withCString { pointer in
                var pointer: UnsafePointer<CChar>? = pointer
                _ = dbus_message_iter_append_basic(&iterator, Self.code("o"), &pointer)
            }
        case let .variant(value):
            var inner = DBusMessageIter()
            _ = value.signature.withCString { dbus_message_iter_open_container(&iterator, Self.code("v"), $0, &inner) }
            value.append(to: &inner)
            _ = dbus_message_iter_close_container(&iterator, &inner)
        }
    }

    /// The most values a call's arguments may hold in all (a caller's claim is bounded).
    static let maxValues = 4096

    /// The arguments of a call; nil when one is of a type no interface of xpbd takes, or there
    /// are more than ``maxValues``. libdbus has checked the message (UTF-8, sizes, nesting).
    /// `maxBytes`: the most bytes of strings and byte arrays the arguments may hold; past it,
    /// ``ArgumentError/tooLarge`` before any is copied.
    static func arguments(of message: OpaquePointer, maxBytes: Int = .max) -> Result<[DBusValue], ArgumentError> {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message, &iterator) != 0 else { return .success([]) }
        var budget = maxValues
        var bytes = maxBytes
        var values: [DBusValue] = []
        repeat {
            guard let value = read(&iterator, budget: &budget, bytes: &bytes) else { return .failure(bytes < 0 ? .tooLarge : .unreadable) }
            values.append(value)
        } while dbus_message_iter_next(&iterator) != 0
        return .success(values)
    }

    /// Why a call's arguments were not read.
    enum ArgumentError: Error {
        /// Of a type no interface of xpbd takes, or more than ``maxValues``.
        case unreadable
        /// More bytes than the method takes.
        case tooLarge
    }

    private static func read(_ iterator: inout DBusMessageIter, budget: inout Int, bytes: inout Int) -> DBusValue? {
        budget -= 1
        guard budget >= 0 else { return nil }
        func basic<T: BitwiseCopyable>(_ zero: T) -> T {
            var value = zero
            withUnsafeMutableBytes(of: &value) { bytes in dbus_message_iter_get_basic(&iterator, bytes.baseAddress) }
            return value
        }
        switch dbus_message_iter_get_arg_type(&iterator) {
        case code("s"), code("o"):
            var pointer: UnsafePointer<CChar>?
            dbus_message_iter_get_basic(&iterator, &pointer)
            bytes -= pointer.map { strlen($0) } ?? 0
            guard bytes >= 0 else { return nil }
            return .string(pointer.map { String(cString: $0) } ?? "")
        case code("i"): return .int32(basic(Int32(0)))
        case code("x"): return .int64(basic(Int64(0)))
        case code("u"): return .uint32(basic(UInt32(0)))
        case code("t"): return .uint64(basic(UInt64(0)))
        case code("b"): return .bool(basic(dbus_bool_t(0)) != 0)
        case code("d"): return .double(basic(Double(0)))
        case code("a"):
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            let elementType = dbus_message_iter_get_element_type(&iterator)
            if elementType == code("y") {
                var pointer: UnsafeRawPointer?
                var count: Int32 = 0
                if dbus_message_iter_get_arg_type(&inner) != 0 {
                    dbus_message_iter_get_fixed_array(&inner, &pointer, &count)
                }
                bytes -= Int(count)
                guard bytes >= 0 else { return nil }
                return .bytes(pointer.map { Data(bytes: $0, count: Int(count)) } ?? Data())
            }
            let signature = dbus_message_iter_get_signature(&inner).map { pointer -> String in
                defer { dbus_free(pointer) }
                return String(cString: pointer)
            } ?? ""
            if elementType == code("e") {
                var pairs: [(DBusValue, DBusValue)] = []
                let body = signature.dropFirst().dropLast()
                let key = String(body.prefix(1))
                let value = String(body.dropFirst())
                while dbus_message_iter_get_arg_type(&inner) == code("e") {
                    var entry = DBusMessageIter()
                    dbus_message_iter_recurse(&inner, &entry)
                    guard let k = read(&entry, budget: &budget, bytes: &bytes), dbus_message_iter_next(&entry) != 0, let v = read(&entry, budget: &budget, bytes: &bytes) else { return nil }
                    pairs.append((k, v))
                    dbus_message_iter_next(&inner)
                }
                return .dictionary(key: key, value: value, pairs)
            }
            var values: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&inner) != 0 {
                guard let value = read(&inner, budget: &budget, bytes: &bytes) else { return nil }
                values.append(value)
                dbus_message_iter_next(&inner)
            }
            return .array(signature, values)
        case code("r"):
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&inner) != 0 {
                guard let value = read(&inner, budget: &budget, bytes: &bytes) else { return nil }
                fields.append(value)
                dbus_message_iter_next(&inner)
            }
            return .structure(fields)
        case code("v"):
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            return read(&inner, budget: &budget, bytes: &bytes).map { .variant($0) }
        default:
            return nil
        }
    }
}
