internal import CLinux
import CommandLineTable
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire
import PasteboardX11

struct WatchCommand: Command {
    /// The options, each declared once: the spec lists them and the look-ups name them, so a
    /// look-up can only name a declared option.
    enum Option {
        static let json = OptionSpec.flag(nil, "json", "Print one JSON object per change.")
        static let exec = OptionSpec.value(nil, "exec", "command", "Run this shell command for each change, with the new contents on its standard input (as xpb paste writes them; nothing for secret data or an empty pasteboard) and XPB_CHANGE_COUNT, XPB_SELECTION, XPB_TYPES, XPB_OWNER_PID and XPB_OWNER_APP (who copied, where known) set.")
        static let count = OptionSpec.value(nil, "count", "n", "Stop after this many changes (with --pastes, pastes).")
        static let pastes = OptionSpec.flag(nil, "pastes", "Print one line per paste instead, as xpbd notes it: each paste of a copy it serves, and on X of an xpb owner's copy it keeps (see xpb history --json's pastes). Lines are tab-separated: time, selection, the reading app, its pid, the history entry's id. Needs xpbd.")
    }

    static let name = "watch"
    static let spec = CommandSpec(
        name: name,
        abstract: "Print one line per change of a pasteboard: change count, selection, types.",
        discussion: "Driven by XFixes events: no polling. Lines are tab-separated: count, selection, comma-separated types.",
        options: SelectionOptions.specs + [
            Option.json,
            Option.exec,
            Option.count,
            Option.pastes,
        ])

