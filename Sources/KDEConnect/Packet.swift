import FoundationEssentials

/// One KDE Connect packet, as far as xpbd takes part in the protocol: a JSON object on one line,
/// `{"id": …, "type": "kdeconnect.…", "body": {…}}`.
///
/// Read from kdeconnect-kde 22.12 (`core/networkpacket.cpp`, `core/backends/lan/`,
/// `plugins/clipboard/`) and current (protocol 8), and KDE's protocol reference
/// (`kdeconnect-meta/protocol.md`). The `id` is a timestamp nobody reads (22.12 writes it as a
/// string, 8 as a number): it is written, never required.
package enum Packet: Equatable, Sendable {
    /// Who a device is: broadcast over UDP, sent in clear on a new TCP link, and in protocol 8
    /// again inside TLS.
    case identity(DeviceIdentity)
    /// A pairing request or its answer (`true`), or an unpairing or refusal (`false`).
    /// `timestamp` (seconds) is what protocol 8 sends with a request.
    case pair(Bool, timestamp: Int64?)
    /// The clipboard's text changed on the sender.
    case clipboard(String)
    /// The clipboard's text as a device connects, with the time (ms since 1970) it was copied;
    /// 0 when the sender does not know it.
    case clipboardConnect(String, timestamp: Int64)
    /// A packet of a plugin xpbd does not speak (a ping, a battery report): read, then ignored.
    case other(type: String)

    package static let identityType = "kdeconnect.identity"
    package static let pairType = "kdeconnect.pair"
    package static let clipboardType = "kdeconnect.clipboard"
    package static let clipboardConnectType = "kdeconnect.clipboard.connect"

    /// The packet's type, as it is sent.
    package var type: String {
        switch self {
        case .identity: Self.identityType
        case .pair: Self.pairType
        case .clipboard: Self.clipboardType
        case .clipboardConnect: Self.clipboardConnectType
        case .other(let type): type
        }
    }
}

/// Why a device's bytes were refused. Every case names what was wrong, for the log line that
/// goes with the closed link.
package enum PacketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A line longer than the link allows, with or without its end.
    case lineTooLong(limit: Int)
    /// Not one JSON object in UTF-8.
    case notJSON
    /// A packet with no `type`, or a type that is not `kdeconnect.…`.
    case badType
    /// A field missing or of the wrong kind (`field` is its name).
    case badField(type: String, field: String)
    /// A device id that is not 32 to 38 letters, digits, `_` or `-`.
    case badDeviceId
    /// A device name with nothing left once the characters KDE Connect forbids are taken out.
    case badDeviceName
    /// A protocol version xpbd does not speak (it speaks 7 and 8).
    case unsupportedVersion(Int)
    /// A TCP port outside KDE Connect's range (1716–1764).
    case portOutOfRange(Int)

    package var description: String {
        switch self {
        case .lineTooLong(let limit): "a packet longer than \(ByteText.count(limit))"
        case .notJSON: "a packet that is not one JSON object in UTF-8"
        case .badType: "a packet without a kdeconnect.* type"
        case .badField(let type, let field): "a \(type) packet whose \(field) is missing or of the wrong kind"
        case .badDeviceId: "a device id that is not 32 to 38 letters, digits, _ or -"
        case .badDeviceName: "a device name with nothing left once forbidden characters are removed"
        case .unsupportedVersion(let version): "protocol version \(version) (xpbd speaks \(DeviceIdentity.versions.map(String.init).joined(separator: " and ")))"
        case .portOutOfRange(let port): "a TCP port \(port) outside \(DeviceIdentity.tcpPorts.lowerBound)–\(DeviceIdentity.tcpPorts.upperBound)"
        }
    }
}

/// Sizes in words, for errors.
enum ByteText {
    static func count(_ bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : bytes >= 1 << 10 && bytes % (1 << 10) == 0 ? "\(bytes >> 10) KiB" : "\(bytes) bytes"
    }
}

