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
    /// Another client took a selection we owned. `announced`: XFixes tells of the change too
    /// (``selectionOwnerChanged(selection:owner:timestamp:reason:isOurs:session:)``); else this
    /// is the one word of it this connection gets.
    func ownershipLost(selection: X11Atom, announced: Bool)
    /// We converted a selection we own to a data target for a client (an INCR transfer counts
    /// when it starts).
    func served(selection: X11Atom, type: PasteboardType)
    /// We converted a selection we own to a data target for `reader` (``ServedTarget/isPaste``):
    /// a paste, while ``SelectionServer/pasteReports`` is set.
    func pasted(selection: X11Atom, reader: PasteReader)
    /// A client asked the clipboard manager (us) to save the clipboard: the targets it listed
    /// (empty when it listed none). ``ClipboardManagerRole/answerSave(saved:)`` replies.
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

/// The loop on the X thread: the wire to the server (``X11Wire``), the timers, the event intake
/// and wake-ups, and the parts it drives, each with its own state: the owner of our selections
/// (``SelectionServer``), the reader of others' (``SelectionReader``) and the clipboard manager's
/// duties (``ClipboardManagerRole``). Each event goes to the part that asked for it
/// (X11EventLoop.swift). Only ``X11Connection``'s thread touches it.
final class X11Session {
    /// Where the session is in its life: serving; asked to stop after the current job; or its
    /// connection died (an I/O error: nothing more may be sent).
    enum Lifecycle {
        case running
        case stopRequested
        case dead
    }

    let wire: X11Wire
    let configuration: X11Configuration
    weak var delegate: (any X11SessionDelegate)?
    var lifecycle = Lifecycle.running
    var timers = TimerQueue<() -> Void>()
    /// The clock as read at the start of the loop's turn (nanoseconds).
    var turnClock: UInt64 = 0
    /// Whether the last turn stopped at its budget, with events perhaps left to read.
    var turnCutShort = false
    /// A flood was dropped unseen (``X11Wire/FloodSkip``): XCB's memory for it goes back to the
    /// system at the first turn after it that drops nothing.
    var floodTrimDue = false
    /// Hands a job to this session's own thread from any thread (set by the connection); false
    /// once the connection has stopped.
    var enqueue: (@Sendable (@escaping @Sendable (X11Session) -> Void) -> Bool)?
    /// Descriptors besides the X connection that the loop polls, and what to do when one is ready.
    private(set) var descriptorHandlers: [Int32: () -> Void] = [:]
    private var nextOperationID = 0
    /// The selections whose owner changes XFixes reports to us, and our own changes among them.
    private var ownership = OwnershipWatch()
    /// Waiting for a server timestamp (``serverTime(_:)``), oldest first, each with its number;
    /// one that timed out stays without its completion, to take its answer if it comes late (the
    /// server answers appends in order).
    private var timestampWaiters: [(number: Int, completion: ((Result<X11Timestamp, any Error>) -> Void)?)] = []
    private var nextTimestampWaiter = 0
    /// The server time of our window's `WM_NAME`, written as the wire opened
    /// (``X11Wire/init(display:configuration:)``): the first selection taken soon after takes it
    /// instead of a timestamp of its own (``ownershipTime(_:)``), and the ownership waiting for it.
    private var startTime = StartTimeRule()
    private var startTimeWaiter: ((Result<X11Timestamp, any Error>) -> Void)?

    /// The owner of our selections.
    private(set) lazy var owner = SelectionServer(session: self)
    /// The reader of other clients' selections.
    private(set) lazy var reader = SelectionReader(session: self)
    /// The clipboard manager's side (the daemon's).
    private(set) lazy var manager = ClipboardManagerRole(session: self)

    /// When the connection opened, on ``X11Configuration/clock``.
    private let openedAt: UInt64

    init(display: OpaquePointer, configuration: X11Configuration) {
        wire = X11Wire(display: display, configuration: configuration)
        self.configuration = configuration
        openedAt = configuration.clock()
    }

    /// Whether what the connection learnt as it opened (the server's time, the clipboard
    /// manager's window) may still stand for now (``X11Configuration/startTimeFreshness``).
    private var isStartFresh: Bool { configuration.clock() &- openedAt <= configuration.startTimeFreshness }

