import FoundationEssentials
import PasteboardDaemon
import PasteboardKit
import PasteboardX11

/// Who may read from an owner of this display now, per (selection, owner window): the keeper's
/// capture, a peer's fetch served from this display, and a save request all take turns.
///
/// Many owners (xclip, xsel, toolkits mid-INCR) serve one transfer at a time; two of ours
/// asking at once would stall each other. A turn is one conversion (one target), so a long
/// capture and a peer's fetch interleave target by target. Waiting is a condition wait, woken
/// when the turn is given back: nothing here polls.
///
/// It also tells whether the keeper's capture of an owner is under way, so that a save request
/// for the same owner waits for it instead of asking the owner for everything twice.
final class OwnerGate: @unchecked Sendable {
    struct Key: Hashable {
        let name: Pasteboard.Name
        let owner: X11Window
    }

    // Guards `reading` and `capturing`; every change to either broadcasts.
    private let condition = Condition()
    private var reading: Set<Key> = []
    private var capturing: Set<Key> = []

    /// Runs `body` with the turn to read from `owner`'s `name`, once nobody else holds it.
    /// Returns nil, without running it, when the turn did not come before `deadline`, or
    /// `isCurrent` became false while waiting (checked at every ownership change).
    func withTurn<T>(_ name: Pasteboard.Name, _ owner: X11Window, until deadline: Date, while isCurrent: () -> Bool = { true },
                     _ body: () throws -> T) rethrows -> T? {
        let key = Key(name: name, owner: owner)
        condition.lock()
        while reading.contains(key) {
            guard isCurrent(), condition.wait(until: deadline) || !reading.contains(key) else {
                condition.unlock()
                return nil
            }
        }
        guard isCurrent() else {
            condition.unlock()
            return nil
        }
        reading.insert(key)
        condition.unlock()
        defer { release { $0.reading.remove(key) } }
        return try body()
    }

    /// Marks the keeper's capture of `owner`'s `name` as under way until `body` returns.
    func capturing<T>(_ name: Pasteboard.Name, _ owner: X11Window, _ body: () throws -> T) rethrows -> T {
        let key = Key(name: name, owner: owner)
        condition.lock()
        capturing.insert(key)
        condition.unlock()
        defer { release { $0.capturing.remove(key) } }
        return try body()
    }

    /// Waits until no capture of `owner`'s `name` is under way, or `deadline`. Returns whether
    /// none is.
    @discardableResult
    func waitForCapture(_ name: Pasteboard.Name, _ owner: X11Window, until deadline: Date) -> Bool {
        let key = Key(name: name, owner: owner)
        condition.lock()
        defer { condition.unlock() }
        while capturing.contains(key) {
            if !condition.wait(until: deadline) { return !capturing.contains(key) }
        }
        return true
    }

    /// An ownership changed (on the X thread): waiters look again at whether they still wait
    /// for a current owner.
    func ownershipChanged() {
        release { _ in }
    }

    private func release(_ change: (OwnerGate) -> Void) {
        condition.lock()
        change(self)
        condition.broadcast()
        condition.unlock()
    }
}
