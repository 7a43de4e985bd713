import CommandLineTable
import FoundationEssentials
import PasteboardKit
import PasteboardWire

struct ClearCommand: Command {
    static let name = "clear"
    static let spec = CommandSpec(
        name: name,
        abstract: "Empty a pasteboard: its selection gets no owner, whoever held it.",
        options: SelectionOptions.specs)

    let selection: SelectionOptions

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
    }

    func run() throws {
        // On Wayland an emptied clipboard looks the same as a source that went, which the
        // session's xpbd fills again with what it kept: it is told that this clear is one.
        if selection.host == .wayland, let client = try? DaemonAccess.client(display: nil, timeout: 2) {
            var client = client
            defer { client.close() }
            if case .done = try client.send(.clearPasteboard(pasteboard: selection.selection)) { return }
        }
        // On X the display's xpbd clears it for the user: a clear X reports names no client, and
        // one xpbd did not make could be a password manager's taking its copy back (forgotten).
        if case let .display(display) = selection.host, selection.name == .general || selection.name == .find,
           let client = try? ControlClient(display: display, timeout: 2) {
            var client = client
            defer { client.close() }
            if case .done? = try? client.send(.clearPasteboard(pasteboard: selection.selection)) { return }
        }
        let backend = try selection.connect()
        defer { backend.close(handOff: false) }
        try backend.clear(selection.name)
    }
}
