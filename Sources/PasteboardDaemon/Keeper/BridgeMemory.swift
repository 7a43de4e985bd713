import Dispatch
import FoundationEssentials
import PasteboardKit
import Synchronization

/// What the bridge remembers of the last copies on each side, to tell a copy the compositor's
/// own bridge made (an echo) from one a person made. While an X window has the focus, a wlroots
/// compositor carries every X copy to Wayland itself, and every X selection change (ours too) as
/// well: without this, the two bridges would carry one copy back and forth for ever.
///
/// A new Wayland copy is an echo when its text is the text of the X copy made just before it
/// (the compositor carried it from X), or of the Wayland copy the bridge carried to X just before
/// (the compositor carried it back). The X side reads each X copy's text as its change is read,
/// without the keeper's debounce; a Wayland copy that follows an X change waits a little for it.
/// What the bridge itself owns on X the compositor never carries: its reads of it are refused
/// (so a person's copy right after the bridge took an X selection is a copy, not a reaction).
package final class BridgeMemory: Sendable {
    /// How long after a copy an equal one on the other side counts as its echo.
    static let window = 2.0
    /// How long a Wayland copy waits for the text of an X change just before it (a read of the
    /// X owner, which a loaded machine can make slow).
    static let wait = 2.0
    /// How long a Wayland copy waits for an X change to be read at all: under load the compositor
    /// can carry an X copy to Wayland before the bridge's X side has read that X copy's event.
    static let settle = 0.3
    /// The most text compared.
    package static let limit = 1 << 20

    private struct Copy {
        let time: Date
        var text: Data?
        var isRead: Bool
        /// Marked secret on its side: its text is never read.
        var isSecret = false
    }

    /// What a new Wayland copy is.
    package enum Kind: Equatable {
        /// A copy made on Wayland.
        case copy
        /// The compositor carrying a copy the bridge knows.
        case echo
        /// The compositor carrying an X copy marked secret (wlroots drops the mark on the way).
        case secretEcho
    }

    private struct State {
        var x: [Pasteboard.Name: Copy] = [:]
        var carried: [Pasteboard.Name: Copy] = [:]
    }

    private let state = Mutex(State())
    private let changed = DispatchSemaphore(value: 0)
    /// How long a Wayland copy waits for the text of an X change just before it (``wait``).
    private let waitLimit: Double

    private let settleLimit: Double

    /// Brings the X side up to date: returns once the X thread has read every X event sent
    /// before the call (``xChanged(_:)`` included). Set by the bridge.
    private let xCatchUp = Mutex<(@Sendable () -> Void)?>(nil)

    package init(wait: Double = BridgeMemory.wait, settle: Double = BridgeMemory.settle) {
        waitLimit = wait
        settleLimit = settle
    }

    /// How the X side is brought up to date before a Wayland copy is judged.
    package func catchesUp(with body: @escaping @Sendable () -> Void) {
        xCatchUp.withLock { $0 = body }
    }

    /// An X client (not the compositor, not the bridge) took `name`; its text follows.
    package func xChanged(_ name: Pasteboard.Name) {
        state.withLock { $0.x[name] = Copy(time: Date(), text: nil, isRead: false) }
        changed.signal()
    }

    /// The X copy whose change was noted last is marked secret: its text is not read, and what the
    /// compositor carries of it to Wayland is secret too.
    package func xSecret(_ name: Pasteboard.Name) {
        state.withLock { state in
            guard state.x[name]?.isRead == false else { return }
            state.x[name]?.isSecret = true
            state.x[name]?.isRead = true
        }
        changed.signal()
    }

    /// The text of the X copy whose change was noted last (nil: it has none).
    package func xText(_ name: Pasteboard.Name, _ text: Data?) {
        state.withLock { state in
            guard state.x[name]?.isRead == false else { return }
            state.x[name]?.text = text
            state.x[name]?.isRead = true
        }
        changed.signal()
    }

    /// A Wayland copy the bridge carries to X (its text as kept).
    package func carried(_ name: Pasteboard.Name, text: Data?) {
        state.withLock { $0.carried[name] = Copy(time: Date(), text: text, isRead: true) }
    }

    /// What a new Wayland copy of `text` is: the compositor's echo of a copy made just before, or
    /// a copy.
    package func kind(_ name: Pasteboard.Name, text: @autoclosure () -> Data?) -> Kind {
        // A secret X copy's echo is told by its time alone (its text is not read). The X change
        // it follows may not be read yet: the X side first reads what the server sent before now
        // (the compositor carries an X copy only after the server told of it), and a moment is
        // given besides. Under load the X side had not read the change 0.3 s after the
        // compositor's copy came, and a secret was kept; an older X change still in the window
        // hid it.
        if let catchUp = xCatchUp.withLock({ $0 }) { catchUp() }
        let started = Date()
        let deadline = started.addingTimeInterval(waitLimit)
        while true {
            let (secret, waiting) = state.withLock { state -> (Bool, Bool) in
                guard let x = state.x[name], Date().timeIntervalSince(x.time) < Self.window else {
                    return (false, Date().timeIntervalSince(started) < settleLimit)
                }
                return (x.isSecret, !x.isRead)
            }
            if secret { return .secretEcho }
            guard waiting, Date() < deadline else { break }
            _ = changed.wait(timeout: .now() + 0.02)
        }
        // An X change made just before and still not read (the X side is that far behind): the
        // copy may be its echo, and that X copy may be a secret. It is not kept.
        if state.withLock({ state in state.x[name].map { !$0.isRead && Date().timeIntervalSince($0.time) < Self.window } ?? false }) {
            return .echo
        }
        guard let text = text(), !text.isEmpty else { return .copy }
        return state.withLock { state -> Kind in
            let now = Date()
            if let carried = state.carried[name], now.timeIntervalSince(carried.time) < Self.window, carried.text == text { return .echo }
            if let x = state.x[name], now.timeIntervalSince(x.time) < Self.window, x.isRead, x.text == text { return .echo }
            return .copy
        }
    }

    /// Whether an X copy of `text` is the Wayland copy the bridge carried to X just before, made
    /// again on X by a program that copies each Wayland copy to X (the wl-clipboard recipe
    /// `wl-paste --watch xclip -i -selection clipboard`): Wayland holds it already, and carrying
    /// it back would make a new Wayland copy for the program to copy again, for ever.
    /// `text` is asked only when the bridge carried a copy of `name` within the window.
    package func isCarriedBack(_ name: Pasteboard.Name, text: () -> Data?) -> Bool {
        let carried = state.withLock { state -> Data? in
            guard let carried = state.carried[name], Date().timeIntervalSince(carried.time) < Self.window else { return nil }
            return carried.text
        }
        guard let carried, !carried.isEmpty else { return false }
        return text() == carried
    }

    /// Whether a new Wayland copy is the compositor's echo (secret or not).
    func isEcho(_ name: Pasteboard.Name, text: @autoclosure () -> Data?) -> Bool {
        kind(name, text: text()) != .copy
    }
}
