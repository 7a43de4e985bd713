import ArgumentParser
import Foundation
import PasteboardKit
import PasteboardX11

struct PasteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paste",
        abstract: "Write the best available representation to standard output, byte-exact.",
        discussion: "Nothing is added: no newline, no conversion beyond the type's own encoding.")

    @OptionGroup var selection: SelectionOptions

    @Option(name: [.customShort("t"), .customLong("type")], help: ArgumentHelp(
        "Accepted types, best first, comma-separated (UTI, MIME type, X target or short name such as text, html, png).",
        valueName: "type[,type…]"))
    var types: String?

    @Option(name: .customLong("item"), help: "The item to read (0 is the first).")
    var item = 0

    @Option(name: .customLong("timeout"), help: "Give up after this many seconds without progress.", transform: seconds)
    var timeout: Double = 5

    @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
    var output: String?

    func validate() throws {
        if item < 0 { throw ValidationError("--item must be 0 or more") }
        if let types, types.split(separator: ",").isEmpty { throw ValidationError("--type needs at least one type") }
    }

    func run() async throws {
        try await reporting {
            let backend = try selection.connect(readTimeout: timeout)
            defer { backend.close(handOff: false) }
            let board = selection.pasteboard(on: backend)
            let owned = try backend.isOwner(of: selection.name) || backend.owner(of: selection.name) != nil
            guard owned else {
                throw Failure("\(selection.label) is empty (no owner for \(selection.selection))", .empty)
            }
            let items = try board.itemTypes()
            guard !items.isEmpty else {
                throw Failure("\(selection.label) holds no data its owner will convert", .empty)
            }
            guard item < items.count else {
                throw Failure("item \(item) does not exist: \(selection.label) holds \(items.count) item\(items.count == 1 ? "" : "s")", .typeUnavailable)
            }
            let offered = items[item]
            let registry = board.registry
            let chosen: PasteboardType?
            if let types {
                let wanted = try types.split(separator: ",").map { try registry.resolve($0.trimmingCharacters(in: .whitespaces)) }
                chosen = registry.bestType(among: offered, accepting: wanted)
                guard chosen != nil else {
                    throw Failure("\(selection.label) has no \(wanted.map(\.identifier).joined(separator: " or ")); it offers \(offered.map(\.identifier).joined(separator: ", "))", .typeUnavailable)
                }
            } else {
                chosen = registry.bestType(among: offered, accepting: ReaderPreference.plainText) ?? offered.first
            }
            guard let chosen, let data = try board.data(forPasteboardType: chosen, inItemSet: IndexSet(integer: item)).first else {
                throw Failure("the owner of \(selection.selection) refused to convert it", .typeUnavailable)
            }
            if let output {
                do {
                    try data.write(to: URL(fileURLWithPath: output), options: .atomic)
                } catch {
                    throw Failure("cannot write \(output): \(error.localizedDescription)")
                }
            } else {
                writeOut(data)
            }
        }
    }
}

struct TypesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "types",
        abstract: "List the representation types on a pasteboard, without moving any data.",
        discussion: "By default the first item's types, one per line.")

    @OptionGroup var selection: SelectionOptions

    @Flag(name: .customLong("targets"), help: "List the raw X target names the owner advertises instead.")
    var targets = false

    @Flag(name: .customLong("items"), help: "List the types of every item: 'item<TAB>type' lines.")
    var items = false

    @Option(name: .customLong("timeout"), help: "Give up after this many seconds without an answer.", transform: seconds)
    var timeout: Double = 5

    func validate() throws {
        if targets && items { throw ValidationError("choose either --targets or --items") }
    }

    func run() async throws {
        try await reporting {
            let backend = try selection.connect(readTimeout: timeout)
            defer { backend.close(handOff: false) }
            if targets {
                let names = try backend.targets(of: selection.name)
                guard !names.isEmpty else { throw Failure("\(selection.label) is empty (no owner for \(selection.selection))", .empty) }
                names.forEach(writeLine)
                return
            }
            let all = try selection.pasteboard(on: backend).itemTypes()
            guard !all.isEmpty else { throw Failure("\(selection.label) is empty (no owner for \(selection.selection))", .empty) }
            if items {
                for (index, types) in all.enumerated() { types.forEach { writeLine("\(index)\t\($0.identifier)") } }
            } else {
                all[0].forEach { writeLine($0.identifier) }
            }
        }
    }
}

struct ClearCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear",
        abstract: "Empty a pasteboard: its selection gets no owner, whoever held it.")

    @OptionGroup var selection: SelectionOptions

    func run() async throws {
        try await reporting {
            let backend = try selection.connect()
            defer { backend.close(handOff: false) }
            try backend.clear(selection.name)
        }
    }
}

struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show who owns a pasteboard and what it holds.",
        discussion: "The owner's window, its name and process id where the owner publishes them, the change count seen by this command, the number of items and their types.")

    @OptionGroup var selection: SelectionOptions

    @Flag(name: .customLong("json"), help: "Print one JSON object.")
    var asJSON = false

    @Option(name: .customLong("timeout"), help: "Give up after this many seconds without an answer.", transform: seconds)
    var timeout: Double = 5

    struct Report: Encodable {
        let pasteboard: String
        let selection: String
        let owner: String?
        let ownerName: String?
        let ownerPID: Int?
        let changeCount: Int
        let items: [[String]]
    }

    func run() async throws {
        try await reporting {
            let backend = try selection.connect(readTimeout: timeout)
            defer { backend.close(handOff: false) }
            let owner = try backend.owner(of: selection.name)
            let board = selection.pasteboard(on: backend)
            let items = owner == nil ? [] : try board.itemTypes()
            let report = Report(
                pasteboard: selection.name.rawValue, selection: selection.selection,
                owner: owner.map { "0x" + String($0.window, radix: 16) }, ownerName: owner?.name, ownerPID: owner?.processID,
                changeCount: board.changeCount, items: items.map { $0.map(\.identifier) })
            if asJSON {
                writeLine(json(report))
                return
            }
            writeLine("pasteboard: \(report.pasteboard)")
            writeLine("selection: \(report.selection)")
            writeLine("owner: \(report.owner ?? "none")")
            if let name = report.ownerName { writeLine("owner name: \(name)") }
            if let pid = report.ownerPID { writeLine("owner pid: \(pid)") }
            writeLine("change count: \(report.changeCount)")
            writeLine("items: \(report.items.count)")
            for (index, types) in report.items.enumerated() {
                writeLine("item \(index): \(types.joined(separator: ", "))")
            }
        }
    }
}

struct DetectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detect",
        abstract: "Detect patterns in the first item: probable URL, search or number; links, emails, phone numbers, numbers.",
        discussion: "Reads only the item's URL or plain text, never its other representations.")

    @OptionGroup var selection: SelectionOptions

    @Flag(name: .customLong("json"), help: "Print one JSON object.")
    var asJSON = false

    @Option(name: .customLong("timeout"), help: "Give up after this many seconds without progress.", transform: seconds)
    var timeout: Double = 5

    struct Report: Encodable {
        let patterns: [String]
        let links: [String]
        let emailAddresses: [String]
        let phoneNumbers: [String]
        let numbers: [Double]
    }

    func run() async throws {
        try await reporting {
            let backend = try selection.connect(readTimeout: timeout)
            defer { backend.close(handOff: false) }
            let board = selection.pasteboard(on: backend)
            guard try !board.itemTypes().isEmpty else {
                throw Failure("\(selection.label) is empty (no owner for \(selection.selection))", .empty)
            }
            let patterns = try board.detectPatterns(for: Set(DetectionPattern.allCases))
            let values = try board.detectValues(for: Set(ValueDetectionPattern.allCases))
            let report = Report(
                patterns: DetectionPattern.allCases.filter(patterns.contains).map(\.rawValue),
                links: values.links.map(\.absoluteString), emailAddresses: values.emailAddresses,
                phoneNumbers: values.phoneNumbers, numbers: values.numbers)
            if asJSON {
                writeLine(json(report))
                return
            }
            writeLine("patterns: \(report.patterns.joined(separator: ", "))")
            writeLine("links: \(report.links.joined(separator: " "))")
            writeLine("emails: \(report.emailAddresses.joined(separator: " "))")
            writeLine("phone numbers: \(report.phoneNumbers.joined(separator: ", "))")
            writeLine("numbers: \(report.numbers.map { $0 == $0.rounded() && abs($0) < 1e15 ? String(Int($0)) : String($0) }.joined(separator: " "))")
        }
    }
}

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print one line per change of a pasteboard: change count, selection, types.",
        discussion: "Driven by XFixes events: no polling. Lines are tab-separated: count, selection, comma-separated types.")

    @OptionGroup var selection: SelectionOptions

    @Flag(name: .customLong("json"), help: "Print one JSON object per change.")
    var asJSON = false

    @Option(name: .customLong("exec"), help: ArgumentHelp(
        "Run this shell command for each change, with XPB_CHANGE_COUNT, XPB_SELECTION and XPB_TYPES set.", valueName: "command"))
    var command: String?

    @Option(name: .customLong("count"), help: "Stop after this many changes.")
    var count: Int?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be 1 or more") }
    }

    struct Line: Encodable {
        let changeCount: Int
        let pasteboard: String
        let selection: String
        let types: [String]
        let added: [String]
        let removed: [String]
    }

    func run() async throws {
        try await reporting {
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
