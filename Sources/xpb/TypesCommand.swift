import ArgumentParser
import Foundation
import PasteboardKit

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
                guard !names.isEmpty else { throw selection.emptyFailure }
                names.forEach(writeLine)
                return
            }
            let all = try selection.pasteboard(on: backend).itemTypes()
            guard !all.isEmpty else { throw selection.emptyFailure }
            if items {
                for (index, types) in all.enumerated() { types.forEach { writeLine("\(index)\t\($0.identifier)") } }
            } else {
                all[0].forEach { writeLine($0.identifier) }
            }
        }
    }
}
