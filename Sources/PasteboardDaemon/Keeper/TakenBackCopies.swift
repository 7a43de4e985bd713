import FoundationEssentials
import PasteboardKit

/// Copies that their app takes back: a secret that no hint marked. Password managers that mark
/// nothing (Bitwarden, QtPass, a browser's generated password) empty the clipboard themselves a
/// while after a copy. When the app that made a kept copy replaces it with an empty copy, or the
/// selection is cleared, within ``window`` of the copy, that copy was a secret: xpbd forgets it
/// (``ClipboardDaemon/forgetTakenBack(_:)``).
///
/// A value: events in, the copy to forget out. The host reports what it reads (``kept(_:app:time:)``,
/// ``copied(_:app:isEmpty:at:)``, ``cleared(_:at:)``); the history reports the entry it wrote
/// (``written(_:time:entry:)``).
///
/// On X a clear does not say which client made it (XFixes reports the owner set to None): a
/// clear within the window counts while the copy's app still owned the selection (once it went
/// away, xpbd serves the copy, and the app that made it takes nothing back).
struct TakenBackCopies: Sendable {
    /// A kept copy that may still be taken back.
    struct Copy: Equatable, Sendable {
        var selection: Pasteboard.Name
        /// The app credited with the copy.
        var app: String?
        /// When the copy was made (its snapshot's time): names it in the keeper.
        var time: Date
        /// Its history entry, once written.
        var entry: Int64?
    }

    /// How long after a copy its app's clear makes it a secret (`--forget-cleared-within`);
    /// 0 turns the rule off.
    var window: TimeInterval
    /// The newest kept copy per selection.
    private(set) var recent: [Pasteboard.Name: Copy] = [:]
    /// The copy each newest one replaced: its app may be the one that clears.
    private var replaced: [Pasteboard.Name: Copy] = [:]

    /// What a clear says of the copy it emptied.
    enum Cleared: Equatable {
        /// Made within the window, and no other app's copy in the window could have made the
        /// clear: its app took it back, a secret.
        case takenBack(Copy)
        /// Made within the window, but the app of the copy before it (`earlierApp`), also within
        /// the window, may have made the clear (X does not say who clears): a copy that a known
        /// app made after another's is never forgotten on a guess.
        case unknownClearer(Copy, earlierApp: String)
        /// Nothing to forget.
        case nothing
    }

    init(window: TimeInterval) {
        self.window = window
    }

    /// A copy was kept (and goes to the history).
    mutating func kept(_ selection: Pasteboard.Name, app: String?, time: Date) {
        guard window > 0 else { return }
        if let earlier = recent[selection] { replaced[selection] = earlier }
        recent[selection] = Copy(selection: selection, app: app, time: time)
    }

    /// The history wrote the copy of `time` as `entry`.
    mutating func written(_ selection: Pasteboard.Name, time: Date, entry: Int64) {
        guard recent[selection]?.time == time else { return }
        recent[selection]?.entry = entry
    }

    /// A new copy was read on `selection` (kept or not). An empty one from the app of the copy
    /// before, within the window, takes that copy back: it is returned, to be forgotten. Any other
    /// copy ends the earlier one's window (it is no longer the clipboard's).
    mutating func copied(_ selection: Pasteboard.Name, app: String?, isEmpty: Bool, at now: Date) -> Copy? {
        guard let earlier = recent[selection] else { return nil }
        if isEmpty, let app, earlier.app == app, isWithinWindow(earlier, at: now) {
            recent.removeValue(forKey: selection)
            return earlier
        }
        if isEmpty { return nil }
        replaced[selection] = recent.removeValue(forKey: selection)
        return nil
    }

    /// The selection was cleared on purpose (not its owner gone): the copy it held, if it was made
    /// within the window, is returned, to be forgotten, unless another app may have cleared it.
    mutating func cleared(_ selection: Pasteboard.Name, at now: Date) -> Cleared {
        let before = replaced.removeValue(forKey: selection)
        guard let copy = recent.removeValue(forKey: selection) else { return .nothing }
        guard isWithinWindow(copy, at: now) else { return .nothing }
        if let before, isWithinWindow(before, at: now), before.app == nil || before.app != copy.app {
            return .unknownClearer(copy, earlierApp: before.app ?? "an unknown app")
        }
        return .takenBack(copy)
    }

    /// The user cleared the selection (through xpbd: `xpb clear`, a D-Bus caller): the copy it
    /// held was no secret.
    mutating func userCleared(_ selection: Pasteboard.Name) {
        recent.removeValue(forKey: selection)
        replaced.removeValue(forKey: selection)
    }

    /// The owner of `selection` went away (exited, its window destroyed): an app that is gone
    /// takes nothing back, and a later clear is another client's.
    mutating func ownerGone(_ selection: Pasteboard.Name) {
        recent.removeValue(forKey: selection)
        replaced.removeValue(forKey: selection)
    }

    private func isWithinWindow(_ copy: Copy, at now: Date) -> Bool {
        let age = now.timeIntervalSince(copy.time)
        return age >= 0 && age <= window
    }

    /// The copies whose window has passed by `now` can no longer be taken back.
    mutating func expire(at now: Date) {
        recent = recent.filter { now.timeIntervalSince($0.value.time) <= window }
        replaced = replaced.filter { now.timeIntervalSince($0.value.time) <= window }
    }

    /// The copies that may still be taken back: the history holds them in memory
    /// (``History``); any other copy it holds is written.
    var holding: Set<History.HeldKey> {
        Set(recent.values.map { History.HeldKey($0.selection, time: $0.time) })
    }
}
