import FoundationEssentials

// The sync protocol between daemons (docs/sync-protocol.md): the same frames as the control
// protocol, over any byte stream (a daemon's UNIX socket, or `ssh HOST xpb daemon link`).
// The first frame each way is a hello frame carrying ``SyncHello``; then ``FrameKind/sync``
// frames carry ``SyncMessage`` JSON (one object, its `kind` and its fields side by side) and
// ``FrameKind/data`` frames carry a transfer's bytes.
//
// Growing the protocol: a newer peer may send message kinds and fields this version does not
// know. They are ignored and counted (``SyncIncoming``), never fatal; a change that an older
// peer could not ignore safely takes a new version, and the link speaks the lower of the two
// sides' versions (``SyncHello/agreedVersion(with:)``).

/// The first frame each way on a sync link.
package struct SyncHello: Codable, Sendable, Equatable {
    package static let protocolName = "xpb-sync"
    /// The newest version this side speaks. 1 was xpb's first, whose messages were Swift's
    /// synthesized enum encoding (`{"announce":{"_0":…}}`) and which refused any other version.
    package static let version = 2
    /// The oldest version this side still speaks.
    package static let oldestVersion = 2

    package var `protocol`: String
    package var version: Int
    /// The node's origin id (random per daemon start): the tie-break of equal clocks.
    package var node: String
    /// For people: host and display.
    package var name: String
    /// Whether this side sends its changes on this link, and takes the other's.
    package var sends: Bool
    package var receives: Bool
    /// The selections this side syncs on this link (`CLIPBOARD`, `PRIMARY`).
    package var selections: [String]
    /// False for a node that keeps no history (`xpbd-kdeconnect`): the daemon it links to keeps
    /// the copies made there (absent: it keeps its own, as every daemon does).
    package var keepsHistory: Bool?

    package init(node: String, name: String, sends: Bool, receives: Bool, selections: [String], keepsHistory: Bool? = nil,
                protocol: String = SyncHello.protocolName, version: Int = SyncHello.version) {
        self.protocol = `protocol`
        self.version = version
        self.node = node
        self.name = name
        self.sends = sends
        self.receives = receives
        self.selections = selections
        self.keepsHistory = keepsHistory
    }

    /// Nil when a link with `other` can speak a version both sides know, else why not.
    package func mismatch(with other: SyncHello) -> String? {
        guard other.protocol == self.protocol else { return "the peer speaks '\(other.protocol)', not '\(self.protocol)'" }
        guard agreedVersion(with: other) != nil else {
            return "the peer speaks \(self.protocol) up to version \(other.version), this side versions \(Self.oldestVersion) to \(version): update the older xpb"
        }
        return nil
    }

    /// The version a link with `other` speaks: the lower of the two sides' newest, if this
    /// side still speaks it (a newer peer steps down to it by the same rule).
    package func agreedVersion(with other: SyncHello) -> Int? {
        let agreed = min(version, other.version)
        return agreed >= Self.oldestVersion ? agreed : nil
    }
}

/// Orders changes: a hybrid logical clock (milliseconds, never behind any clock seen) and the
/// origin node's id, which breaks ties. The greater stamp is the newer change, on every node.
package struct SyncStamp: Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
    package var clock: UInt64
    package var node: String

    package init(clock: UInt64, node: String) {
        self.clock = clock
        self.node = node
    }

    package static func < (lhs: SyncStamp, rhs: SyncStamp) -> Bool {
        (lhs.clock, lhs.node) < (rhs.clock, rhs.node)
    }

    package var description: String { "\(clock)@\(node)" }
}

