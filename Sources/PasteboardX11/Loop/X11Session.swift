internal import CX11
internal import CXEvents
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections

/// What the X thread tells the backend.
protocol X11SessionDelegate: AnyObject, Sendable {
    /// XFixes reported a new owner (or none) for a selection; `isOurs` marks our own acquisitions.
    func selectionOwnerChanged(selection: X11Atom, owner: X11Window, timestamp: X11Timestamp, reason: OwnerChangeReason, isOurs: Bool,
                               session: X11Session)
    /// Another client took a selection we owned.
    func ownershipLost(selection: X11Atom)
    /// We converted a selection we own to a data target for a client (an INCR transfer counts
    /// when it starts).
    func served(selection: X11Atom, type: PasteboardType)
    /// A client asked the clipboard manager (us) to save the clipboard: the targets it listed
    /// (empty when it listed none). ``X11Session/answerSave(saved:)`` replies.
    func saveRequested(targets: [String], time: X11Timestamp)
    /// Another client took `CLIPBOARD_MANAGER` from us (a manager replacing this one).
    func clipboardManagerLost()
}

/// A span of request serials whose errors go to `handler`, and the next one to ask XCB about.
struct ErrorRoute {
    let first: UInt
    let last: UInt
    var next: UInt
    let handler: (XErrorRecord) -> Void
}

/// A property as read: its type, format, and bytes (format 32 as 32-bit units, not C longs).
struct PropertyValue {
    let type: X11Atom
    let format: Int32
    let data: Data

    /// The values of a format-32 property.
    var longs: [UInt] {
        guard format == 32 else { return [] }
        return stride(from: 0, to: data.count - 3, by: 4).map { offset in
            let start = data.startIndex + offset
            return UInt(data[start]) | UInt(data[start + 1]) << 8 | UInt(data[start + 2]) << 16 | UInt(data[start + 3]) << 24
        }
    }

    /// The values of a format-32 property as atoms.
    var atoms: [X11Atom] { longs.map(X11Atom.init(rawValue:)) }
}

/// Everything that lives on the X thread: the display, our window, atoms, the selections we own,
/// the transfers under way, timers, and error routes. Only ``X11Connection``'s thread touches it
/// (``assertOnXThread()``). The Xlib calls are in XlibCalls.swift, the loop's work in
/// X11EventLoop.swift, the owner's and reader's protocol in SelectionOwner.swift and
/// SelectionReader.swift.
final class X11Session {
    /// Where the session is in its life: serving; asked to stop after the current job; or its
    /// connection died (an I/O error: nothing more may be sent).
    enum Lifecycle {
        case running
        case stopRequested
        case dead
    }

    let display: OpaquePointer
    let root: X11Window
    let window: X11Window
    let configuration: X11Configuration
    weak var delegate: (any X11SessionDelegate)?
    let chunkSize: Int
    var fixesEventBase: Int32 = -1
    var lifecycle = Lifecycle.running
    /// The thread that runs the loop, once it has started.
    var thread: pthread_t?

    /// The atoms the backend speaks by name.
    var known: WellKnownAtoms
    // Atoms by name and names by atom, as interned or looked up so far.
    var atomsByName: [String: X11Atom] = [:]
    var namesByAtom: [X11Atom: String] = [:]

    var timers = TimerQueue<() -> Void>()
    /// Writes waiting for the clipboard manager to count them (``waitForSharedCount(index:toPass:within:done:)``).
    var sharedCountWaiters: [SharedCountWaiter] = []
    /// Error routes: a span of request serials and what to do with an error in it.
    var errorRoutes: [ErrorRoute] = []
    /// Whether collectErrors is under way (a route's handler may call it again).
    var collectingErrors = false

