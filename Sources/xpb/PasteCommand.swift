import CommandLineTable
import Foundation
import PasteboardKit

struct PasteCommand: Command {
    static let spec = CommandSpec(
        name: "paste",
        abstract: "Write the best available representation to standard output, byte-exact.",
        discussion: """
            Nothing is added: no newline, no conversion beyond the type's own encoding. The data \
            is streamed: it never needs to fit in memory. With -o, the file is written as a shell \
            redirection would (opened, truncated, written: symlinks followed, mode, owner and \
            links kept), and only once the data is known to be there.
            """,
        options: SelectionOptions.specs + [
            .value("t", "type", "type[,type…]", "Accepted types, best first, comma-separated (UTI, MIME type, X target or short name such as text, html, png)."),
            .value(nil, "item", "n", "The item to read (0 is the first)."),
            CommonOptions.timeout,
            CommonOptions.maxTime,
            .value(nil, "max-size", "size", "Refuse data larger than this (bytes, or with a K, M or G suffix; default 1G)."),
            .value("o", "output", "file", "Write to this file instead of standard output."),
        ])

    let selection: SelectionOptions
    let types: String?
    let item: Int
    let timeout: Double
    let maxTime: Double
    let maxSize: Int
    let output: String?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        types = arguments.value("type")
        item = try arguments.integer("item") ?? 0
        timeout = try CommonOptions.timeout(in: arguments)
        maxTime = try CommonOptions.maxTime(in: arguments)
        maxSize = try arguments.size("max-size") ?? CommonOptions.defaultMaxSize
        output = arguments.value("output")
        if item < 0 { throw UsageError("--item must be 0 or more") }
        if let types, types.split(separator: ",").isEmpty { throw UsageError("--type needs at least one type") }
    }

    func run() throws {
        if output == nil, StandardDescriptors.wasClosed(STDOUT_FILENO) {
            throw Failure("standard output is closed: nothing to write the data to (use -o FILE)")
        }
        let backend = try selection.connect(readTimeout: timeout, maxTime: maxTime, maxSize: maxSize)
        defer { backend.close(handOff: false) }
        guard let items = try backend.itemTypesIfOwned(of: selection.name) else {
            throw selection.emptyFailure
        }
        guard !items.isEmpty else {
            throw Failure("\(selection.label) holds no data its owner will convert", .empty)
        }
        guard item < items.count else {
            throw Failure("item \(item) does not exist: \(selection.label) holds \(items.count) item\(items.count == 1 ? "" : "s")", .typeUnavailable)
        }
        let offered = items[item]
        let registry = backend.registry
        let chosen: PasteboardType?
        if let types {
            let names = types.split(separator: ",").map { String($0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
            names.forEach { warnIfUnknownType($0, registry: registry) }
            let wanted = try names.map { try registry.resolve($0) }
            chosen = registry.bestType(among: offered, accepting: wanted)
            guard chosen != nil else {
                throw Failure("\(selection.label) has no \(wanted.map(\.identifier).joined(separator: " or ")); it offers \(offered.map(\.identifier).joined(separator: ", "))", .typeUnavailable)
            }
        } else {
            chosen = registry.bestType(among: offered, accepting: ReaderPreference.plainText) ?? offered.first
        }
        guard let chosen else { throw Failure("\(selection.label) offers no type", .typeUnavailable) }
        // The destination is opened when the first bytes (or the owner's file) are there: a
        // refused or failed read leaves an existing file as it was.
        var destination: Int32? = output == nil ? STDOUT_FILENO : nil
        defer { if let destination, output != nil { close(destination) } }
        let open = { () throws -> Int32 in
            if let destination { return destination }
            let fd = try OutputFile.open(output!)
            destination = fd
            return fd
        }
        // A file passed over the fast path is streamed by the kernel, never copied through here.
        let found = try backend.stream(of: selection.name, item: item, type: chosen, limit: maxSize,
                                       file: { try write(.file($0), to: open()) },
                                       bytes: { try writeAll($0, to: open()) })
        guard found else {
            throw Failure("the owner of \(selection.selection) refused to convert it", .typeUnavailable)
        }
        _ = try open()
    }
}
