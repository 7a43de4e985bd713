import FoundationEssentials
import PasteboardKit
import PasteboardWire

/// Where a daemon's pasteboards live: an X display (``DisplayHost``: the keeper, `SAVE_TARGETS`,
/// PRIMARY↔CLIPBOARD) or this process's memory (``MemoryHost``, a host without a display). The
/// daemon (``ClipboardDaemon``) does everything else the same over either: the history and the
/// record pipeline (content rules, actions, caps), control, the sync hub, status, reload, its
/// lifecycle.
///
/// A host calls back into its daemon (``ClipboardDaemon/record(_:written:)``,
/// ``ClipboardDaemon/admits(_:from:owner:hub:)``, ``ClipboardDaemon/finish(failure:reason:)``) from
/// the moment ``start(_:)`` hands it over until ``close()``.
package protocol ClipboardHost: AnyObject, Sendable {
    /// The node's name in logs, status and sync: the display's, or `headless`.
    var nodeName: String { get }
    /// The control socket when the configuration names none.
    var defaultSocketPath: String { get }
    /// More paths the control socket answers on when the configuration names none (a bridge's
    /// X display's, beside its Wayland session's).
    var otherSocketPaths: [String] { get }
    /// The displays (or sessions) whose copies the daemon records: its own, or a bridge's two.
    var displays: [String] { get }
    /// What the sync hub drives.
    var surface: any SyncSurface { get }
    /// The selections the status lists as kept.
    var keeps: [String] { get }
    /// Whether `--idle-exit` applies: a daemon with no link and no client stops (a server's,
    /// started by ssh, never lingers; a desktop's runs for the session).
    var stopsWhenIdle: Bool { get }
    /// Whether the host tells the daemon of copies replaced and cleared by their app
    /// (``ClipboardDaemon/copyRead(_:app:isEmpty:)``): its new copies are held in memory while
    /// their app may take them back (``TakenBackCopies``).
    var seesTakeBacks: Bool { get }

    /// Takes the host's selections (the manager selection, owners already there, the last
    /// contents restored), before the control socket answers. Throws when another daemon serves
    /// this host.
    func start(_ daemon: ClipboardDaemon) throws
    /// After the control socket answers and before the hub dials: ownership changes begin to
    /// reach the hub.
    func connect(_ daemon: ClipboardDaemon)
    /// Serves a history entry selected again.
    func serveSelected(_ snapshot: Snapshot) throws
    /// Empties a selection on purpose (a D-Bus caller's clear): nothing kept of it is brought back.
    func clearSelection(_ name: Pasteboard.Name) throws
    /// A kept copy was a secret (``TakenBackCopies``): what the host holds of it (the copy of
    /// `time` on `name`) is dropped and its bytes zeroed. It is not served again.
    func forgetKept(_ name: Pasteboard.Name, time: Date)
    /// The paste queue (`xpb queue`): an X display's and a Wayland session's xpbd have one.
    func answerQueue(_ request: QueueRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure>
    /// The requests about the pasteboards themselves (`offer`, `read`, `write`, `clearPasteboard`,
    /// `watch`); may talk on the client's connection before it returns.
    func answer(_ request: ControlRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure>
    /// The change count of each selection counted.
    func changeCounts() -> [String: Int]
    /// An owner's word of a paste of its copy (`owner`: as the host names owners): noted on the
    /// entry of the copy the host kept from it, if it keeps it still.
    func ownerPasted(_ record: PasteRecord, of name: Pasteboard.Name, by owner: String)
    /// The history entry of the copy the host serves of `name` itself now (its app gone, an
    /// entry selected again), if it was written.
    func servedEntry(of name: Pasteboard.Name) -> Int64?
    /// Takes what can change while running from a reread configuration.
    func reload(_ fresh: DaemonConfiguration)
    /// Stops taking new work (before the links, the socket and the history writes stop).
    func stopping()
    /// Lets go of the host (after everything else stopped) and of the daemon.
    func close()
}

extension ClipboardHost {
    package var seesTakeBacks: Bool { false }

    package var otherSocketPaths: [String] { [] }

    package var displays: [String] { [nodeName] }

    /// Hosts whose owners are not named apart (Wayland's, the memory's).
    package func ownerPasted(_ record: PasteRecord, of name: Pasteboard.Name, by owner: String) {}

    /// Hosts that serve no kept copy.
    package func servedEntry(of name: Pasteboard.Name) -> Int64? { nil }

    /// Hosts that keep no copy in memory apart from what they serve.
    package func forgetKept(_ name: Pasteboard.Name, time: Date) {}

    package func answerQueue(_ request: QueueRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        .failure(ControlFailure("the paste queue is a desktop's: this xpbd serves \(nodeName), where nobody pastes"))
    }
}
