import Foundation
import PasteboardKit

struct PasteCommand: Command {
    static let spec = CommandSpec(
        name: "paste",
        abstract: "Write the best available representation to standard output, byte-exact.",
        discussion: "Nothing is added: no newline, no conversion beyond the type's own encoding.",
        options: SelectionOptions.specs + [
            .value("t", "type", "type[,type…]", "Accepted types, best first, comma-separated (UTI, MIME type, X target or short name such as text, html, png)."),
            .value(nil, "item", "n", "The item to read (0 is the first)."),
            CommonOptions.timeout,
            .value("o", "output", "file", "Write to this file instead of standard output."),
        ])

    let selection: SelectionOptions
    let types: String?
    let item: Int
    let timeout: Double
    let output: String?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        types = arguments.value("type")
        item = try arguments.integer("item") ?? 0
        timeout = try CommonOptions.timeout(in: arguments)
        output = arguments.value("output")
        if item < 0 { throw UsageError("--item must be 0 or more") }
        if let types, types.split(separator: ",").isEmpty { throw UsageError("--type needs at least one type") }
    }

    func run() throws {
        let backend = try selection.connect(readTimeout: timeout)
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
            let wanted = try types.split(separator: ",").map { try registry.resolve(String($0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())) }
            chosen = registry.bestType(among: offered, accepting: wanted)
            guard chosen != nil else {
                throw Failure("\(selection.label) has no \(wanted.map(\.identifier).joined(separator: " or ")); it offers \(offered.map(\.identifier).joined(separator: ", "))", .typeUnavailable)
            }
        } else {
            chosen = registry.bestType(among: offered, accepting: ReaderPreference.plainText) ?? offered.first
        }
        // A file passed over the fast path is streamed by the kernel, never copied through here.
        guard let chosen, let contents = try backend.contents(of: selection.name, item: item, type: chosen) else {
            throw Failure("the owner of \(selection.selection) refused to convert it", .typeUnavailable)
        }
        if let output {
            try OutputFile.replace(output) { try write(contents, to: $0) }
        } else {
            try write(contents, to: STDOUT_FILENO)
        }
    }
}
