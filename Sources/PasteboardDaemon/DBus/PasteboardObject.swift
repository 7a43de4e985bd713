import FoundationEssentials
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// xpbd's own D-Bus interface, for applets, launchers and scripts that want more than Klipper's
/// strings: typed contents (MIME type → bytes), the history with its columns, select, pin,
/// delete, and a change signal that names the app that copied.
///
/// Bus name `org.xpb.Pasteboard1`, object `/org/xpb/Pasteboard1`, interface
/// `org.xpb.Pasteboard1` (D-Bus's conventions: reverse-DNS names, the major version in the
/// interface's name; a change that breaks callers comes as `org.xpb.Pasteboard2` beside it).
/// A pasteboard is named `CLIPBOARD` (or empty) or `PRIMARY`. History entries are named by
/// their id (`ListHistory`'s first column), which stays the entry's whatever copies come.
final class PasteboardObject: DBusObject, @unchecked Sendable {
    let busName = "org.xpb.Pasteboard1"
    let path = "/org/xpb/Pasteboard1"
    let interface = "org.xpb.Pasteboard1"
    /// The most bytes of contents a reply carries: its framing fits in ``DBusService/maxReply``.
    static let maxReply = DBusService.maxReply - (1 << 20)

    private weak var daemon: ClipboardDaemon?
    private let logger: Logger

    init(daemon: ClipboardDaemon, logger: Logger) {
        self.daemon = daemon
        self.logger = logger
    }

    /// The signature of a `ListHistory` row: id, time (seconds since 1970), pasteboard, app,
    /// types, size, pinned, preview.
    static let rowSignature = "(xdssastbs)"

    func call(_ member: String, _ arguments: [DBusValue], caller: DBusCaller) -> Result<[DBusValue], DBusFailure> {
        guard let daemon else { return .failure(.failed("xpbd is stopping")) }
        // As on the control socket: a copy handed to the history's writes before the call is
        // there for it (an upkeep turn may stand before it: a call waits for one turn at most).
        daemon.awaitWritesHandedIn()
        // The arguments are those of `signatures[member]` (DBusService checked them).
        func string(_ index: Int) -> String { if case let .string(value) = arguments[index] { return value } else { return "" } }
        func id(_ index: Int) -> Int64 { if case let .int64(value) = arguments[index] { return value } else { return -1 } }
        func number(_ index: Int) -> Int { if case let .uint32(value) = arguments[index] { return Int(value) } else { return 0 } }
        let history = daemon.history
        do {
            switch member {
            case "GetContents":
                let selection = try Self.pasteboard(string(0))
                return .success([try Self.contents(try history.latest(selection))])
            case "SetContents":
                guard case let .dictionary(_, _, pairs) = arguments[1] else { return .failure(.invalidArguments("SetContents takes a{say}")) }
                try setContents(Self.pasteboard(string(0)), pairs, in: daemon)
                return .success([])
            case "ListHistory":
                let page = try history.page(offset: number(0), limit: max(1, min(number(1), 10_000)), thumbnails: false)
                let rows = page.entries.map { entry -> DBusValue in
                    .structure([.int64(entry.id ?? -1), .double(entry.time.timeIntervalSince1970), .string(entry.selection), .string(entry.app ?? entry.source ?? ""),
                                .array("s", entry.types.map { .string($0) }), .uint64(UInt64(max(0, entry.size))), .bool(entry.pinned == true), .string(entry.preview)])
                }
                return .success([.array(Self.rowSignature, rows)])
            case "GetHistoryItem":
                guard let snapshot = try history.snapshot(.id(id(0))) else { return .failure(Self.noEntry(id(0))) }
                return .success([try Self.contents(snapshot)])
            case "Select":
                try history.select(.id(id(0)))
                return .success([])
            case "Pin":
                guard case let .bool(pinned) = arguments[1] else { return .failure(.invalidArguments("Pin takes (xb)")) }
                try history.pin(.id(id(0)), pinned)
                return .success([])
            case "Delete":
                try history.delete(.id(id(0)))
                return .success([])
            default:
                return .failure(.unknownMethod("no method \(member) in \(interface)"))
            }
        } catch let failure as DBusFailure {
            return .failure(failure)
        } catch let refusal as HistoryService.Refusal {
            return .failure(.invalidArguments(refusal.description))
        } catch {
            return .failure(.failed("\(error)"))
        }
    }

    var signatures: [String: String] { Self.signatures }
    /// A copy's types and bytes, as xpbd keeps at most, and their names.
    var maxArgumentBytes: Int { (daemon?.configuration.maxSnapshotBytes ?? 0) + (1 << 20) }

