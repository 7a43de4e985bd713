import FoundationEssentials
import Glibc

/// The first frame each way.
package struct ControlHello: Codable, Sendable, Equatable {
    /// The protocol this version of xpb speaks on the control socket.
    package static let current = ControlHello(protocol: "xpb-control", version: 1)

    package let `protocol`: String
    package let version: Int

    package init(protocol: String, version: Int) {
        self.protocol = `protocol`
        self.version = version
    }

    /// Nil when `other` speaks this protocol and version, else why not.
    package func mismatch(with other: ControlHello) -> String? {
        guard other.protocol == self.protocol else { return "the peer speaks '\(other.protocol)', not '\(self.protocol)'" }
        guard other.version == version else {
            return "the peer speaks \(self.protocol) version \(other.version), this side version \(version): run the same xpb version on both"
        }
        return nil
    }
}

/// A command for the daemon.
package enum ControlRequest: Codable, Sendable, Equatable {
    /// The entries `xpb history` lists by default, and the page the daemon encodes ahead.
    package static let historyPageSize = 1000

    /// The daemon's state (``DaemonStatus``).
    case status
    /// History entries, newest first, optionally only those whose text contains `search`
    /// (case-insensitive), all in one reply: what an xpb from before ``historyPage(search:offset:limit:)``
    /// asks (this xpb asks for pages; one reply holds at most 16 MiB).
    case history(search: String?)
    /// A page of them: at most `limit` from entry `offset` on (of the search's matches with
    /// `search`), fewer when they are large (``ControlReply/historyPage(entries:total:partial:)``);
    /// with `compact`, answered by a ``FrameKind/page`` frame (``HistoryPageCoding``).
    case historyPage(search: String?, offset: Int, limit: Int, compact: Bool? = nil)
    /// Entry `index` (0 = newest) becomes the selection it came from, served by the daemon.
    case select(index: Int)
    /// Forgets entry `index`.
    case delete(index: Int)
    /// Forgets every entry but the pinned ones.
    case clear
    /// Forgets every entry, the pinned ones too.
    case clearAll
    /// Pins (or unpins) entry `index`: a pinned entry is never evicted by the caps and survives `clear`.
    case pin(index: Int, pinned: Bool)

    // A headless daemon's pasteboards (``HeadlessProtocol``), named by their X selection
    // (`CLIPBOARD`, `PRIMARY`, `SECONDARY`, `XPB_PASTEBOARD:<name>`). A display's daemon refuses them.

    /// What the pasteboard offers: ``ControlReply/offer(_:)``.
    case offer(pasteboard: String)
    /// The bytes of one target: ``ControlReply/transfer(type:size:)``, then data frames (raw
    /// bytes, at most ``HeadlessProtocol/chunkSize`` each), then ``ControlReply/end(total:)``, or
    /// an error frame at any point.
    case read(pasteboard: String, target: String, limit: Int)
    /// New contents: the client then sends every representation's bytes in data frames, in
    /// order; answered ``ControlReply/done(_:)`` once they are held.
    case write(PasteboardWrite)
    /// Empties the pasteboard.
    case clearPasteboard(pasteboard: String)
    /// Every change from now on, one ``ControlReply/changed(_:)`` each, until the client closes
    /// the connection (nil: every pasteboard).
    case watch(pasteboard: String?)
    /// The paste queue of a display's daemon (`xpb queue`), answered ``ControlReply/queue(_:)``.
    case queue(QueueRequest)
    /// Who pasted the copy the daemon keeps of the pasteboard (nil: of each), newest first:
    /// ``ControlReply/pastes(_:)``. With `follow`, each paste noted from now on instead, one
    /// ``ControlReply/pasted(_:)`` each, until the client closes the connection.
    case pastes(pasteboard: String?, follow: Bool)
    /// An xpb owner tells the daemon of a paste of its copy, which the daemon keeps: the owner as
    /// the host names it (an X window id, as ``PasteboardOffer``'s owners are named), and who read.
    /// Answered ``ControlReply/done(_:)``, noted or not.
    case pasted(pasteboard: String, owner: String, paste: PasteRecord)
    /// The apps a copy marked secret is refused to (`--refuse-secret-to`), which an xpb owner of
    /// a secret asks for when it starts: ``ControlReply/secretRule(refusedTo:)``.
    case secretRule
}

