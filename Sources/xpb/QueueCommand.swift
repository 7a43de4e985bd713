import CommandLineTable
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// `xpb queue`: the paste queue of the display's xpbd. Copy several things, then paste them in
/// order: each paste takes the next.
struct QueueCommand: Command {
    enum Option {
        static let display = OptionSpec.value(nil, "display", "display", "The display whose xpbd holds the queue (default: $DISPLAY).", completion: .displays)
        static let type = OptionSpec.value("t", "type", "type[=file]", "With 'add': the type of the data, as xpb copy -t takes it.", completion: SelectionOptions.typeCompletion)
    }

    static let name = "queue"
    static let spec = CommandSpec(
        name: name,
        abstract: "The paste queue: items pasted one per paste, first in, first out (needs xpbd).",
        discussion: """
            Actions: 'list' (the default): the items waiting, the next first; 'add FILE|- …': each file (or standard \
            input) becomes one item at the end, as xpb copy --queue adds it (-t names the type, TYPE=FILE pairs make one \
            item of several types); 'clear': empty the queue. While the queue holds items, xpbd owns CLIPBOARD and \
            serves its first item; each paste takes one item (a paste is one reader's conversions: its TARGETS and the \
            data it asks, until its window is gone or it is silent for a second, so a reader that asks TARGETS twice or \
            two text types takes one item), and the next reader gets the next. When the last item is pasted the \
            clipboard keeps it. A copy by another app ends the queue. 'xpb history queue 3 1 2' queues history \
            entries. Queued files are their contents, not files. Needs xpbd running (see docs/xpbd.md, 'The paste queue').
            """,
        options: [CommonOptions.json, Option.display, Session.backendOption, Option.type],
        positional: PositionalSpec(valueName: "action", help: "list, add FILE|-…, or clear.", completion: .words(["list", "add", "clear"])))

    enum Action: Equatable {
        case list
        case add([String])
        case clear
    }

    let action: Action
    let asJSON: Bool
    let display: String?
    /// `--backend` as given (`queue add` passes it on to the copy).
    let backend: String?
    /// Whose xpbd to ask (`--backend`, `--display`, the environment).
    let session: Session
    let types: [String]

    init(_ arguments: ParsedArguments) throws(UsageError) {
        asJSON = arguments.flag(CommonOptions.json)
        display = arguments.value(Option.display)
        backend = arguments.value(Session.backendOption)
        session = try Session(backend: backend, display: display)
        types = arguments.all(Option.type)
        var words = arguments.positionals
        let verb = words.isEmpty ? "list" : words.removeFirst()
        switch verb {
        case "list", "clear":
            guard words.isEmpty else { throw UsageError("'queue \(verb)' takes no argument") }
            action = verb == "list" ? .list : .clear
        case "add":
            action = .add(words)
        default:
            throw UsageError("unknown queue action '\(verb)' (list, add, clear)")
        }
        if !types.isEmpty, action == .list || action == .clear { throw UsageError("-t goes with 'queue add'") }
    }

    func run() throws {
        switch action {
        case let .add(files):
            // As `xpb copy --queue` (its inputs, types and checks).
            let arguments = ["--queue"] + types.flatMap { ["-t", $0] } + (display.map { ["--display", $0] } ?? [])
                + (backend.map { ["--backend", $0] } ?? []) + ["--"] + files
            let copy: CopyCommand
            do {
                copy = try CopyCommand(try ParsedArguments(arguments, spec: CopyCommand.spec))
            } catch {
                throw Failure(error.message, .usage)
            }
            try copy.run()
            if asJSON { try Self.show(try Self.send(.list, session: session), asJSON: true) }
        case .list:
            try Self.show(try Self.send(.list, session: session), asJSON: asJSON)
        case .clear:
            let left = try Self.send(.clear, session: session).count
            if asJSON { writeJSONLine(json(["result": "paste queue cleared (\(left) items)"])) } else { writeLine("paste queue cleared (\(left) items)") }
        }
    }

    /// Sends a queue request to the display's xpbd; the queue it answers with.
    static func send(_ request: QueueRequest, session: Session) throws -> [QueuedItem] {
        var client = try DaemonAccess.client(session: session)
        defer { client.close() }
        guard case let .queue(items) = try client.send(.queue(request)) else { throw Failure("xpbd answered out of turn") }
        return items
    }

    /// `1  16 B  xclip  text/plain  the first line`, or JSON.
    static func show(_ items: [QueuedItem], asJSON: Bool) throws {
        if asJSON {
            writeJSONLine(String(decoding: try ControlCoding.encode(items), as: UTF8.self))
            return
        }
        if items.isEmpty {
            XPB.printError("xpb: the paste queue is empty\n")
            return
        }
        for (index, item) in items.enumerated() {
            let types = item.types.prefix(3).joined(separator: ",") + (item.types.count > 3 ? ",+\(item.types.count - 3)" : "")
            writeLine("\(String(index + 1).leftAligned(3))  \(ByteCount.format(item.size).leftAligned(9))  \(item.app ?? "?")  \(types.isEmpty ? "-" : types)  \(item.preview)")
        }
    }
}
