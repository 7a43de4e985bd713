import Dispatch
import PasteboardKit

/// Tunables of the X11 backend.
public struct X11Configuration: Sendable {
    /// How long a read may go without progress before it fails, in seconds.
    public var readTimeout: Double = 5
    /// How long an INCR transfer we serve may wait for the requestor before it is dropped.
    public var serveTimeout: Double = 30
    /// How long a conversion waits for a lazy provider before the request is refused, in
    /// seconds. Providers run on a worker thread, never on the X thread: other requestors are
    /// served meanwhile. A provider that overruns keeps running; its result serves later requests.
    public var providerTimeout: Double = 20
    /// The most time one read may take in all, INCR transfer included, in seconds: an owner
    /// that trickles a byte now and then cannot keep a read alive for ever.
    public var transferDeadline: Double = 300
    /// The most bytes one read accepts; an owner that sends (or announces) more gets the read
    /// failed. Streamed reads (``X11PasteboardBackend/stream(of:item:type:limit:file:bytes:)``)
    /// take their own limit.
    public var maxReadSize: Int = 1 << 30
    /// The bytes per property write; nil for the server's maximum request size, capped at 1 MiB
    /// (the fastest measured, and well under the 4,000,000 bytes xsel fetches at once).
    public var chunkSize: Int? = nil
    /// How long a clean shutdown waits for a clipboard manager to take the contents, in seconds.
    public var handOffTimeout: Double = 3
    /// Whether two xpb processes of one user on one host move data outside the X server: the
    /// owner hands the reader a file descriptor over a UNIX socket (see ``FastPath``). Every
    /// other client, and any failure, goes through the X server as usual.
    public var fastPath = true
    /// The name of this process's window (`WM_NAME`), which `xpb info`, xprop and "another
    /// clipboard manager runs" messages show for what it owns.
    public var windowName = "xpb"
    /// Who made the copies this process owns (``CopyCredit``): published beside each selection
    /// it owns with items, for clipboard managers and `xpb info`. Nil: the process itself.
    public var copiedBy: CopyCredit? = nil
    /// Whether a read ends as soon as its selection changes owner (a watched selection's XFixes
    /// event), with ``PasteboardError/backendFailure(_:)``, instead of following the old owner's
    /// INCR to its end: a clipboard manager reads one ownership at a time, and an owner that
    /// trickles its data must not keep it from the next copy. Off for pastes (what was asked
    /// for is delivered).
    public var abandonsReadsOnOwnerChange = false
    /// Whether a request the selection's owner has not answered within ``readTimeout`` is sent
    /// again, from a new requestor window (the first rests, in case the owner answers late),
    /// after 1, 2, 4 … times the read timeout, while the selection keeps that owner and within
    /// ``transferDeadline``: xclip drops the requests that come while it sends an INCR transfer
    /// to another reader, so a manager that asks as someone pastes a large copy would otherwise
    /// get nothing, and lose the copy once xclip is gone. Needs ``abandonsReadsOnOwnerChange``
    /// (a change of owner ends the read). Off for pastes: a stopped owner fails them at the read
    /// timeout.
    public var asksSilentOwnersAgain = false
    /// Whether the backend follows owner changes (XFixes): change counts, change streams, and
    /// offers kept while their owner stays. Off for a process that reads once and exits (`xpb
    /// paste`): it spares two round trips at start, and every read asks the owner. Off too for
    /// an owner that follows only its own selection (`xpb copy`): losing it (SelectionClear)
    /// is then counted as the change.
    public var watchesOwnerChanges = true
    /// Whether the X loop runs on the thread that calls the backend, during its calls, instead of
    /// a thread of its own: no thread to start and no hand-off per call, for a process that reads
    /// on one thread and exits (`xpb paste`). Every call must come from that thread, and nothing
    /// is served between calls: leave it off for a process that owns a selection or watches.
    public var runsOnCallersThread = false
    /// Whether the process exits as soon as the backend is closed (`xpb paste`): closing then
    /// flushes what was sent and shuts the socket, without Xlib's closing round trip, and leaves
    /// Xlib's memory and the backend's own objects to the exit (the backend is never freed). A
    /// backend of a process that goes on must leave it off: their memory would stay allocated.
    public var exitsAfterClose = false
    /// Where the backend reports what it noticed without failing a read: an INCR transfer whose
    /// bytes disagree with the size its owner announced (the protocol has no checksum; the
    /// announcement is all a reader can compare). Called on the X thread; nil: not reported.
    public var warning: (@Sendable (String) -> Void)? = nil
    /// Where the backend tells what it did that a debug log shows: a request sent again to a
    /// silent owner (``asksSilentOwnersAgain``). Called on the X thread; nil: not told.
    public var debug: (@Sendable (String) -> Void)? = nil
    /// The X thread's clock for its deadlines, in nanoseconds of a monotonic clock: tests inject
    /// their own.
    var clock: @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    /// How long after the connection opened (nanoseconds of ``clock``) the server time it began
    /// with may still take a selection (``X11Session/ownershipTime(_:)``): 50 ms, a one-shot
    /// copy's time to its first ownership many times over. Tests widen it.
    var startTimeFreshness: UInt64 = 50_000_000

    /// The defaults: 5 s read timeout, 300 s transfer deadline, 30 s serve timeout, 20 s provider
    /// timeout, 1 GiB read limit.
    public init() {}
}
