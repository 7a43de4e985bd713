import Dispatch
import FoundationEssentials
import PasteboardKit
import PasteboardSelections

/// Copies that their app takes back (``TakenBackCopies``): forgotten everywhere xpbd put them.
extension ClipboardDaemon {
    /// The host read a new copy on `name` (kept or not): an empty copy by the app of the copy
    /// before, within the window, makes that one a secret.
    package func copyRead(_ name: Pasteboard.Name, app: String?, isEmpty: Bool) {
        let (copy, earlier) = takenBack.withLock { rule in
            let earlier = rule.recent[name]
            return (rule.copied(name, app: app, isEmpty: isEmpty, at: Date()), earlier)
        }
        defer { writeReleasedSoon(because: isEmpty ? "its app's copy replaced it" : "a newer copy replaced it") }
        guard let copy else {
            if isEmpty {
                let before = earlier.map { "the copy before was \(printable($0.app ?? "an unknown app's")), \(Int(Date().timeIntervalSince($0.time))) s old" } ?? "no copy before is known"
                logger.debug("\(SelectionNames.selection(for: name)): an empty copy by \(printable(app ?? "an unknown app")); \(before): nothing taken back")
            }
            return
        }
        forgetTakenBack(copy, because: "\(printable(copy.app ?? "its app")) replaced it with an empty copy")
    }

    /// `name` was cleared on purpose (not its owner gone): the copy it held, if made within the
    /// window, was a secret.
    /// Returns whether it was a secret (forgotten).
    @discardableResult
    package func selectionCleared(_ name: Pasteboard.Name) -> Bool {
        defer { writeReleasedSoon(because: "it was cleared, and it was no secret") }
        switch takenBack.withLock({ $0.cleared(name, at: Date()) }) {
        case let .takenBack(copy):
            forgetTakenBack(copy, because: "the clipboard was cleared")
            return true
        case let .unknownClearer(copy, earlierApp):
            logger.notice("\(SelectionNames.selection(for: name)): cleared \(Int(Date().timeIntervalSince(copy.time))) s after \(printable(copy.app ?? "an unknown app"))'s copy, but \(printable(earlierApp)), whose copy came just before, may have cleared it (X does not say who clears): the copy is kept")
            return false
        case .nothing:
            return false
        }
    }

    /// The user empties `name` through xpbd (`xpb clear`, Klipper's `clearClipboardContents`):
    /// the copy it held was no secret, and is kept in the history.
    package func userClears(_ name: Pasteboard.Name) throws {
        takenBack.withLock { $0.userCleared(name) }
        writeReleasedSoon(because: "the user cleared the clipboard")
        try host.clearSelection(name)
        logger.info("\(SelectionNames.selection(for: name)) cleared at the user's request; its copy stays in the history")
    }

    /// The owner of `name` went away: its copy is no longer its app's to take back.
    package func ownerGone(_ name: Pasteboard.Name) {
        takenBack.withLock { $0.ownerGone(name) }
        writeReleasedSoon(because: "its owner went away")
    }

    /// ``writeReleased(because:)`` on the history's queue, after what is queued there.
    func writeReleasedSoon(because reason: String) {
        storage.async { [self] in writeReleased(because: reason) }
    }

    /// Writes to disk the copies the history holds in memory that can no longer be taken back
    /// (``TakenBackCopies/holding``). On `storage` only.
    func writeReleased(because reason: String) {
        let holding = takenBack.withLock { $0.holding }
        do {
            let written = try store.withLock { try $0.writeHeld(except: holding, of: host.nodeName) }
            for entry in written {
                logger.debug("\(SelectionNames.selection(for: entry.selection)): written to the history (entry \(entry.disk)): \(reason)")
            }
        } catch {
            // Held still: listed, and written at the next chance.
            logWriteFailure(error)
        }
    }

    /// Forgets a secret copy: its history entry (its rows zeroed on disk, the search index
    /// merged, the log emptied), its payload files (overwritten) and thumbnails, and what the host
    /// keeps of it in memory (zeroed). Peers hear the clear or the empty copy that took it back
    /// as the newest copy, and a peer's history holds only its own display's copies.
    func forgetTakenBack(_ copy: TakenBackCopies.Copy, because reason: String) {
        let selection = SelectionNames.selection(for: copy.selection)
        let seconds = Int(Date().timeIntervalSince(copy.time).rounded())
        host.forgetKept(copy.selection, time: copy.time)
        // After the entry's own write, which is on `storage` before this.
        storage.async { [self] in
            do {
                let started = DispatchTime.now()
                let forgotten = try store.withLock { try $0.forgetSecret(entry: copy.entry, selection: copy.selection, time: copy.time, display: host.nodeName) }
                let milliseconds = (DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1_000_000
                logger.notice("\(selection): \(reason) \(seconds) s after the copy: the copy was a secret, \(forgotten ? "forgotten (history, payloads, thumbnails) in \(milliseconds) ms" : "which the history no longer held")")
                if forgotten { historyChanged() }
            } catch {
                logger.error("\(selection): \(reason): the copy was a secret, but its history entry could not be forgotten: \(error)")
            }
        }
    }
}
