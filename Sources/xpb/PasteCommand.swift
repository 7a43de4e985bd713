import ArgumentParser
import Foundation
import PasteboardKit

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
                throw selection.emptyFailure
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
