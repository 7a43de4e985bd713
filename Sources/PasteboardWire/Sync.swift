import FoundationEssentials

// The sync protocol between daemons (docs/sync-protocol.md): the same frames as the control
// protocol, over any byte stream (a daemon's UNIX socket, or `ssh HOST xpb daemon link`).
// The first frame each way is a hello frame carrying ``SyncHello``; then ``FrameKind/sync``
// frames carry ``SyncMessage`` JSON and ``FrameKind/data`` frames carry a transfer's bytes.

/// The first frame each way on a sync link.
package struct SyncHello: Codable, Sendable, Equatable {
    package static let protocolName = "xpb-sync"
    package static let version = 1

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

    package init(node: String, name: String, sends: Bool, receives: Bool, selections: [String],
                protocol: String = SyncHello.protocolName, version: Int = SyncHello.version) {
        self.protocol = `protocol`
        self.version = version
        self.node = node
        self.name = name
        self.sends = sends
        self.receives = receives
        self.selections = selections
    }

    /// Nil when `other` speaks this protocol and version, else why not.
    package func mismatch(with other: SyncHello) -> String? {
        guard other.protocol == self.protocol else { return "the peer speaks '\(other.protocol)', not '\(self.protocol)'" }
        guard other.version == version else {
            return "the peer speaks \(self.protocol) version \(other.version), this side version \(version): run the same xpb version on both sides"
        }
        return nil
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
    package var lastError: String?
    /// The transport's process (ssh), while it runs.
    package var transportPID: Int?

    /// `both`, `send-only` or `receive-only`, for a link that sends and receives as said.
    package static func direction(sends: Bool, receives: Bool) -> String {
        sends && receives ? "both" : sends ? "send-only" : "receive-only"
    }

    package init(name: String, state: String, direction: String, selections: [String], remote: String? = nil, since: Date,
                roundTripMilliseconds: Double? = nil, lastAnnounce: Date? = nil, announcesSent: Int = 0, announcesReceived: Int = 0,
                bytesSent: Int = 0, bytesReceived: Int = 0, lastError: String? = nil, transportPID: Int? = nil) {
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
        self.lastError = lastError
        self.transportPID = transportPID
    }
}
