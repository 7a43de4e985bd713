import CommandLineTable
import FoundationEssentials
import PasteboardWire

struct DaemonCommand: Command {
    /// The options, each declared once: the spec lists them and the look-ups name them, so a
    /// look-up can only name a declared option.
    enum Option {
        static let display = OptionSpec.value(nil, "display", "display", "The display whose daemon to ask (default: $DISPLAY).", completion: .displays)
    }

    static let name = "daemon"
    static let spec = CommandSpec(
        name: name,
        abstract: "Show whether the clipboard manager (xpbd) runs for the display, and what it keeps and syncs.",
        discussion: "'xpb daemon status': running or not (without a display: this host's headless xpbd), pid, display, the selections kept, history entries and bytes, the state directory, whether the history is sealed at rest and where its key is, and each sync peer (state, round-trip time, last announce, bytes moved). Exit status 0 when it runs, 1 when it does not.\n'xpb daemon link': joins standard input and output to the daemon's socket, byte for byte: the remote command of 'xpbd --peer' (run by ssh on the peer). Without --display and $DISPLAY it picks the only xpbd running for this user, and with none it starts 'xpbd --headless --sync-primary' (log: $XDG_RUNTIME_DIR/xpb/xpbd-headless.log), so that a desktop's 'xpbd --peer HOST' reaches a server without a display. Exit status 0 when the link ends, 1 when no daemon can be reached.",
        options: [CommonOptions.json, Option.display, Session.backendOption],
        positional: PositionalSpec(valueName: "action", help: "status (the default) or link.", completion: .words(["status", "link"])))

    let asJSON: Bool
    let display: String?
    /// Whose xpbd to ask (`--backend`, `--display`, the environment).
    let session: Session
    let isLink: Bool

    init(_ arguments: ParsedArguments) throws(UsageError) {
        asJSON = arguments.flag(CommonOptions.json)
        display = arguments.value(Option.display)
        session = try Session(backend: arguments.value(Session.backendOption), display: display)
        let action = arguments.positionals.first ?? "status"
        guard arguments.positionals.count <= 1, ["status", "link"].contains(action) else {
            throw UsageError("unknown daemon action '\(arguments.positionals.joined(separator: " "))' (status, link)")
        }
        isLink = action == "link"
        if isLink, asJSON { throw UsageError("'xpb daemon link' takes no --json") }
    }

    struct NotRunning: Encodable {
        let running = false
        let display: String
        let socket: String
        let reason: String
    }

    struct Running: Encodable {
        let running = true
        let status: DaemonStatus
    }

    /// The display's daemon socket, as a not-running report names it.
    private static func socketPath(display: String?) throws -> (path: String, display: String) {
        do {
            return try ControlClient.socketPath(display: display)
        } catch {
            throw Failure(error)
        }
    }

    func run() throws {
        if isLink { return try DaemonLink(display: display).run() }
        var client: ControlClient
        do {
            client = try DaemonAccess.client(session: session)
        } catch let failure as Failure where failure.status == .failure {
            let (socket, display) = try Self.socketPath(display: display)
            if asJSON {
                writeJSONLine(String(decoding: try ControlCoding.encode(NotRunning(display: display, socket: socket, reason: failure.message)), as: UTF8.self))
            } else {
                writeLine("xpbd: not running for display \(display)")
                writeLine("  \(failure.message)")
            }
            throw Exit(status: Status.failure.rawValue)
        }
        defer { client.close() }
        guard case let .status(status) = try client.send(.status) else { throw Failure("xpbd answered out of turn") }
        if asJSON {
            writeJSONLine(String(decoding: try ControlCoding.encode(Running(status: status)), as: UTF8.self))
            return
        }
        let uptime = HistoryCommand.age(Date().timeIntervalSince(status.startedAt))
        writeLine("xpbd: running (pid \(status.pid), version \(status.version), up \(uptime))")
        writeLine("  display:      \(status.display)")
        writeLine("  keeps:        \(status.keeps.joined(separator: ", "))")
        writeLine("  history:      \(status.entryCount) entries, \(ByteCount.format(status.bytes)) (caps: \(status.maxEntries) entries, \(ByteCount.format(status.maxBytes)))")
        writeLine("  state:        \(status.stateDirectory)")
        writeLine("  database:     \(status.database)")
        if status.database != ":memory:" {
            writeLine("  sealed:       \(status.sealedWith.map { "yes, the key from \($0)" } ?? "no (plain)")")
        }
        writeLine("  socket:       \(status.socket)")
        writeLine("  change count: CLIPBOARD \(status.changeCounts["CLIPBOARD"] ?? 0), PRIMARY \(status.changeCounts["PRIMARY"] ?? 0)")
        let peers = status.peers ?? []
        writeLine("  sync peers:   \(peers.isEmpty ? "none" : String(peers.count))")
        for peer in peers {
            var line = "    \(peer.name): \(peer.state) for \(HistoryCommand.age(Date().timeIntervalSince(peer.since)))"
            if let remote = peer.remote { line += ", \(remote)" }
            writeLine(line)
            var details = "      \(peer.direction), \(peer.selections.joined(separator: "+"))"
            if let rtt = peer.roundTripMilliseconds { details += ", rtt \(rtt) ms" }
            details += ", announces \(peer.announcesSent) out / \(peer.announcesReceived) in"
            if let last = peer.lastAnnounce { details += " (last \(HistoryCommand.age(Date().timeIntervalSince(last))) ago)" }
            details += ", \(ByteCount.format(peer.bytesSent)) sent, \(ByteCount.format(peer.bytesReceived)) received"
            if peer.ignoredMessages + peer.ignoredFields > 0 {
                details += "; ignored from a newer peer: \(peer.ignoredMessages) messages, \(peer.ignoredFields) fields"
            }
            writeLine(details)
            if let error = peer.lastError, peer.state != "connected" { writeLine("      last error: \(error)") }
        }
        for value in status.syncValues ?? [] {
            var line = "  sync \(value.selection):"
            if let stamp = value.stamp {
                line += " \(value.state) \(stamp)"
                if let origin = value.origin { line += " from \(origin)" }
                line += value.via.map { " via \($0)" } ?? " (this display's)"
            } else {
                line += " nothing shared yet"
            }
            if let local = value.localStamp, local != value.stamp { line += "; this display: \(local), \(value.localState ?? "")" }
            writeLine(line)
        }
    }
}