    // Owner state.
    var owned: [X11Atom: OwnedSelection] = [:]
    /// The INCR sends under way.
    var outgoing = OutgoingSends()
    /// Requests for targets served from elsewhere (a sync peer), waiting for the first bytes.
    var pendingRemote: [Int: (request: ConversionRequest, stream: ByteStream)] = [:]
    var watchedRequestors: [X11Window: Int] = [:]
    /// Selections whose XFixes events we ask for.
    var watchedSelections: Set<X11Atom> = []
    /// Timestamps of our own ownership changes per selection, so that their XFixes events are
    /// recognised as ours and not counted twice.
    var ourChangeTimes: [X11Atom: [X11Timestamp]] = [:]
    /// Requests waiting for work on a worker (providers, large conversions): how many of their
    /// targets are not ready yet, and what to do then.
    var waitingForPreparation: [Int: (remaining: Int, requestor: X11Window?, answer: @Sendable (X11Session) -> Void, timedOut: @Sendable (X11Session) -> Void)] = [:]
    /// Conversion requests waiting their turn, and the flood rules.
    var scheduler = RequestScheduler()
    /// Whether conversions are reported to the delegate (``X11SessionDelegate/served(selection:type:)``):
    /// only while the backend has a handler for them.
    var reportsServed = false
    /// The clock as read at the start of the loop's turn (nanoseconds).
    var turnClock: UInt64 = 0
    /// Events XCB read while a round trip waited, not handled yet.
    var intake = EventIntake()
    /// Errors of requests without a reply, which come with the events: collectErrors routes them.
    var wireErrors: [XErrorRecord] = []
    /// Whether the last turn stopped at its budget, with events perhaps left to read.
    var turnCutShort = false
    /// The work under way per target: the requests waiting for it, and its deadline timer.
    var preparations: [PreparationKey: (waiters: [Int], timer: TimerHandle)] = [:]

    // Clipboard manager state (the daemon's).
    /// Whether we hold `CLIPBOARD_MANAGER` as the clipboard manager.
    var isClipboardManager = false
    /// The `SAVE_TARGETS` request being handled; `abandoned` once its requestor window is gone.
    var pendingSave: (request: ConversionRequest, abandoned: Bool)?
    /// What to do when a window (watched for StructureNotify) is destroyed.
    var windowGoneWaiters: [X11Window: [() -> Void]] = [:]

    // Reader state.
    var conversions: [PendingConversion] = []
    var incoming: [ReplySlot: IncomingState] = [:]
    /// Each conversion's own requestor window (``ReplySlot``).
    var requestorWindows = RequestorWindows()
    /// Conversions waiting for a drained reply of their selection to end.
    var heldConversions: [(selection: X11Atom, start: () -> Void, fail: (any Error) -> Void)] = []
    var timestampWaiters: [(Result<X11Timestamp, any Error>) -> Void] = []
    var nextOperationID = 0

    /// Where file chunks are read before they are written to a property (chunkSize bytes, made
    /// on first use).
    var scratch: UnsafeMutableRawBufferPointer?

    /// Hands a job to this session's own thread from any thread (set by the connection); false
    /// once the connection has stopped.
    var enqueue: (@Sendable (@escaping @Sendable (X11Session) -> Void) -> Bool)?
    /// The same-host fast path's listener, once this process owns something.
    var fastPath: FastPathServer?
    /// Descriptors besides the X connection that the loop polls, and what to do when one is ready.
    private(set) var descriptorHandlers: [Int32: () -> Void] = [:]

    /// The largest chunk we write by default: 1 MiB. Measured (Benchmarks/ceiling.c, 100 MB
    /// through one property on Xvfb) it moves data fastest: 132 ms, against 166 ms at 256 KiB and
    /// 161 ms at 3.9 MB. It also stays under what some readers fetch at once: xsel takes a chunk
    /// with one XGetWindowProperty of 1,000,000 units (4,000,000 bytes) and hangs on more.
    static let defaultChunkCap = 1 << 20