/// What `xpb queue` asks of the paste queue: each answer lists the queue as it is then (`clear`: as it was).
package enum QueueRequest: Codable, Sendable, Equatable {
    /// The queue.
    case list
    /// Empties the queue (answered with the items it held); the clipboard keeps the item it serves.
    case clear
    /// New items at the end, one per item of the write, its bytes in data frames as for a write.
    case add(PasteboardWrite)
    /// History entries (0 = newest) at the end, in this order.
    case history([Int])
}

/// One item waiting in the paste queue.
package struct QueuedItem: Codable, Sendable, Equatable {
    package var preview: String
    package var types: [String]
    package var size: Int
    /// The app that copied it (a history entry's), or xpb's caller.
    package var app: String?

    package init(preview: String, types: [String], size: Int, app: String?) {
        self.preview = preview
        self.types = types
        self.size = size
        self.app = app
    }
}

/// New contents for a headless daemon's pasteboard: the items' types and sizes (the bytes follow
/// in data frames) and their options.
package struct PasteboardWrite: Codable, Sendable, Equatable {
    package struct Representation: Codable, Sendable, Equatable {
        /// The type identifier (UTI or MIME type, as the model names it).
        package var type: String
        package var size: Int

        package init(type: String, size: Int) {
            self.type = type
            self.size = size
        }
    }

    package var pasteboard: String
    package var items: [[Representation]]
    package var isLocalOnly: Bool
    package var expires: Date?
    /// Who wrote it, for people (`xpb` and the user's host).
    package var origin: String
    /// The program that ran the writing xpb (`CopyCredit`: past shells, `env`, `timeout`) and its
    /// pid, where it found one (absent from earlier clients).
    package var copiedBy: String?
    package var copiedByPID: Int?

    package init(pasteboard: String, items: [[Representation]], isLocalOnly: Bool, expires: Date?, origin: String,
                 copiedBy: String? = nil, copiedByPID: Int? = nil) {
        self.pasteboard = pasteboard
        self.items = items
        self.isLocalOnly = isLocalOnly
        self.expires = expires
        self.origin = origin
        self.copiedBy = copiedBy
        self.copiedByPID = copiedByPID
    }

    /// Every representation's bytes in all (`Int.max` when the claimed sizes add up past it: they
    /// come from another process, which must not make the daemon trap on an overflow).
    package var size: Int {
        items.joined().reduce(0) { total, representation in
            let (sum, overflow) = total.addingReportingOverflow(representation.size)
            return overflow ? .max : sum
        }
    }
}

/// What a headless daemon's pasteboard offers: its targets (as an X owner would list them) and
/// who made the copy.
package struct PasteboardOffer: Codable, Sendable, Equatable {
    package var pasteboard: String
    package var targets: [String]
    package var changeCount: Int
    /// Where the copy was made (this host's `xpb`, or a peer's application).
    package var origin: String
    /// The process of this host that wrote the copy (nil for another node's): its id, and its
    /// executable's name and path as `/proc` showed them when it wrote.
    package var ownerPID: Int?
    package var ownerApp: String?
    package var ownerExecutable: String?
    /// The program that ran that xpb, and its pid, as xpb found them (``PasteboardWrite/copiedBy``).
    package var copiedBy: String?
    package var copiedByPID: Int?

    package init(pasteboard: String, targets: [String], changeCount: Int, origin: String,
                 ownerPID: Int? = nil, ownerApp: String? = nil, ownerExecutable: String? = nil,
                 copiedBy: String? = nil, copiedByPID: Int? = nil) {
        self.pasteboard = pasteboard
        self.targets = targets
        self.changeCount = changeCount
        self.origin = origin
        self.ownerPID = ownerPID
        self.ownerApp = ownerApp
        self.ownerExecutable = ownerExecutable
        self.copiedBy = copiedBy
        self.copiedByPID = copiedByPID
    }
}

/// One change of a headless daemon's pasteboard, as `watch` reports it.
package struct PasteboardChangeNote: Codable, Sendable, Equatable {
    package var pasteboard: String
    package var changeCount: Int
    /// The new contents' targets; empty when the pasteboard was emptied.
    package var targets: [String]
    package var origin: String?
    /// The process of this host that wrote the copy (nil for another node's, or a clear).
    package var ownerPID: Int?

    package init(pasteboard: String, changeCount: Int, targets: [String], origin: String?, ownerPID: Int? = nil) {
        self.pasteboard = pasteboard
        self.changeCount = changeCount
        self.targets = targets
        self.origin = origin
        self.ownerPID = ownerPID
    }
}

