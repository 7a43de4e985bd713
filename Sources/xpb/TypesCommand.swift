import CommandLineTable
import FoundationEssentials
import PasteboardKit

struct TypesCommand: Command {
    /// The options, each declared once: the spec lists them and the look-ups name them, so a
    /// look-up can only name a declared option.
    enum Option {
        static let targets = OptionSpec.flag(nil, "targets", "List the raw X target names the owner advertises instead.")
        static let items = OptionSpec.flag(nil, "items", "List the types of every item: 'item<TAB>type' lines.")
        static let uti = OptionSpec.flag(nil, "uti", "Name the types by their uniform type identifiers (public.utf8-plain-text), as the library does, not by MIME type.")
    }

    static let name = "types"
    static let spec = CommandSpec(
        name: name,
        abstract: "List the representation types on a pasteboard, without moving any data.",
        discussion: """
            By default the first item's types, one per line, by the MIME names xpb paste -t, wl-paste and xclip take \
            (text/plain, text/html, image/png); a type that has none by its identifier.
            """,
        options: SelectionOptions.specs + [
            Option.targets,
            Option.items,
            Option.uti,
            CommonOptions.timeout,
        ])

    let selection: SelectionOptions
    let targets: Bool
    let items: Bool
    let uti: Bool
    let timeout: Double

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        targets = arguments.flag(Option.targets)
        items = arguments.flag(Option.items)
        uti = arguments.flag(Option.uti)
        timeout = try CommonOptions.timeout(in: arguments)
        if targets && items { throw UsageError("choose either --targets or --items") }
        if targets && uti { throw UsageError("--targets lists X target names: it takes no --uti") }
    }

    func run() throws {
        let backend = try selection.connect(readTimeout: timeout, readsOnce: true)
        defer { backend.close(handOff: false) }
        if targets {
            let names = try backend.targets(of: selection.name)
            guard !names.isEmpty else { throw selection.emptyFailure }
            names.forEach(writeLine)
            return
        }
        let all = try backend.itemTypesIfOwned(of: selection.name)
        guard let all else { throw selection.emptyFailure }
        guard !all.isEmpty else {
            throw Failure("the owner of \(selection.selection) offers no type xpb can read (see --targets)", .empty)
        }
        if items {
            for (index, types) in all.enumerated() { TypeNames.listed(types, uti: uti).forEach { writeLine("\(index)\t\($0)") } }
        } else {
            TypeNames.listed(all[0], uti: uti).forEach(writeLine)
        }
    }
}