/// One target of announced contents.
package struct SyncTarget: Codable, Sendable, Equatable {
    /// The X target (atom name).
    package var target: String
    /// Its size in bytes, when the owner says (`TARGET_SIZES`).
    package var size: Int?
    /// The bytes themselves, for xpb's manifest (`XPB_MANIFEST`) only: every xpb reader asks
    /// for it first, and it says which types each item has, not what they hold. Carried with the
    /// announce, it spares a reader on the other side a round trip over the link before its
    /// paste can begin. At most ``maxInline`` bytes; absent from older peers' announces.
    package var inline: Data?

    /// The target whose bytes may come with an announce.
    package static let inlineTarget = "XPB_MANIFEST"
    /// The most bytes an announce carries of it.
    package static let maxInline = 64 << 10

    package init(target: String, size: Int? = nil, inline: Data? = nil) {
        self.target = target
        self.size = size
        self.inline = inline
    }
}

/// New contents of a selection, somewhere: its targets, not its bytes.
package struct SyncAnnounce: Codable, Sendable, Equatable {
    package var selection: String
    package var stamp: SyncStamp
    /// For people: where the copy was made (host, display, owner).
    package var origin: String
    /// The owner's targets in its order (protocol targets such as `TARGETS` left out).
    package var targets: [SyncTarget]
    /// When the contents must be dropped everywhere.
    package var expires: Date?

    package init(selection: String, stamp: SyncStamp, origin: String, targets: [SyncTarget], expires: Date? = nil) {
        self.selection = selection
        self.stamp = stamp
        self.origin = origin
        self.targets = targets
        self.expires = expires
    }
}