/// The fixed values of the headless requests.
package enum HeadlessProtocol {
    /// The most bytes one data frame of a read or a write carries.
    package static let chunkSize = 1 << 20
    /// The name a headless daemon's socket carries instead of a display's
    /// (`$XDG_RUNTIME_DIR/xpb/xpbd-headless.socket`).
    package static let socketKey = "headless"
}

/// The daemon's answer.
package enum ControlReply: Codable, Sendable, Equatable {
    case status(DaemonStatus)
    case history([HistoryEntrySummary])
    /// A page of the history, and how many entries the whole listing (or search) has: the next
    /// page begins at the offset asked plus the entries given. `partial` (a search of many
    /// matches): `total` counts those up to the page's end, and more may follow; the next page
    /// says more (an xpbd from before it always counted them all).
    case historyPage(entries: [HistoryEntrySummary], total: Int, partial: Bool? = nil)
    /// The command was carried out; the text says what happened.
    case done(String)
    /// A headless pasteboard's offer; nil when it is empty.
    case offer(PasteboardOffer?)
    /// A read begins: the reply's type, and its size when known.
    case transfer(type: String, size: Int?)
    /// A read is complete: `total` bytes were sent.
    case end(total: Int)
    /// A read's target is not served (before any byte); why.
    case refused(String)
    /// A watched pasteboard changed.
    case changed(PasteboardChangeNote)
    /// The paste queue, next item first.
    case queue([QueuedItem])
    /// Pastes noted, newest first.
    case pastes([PasteNote])
    /// A paste noted just now (a followed ``ControlRequest/pastes(pasteboard:follow:)``).
    case pasted(PasteNote)
    /// The apps a copy marked secret is refused to (none: every reader is served).
    case secretRule(refusedTo: [String])
}

/// A paste noted on a history entry: of which pasteboard, which entry, who and when.
package struct PasteNote: Codable, Sendable, Equatable {
    /// The pasteboard's X selection (`CLIPBOARD`, `PRIMARY` …).
    package var pasteboard: String
    /// The history entry (``HistoryEntrySummary/id``).
    package var entry: Int64
    package var paste: PasteRecord

    package init(pasteboard: String, entry: Int64, paste: PasteRecord) {
        self.pasteboard = pasteboard
        self.entry = entry
        self.paste = paste
    }
}

/// What `xpb daemon status` shows.
package struct DaemonStatus: Codable, Sendable, Equatable {
    package var pid: Int
    package var version: String
    package var display: String
    /// The selections kept (`CLIPBOARD`, and `PRIMARY` or named ones when asked).
    package var keeps: [String]
    package var entryCount: Int
    package var bytes: Int
    package var maxEntries: Int
    package var maxBytes: Int
    package var stateDirectory: String
    package var database: String
    package var socket: String
    package var startedAt: Date
    /// The change count published per selection name.
    package var changeCounts: [String: Int]
    /// The sync links (absent from daemons before sync).
    package var peers: [PeerStatus]?
    /// Per synced selection, the value sync holds and why it won (absent from older daemons).
    package var syncValues: [SyncValueStatus]?
    /// Where the key of the history sealed at rest comes from ("the keyring (Secret Service)",
    /// "the key file PATH"); nil: the history is plain, or in memory (absent from older daemons).
    package var sealedWith: String?

    package init(pid: Int, version: String, display: String, keeps: [String], entryCount: Int, bytes: Int, maxEntries: Int,
                maxBytes: Int, stateDirectory: String, database: String, socket: String, startedAt: Date, changeCounts: [String: Int],
                peers: [PeerStatus]? = nil, syncValues: [SyncValueStatus]? = nil, sealedWith: String? = nil) {
        self.pid = pid
        self.version = version
        self.display = display
        self.keeps = keeps
        self.entryCount = entryCount
        self.bytes = bytes
        self.maxEntries = maxEntries
        self.maxBytes = maxBytes
        self.stateDirectory = stateDirectory
        self.database = database
        self.socket = socket
        self.startedAt = startedAt
        self.changeCounts = changeCounts
        self.peers = peers
        self.syncValues = syncValues
        self.sealedWith = sealedWith
    }
}

