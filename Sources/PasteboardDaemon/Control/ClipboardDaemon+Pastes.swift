import FoundationEssentials
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

    /// `pastes`: who pasted the copies the host serves now (of `pasteboard`, else of each), newest first;
    /// with `follow`, each paste from now on until the client goes.
    func answerPastes(of pasteboard: String?, follow: Bool, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        let names: [Pasteboard.Name]
        if let pasteboard {
            guard let name = SelectionNames.pasteboard(forSelection: pasteboard) else {
                return .failure(ControlFailure("'\(pasteboard)' is not a pasteboard (CLIPBOARD, PRIMARY, SECONDARY or XPB_PASTEBOARD:<name>)"))
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