    let selection: SelectionOptions
    let asJSON: Bool
    let command: String?
    let count: Int?
    let followsPastes: Bool

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        asJSON = arguments.flag(Option.json)
        command = arguments.value(Option.exec)
        count = try arguments.integer(Option.count)
        followsPastes = arguments.flag(Option.pastes)
        if let count, count < 1 { throw UsageError("--count must be 1 or more") }
        if followsPastes, command != nil { throw UsageError("--exec runs for changes, not for --pastes") }
    }

    /// One paste as `--pastes --json` prints it.
    struct PasteLine: Encodable {
        let time: String
        let pasteboard: String
        let selection: String
        let entry: Int64
        let app: String?
        let pid: Int?
        let unknown: String?
    }

    struct Line: Encodable {
        let changeCount: Int
        let pasteboard: String
        let selection: String
        let types: [String]
        let added: [String]
        let removed: [String]
        /// Who copied: the owner's process and application (``SelectionOwnerInfo``), as the
        /// change is printed (a newer copy may already have replaced it).
        let ownerPID: Int?
        let ownerApp: String?
    }

    func run() throws {
        if followsPastes { return try followPastes() }
        try watch()
    }

    /// `--pastes`: each paste xpbd notes on the pasteboard, as it notes it.
    private func followPastes() throws {
        var client = try DaemonAccess.client(session: selection.session)
        defer { client.close() }
        do {
            guard case .done = try client.send(.pastes(pasteboard: selection.selection, follow: true)) else {
                throw Failure("xpbd answered out of turn")
            }
            client.waitIndefinitely()
            var seen = 0
            while true {
                guard case let .pasted(note) = try client.nextReply() else { throw Failure("xpbd answered out of turn") }
                let paste = note.paste
                let line = PasteLine(time: Date.ISO8601FormatStyle().format(paste.time), pasteboard: selection.name.rawValue, selection: note.pasteboard,
                                     entry: note.entry, app: paste.app, pid: paste.pid, unknown: paste.unknown)
                if asJSON {
                    writeJSONLine(json(line))
                } else {
                    // Names other clients chose (the executable's): escaped, as for a terminal.
                    writeLine("\(line.time)\t\(line.selection)\t\(printable(line.app ?? "?"))\t\(line.pid.map(String.init) ?? "?")\t\(line.entry)")
                }
                seen += 1
                if let count, seen >= count { return }
            }
        } catch let error as ControlClientError {
            throw Failure(error)
        }
    }

    /// What a hook is given of the first item: plain text, else an image, else its first type
    /// that is data; nothing of secret data.
    private static func firstItemChooser(_ registry: TypeRegistry) -> ([[PasteboardType]]?) throws -> PasteboardType {
        { items in
            guard let offered = items?.first, !SecretMarking.isSecret(offered),
                  let type = registry.defaultType(among: offered) else { throw Failure("nothing to read", .empty) }
            return type
        }
    }

    /// A memory file filled by `fill`, rewound for reading; empty when `fill` fails (the command
    /// still runs, with nothing on its standard input), nil when none can be made.
    private static func memoryFile(_ fill: (Int32) throws -> Void) -> Int32? {
        let fd = clinux_memfd("xpb-watch")
        guard fd >= 0 else { return nil }
        do {
            try fill(fd)
        } catch {
            _ = ftruncate(fd, 0)
        }
        _ = lseek(fd, 0, SEEK_SET)
        return fd
    }

    private func watch() throws {
        let backend = try selection.connect(observesChanges: true)
        defer { backend.close(handOff: false) }
        let board = selection.pasteboard(on: backend)
        var seen = 0
        let changes = board.changeQueue
        while let change = changes.next() {
            // The types as the owner lists them, in the order `xpb types` prints them; who copied,
            // for --json and --exec (a few round trips each change).
            let owner = (asJSON || command != nil) && !change.types.isEmpty ? try? backend.contentsOwner(of: selection.name) : nil
            let line = Line(changeCount: change.changeCount, pasteboard: selection.name.rawValue, selection: selection.selection,
                            types: change.types.map(\.identifier), added: change.typesAdded.map(\.identifier),
                            removed: change.typesRemoved.map(\.identifier), ownerPID: owner?.processID, ownerApp: owner?.appName ?? owner?.origin)
            if asJSON {
                writeJSONLine(json(line))
            } else {
                // By the names `xpb types` prints; --json keeps the model's identifiers.
                writeLine("\(line.changeCount)\t\(line.selection)\t\(TypeNames.listed(change.types).joined(separator: ","))")
            }
            if let command { runHook(command, line, input: contents(on: backend, types: change.types)) }
            seen += 1
            if let count, seen >= count { break }
        }
        if !backend.isConnected { throw Failure(selection.host.lostConnection) }
    }

    /// The first item as `xpb paste` would write it (plain text, else an image, else its first
    /// type that is data), in a memory file for the command's standard input: the command may read it or not,
    /// and nothing waits on a pipe. nil when there is nothing to give: no owner, an owner that
    /// fails to answer, or secret data (any of ``SecretMarking``'s markers), which no hook is handed.
    private func contents(on backend: any StreamingPasteboardBackend, types: [PasteboardType]) -> Int32? {
        guard !types.isEmpty, !SecretMarking.isSecret(types) else { return nil }
        return Self.memoryFile { fd in
            _ = try backend.stream(of: selection.name, item: 0, limit: CommonOptions.defaultMaxSize, likely: nil,
                                   choosing: Self.firstItemChooser(backend.registry),
                                   file: { try write(.file($0), to: fd) }, bytes: { try writeAll($0, to: fd) })
        }
    }

    private func runHook(_ command: String, _ line: Line, input: Int32?) {
        defer { if let input { close(input) } }
        var environment = ProcessInfo.processInfo.environment
        environment["XPB_CHANGE_COUNT"] = String(line.changeCount)
        environment["XPB_SELECTION"] = line.selection
        // Names other clients chose (targets, the executable's name): escaped, as for a terminal.
        environment["XPB_TYPES"] = printable(line.types.joined(separator: ","))
        environment["XPB_OWNER_PID"] = line.ownerPID.map(String.init)
        environment["XPB_OWNER_APP"] = line.ownerApp.map { printable($0) }
        var child = ChildProcess.shell(command)
        child.environment = environment
        child.descriptors = [0: input.map { .inherit($0) } ?? .open("/dev/null", flags: O_RDONLY), 1: .inherit(1), 2: .inherit(2)]
        do {
            ChildProcess.wait(for: try child.spawn())
        } catch {
            XPB.printError("xpb: cannot run --exec command: \(error)\n")
        }
    }
}