/// A message on a sync link (a ``FrameKind/sync`` frame). Transfer ids are chosen by the side
/// that sends `fetch`; `begin`, `end`, `failed` (and data frames) answer it; `credit` and
/// `cancel` go with it.
///
/// On the wire: one JSON object, `{"kind": "fetch", "id": 7, "selection": "CLIPBOARD", …}`: the
/// message's name under `kind` and each of its fields under its own name
/// (docs/sync-protocol.md lists them).
package enum SyncMessage: Codable, Sendable, Equatable {
    /// New contents (see ``SyncAnnounce``).
    case announce(SyncAnnounce)
    /// The contents of `stamp` are gone (cleared, expired, or replaced by data that must not
    /// leave its machine): drop them.
    case withdraw(selection: String, stamp: SyncStamp)
    /// Send the bytes of `target` of the contents `stamp`. The sender may send `window` bytes,
    /// then as many more as `credit` messages grant; at most `limit` in all.
    case fetch(id: UInt64, selection: String, stamp: SyncStamp, target: String, window: Int, limit: Int)
    /// The transfer starts: the reply's type, and its size when known (exact for data at hand, an
    /// INCR owner's announcement otherwise; a reader may refuse a size over its cap at once).
    case begin(id: UInt64, type: String, size: Int?)
    /// The transfer is complete: `total` bytes were sent.
    case end(id: UInt64, total: Int)
    /// The transfer failed (or was refused); `message` says why.
    case failed(id: UInt64, message: String)
    /// The receiver consumed `bytes`: the sender may send that many more.
    case credit(id: UInt64, bytes: Int)
    /// The receiver gives the transfer up.
    case cancel(id: UInt64)
    /// Liveness and round-trip time: answer a ping with a pong of the same sequence number.
    case ping(seq: Int)
    case pong(seq: Int)

    /// The name under `kind`.
    package var kind: String {
        switch self {
        case .announce: "announce"
        case .withdraw: "withdraw"
        case .fetch: "fetch"
        case .begin: "begin"
        case .end: "end"
        case .failed: "failed"
        case .credit: "credit"
        case .cancel: "cancel"
        case .ping: "ping"
        case .pong: "pong"
        }
    }

    /// The fields of each kind this version knows, `kind` aside.
    package static let fields: [String: Set<String>] = [
        "announce": ["selection", "stamp", "origin", "targets", "expires"],
        "withdraw": ["selection", "stamp"],
        "fetch": ["id", "selection", "stamp", "target", "window", "limit"],
        "begin": ["id", "type", "size"],
        "end": ["id", "total"],
        "failed": ["id", "message"],
        "credit": ["id", "bytes"],
        "cancel": ["id"],
        "ping": ["seq"],
        "pong": ["seq"],
    ]

    package struct Key: CodingKey {
        package var stringValue: String
        package var intValue: Int? { nil }
        package init(_ name: String) { stringValue = name }
        package init?(stringValue: String) { self.stringValue = stringValue }
        package init?(intValue: Int) { nil }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(kind, forKey: Key("kind"))
        switch self {
        case let .announce(announce):
            try container.encode(announce.selection, forKey: Key("selection"))
            try container.encode(announce.stamp, forKey: Key("stamp"))
            try container.encode(announce.origin, forKey: Key("origin"))
            try container.encode(announce.targets, forKey: Key("targets"))
            try container.encodeIfPresent(announce.expires, forKey: Key("expires"))
        case let .withdraw(selection, stamp):
            try container.encode(selection, forKey: Key("selection"))
            try container.encode(stamp, forKey: Key("stamp"))
        case let .fetch(id, selection, stamp, target, window, limit):
            try container.encode(id, forKey: Key("id"))
            try container.encode(selection, forKey: Key("selection"))
            try container.encode(stamp, forKey: Key("stamp"))
            try container.encode(target, forKey: Key("target"))
            try container.encode(window, forKey: Key("window"))
            try container.encode(limit, forKey: Key("limit"))
        case let .begin(id, type, size):
            try container.encode(id, forKey: Key("id"))
            try container.encode(type, forKey: Key("type"))
            try container.encodeIfPresent(size, forKey: Key("size"))
        case let .end(id, total):
            try container.encode(id, forKey: Key("id"))
            try container.encode(total, forKey: Key("total"))
        case let .failed(id, message):
            try container.encode(id, forKey: Key("id"))
            try container.encode(message, forKey: Key("message"))
        case let .credit(id, bytes):
            try container.encode(id, forKey: Key("id"))
            try container.encode(bytes, forKey: Key("bytes"))
        case let .cancel(id):
            try container.encode(id, forKey: Key("id"))
        case let .ping(seq), let .pong(seq):
            try container.encode(seq, forKey: Key("seq"))
        }
    }

    /// Decodes a message of a kind this version knows; a kind it does not know is
    /// ``SyncIncoming/Unknown`` (``SyncIncoming`` tells the two apart without an error).
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        let kind = try container.decode(String.self, forKey: Key("kind"))
        func value<T: Decodable>(_ name: String) throws -> T { try container.decode(T.self, forKey: Key(name)) }
        switch kind {
        case "announce":
            self = .announce(SyncAnnounce(selection: try value("selection"), stamp: try value("stamp"), origin: try value("origin"),
                                          targets: try value("targets"), expires: try container.decodeIfPresent(Date.self, forKey: Key("expires"))))
        case "withdraw": self = .withdraw(selection: try value("selection"), stamp: try value("stamp"))
        case "fetch":
            self = .fetch(id: try value("id"), selection: try value("selection"), stamp: try value("stamp"), target: try value("target"),
                          window: try value("window"), limit: try value("limit"))
        case "begin": self = .begin(id: try value("id"), type: try value("type"), size: try container.decodeIfPresent(Int.self, forKey: Key("size")))
        case "end": self = .end(id: try value("id"), total: try value("total"))
        case "failed": self = .failed(id: try value("id"), message: try value("message"))
        case "credit": self = .credit(id: try value("id"), bytes: try value("bytes"))
        case "cancel": self = .cancel(id: try value("id"))
        case "ping": self = .ping(seq: try value("seq"))
        case "pong": self = .pong(seq: try value("seq"))
        default: throw SyncIncoming.Unknown(kind: kind)
        }
    }
}