/// What sync holds for one selection: the newest shared value (its stamp orders it against
/// every other copy: the greater stamp won) and this display's own newest change.
package struct SyncValueStatus: Codable, Sendable, Equatable {
    package var selection: String
    /// The shared value's stamp (`clock@node`), its origin (host, display, owner), and whether it
    /// is a copy or a tombstone (`copy`, `cleared`); nil stamp when nothing was shared yet.
    package var stamp: String?
    package var origin: String?
    package var state: String
    /// The link it came on (nil: this display's own).
    package var via: String?
    /// This display's newest change: its stamp and whether it is shared (`shared`, `pending`,
    /// `not shared: WHY`, `cleared`).
    package var localStamp: String?
    package var localState: String?

    package init(selection: String, stamp: String?, origin: String?, state: String, via: String?, localStamp: String?, localState: String?) {
        self.selection = selection
        self.stamp = stamp
        self.origin = origin
        self.state = state
        self.via = via
        self.localStamp = localStamp
        self.localState = localState
    }
}

/// One history entry as listed (no payload).
package struct HistoryEntrySummary: Codable, Sendable, Equatable {
    package var index: Int
    package var selection: String
    package var time: Date
    /// The targets kept, in the order the owner advertised them.
    package var targets: [String]
    /// What a person recognises, in MIME names, the most telling first (`text/html` before
    /// `text/plain`; toolkit markers and protocol targets left out; an image known only by a
    /// vendor target named by its bytes, `image/png`).
    package var types: [String]
    /// The size of the content: the bytes of the first of `types` (19 characters of text are
    /// 19 B, however many targets serve them).
    package var size: Int
    /// Bytes kept for the entry, every target's (identical payloads counted once).
    package var keptBytes: Int
    /// The owner's window name, if it published one.
    package var source: String?
    package var pid: Int?
    /// The first non-empty line of the text, if the entry has text; else the first type and its
    /// size, like `[image/png 12 kB]`.
    package var preview: String
    /// How many more lines the text has after the preview's.
    package var moreLines: Int
    /// The lines after the preview's, joined by " ⏎ " (at most 1,000 characters), for pickers
    /// and searches that match any line; empty for one line.
    package var rest: String
    /// An image entry's size in pixels.
    package var pixelWidth: Int?
    package var pixelHeight: Int?
    /// An image entry's thumbnail: a PNG at most 256 px on its long side, under
    /// `$XDG_RUNTIME_DIR/xpb/thumbnails` (a plain history's: `$XDG_CACHE_HOME/xpb/thumbnails`).
    package var thumbnail: String?
    /// The application that copied: its executable's name (else its window class), where the
    /// daemon could tell.
    package var app: String?
    /// Whether the entry is pinned (never evicted, kept by `clear`).
    package var pinned: Bool?

    /// The entry's id: it names the entry whatever copies come (the index moves).
    package var id: Int64?
    /// Who pasted the entry's copy while xpbd served it, newest first, at most
    /// ``PasteRecord/maxPerEntry``.
    package var pastes: [PasteRecord]?

    package init(index: Int, id: Int64? = nil, selection: String, time: Date, targets: [String], types: [String], size: Int, keptBytes: Int,
                source: String?, pid: Int?, preview: String, moreLines: Int = 0, rest: String = "",
                pixelWidth: Int? = nil, pixelHeight: Int? = nil, thumbnail: String? = nil, app: String? = nil, pinned: Bool = false,
                pastes: [PasteRecord]? = nil) {
        self.index = index
        self.id = id
        self.selection = selection
        self.time = time
        self.targets = targets
        self.types = types
        self.size = size
        self.keptBytes = keptBytes
        self.source = source
        self.pid = pid
        self.preview = preview
        self.moreLines = moreLines
        self.rest = rest
        self.pixelWidth = pixelWidth
        self.pixelHeight = pixelHeight
        self.thumbnail = thumbnail
        self.app = app
        self.pinned = pinned ? true : nil
        self.pastes = pastes
    }
}