    /// The clipboard manager's window as the connection opened, while that is fresh and not
    /// taken yet (then nil, and the look-up's answer is dropped): the first change of ours
    /// follows the manager's count without asking for its window again.
    func managerAtStart() -> X11Window? {
        wire.takeManagerAtStart(stale: !isStartFresh)
    }

    var isDead: Bool { lifecycle == .dead }

    /// Has the loop call `handler` whenever `fd` is readable.
    func watchDescriptor(_ fd: Int32, _ handler: @escaping () -> Void) { descriptorHandlers[fd] = handler }

    func unwatchDescriptor(_ fd: Int32) { descriptorHandlers.removeValue(forKey: fd) }

    /// A new operation id.
    func makeOperationID() -> Int {
        nextOperationID += 1
        return nextOperationID
    }

    /// Asks the loop to stop after the current job.
    func requestStop() {
        if lifecycle == .running { lifecycle = .stopRequested }
    }

    /// A requestor window was destroyed: the one call that tells every part holding something
    /// of it, each of which drops its own. With `serial` (a request of ours that found the window
    /// gone), requests that came after the server processed it are another window's, of the same
    /// id: they stay queued.
    func requestorGone(_ requestor: X11Window, asOf serial: UInt? = nil) {
        manager.requestorGone(requestor)
        owner.requestorGone(requestor, asOf: serial)
    }

    /// Asks XFixes for owner changes of a selection (once per selection).
    func watch(_ selection: X11Atom) {
        guard wire.fixesEventBase >= 0, ownership.watch(selection) else { return }
        XFixesSelectSelectionInput(wire.display, wire.root.rawValue, selection.rawValue,
                                   UInt(XFixesSetSelectionOwnerNotifyMask | XFixesSelectionWindowDestroyNotifyMask | XFixesSelectionClientCloseNotifyMask))
    }

    /// Whether XFixes reports the owner changes of `selection` to this connection.
    func isWatched(_ selection: X11Atom) -> Bool {
        wire.fixesEventBase >= 0 && ownership.isWatched(selection)
    }

    /// Records an ownership change of ours at `time`, so that its XFixes event is known as ours
    /// and not counted twice.
    func noteOurChange(_ selection: X11Atom, at time: X11Timestamp) {
        ownership.note(selection, at: time)
    }

    /// Whether an ownership change at `time` was ours (each of ours is recognised once).
    func consumeOurChange(_ selection: X11Atom, at time: X11Timestamp) -> Bool {
        ownership.consume(selection, at: time)
    }

    /// A fresh server timestamp: a zero-length append to a property of our window, whose
    /// PropertyNotify carries the server's time (ICCCM §2.1; never CurrentTime).
    func serverTime(_ completion: @escaping (Result<X11Timestamp, any Error>) -> Void) {
        nextTimestampWaiter += 1
        let number = nextTimestampWaiter
        timestampWaiters.append((number, completion))
        var nothing: UInt8 = 0
        XChangeProperty(wire.display, wire.window.rawValue, wire.known[.timestampProperty].rawValue, X11Atom.integer.rawValue, 8,
                        PropModeAppend, &nothing, 0)
        wire.flush()
        let deadline = configuration.readTimeout
        after(deadline) { [weak self] in
            // This call's own waiter, if still unanswered: never another's (a timer of an answered
            // call failed the newest waiter at once under load).
            guard let self, let index = self.timestampWaiters.firstIndex(where: { $0.number == number }),
                  let completion = self.timestampWaiters[index].completion else { return }
            self.timestampWaiters[index].completion = nil
            completion(.failure(PasteboardError.timedOut(operation: "getting a server timestamp", seconds: deadline)))
        }
    }

    /// A server timestamp to take a selection at, and whether it is the start time: the start
    /// time while it is fresh (``isStartFresh``) and not used yet, else a fresh one
    /// (``serverTime(_:)``); the rule is ``StartTimeRule``'s. `xpb copy` takes its selection a
    /// millisecond or two after it connects: the start time spares it the round trip of a
    /// timestamp of its own. A time that old may lose to an owner that came in between (the
    /// server refuses a change older than the last): the caller then asks again with a fresh one
    /// (``SelectionServer``'s `own`), as it would have from the start.
    func ownershipTime(_ completion: @escaping (Result<X11Timestamp, any Error>, _ isStartTime: Bool) -> Void) {
        switch startTime.ask(fresh: isStartFresh) {
        case .wait:
            startTimeWaiter = { completion($0, true) }
            // Its PropertyNotify always comes (the window's events were selected before the
            // write); should the write have failed, the timestamp is taken as any other.
            after(configuration.readTimeout) { [weak self] in
                guard let self, self.startTime.giveUp() else { return }
                self.startTimeWaiter = nil
                self.serverTime { completion($0, false) }
            }
        case let .use(time):
            // After the job that asked: as a timestamp asked of the server comes, so that what
            // the job does next (the manager's count followed) goes before the change.
            after(0) { completion(.success(time), true) }
        case .askServer:
            serverTime { completion($0, false) }
        }
    }

