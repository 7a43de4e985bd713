import CommandLineTable
import Foundation
import PasteboardWire

struct DaemonCommand: Command {
    static let spec = CommandSpec(
        name: "daemon",
        abstract: "Show whether the clipboard manager (xpbd) runs for the display, and what it keeps.",
        discussion: "'xpb daemon status': running or not, pid, display, the selections kept, history entries and bytes, the state directory. Exit status 0 when it runs, 1 when it does not.",
        options: [CommonOptions.json, .value(nil, "display", "display", "The display whose daemon to ask (default: $DISPLAY).")],
        positional: PositionalSpec(valueName: "action", help: "status (the default)."))

    let asJSON: Bool
    let display: String?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        asJSON = arguments.flag("json")
        display = arguments.value("display")
        guard arguments.positionals.count <= 1, arguments.positionals.first ?? "status" == "status" else {
            throw UsageError("unknown daemon action '\(arguments.positionals.joined(separator: " "))' (status)")
        }
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

    func run() throws {
        var client: DaemonClient
        do {
            client = try DaemonClient(display: display)
        } catch let failure as Failure where failure.status == .failure {
            let (socket, display) = try DaemonClient.socketPath(display: display)
            if asJSON {
                writeLine(String(decoding: try ControlCoding.encode(NotRunning(display: display, socket: socket, reason: failure.message)), as: UTF8.self))
            } else {
                writeLine("xpbd: not running for display \(display)")
                writeLine("  \(failure.message)")
            }
            throw Exit(status: Status.failure.rawValue)
        }
        defer { client.close() }
        guard case let .status(status) = try client.send(.status) else { throw Failure("xpbd answered out of turn") }
        if asJSON {
            writeLine(String(decoding: try ControlCoding.encode(Running(status: status)), as: UTF8.self))
            return
        }
        let uptime = HistoryCommand.age(Date().timeIntervalSince(status.startedAt))
        writeLine("xpbd: running (pid \(status.pid), version \(status.version), up \(uptime))")
        writeLine("  display:      \(status.display)")
        writeLine("  keeps:        \(status.keeps.joined(separator: ", "))")
        writeLine("  history:      \(status.entryCount) entries, \(ByteCount.format(status.bytes)) (caps: \(status.maxEntries) entries, \(ByteCount.format(status.maxBytes)))")
        writeLine("  state:        \(status.stateDirectory)")
        writeLine("  database:     \(status.database)")
        writeLine("  socket:       \(status.socket)")
        writeLine("  change count: CLIPBOARD \(status.changeCounts["CLIPBOARD"] ?? 0), PRIMARY \(status.changeCounts["PRIMARY"] ?? 0)")
    }
}