/// One paste of a copy xpbd served: who read it, and when. Several conversions by one reader in a
/// moment (a toolkit asks for the types, then the text) are one paste.
package struct PasteRecord: Codable, Sendable, Equatable {
    /// How many pastes an entry keeps: the newest.
    package static let maxPerEntry = 16

    package var time: Date
    /// The reading application: its executable's name.
    package var app: String?
    package var pid: Int?
    /// Why no app is named, when none is: the display did not say who read (a Wayland reader
    /// whose pipe this host cannot follow, an X client the server names no process for).
    package var unknown: String?

    package init(time: Date, app: String?, pid: Int?, unknown: String? = nil) {
        self.time = time
        self.app = app
        self.pid = pid
        self.unknown = app == nil && pid == nil ? unknown ?? "the display did not say who read it" : nil
    }
}

/// JSON as the control protocol writes it: ISO 8601 dates, sorted keys.
package enum ControlCoding {
    package static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    package static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            if let date = InternetTime.parse(text) { return date }
            do {
                return try Date.ISO8601FormatStyle().parse(text)
            } catch {
                throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "'\(text)' is not an ISO 8601 date"))
            }
        }
        return try decoder.decode(type, from: data)
    }
}

/// The one form of ISO 8601 time the encoder writes (`2026-11-24T14:40:44Z`: UTC, whole
/// seconds), read by hand. FoundationEssentials' ISO 8601 parser took 9 % of an `xpb history`
/// of 1000 entries; every other form still goes to it.
package enum InternetTime {
    /// The time `text` names, or nil when it is not exactly `YYYY-MM-DDTHH:MM:SSZ` with a
    /// valid date and time.
    package static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes -> Date? in
            guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
                  bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z") else { return nil }
            func number(_ start: Int, _ count: Int) -> Int? {
                var value = 0
                for index in start..<(start + count) {
                    let digit = Int(bytes[index]) - 48
                    guard (0...9).contains(digit) else { return nil }
                    value = value * 10 + digit
                }
                return value
            }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
                  let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
                  (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
                  hour < 24, minute < 60, second < 60 else { return nil }
            let seconds = daysSinceEpoch(year: year, month: month, day: day) * 86400 + hour * 3600 + minute * 60 + second
            return Date(timeIntervalSince1970: Double(seconds))
        }
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the date in the proleptic Gregorian calendar (the civil-from-days
    /// inverse: eras of 400 years, March-based years so that February is last).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

/// An error frame's payload.
package struct ControlFailure: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    package let message: String
    package init(message: String) { self.message = message }
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// Where the daemon of a display listens.
package enum ControlEndpoint {
    /// `$XDG_RUNTIME_DIR/xpb/xpbd-<display>.socket` (without XDG_RUNTIME_DIR:
    /// `/tmp/xpb-<uid>/…`), the display's screen number dropped (`:0.0` and `:0` share a daemon).
    package static func socketPath(display: String, environment: [String: String], uid: UInt32) -> String {
        directory(environment: environment, uid: uid) + "/xpbd-" + displayKey(display) + ".socket"
    }

    /// The socket of this user's headless daemon (``HeadlessProtocol/socketKey``).
    package static func headlessSocketPath(environment: [String: String], uid: UInt32) -> String {
        directory(environment: environment, uid: uid) + "/xpbd-" + HeadlessProtocol.socketKey + ".socket"
    }

    /// What of this process's environment the socket paths read (DISPLAY, XDG_RUNTIME_DIR),
    /// by getenv: ProcessInfo's environment copies the whole environment into a dictionary,
    /// and its first use costs a short command about 100 µs (every copy asks for xpbd's socket).
    package static var environment: [String: String] {
        var found: [String: String] = [:]
        for name in ["DISPLAY", "XDG_RUNTIME_DIR"] {
            if let value = getenv(name) { found[name] = String(cString: value) }
        }
        return found
    }

    /// The directory of the sockets (0700).
    package static func directory(environment: [String: String], uid: UInt32) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { return runtime + "/xpb" }
        return "/tmp/xpb-\(uid)"
    }

    /// A display name as a file name part: `:0` → `0`, `host:1.0` → `host_1`.
    package static func displayKey(_ display: String) -> String {
        var name = display
        if name.hasPrefix("unix:") { name.removeFirst(4) }
        if let colon = name.lastIndex(of: ":"), let dot = name[colon...].firstIndex(of: ".") { name = String(name[..<dot]) }
        if name.hasPrefix(":") { name.removeFirst() }
        let key = String(name.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" })
        return key.isEmpty ? "default" : key
    }
}