extension Packet {
    /// The largest identity packet read (kdeconnect-kde's `MAX_IDENTITY_PACKET_SIZE`): a device
    /// that has not shown who it is gets no more.
    package static let maxIdentityBytes = 8192

    /// Reads one line (without its newline). Throws what was wrong; a packet of a type xpbd does
    /// not speak is `.other`, not an error.
    package static func decode(_ line: some Collection<UInt8>) throws(PacketError) -> Packet {
        // JSON is UTF-8: bytes that are not are refused before any field is looked at.
        guard String(validating: line, as: UTF8.self) != nil else { throw .notJSON }
        let data = Data(line)
        let head: Head
        do {
            head = try JSONDecoder().decode(Head.self, from: data)
        } catch {
            throw .notJSON
        }
        guard let type = head.type, type.hasPrefix("kdeconnect."), type.utf8.count <= 128 else { throw .badType }
        switch type {
        case identityType:
            let body = try body(IdentityBody.self, of: type, in: data)
            return .identity(try body.identity())
        case pairType:
            let body = try body(PairBody.self, of: type, in: data)
            guard let pair = body.pair else { throw .badField(type: type, field: "pair") }
            return .pair(pair, timestamp: body.timestamp)
        case clipboardType:
            let body = try body(ClipboardBody.self, of: type, in: data)
            guard let content = body.content else { throw .badField(type: type, field: "content") }
            return .clipboard(content)
        case clipboardConnectType:
            let body = try body(ClipboardBody.self, of: type, in: data)
            guard let content = body.content else { throw .badField(type: type, field: "content") }
            return .clipboardConnect(content, timestamp: body.timestamp ?? 0)
        default:
            return .other(type: type)
        }
    }

    /// The packet as it is sent: one line, its newline included. `id` is the time of sending in
    /// ms, as kdeconnect-kde writes it.
    package func encoded(id: Int64) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json: Data
        do {
            switch self {
            case .identity(let identity):
                json = try encoder.encode(Outgoing(id: id, type: type, body: IdentityBody(identity)))
            case .pair(let pair, let timestamp):
                json = try encoder.encode(Outgoing(id: id, type: type, body: PairBody(pair: pair, timestamp: timestamp)))
            case .clipboard(let content):
                json = try encoder.encode(Outgoing(id: id, type: type, body: ClipboardBody(content: content, timestamp: nil)))
            case .clipboardConnect(let content, let timestamp):
                json = try encoder.encode(Outgoing(id: id, type: type, body: ClipboardBody(content: content, timestamp: timestamp)))
            case .other:
                json = try encoder.encode(Outgoing(id: id, type: type, body: [String: String]()))
            }
        } catch {
            // Strings, integers and booleans always encode.
            preconditionFailure("a KDE Connect packet did not encode: \(error)")
        }
        return Array(json) + [0x0A]
    }

    private static func body<Body: Decodable>(_: Body.Type, of type: String, in data: Data) throws(PacketError) -> Body {
        do {
            guard let body = try JSONDecoder().decode(Envelope<Body>.self, from: data).body else {
                throw PacketError.badField(type: type, field: "body")
            }
            return body
        } catch let error as PacketError {
            throw error
        } catch {
            throw .badField(type: type, field: Self.field(of: error) ?? "body")
        }
    }

    /// The field a decoding error is about.
    private static func field(of error: any Error) -> String? {
        guard let error = error as? DecodingError else { return nil }
        let path: [any CodingKey]
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): path = context.codingPath
        case .keyNotFound(let key, let context): path = context.codingPath + [key]
        @unknown default: return nil
        }
        return path.last(where: { $0.intValue == nil })?.stringValue
    }

    private struct Head: Decodable {
        var type: String?
    }

    private struct Envelope<Body: Decodable>: Decodable {
        var body: Body?
    }

    private struct Outgoing<Body: Encodable>: Encodable {
        var id: Int64
        var type: String
        var body: Body
    }

    private struct PairBody: Codable {
        var pair: Bool?
        var timestamp: Int64?
    }

    private struct ClipboardBody: Codable {
        var content: String?
        var timestamp: Int64?
    }
}
