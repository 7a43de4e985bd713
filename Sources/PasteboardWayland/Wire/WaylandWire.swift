import FoundationEssentials
import Glibc

/// The kinds of a Wayland message's arguments, as the protocol specifications name them.
package enum WaylandArgumentKind: Sendable, Equatable {
    case int, uint, fixed, object, newID, string, array, fd
    /// A string that may be null (`allow-null="true"`); a plain `.string` may not.
    case optionalString
    /// An object that may be null (id 0).
    case optionalObject
}

/// One argument's value. A string is bytes, not `String`: what a peer names may be any bytes,
/// and the codec passes it on as it came (the reader decides what to make of it).
package enum WaylandArgument: Sendable, Equatable {
    case int(Int32)
    case uint(UInt32)
    case fixed(Int32)
    case object(UInt32)
    case newID(UInt32)
    /// Without its terminating NUL; nil is the null string.
    case string([UInt8]?)
    case array([UInt8])
    case fd(Int32)

    /// The string's bytes as UTF-8 text (invalid sequences repaired), nil for the null string or
    /// another kind.
    package var text: String? {
        guard case let .string(bytes?) = self else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A 32-bit value's bits (int, uint, fixed, object, new_id), nil for the others.
    package var word: UInt32? {
        switch self {
        case let .int(value), let .fixed(value): return UInt32(bitPattern: value)
        case let .uint(value), let .object(value), let .newID(value): return value
        default: return nil
        }
    }
}

/// One message: to (a request) or from (an event) the object `object`.
package struct WaylandMessage: Sendable, Equatable {
    package var object: UInt32
    package var opcode: UInt16
    package var arguments: [WaylandArgument]

    package init(object: UInt32, opcode: UInt16, arguments: [WaylandArgument] = []) {
        self.object = object
        self.opcode = opcode
        self.arguments = arguments
    }
}

/// What is wrong with bytes a peer sent: the connection cannot go on after any of these (the
/// message boundaries are lost, or the peer does not speak the protocol).
package struct WaylandWireError: Error, Equatable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// The wire format of Wayland (the specification's "Wire Format"): a header of two 32-bit words
/// (the object; the size in bytes, header included, in the upper 16 bits and the opcode in the
/// lower), then the arguments, each padded to 32 bits, in the host's byte order. Descriptors go
/// beside the bytes (SCM_RIGHTS), in the order of the arguments that carry them.
package enum WaylandWire {
    /// The largest message libwayland sends or accepts (its connection buffer).
    package static let maxMessageSize = 4096
    /// The header's size.
    package static let headerSize = 8

    /// A message's bytes and the descriptors that go with them.
    package static func encode(_ message: WaylandMessage) throws -> (bytes: [UInt8], fds: [Int32]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        append(message.object, to: &bytes)
        append(0, to: &bytes)
        var fds: [Int32] = []
        for argument in message.arguments {
            switch argument {
            case let .int(value), let .fixed(value): append(UInt32(bitPattern: value), to: &bytes)
            case let .uint(value), let .object(value), let .newID(value): append(value, to: &bytes)
            case let .string(value):
                guard let value else {
                    append(0, to: &bytes)
                    continue
                }
                guard !value.contains(0) else { throw WaylandWireError("a string holds a NUL byte") }
                append(UInt32(value.count + 1), to: &bytes)
                bytes += value
                bytes.append(0)
                pad(&bytes)
            case let .array(value):
                append(UInt32(value.count), to: &bytes)
                bytes += value
                pad(&bytes)
            case let .fd(value): fds.append(value)
            }
        }
        guard bytes.count <= maxMessageSize else {
            throw WaylandWireError("a message of \(bytes.count) bytes is larger than the \(maxMessageSize) the protocol allows")
        }
        let word = UInt32(bytes.count) << 16 | UInt32(message.opcode)
        withUnsafeBytes(of: word) { bytes.replaceSubrange(4..<8, with: $0) }
        return (bytes, fds)
    }

    private static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value) { bytes += $0 }
    }

    private static func pad(_ bytes: inout [UInt8]) {
        while bytes.count % 4 != 0 { bytes.append(0) }
    }

    /// The size a message in `bytes` announces (its header at `offset`), nil while the header has
    /// not all come.
    package static func announcedSize(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= headerSize else { return nil }
        return Int(bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self) >> 16)
    }

    /// Decodes one whole message (`bytes` is exactly its announced size) by its signature;
    /// descriptors are taken from the front of `fds`.
    ///
    /// - Throws: ``WaylandWireError`` when the bytes do not fit the signature: too short or too
    ///   long, a string without its NUL or with one inside, a null where none is allowed, a
    ///   descriptor that did not come.
    package static func decode(_ bytes: UnsafeRawBufferPointer, signature: [WaylandArgumentKind],
                               fds: inout ArraySlice<Int32>) throws -> WaylandMessage {
        guard bytes.count >= headerSize, bytes.count % 4 == 0 else { throw WaylandWireError("a message of \(bytes.count) bytes") }
        let object = bytes.loadUnaligned(as: UInt32.self)
        let opcode = UInt16(truncatingIfNeeded: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        var offset = headerSize
        func word() throws -> UInt32 {
            guard offset + 4 <= bytes.count else { throw WaylandWireError("message \(object).\(opcode) ends inside an argument") }
            defer { offset += 4 }
            return bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
        }
        func blob(_ length: Int) throws -> [UInt8] {
            let padded = (length + 3) & ~3
            guard length >= 0, padded <= bytes.count - offset else {
                throw WaylandWireError("message \(object).\(opcode) announces \(length) bytes it does not hold")
            }
            defer { offset += padded }
            return Array(bytes[offset ..< offset + length])
        }
        var arguments: [WaylandArgument] = []
        arguments.reserveCapacity(signature.count)
        for kind in signature {
            switch kind {
            case .int: arguments.append(.int(Int32(bitPattern: try word())))
            case .uint: arguments.append(.uint(try word()))
            case .fixed: arguments.append(.fixed(Int32(bitPattern: try word())))
            case .object, .optionalObject:
                let id = try word()
                guard id != 0 || kind == .optionalObject else { throw WaylandWireError("message \(object).\(opcode) has a null object") }
                arguments.append(.object(id))
            case .newID:
                let id = try word()
                guard id != 0 else { throw WaylandWireError("message \(object).\(opcode) makes object 0") }
                arguments.append(.newID(id))
            case .string, .optionalString:
                let length = Int(try word())
                if length == 0 {
                    guard kind == .optionalString else { throw WaylandWireError("message \(object).\(opcode) has a null string") }
                    arguments.append(.string(nil))
                    continue
                }
                var text = try blob(length)
                guard text.last == 0 else { throw WaylandWireError("message \(object).\(opcode) has a string without its NUL") }
                text.removeLast()
                guard !text.contains(0) else { throw WaylandWireError("message \(object).\(opcode) has a NUL inside a string") }
                arguments.append(.string(text))
            case .array:
                let length = Int(try word())
                arguments.append(.array(try blob(length)))
            case .fd:
                guard let fd = fds.popFirst() else { throw WaylandWireError("message \(object).\(opcode) carries a descriptor that did not come") }
                arguments.append(.fd(fd))
            }
        }
        guard offset == bytes.count else { throw WaylandWireError("message \(object).\(opcode) has \(bytes.count - offset) bytes too many") }
        return WaylandMessage(object: object, opcode: opcode, arguments: arguments)
    }
}

