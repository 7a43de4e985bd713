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
        if clearedByDaemon() { return }
        let backend = try selection.connect()
        defer { backend.close(handOff: false) }
        try backend.clear(selection.name)
    }

    /// Asks the session's xpbd to clear the pasteboard, as the user's clear. On Wayland an emptied
    /// clipboard looks the same as a source that went, which xpbd fills again with what it kept;
    /// on X a clear names no client, and one xpbd did not make could be a password manager
    /// taking its copy back (forgotten). True when xpbd cleared it; else xpb clears it itself.
    private func clearedByDaemon() -> Bool {
        let client: ControlClient?
        switch selection.session.settled() {
        case .wayland: client = try? DaemonAccess.client(session: selection.session, timeout: 2)
        case let .x11(display) where selection.name == .general || selection.name == .find:
            client = try? ControlClient(display: display, timeout: 2)
        default: client = nil
        }
        guard var client else { return false }
        defer { client.close() }
        if case .done? = try? client.send(.clearPasteboard(pasteboard: selection.selection)) { return true }
        return false
    }
}