    /// Each method's arguments.
    static let signatures = [
        "GetContents": "s", "SetContents": "sa{say}", "ListHistory": "uu", "GetHistoryItem": "x", "Select": "x", "Pin": "xb", "Delete": "x",
    ]

    private static func noEntry(_ id: Int64) -> DBusFailure { .invalidArguments("no history entry with id \(id)") }

    static func pasteboard(_ name: String) throws(DBusFailure) -> Pasteboard.Name {
        switch name.uppercased() {
        case "", "CLIPBOARD", "GENERAL": return .general
        case "PRIMARY", "FIND": return .find
        default: throw .invalidArguments("no pasteboard '\(name)': name CLIPBOARD or PRIMARY")
        }
    }

    /// What a copy holds by MIME type (`a{say}`): its targets that are MIME types, and its UTF-8
    /// text as `text/plain;charset=utf-8`; X's legacy names and xpb's own are left out.
    static func typedContents(_ snapshot: Snapshot) -> [(type: String, data: Data)] {
        var result: [(type: String, data: Data)] = []
        var seen: Set<String> = []
        for target in snapshot.targets where !target.target.hasPrefix("XPB_") {
            let type = target.target == "UTF8_STRING" ? "text/plain;charset=utf-8" : target.target
            guard type.contains("/"), seen.insert(type.lowercased()).inserted else { continue }
            result.append((type, target.data))
        }
        return result
    }

    private static func contents(_ snapshot: Snapshot?) throws(DBusFailure) -> DBusValue {
        let typed = snapshot.map(typedContents) ?? []
        let size = typed.reduce(0) { $0 + $1.data.count }
        guard size <= maxReply else {
            throw .failed("the copy holds \(ByteCount.format(size)), more than the \(ByteCount.format(maxReply)) a D-Bus reply of xpbd carries: read it with xpb paste")
        }
        return .dictionary(key: "s", value: "ay", typed.map { (.string($0.type), .bytes($0.data)) })
    }

    private func setContents(_ selection: Pasteboard.Name, _ pairs: [(DBusValue, DBusValue)], in daemon: ClipboardDaemon) throws {
        guard !pairs.isEmpty else { throw DBusFailure.invalidArguments("SetContents takes at least one type") }
        var item = PasteboardItem()
        var size = 0
        for (key, value) in pairs {
            guard case let .string(name) = key, case let .bytes(data) = value else { throw DBusFailure.invalidArguments("SetContents takes a{say}") }
            let type: PasteboardType
            // A MIME type as the model knows it (text/plain;charset=utf-8 is UTF-8 text), as xpb copy -t takes it.
            do { type = try TypeRegistry.standard.resolve(name) } catch { throw DBusFailure.invalidArguments("'\(name)' is not a type: \(error)") }
            for alias in TypeRegistry.standard.targets(for: type) where SelectionNames.isReservedTarget(alias.name) {
                throw DBusFailure.invalidArguments("'\(name)' is a name the X selection protocol reserves (\(alias.name))")
            }
            size += data.count
            item.setData(data, for: type)
        }
        guard size <= daemon.configuration.maxSnapshotBytes else {
            throw DBusFailure.invalidArguments("the copy is \(ByteCount.format(size)), more than the \(ByteCount.format(daemon.configuration.maxSnapshotBytes)) xpbd keeps")
        }
        guard let snapshot = Snapshot(selection, of: HeldSelection(items: [item], options: PasteboardOptions()), cap: daemon.configuration.maxSnapshotBytes) else {
            throw DBusFailure.invalidArguments("nothing in the copy can be served")
        }
        try daemon.serveAndKeep(snapshot, madeOverDBusBy: "SetContents")
    }

    let introspection = """
          <interface name="org.xpb.Pasteboard1">
            <method name="GetContents"><arg name="pasteboard" type="s" direction="in"/><arg name="contents" type="a{say}" direction="out"/></method>
            <method name="SetContents"><arg name="pasteboard" type="s" direction="in"/><arg name="contents" type="a{say}" direction="in"/></method>
            <method name="ListHistory"><arg name="offset" type="u" direction="in"/><arg name="limit" type="u" direction="in"/><arg name="entries" type="a(xdssastbs)" direction="out"/></method>
            <method name="GetHistoryItem"><arg name="id" type="x" direction="in"/><arg name="contents" type="a{say}" direction="out"/></method>
            <method name="Select"><arg name="id" type="x" direction="in"/></method>
            <method name="Pin"><arg name="id" type="x" direction="in"/><arg name="pinned" type="b" direction="in"/></method>
            <method name="Delete"><arg name="id" type="x" direction="in"/></method>
            <signal name="Changed"><arg name="pasteboard" type="s"/><arg name="app" type="s"/><arg name="types" type="as"/></signal>
          </interface>
        """
}