    init(display: OpaquePointer, configuration: X11Configuration) {
        self.display = display
        self.configuration = configuration
        root = X11Window(rawValue: XDefaultRootWindow(display))
        window = X11Window(rawValue: XCreateSimpleWindow(display, root.rawValue, -10, -10, 1, 1, 0, 0, 0))
        XSelectInput(display, window.rawValue, PropertyChangeMask)
        let bigRequest = XExtendedMaxRequestSize(display)
        let maxRequestBytes = (bigRequest > 0 ? bigRequest : XMaxRequestSize(display)) * 4
        chunkSize = configuration.chunkSize ?? max(4096, min(maxRequestBytes - 1024, Self.defaultChunkCap))
        var eventBase: Int32 = 0
        var errorBase: Int32 = 0
        if XFixesQueryExtension(display, &eventBase, &errorBase) != 0 {
            var major: Int32 = 5
            var minor: Int32 = 0
            _ = XFixesQueryVersion(display, &major, &minor)
            fixesEventBase = eventBase
        }
        // The well-known atoms (and our first conversion property) in one round trip.
        let names = WellKnown.allCases.map(\.rawValue) + ["XPB_SEL_1"]
        let interned = Self.internAtoms(display, names)
        known = WellKnownAtoms(Dictionary(uniqueKeysWithValues: zip(WellKnown.allCases, interned)))
        for (name, atom) in zip(names, interned) where !atom.isNone { remember(atom, name) }
        // Name our window so that `xpb info` and tools like xprop can tell who owns a selection.
        XStoreName(display, window.rawValue, configuration.windowName)
        writeLongs(window, known[.netWMPID], type: .cardinal, [UInt(getpid())], onError: { _ in })
        XFlush(display)
    }

    deinit {
        scratch?.deallocate()
    }

    /// Stops in debug builds when called from a thread other than the X thread.
    func assertOnXThread(_ function: StaticString = #function) {
        assert(thread.map { pthread_equal($0, pthread_self()) != 0 } ?? true, "\(function) called off the X thread")
    }

    var isDead: Bool { lifecycle == .dead }

    /// Has the loop call `handler` whenever `fd` is readable.
    func watchDescriptor(_ fd: Int32, _ handler: @escaping () -> Void) { descriptorHandlers[fd] = handler }

    func unwatchDescriptor(_ fd: Int32) { descriptorHandlers.removeValue(forKey: fd) }

    /// Whether two windows belong to one client: the server gives every client its own range of
    /// ids, the bits outside its resource mask (a reader may ask from a window of each conversion,
    /// a toolkit from another of its windows than the one that owns a selection).
    func isSameClient(_ a: X11Window, _ b: X11Window) -> Bool {
        let mask = UInt(cxevents_resource_mask(UnsafeMutableRawPointer(display)))
        return a.rawValue & ~mask == b.rawValue & ~mask
    }

    /// A new operation id.
    func makeOperationID() -> Int {
        nextOperationID += 1
        return nextOperationID
    }

    /// Asks the loop to stop after the current job.
    func requestStop() {
        if lifecycle == .running { lifecycle = .stopRequested }
    }

    /// Fails every pending operation and closes the display.
    func finish(reason: X11BackendError) {
        let failure: any Error = reason
        let held = heldConversions
        heldConversions.removeAll()
        for conversion in held { conversion.fail(failure) }
        for conversion in conversions { conversion.completion(.failure(failure)) }
        conversions.removeAll()
        for (_, state) in incoming { state.completion(.failure(failure)) }
        incoming.removeAll()
        for waiter in timestampWaiters { waiter(.failure(failure)) }
        timestampWaiters.removeAll()
        outgoing.removeAll()
        owned.removeAll()
        closeFastPath()
        timers = TimerQueue()
        let requestors = requestorWindows.removeAll()
        if !isDead {
            for requestor in requestors { XDestroyWindow(display, requestor.rawValue) }
            XDestroyWindow(display, window.rawValue)
            XCloseDisplay(display)
        }
        // A dead display is left open: its memory is small and Xlib's state after an I/O error is
        // not safe to tear down from here.
        XErrorSink.forget(display)
    }
}