    /// Our window's `WM_NAME` got its value: the first time, the start time.
    func startTimeCame(_ time: X11Timestamp) {
        guard startTime.came(time), let waiter = startTimeWaiter else { return }
        startTimeWaiter = nil
        waiter(.success(time))
    }

    /// A server timestamp came (our window's timestamp property grew): the oldest waiter's (one
    /// that timed out takes it and passes it on to nobody).
    func timestampCame(_ time: X11Timestamp) {
        guard !timestampWaiters.isEmpty else { return }
        timestampWaiters.removeFirst().completion?(.success(time))
    }

    /// Fails every pending operation and closes the display.
    func finish(reason: X11BackendError) {
        let failure: any Error = reason
        let windows = reader.finish(failure)
        for waiter in timestampWaiters { waiter.completion?(.failure(failure)) }
        timestampWaiters.removeAll()
        if startTime.giveUp(), let waiter = startTimeWaiter { waiter(.failure(failure)) }
        startTimeWaiter = nil
        owner.finish()
        timers = TimerQueue()
        wire.close(destroying: windows, connectionAlive: !isDead, beforeExit: configuration.exitsAfterClose)
    }
}

/// The selections whose owner changes XFixes reports, and the timestamps of our own changes per
/// selection, so that their events are recognised as ours.
struct OwnershipWatch {
    private var watched: Set<X11Atom> = []
    private var ours: [X11Atom: [X11Timestamp]] = [:]

    /// Adds `selection`; false when it was watched already.
    mutating func watch(_ selection: X11Atom) -> Bool { watched.insert(selection).inserted }

    func isWatched(_ selection: X11Atom) -> Bool { watched.contains(selection) }

    mutating func note(_ selection: X11Atom, at time: X11Timestamp) { ours[selection, default: []].append(time) }

    /// Whether a change at `time` was ours; each is recognised once.
    mutating func consume(_ selection: X11Atom, at time: X11Timestamp) -> Bool {
        guard let index = ours[selection]?.firstIndex(of: time) else { return false }
        ours[selection]?.remove(at: index)
        return true
    }
}

/// Whether a selection is taken at the connection's start time (the server time of the
/// `WM_NAME` written as it opened), or at a timestamp asked of the server: the first
/// ownership asked while the start time is fresh takes it, waiting for it if it has not come;
/// every other asks the server. Events in, answers out (``X11Session/ownershipTime(_:)`` acts).
struct StartTimeRule {
    enum State: Equatable {
        /// Not come yet; `waiting`: an ownership waits for it.
        case coming(waiting: Bool)
        case seen(X11Timestamp)
        /// Used, or too old to use.
        case spent
    }

    enum Answer: Equatable {
        case wait
        case use(X11Timestamp)
        case askServer
    }

    private(set) var state = State.coming(waiting: false)

    /// An ownership asks for its time; `fresh`: whether the connection opened recently enough.
    mutating func ask(fresh: Bool) -> Answer {
        switch state {
        case .coming(waiting: false) where fresh:
            state = .coming(waiting: true)
            return .wait
        case .coming(waiting: true):
            // Promised to the ownership that waits for it.
            return .askServer
        case let .seen(time) where fresh:
            state = .spent
            return .use(time)
        default:
            state = .spent
            return .askServer
        }
    }

    /// The start time came: true when an ownership waits for it (it takes it now).
    mutating func came(_ time: X11Timestamp) -> Bool {
        guard case let .coming(waiting) = state else { return false }
        state = waiting ? .spent : .seen(time)
        return waiting
    }

    /// The waiting ownership stops waiting (the time did not come, or the connection ended):
    /// true when one was waiting.
    mutating func giveUp() -> Bool {
        guard state == .coming(waiting: true) else { return false }
        state = .spent
        return true
    }
}
