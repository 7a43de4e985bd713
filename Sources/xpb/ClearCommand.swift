import ArgumentParser
import Foundation
import PasteboardKit

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
