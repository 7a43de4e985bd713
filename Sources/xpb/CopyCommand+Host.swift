import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import PasteboardX11

/// `xpb copy` to a host that keeps what is written (this host's headless xpbd, where there is no
/// display): the copy is handed over (and from there, lazily, to the desktops linked to it), and
/// the command returns at once. With no such host either, text goes to the terminal as OSC 52,
/// the last resort.
extension CopyCommand {
    func copyToKeepingHost() throws {
        if foreground || loops != nil {
            throw Failure("--foreground, --paste-once and --loops need a display: without one, the headless xpbd holds the copy", .usage)
        }
        let backend: any StreamingPasteboardBackend
        do {
            backend = try selection.connect(copiedBy: copiedBy ?? CopyCredit.current())
        } catch let failure as Failure where failure.status == .noDisplay {
            return try copyByTerminal()
        }
        defer { backend.close(handOff: false) }
        var items = try makeItems()
        if append { items = try appended(to: items, on: backend) }
        if filter { try echo(items) }
        let lifetime = expire ?? (sensitive ? Self.sensitiveExpiry : nil)
        let options = PasteboardOptions(localOnly: localOnly || sensitive, expirationDate: lifetime.map { Date().addingTimeInterval($0) })
        try backend.setItems(items, options: options, on: selection.name)
    }

    /// `--queue`: the items to the end of the display's xpbd's paste queue.
    func copyToQueue() throws {
        var client = try DaemonAccess.client(session: selection.session)
        defer { client.close() }
        let items = try makeItems()
        let reply: ControlReply
        do {
            reply = try DaemonPasteboardBackend.post(items, options: PasteboardOptions(localOnly: localOnly), pasteboard: "CLIPBOARD",
                                                     credit: copiedBy ?? CopyCredit.current(), as: { .queue(.add($0)) }, on: &client)
        } catch let error as ControlClientError {
            throw Failure(error)
        }
        guard case .queue = reply else { throw Failure("xpbd answered out of turn") }
    }

    // MARK: OSC 52

    /// The most bytes of text OSC 52 carries: its base64 is then at most 100,000 bytes, under the
    /// cap of the terminals that have one (xterm, kitty, Windows Terminal …).
    static let terminalLimit = 74_994

    /// OSC 52 to the controlling terminal: text only, on the clipboard or the primary selection,
    /// wrapped for tmux or screen when inside them. A clear error past ``terminalLimit``, never a
    /// cut copy.
    private func copyByTerminal() throws {
        let tty = open("/dev/tty", O_WRONLY | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { throw Failure(DaemonPasteboardBackend.notRunning, .noDisplay) }
        defer { Glibc.close(tty) }
        let target: String
        switch selection.name {
        case .general: target = "c"
        case .find: target = "p"
        default: throw Failure("without a display or a headless xpbd, only the clipboard and the primary selection can be set (by OSC 52 through the terminal)", .noDisplay)
        }
        if sensitive || expire != nil || localOnly || cut || append {
            throw Failure("--sensitive, --expire, --local-only, --cut and --append need a display or a headless xpbd: OSC 52 through the terminal carries plain text only", .noDisplay)
        }
        let items = try makeItems()
        guard items.count == 1, let type = items[0].types.first, items[0].types.count == 1,
              TypeRegistry.standard.conforms(type, to: .plainText) || type == .utf8PlainText else {
            throw Failure("without a display or a headless xpbd, only text can be copied (by OSC 52 through the terminal); this is \(items.first?.types.first?.identifier ?? "nothing")", .noDisplay)
        }
        let text = try items[0].representation(for: type)?.resolve() ?? Data()
        guard text.count <= Self.terminalLimit else {
            throw Failure("the text is \(text.count) bytes: OSC 52 through the terminal carries at most \(Self.terminalLimit) (many terminals refuse more); for more, run 'xpbd --headless &' here and link a desktop to it", .failure)
        }
        if filter { try writeAll(text, to: STDOUT_FILENO) }
        let environment = ProcessInfo.processInfo.environment
        let sequence = OSC52.sequence(text, selection: target, wrapping: OSC52.Multiplexer(environment: environment))
        try writeAll(sequence, to: tty)
    }
}

/// The OSC 52 escape sequence that sets a terminal's clipboard.
enum OSC52 {
    /// A terminal multiplexer between xpb and the terminal, which must pass the sequence on.
    enum Multiplexer: Equatable {
        case none
        /// tmux: a DCS passthrough with every ESC doubled (needs `allow-passthrough on`, or tmux's
        /// own `set-clipboard`, which reads the unwrapped form).
        case tmux
        /// GNU screen: the sequence in DCS pieces, short enough for screen's buffer.
        case screen

        init(environment: [String: String]) {
            if !(environment["TMUX"] ?? "").isEmpty {
                self = .tmux
            } else if !(environment["STY"] ?? "").isEmpty {
                self = .screen
            } else {
                self = .none
            }
        }
    }

    /// `ESC ] 52 ; c ; BASE64 BEL`, wrapped for `multiplexer`.
    static func sequence(_ text: Data, selection: String, wrapping multiplexer: Multiplexer) -> Data {
        let escape = "\u{1B}"
        let osc = "\(escape)]52;\(selection);\(text.base64EncodedString())\u{07}"
        switch multiplexer {
        case .none:
            return Data(utf8Of: osc)
        case .tmux:
            return Data(utf8Of: "\(escape)Ptmux;" + osc.split(separator: "\u{1B}", omittingEmptySubsequences: false).joined(separator: escape + escape) + "\(escape)\\")
        case .screen:
            var out = ""
            var rest = Substring(osc)
            while !rest.isEmpty {
                out += "\(escape)P" + rest.prefix(76) + "\(escape)\\"
                rest = rest.dropFirst(76)
            }
            return Data(utf8Of: out)
        }
    }
}
