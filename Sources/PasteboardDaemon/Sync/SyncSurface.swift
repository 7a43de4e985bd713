import FoundationEssentials
import PasteboardKit
import PasteboardSelections

/// The selections a sync node shares, as the hub sees them: an X display's (``X11SyncSurface``)
/// or a headless daemon's, held in memory (``HeadlessClipboard``). Owners are plain numbers (an
/// X window id, or a headless copy's id); the hub never learns which kind of surface it drives.
///
/// The hub calls these off the links' threads; none of them waits on a peer.
package protocol SyncSurface: Sendable {
    /// The owner of the copies this node holds for other nodes (the daemon's window on X).
    var ourOwner: UInt { get }
    /// The owner of a selection now, nil when nobody owns it.
    func currentOwner(of name: Pasteboard.Name) -> UInt?
    /// Compare-and-own: serves another node's copy (made at `origin`) on `name` if
    /// `precondition`, asked with the owner at that instant, allows it. Returns whether it owns it.
    func own(_ name: Pasteboard.Name, targets: [RemoteTarget], origin: String, if precondition: @escaping @Sendable (UInt) -> Bool) throws -> Bool
    /// Compare-and-clear: clears `name` if `precondition`, asked with the owner at that instant,
    /// allows it. Returns whether it cleared it.
    func clear(_ name: Pasteboard.Name, if precondition: @escaping @Sendable (UInt) -> Bool) throws -> Bool
    /// Waits while `owner`'s copy of a selection is still being made (PRIMARY while a pointer
    /// button is held), or read by the keeper where it must hold the bytes before they are
    /// announced (a bridge's X side), and `isCurrent`; false when it stopped being current.
    func waitUntilFinished(_ name: Pasteboard.Name, owner: UInt, while isCurrent: @escaping @Sendable () -> Bool) -> Bool
    /// Whether the copy `owner` made on `name` may leave the machine, and what it offers.
    /// `nodeName` names this node for the announce's origin.
    func verdict(_ name: Pasteboard.Name, owner: UInt, nodeName: String) -> SyncLedger.Verdict
    /// Serves one target of `owner`'s copy: `begin` with the reply's type and size, then the bytes
    /// to `chunk`, in `owner`'s turn (given up at `turnDeadline`).
    func serve(_ name: Pasteboard.Name, owner: UInt, target: String, limit: Int, turnDeadline: Date,
               isCurrent: @escaping @Sendable () -> Bool, begin: (String, Int?) throws -> Void,
               chunk: (Data) throws -> Void) throws -> SyncServeOutcome
}

/// How a served fetch ended on the surface's side.
package enum SyncServeOutcome: Equatable {
    case served
    /// The owner was busy with another transfer until the turn's deadline.
    case busy
    /// Why the bytes cannot be had.
    case refused(String)
}