/// Splits what comes from the compositor into messages: bytes are appended as they are read,
/// descriptors as they come beside them, and each whole message is decoded by the signature its
/// object's interface gives its opcode. A value type: the connection feeds it; tests and the
/// fuzz target drive it with any bytes.
package struct WaylandDecoder {
    private var buffer: [UInt8] = []
    private var start = 0
    /// Descriptors received and not yet taken by a message.
    private var fds: [Int32] = []
    /// The most descriptors that may wait for their messages (libwayland's own limit).
    package static let maxWaitingDescriptors = 28 * 4

    package init() {}

    /// Bytes read from the socket.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0, start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Descriptors read beside them (this decoder closes those no message takes).
    package mutating func append(descriptors: [Int32]) throws {
        fds += descriptors
        guard fds.count <= Self.maxWaitingDescriptors else {
            throw WaylandWireError("the compositor sent \(fds.count) descriptors no message took")
        }
    }

    /// The bytes waiting for the rest of their message.
    package var pendingBytes: Int { buffer.count - start }

    /// The next whole message, nil until one has come. `signature` gives the arguments of an
    /// event of an object (nil: an object or opcode this client does not know, which ends the
    /// connection: its arguments, descriptors among them, cannot be told apart).
    package mutating func next(signature: (UInt32, UInt16) -> [WaylandArgumentKind]?) throws -> WaylandMessage? {
        let available = buffer.count - start
        guard available >= WaylandWire.headerSize else { return nil }
        let (size, object, opcode) = buffer.withUnsafeBytes { raw -> (Int, UInt32, UInt16) in
            let header = UnsafeRawBufferPointer(rebasing: raw[start...])
            let word = header.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
            return (Int(word >> 16), header.loadUnaligned(as: UInt32.self), UInt16(truncatingIfNeeded: word))
        }
        guard size >= WaylandWire.headerSize, size % 4 == 0, size <= WaylandWire.maxMessageSize else {
            throw WaylandWireError("the compositor announced a message of \(size) bytes")
        }
        guard available >= size else { return nil }
        guard let kinds = signature(object, opcode) else {
            throw WaylandWireError("the compositor sent event \(opcode) to object \(object), which this client does not know")
        }
        var queue = fds[...]
        let message = try buffer.withUnsafeBytes { raw in
            try WaylandWire.decode(UnsafeRawBufferPointer(rebasing: raw[start ..< start + size]), signature: kinds, fds: &queue)
        }
        fds = Array(queue)
        start += size
        if start > 1 << 16 {
            buffer.removeFirst(start)
            start = 0
        }
        return message
    }

    /// Closes the descriptors no message took (the connection ends).
    package mutating func closeDescriptors() {
        for fd in fds { Glibc.close(fd) }
        fds = []
    }
}
