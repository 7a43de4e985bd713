import CommandLineTable
import FoundationEssentials
import PasteboardKit

struct ClearCommand: Command {
    static let spec = CommandSpec(
        name: "clear",
        abstract: "Empty a pasteboard: its selection gets no owner, whoever held it.",
        options: SelectionOptions.specs)

    let selection: SelectionOptions

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
    }

    func run() throws {
        let backend = try selection.connect()
        defer { backend.close(handOff: false) }
        try backend.clear(selection.name)
    }
}
