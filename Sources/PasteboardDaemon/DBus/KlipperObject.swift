import FoundationEssentials
import Logging
import PasteboardKit

/// Klipper's D-Bus interface, so that what already calls KDE's clipboard manager works with
/// xpbd unchanged: `org.kde.klipper`, object `/klipper`, interface `org.kde.klipper.klipper`.
/// `pass` and gopass call `clearClipboardHistory` after every password they copy; scripts and
/// launchers use the rest. Offered only where no real Klipper has the name. What each method
/// does in xpbd's terms:
/// - `getClipboardContents() → s`: the text of the newest history entry of CLIPBOARD;
/// - `setClipboardContents(s)`: a copy of that text, served and kept as a history entry;
/// - `clearClipboardContents()`: CLIPBOARD emptied (not brought back);
/// - `clearClipboardHistory()`: the history forgotten, pinned entries kept; from a password
///   manager's job (pass calls it after its clip time, through qdbus), only the copies it can
///   have made: those since its job began with no app or a clipboard helper's
///   (``forgetPasswordToolCopies(_:since:)``), unless `--klipper-clear-all`;
/// - `saveClipboardHistory()`: the history written to disk now (it always is; this checkpoints);
/// - `getClipboardHistoryMenu() → as`: the entries' texts, newest first;
/// - `getClipboardHistoryItem(i) → s`: entry i's text (an error past the end);
/// - the signal `clipboardHistoryUpdated()`: whenever the history changed.
final class KlipperObject: DBusObject, @unchecked Sendable {
    let busName = "org.kde.klipper"
    let path = "/klipper"
    let interface = "org.kde.klipper.klipper"
    /// The longest text `setClipboardContents` takes.
    static let maxText = 16 << 20
    /// The most bytes `getClipboardHistoryMenu` answers: the newest entries that fit.
    static let maxMenu = 16 << 20

    let signatures = [
        "getClipboardContents": "", "setClipboardContents": "s", "clearClipboardContents": "", "clearClipboardHistory": "",
        "saveClipboardHistory": "", "getClipboardHistoryMenu": "", "getClipboardHistoryItem": "i",
    ]
    /// `setClipboardContents`'s text at most.
    let maxArgumentBytes = KlipperObject.maxText

    private weak var daemon: ClipboardDaemon?
    private let logger: Logger

    init(daemon: ClipboardDaemon, logger: Logger) {
        self.daemon = daemon
        self.logger = logger
    }

    func call(_ member: String, _ arguments: [DBusValue], caller: DBusCaller) -> Result<[DBusValue], DBusFailure> {
        guard let daemon else { return .failure(.failed("xpbd is stopping")) }
        // As on the control socket: a copy handed to the history's writes before the call is
        // there for it (an upkeep turn may stand before it: a call waits for one turn at most).
        daemon.awaitWritesHandedIn()
        let history = daemon.history
        do {
            switch member {
            case "getClipboardContents":
                let text = try history.latest(.general, orNewest: true)?.text(limit: Self.maxText)
                return .success([.string(text ?? "")])
            case "setClipboardContents":
                guard arguments.count == 1, case let .string(text) = arguments[0] else { return .failure(.invalidArguments("setClipboardContents takes one string")) }
                try daemon.setClipboardText(text)
                return .success([])
            case "clearClipboardContents":
                try daemon.userClears(.general)
                return .success([])
            case "clearClipboardHistory":
                if !daemon.configuration.klipperClearsAll, let pid = caller.processID(),
                   let tool = PasswordTool(calling: pid, secretApps: daemon.configuration.appRules.secretAppNames) {
                    let forgotten = try history.forgetCopies(since: tool.started, byApps: PasswordTool.helpers + tool.names)
                    logger.info("D-Bus: clearClipboardHistory from \(tool.name), a password manager: \(forgotten) copies it can have made forgotten, the rest of the history kept (--klipper-clear-all clears it all)")
                    return .success([])
                }
                try history.clear()
                logger.info("D-Bus: clearClipboardHistory: the history was cleared (pinned entries kept)")
                return .success([])
            case "saveClipboardHistory":
                history.checkpoint()
                return .success([])
            case "getClipboardHistoryMenu":
                // The newest entries' texts (a long text cut at 4 KiB, as a menu shows it), as many
                // as the reply could hold, never the whole of a history of a million.
                let texts = try history.texts(limit: 4096, budget: Self.maxMenu)
                // The newest that fit in a reply (17,000 entries of 4 KiB would not).
                var budget = Self.maxMenu
                let shown = texts.prefix { text in
                    budget -= DBusValue.string(text).wireSize
                    return budget >= 0
                }
                return .success([.array("s", shown.map { .string($0) })])
            case "getClipboardHistoryItem":
                guard arguments.count == 1, case let .int32(index) = arguments[0] else {
                    return .failure(.invalidArguments("getClipboardHistoryItem takes one int32"))
                }
                guard let snapshot = try history.snapshot(.index(Int(index))) else {
                    return .failure(.invalidArguments("no history entry \(index)"))
                }
                return .success([.string(snapshot.text(limit: Self.maxText) ?? "")])
            default:
                return .failure(.unknownMethod("no method \(member) in \(interface)"))
            }
        } catch {
            return .failure(.failed("\(error)"))
        }
    }

    let introspection = """
          <interface name="org.kde.klipper.klipper">
            <method name="getClipboardContents"><arg type="s" direction="out"/></method>
            <method name="setClipboardContents"><arg name="s" type="s" direction="in"/></method>
            <method name="clearClipboardContents"/>
            <method name="clearClipboardHistory"/>
            <method name="saveClipboardHistory"/>
            <method name="getClipboardHistoryMenu"><arg type="as" direction="out"/></method>
            <method name="getClipboardHistoryItem"><arg type="s" direction="out"/><arg name="i" type="i" direction="in"/></method>
            <signal name="clipboardHistoryUpdated"/>
          </interface>
        """
}
