import FoundationEssentials
import PasteboardKit

/// Tells a copy that another syncer made from what the daemon carried (an echo) from a copy a
/// person made, for `--primary-to-clipboard` and `--clipboard-to-primary`. A pure value: events
/// in, decisions out; the daemon's bridge acts on them.
///
/// An autocutsel-like program copies one selection to the other whenever it changes. With the
/// daemon carrying the other way, each side's copy is the other's trigger: the daemon takes
/// PRIMARY for a new CLIPBOARD, the program reads PRIMARY and takes CLIPBOARD with it, the
/// daemon takes PRIMARY again … (516 changes in 10 s), and a read that lands while a copy is
/// being replaced fails, so the program copies nothing over the user's copy.
///
/// The echo's mark: the new copy in the source comes from a client that read the destination
/// the daemon carried, moments before. Its content is what the daemon served, so carrying it
/// back changes nothing but the owner: the daemon keeps the destination it owns and serves it
/// from the echo's owner instead (no new ownership, so the other program has nothing to react
/// to). A person who pastes the primary selection and copies within the window is taken for an
/// echo too; their copy is still the clipboard, and the other selection still serves it.
package struct BridgeEchoes: Sendable {
    /// How soon after a read of the carried selection a copy in its source counts as an echo.
    static let window = 1.0
    /// How long without an echo ends an episode (the next echo is logged again).
    static let quiet = 30.0

    /// When each carried selection was last read (opened for a paste), while it is ours.
    private var lastRead: [Pasteboard.Name: Double] = [:]
    /// When the last echo was seen, for the log's episodes.
    private var lastEcho: Double?

    package init() {}

    package enum Decision: Equatable {
        /// A copy to carry: the daemon takes the destination for it.
        case carry
        /// An echo: serve the destination from the new owner, without taking it anew;
        /// `firstOfEpisode` says whether to log it.
        case echo(firstOfEpisode: Bool)
    }

    /// The daemon took `destination` for a copy (or gave it up): reads before now are of an
    /// earlier carry.
    package mutating func carried(_ destination: Pasteboard.Name) {
        lastRead.removeValue(forKey: destination)
    }

    /// Someone opened `destination`, which the daemon carries, for a paste.
    package mutating func read(_ destination: Pasteboard.Name, at time: Double) {
        lastRead[destination] = time
    }

    /// Another client's copy in `source`, to be carried to `destination`, which the daemon
    /// owns now iff `destinationIsOurs`.
    package mutating func changed(_ source: Pasteboard.Name, carriedTo destination: Pasteboard.Name, destinationIsOurs: Bool,
                          at time: Double) -> Decision {
        guard destinationIsOurs, let read = lastRead[destination], time - read >= 0, time - read <= Self.window else {
            return .carry
        }
        let first = lastEcho.map { time - $0 > Self.quiet } ?? true
        lastEcho = time
        return .echo(firstOfEpisode: first)
    }
}
