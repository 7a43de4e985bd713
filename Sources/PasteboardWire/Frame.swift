import FoundationEssentials

/// The wire format between `xpb` and `xpbd` (docs/protocol.md): length-prefixed frames.
///
/// A frame is a 4-byte big-endian payload length, a 1-byte kind, then the payload. Control
/// payloads are UTF-8 JSON objects. The first frame each way is a ``FrameKind/hello`` carrying
/// ``ControlHello``; a side that sees another protocol version answers with an error frame and
/// closes.
package enum FrameKind: UInt8, Sendable {
    /// Opens a connection: protocol name and version.
    case hello = 1
    /// A command for the daemon (``ControlRequest``).
    case request = 2
    /// The daemon's answer (``ControlReply``).
    case reply = 3
    /// A refusal or failure: a JSON object with a `message`.
    case error = 4
    /// A page of the history in its compact form (``HistoryPageCoding``): the answer to a
    /// ``ControlRequest/historyPage(search:offset:limit:compact:)`` that asks for it.
    case page = 5
    /// A sync link's message (``SyncMessage``).
    case sync = 16
    /// A sync link's transfer bytes (``SyncData``).
    case data = 17
}

/// One frame.
package struct Frame: Sendable, Equatable {
    /// The most payload bytes a frame may carry: a length above it is a protocol error (a peer
    /// cannot make the other side allocate gigabytes by claiming them).
    package static let maxPayload = 16 << 20
    /// Bytes before the payload.
    package static let headerSize = 5

    package let kind: FrameKind
    package let payload: Data

    package init(kind: FrameKind, payload: Data) {
        self.kind = kind
        self.payload = payload
    }

    /// The frame as bytes on the wire.
    package var encoded: Data {
        var bytes = Data(capacity: Self.headerSize + payload.count)
        let length = UInt32(payload.count)
        bytes.append(contentsOf: [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
        bytes.append(kind.rawValue)
        bytes.append(payload)
        return bytes
    }
}

/// A stream's bytes cut into frames as they arrive, in pieces of any size.
package struct FrameDecoder: Sendable {
    private var buffer = Data()

    package init() {}

    /// Adds received bytes.
    package mutating func append(_ bytes: Data) { buffer.append(bytes) }

    /// The next whole frame, nil when more bytes are needed.
    ///
    /// - Throws: ``WireError`` for a length over ``Frame/maxPayload`` or an unknown kind.
    package mutating func next() throws(WireError) -> Frame? {
        guard buffer.count >= Frame.headerSize else { return nil }
        let start = buffer.startIndex
        let length = Int(buffer[start]) << 24 | Int(buffer[start + 1]) << 16 | Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
        guard length <= Frame.maxPayload else { throw WireError("a frame claims \(length) bytes, more than the \(Frame.maxPayload)-byte limit") }
        guard let kind = FrameKind(rawValue: buffer[start + 4]) else { throw WireError("unknown frame kind \(buffer[start + 4])") }
        guard buffer.count >= Frame.headerSize + length else { return nil }
        let payload = buffer.subdata(in: start + Frame.headerSize ..< start + Frame.headerSize + length)
        buffer.removeSubrange(start ..< start + Frame.headerSize + length)
        return Frame(kind: kind, payload: payload)
    }
}

/// A malformed or unexpected frame.
package struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    package let message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}