/// A sync frame as this version reads it: a message it knows (with the names of any fields it
/// does not know, which it ignores), or a message of a kind it does not know, ignored whole. Only
/// a frame that is not a JSON object with a `kind`, or a known kind with a field missing or of
/// the wrong type, is malformed.
package enum SyncIncoming: Sendable, Equatable {
    case message(SyncMessage, unknownFields: [String])
    case unknown(kind: String)

    struct Unknown: Error {
        let kind: String
    }

    package static func decode(_ payload: Data) throws -> SyncIncoming {
        do {
            let message = try ControlCoding.decode(SyncMessage.self, from: payload)
            let keys = try ControlCoding.decode(FieldNames.self, from: payload).names
            let known = SyncMessage.fields[message.kind] ?? []
            return .message(message, unknownFields: keys.filter { $0 != "kind" && !known.contains($0) }.sorted())
        } catch let unknown as Unknown {
            return .unknown(kind: unknown.kind)
        }
    }

    /// The names of an object's fields.
    private struct FieldNames: Decodable {
        let names: [String]
        init(from decoder: any Decoder) throws {
            names = try decoder.container(keyedBy: SyncMessage.Key.self).allKeys.map(\.stringValue)
        }
    }
}

/// A data frame's payload: the transfer id (8 bytes, big-endian), then bytes.
package enum SyncData {
    package static let headerSize = 8

    package static func encode(id: UInt64, _ bytes: UnsafeRawBufferPointer) -> Data {
        var data = Data(capacity: headerSize + bytes.count)
        withUnsafeBytes(of: id.bigEndian) { data.append(contentsOf: $0) }
        data.append(contentsOf: bytes)
        return data
    }

    /// The id and the bytes; nil for a payload shorter than the header.
    package static func decode(_ payload: Data) -> (id: UInt64, bytes: Data)? {
        guard payload.count >= headerSize else { return nil }
        var id: UInt64 = 0
        for byte in payload.prefix(headerSize) { id = id << 8 | UInt64(byte) }
        return (id, payload.dropFirst(headerSize))
    }
}

/// A sync link's state as `xpb daemon status` shows it.
package struct PeerStatus: Codable, Sendable, Equatable {
    /// What the link was asked for: `ssh HOST`, `display :N`, or `incoming NAME`.
    package var name: String
    /// `connecting`, `connected`, `retrying`, `refused` (a version or configuration mismatch: no
    /// retry) or `stopped`.
    package var state: String
    /// `both`, `send-only` or `receive-only`.
    package var direction: String
    package var selections: [String]
    /// The other node's own name, once it said hello.
    package var remote: String?
    package var since: Date
    package var roundTripMilliseconds: Double?
    package var lastAnnounce: Date?
    package var announcesSent: Int
    package var announcesReceived: Int
    package var bytesSent: Int
    package var bytesReceived: Int
    /// Sync messages of kinds this version does not know, and unknown fields of known ones,
    /// that the peer sent (a newer xpb): ignored.
    package var ignoredMessages: Int
    package var ignoredFields: Int
    package var lastError: String?
    /// The transport's process (ssh), while it runs.
    package var transportPID: Int?

    /// `both`, `send-only` or `receive-only`, for a link that sends and receives as said.
    package static func direction(sends: Bool, receives: Bool) -> String {
        sends && receives ? "both" : sends ? "send-only" : "receive-only"
    }

    package init(name: String, state: String, direction: String, selections: [String], remote: String? = nil, since: Date,
                roundTripMilliseconds: Double? = nil, lastAnnounce: Date? = nil, announcesSent: Int = 0, announcesReceived: Int = 0,
                bytesSent: Int = 0, bytesReceived: Int = 0, ignoredMessages: Int = 0, ignoredFields: Int = 0,
                lastError: String? = nil, transportPID: Int? = nil) {
        self.name = name
        self.state = state
        self.direction = direction
        self.selections = selections
        self.remote = remote
        self.since = since
        self.roundTripMilliseconds = roundTripMilliseconds
        self.lastAnnounce = lastAnnounce
        self.announcesSent = announcesSent
        self.announcesReceived = announcesReceived
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.ignoredMessages = ignoredMessages
        self.ignoredFields = ignoredFields
        self.lastError = lastError
        self.transportPID = transportPID
    }
}
