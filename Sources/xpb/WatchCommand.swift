import CommandLineTable
import Foundation
import PasteboardKit
import PasteboardX11

struct WatchCommand: Command {
    static let spec = CommandSpec(
        name: "watch",
        abstract: "Print one line per change of a pasteboard: change count, selection, types.",
        discussion: "Driven by XFixes events: no polling. Lines are tab-separated: count, selection, comma-separated types.",
        options: SelectionOptions.specs + [
            .flag(nil, "json", "Print one JSON object per change."),
            .value(nil, "exec", "command", "Run this shell command for each change, with XPB_CHANGE_COUNT, XPB_SELECTION and XPB_TYPES set."),
            .value(nil, "count", "n", "Stop after this many changes."),
        ])

    let selection: SelectionOptions
    let asJSON: Bool
    let command: String?
    let count: Int?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        asJSON = arguments.flag("json")
        command = arguments.value("exec")
        count = try arguments.integer("count")
        if let count, count < 1 { throw UsageError("--count must be 1 or more") }
    }

    struct Line: Encodable {
        let changeCount: Int
        let pasteboard: String
        let selection: String
        let types: [String]
        let added: [String]
        let removed: [String]
    }

    func run() throws {
        try blocking { try await self.watch() }
    }

    private func watch() async throws {
        let backend = try selection.connect()
        defer { backend.close(handOff: false) }
        let board = selection.pasteboard(on: backend)
        var seen = 0
        var current: [String] = []
        for await change in board.changes {
            // The change says what was added and removed: the types now follow from that.
            current = current.filter { !change.typesRemoved.map(\.identifier).contains($0) } + change.typesAdded.map(\.identifier)
            let line = Line(changeCount: change.changeCount, pasteboard: selection.name.rawValue, selection: selection.selection,
                            types: current, added: change.typesAdded.map(\.identifier), removed: change.typesRemoved.map(\.identifier))
            writeLine(asJSON ? json(line) : "\(line.changeCount)\t\(line.selection)\t\(line.types.joined(separator: ","))")
            if let command { runHook(command, line) }
            seen += 1
            if let count, seen >= count { break }
        }
        if !backend.isConnected { throw X11BackendError.connectionLost }
    }

    private func runHook(_ command: String, _ line: Line) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        var environment = ProcessInfo.processInfo.environment
        environment["XPB_CHANGE_COUNT"] = String(line.changeCount)
        environment["XPB_SELECTION"] = line.selection
        environment["XPB_TYPES"] = line.types.joined(separator: ",")
        process.environment = environment
        do {
            try process.run()
            process.waitUntilExit()
        } catch {
            FileHandle.standardError.write(Data("xpb: cannot run --exec command: \(error.localizedDescription)\n".utf8))
        }
    }
}
