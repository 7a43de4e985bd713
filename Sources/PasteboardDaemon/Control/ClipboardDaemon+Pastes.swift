import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// Who pasted: the pastes hosts note on kept copies (``KeepingHost/recordPaste(_:of:madeAt:)``),
/// written on their history entries and told to the clients that follow them.
extension ClipboardDaemon {
    /// A paste of a copy the host serves: noted on the entry `entry` names, on `storage`, so after
    /// the copy's own write (nothing when the copy was not written, or was replaced), and told
    /// to the clients following pastes.
    package func pasted(_ record: PasteRecord, of name: Pasteboard.Name, entry: @escaping @Sendable () -> Int64?) {
        storage.async { [self] in
            guard let id = entry() else { return }
            do {
                try store.withLock { try $0.addPaste(record, to: id) }
            } catch {
                return logger.warning("a paste of history entry \(id) not noted: \(error)")
            }
            let selection = SelectionNames.selection(for: name)
            logger.debug("\(selection) pasted by \(record.app ?? "?")\(record.pid.map { " (\($0))" } ?? "")")
            pasteFollowers.post(PasteNote(pasteboard: selection, entry: id, paste: record), of: selection)
            encodeListingSoon()
        }
    }

    /// `pasted`: an owner's word of a paste of its copy, noted on the entry of the copy the host
    /// kept from that owner (``ClipboardHost/ownerPasted(_:of:by:)``); nothing when it kept none.
    /// Any process of the user may say it, as it may write the history's file.
    func notePaste(_ paste: PasteRecord, of pasteboard: String, by owner: String) -> Result<ControlAnswer, ControlFailure> {
        guard let name = SelectionNames.pasteboard(forSelection: pasteboard) else {
            return .failure(MemoryHost.unknown(pasteboard))
        }
        // This daemon's own read (its keeping of the copy, on Wayland, where the owner cannot
        // tell the clipboard manager's reads from others') is no paste.
        if paste.pid == Int(getpid()) { return .success(.reply(.done("not a paste: xpbd's own read"))) }
        // A name the owner's process chose: one printable line of a bounded length, a pid only if
        // it could be one.
        let app = paste.app.map { LogThrottle.printable(String($0.prefix(256))) }
        let record = PasteRecord(time: min(paste.time, Date()), app: app, pid: paste.pid.flatMap { $0 > 0 ? $0 : nil }, unknown: paste.unknown.map { String($0.prefix(256)) })
        host.ownerPasted(record, of: name, by: owner)
        return .success(.reply(.done("noted")))
    }

    /// `pastes`: who pasted the copies the host serves now (of `pasteboard`, else of each), newest first;
    /// with `follow`, each paste from now on until the client goes.
    func answerPastes(of pasteboard: String?, follow: Bool, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        let names: [Pasteboard.Name]
        if let pasteboard {
            guard let name = SelectionNames.pasteboard(forSelection: pasteboard) else {
                return .failure(MemoryHost.unknown(pasteboard))
            }
            names = [name]
        } else {
            names = [.general, .find]
        }
        if follow {
            guard let watcher = Watcher<PasteNote>(selection: pasteboard.flatMap(SelectionNames.pasteboard(forSelection:)).map(SelectionNames.selection(for:))) else {
                return .failure(ControlFailure("cannot follow pastes: no pipe"))
            }
            let id = pasteFollowers.add(watcher)
            defer { pasteFollowers.drop(id) }
            logger.debug("a client follows the pastes of \(pasteboard ?? "every pasteboard")")
            return watcher.relay(to: &channel, started: "following pastes", logger: logger) { .pasted($0) }
        }
        do {
            var notes: [PasteNote] = []
            for name in names {
                guard let entry = host.servedEntry(of: name) else { continue }
                let selection = SelectionNames.selection(for: name)
                notes += try store.withLock { try $0.pastes(of: entry) }.map { PasteNote(pasteboard: selection, entry: entry, paste: $0) }
            }
            return .success(.reply(.pastes(notes.sorted { $0.paste.time > $1.paste.time })))
        } catch {
            return .failure(ControlFailure("\(error)"))
        }
    }
}
