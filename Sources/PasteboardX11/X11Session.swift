internal import CX11
import Dispatch
import Foundation
import PasteboardKit

/// Tunables of the X11 backend.
public struct X11Configuration: Sendable {
    /// How long a read may go without progress before it fails, in seconds.
    public var readTimeout: Double = 5
    /// How long an INCR transfer we serve may wait for the requestor before it is dropped.
    public var serveTimeout: Double = 30
    /// The most bytes one read accepts; an owner that sends more gets the read failed.
    public var maxReadSize: Int = 4 << 30
    /// The bytes per property write; nil for the server's maximum request size, capped at 1 MiB
    /// (the fastest measured, and well under the 4,000,000 bytes xsel fetches at once).
    public var chunkSize: Int? = nil
    /// How long a clean shutdown waits for a clipboard manager to take the contents, in seconds.
    public var handOffTimeout: Double = 3
    /// Whether two xpb processes of one user on one host move data outside the X server: the
    /// owner hands the reader a file descriptor over a UNIX socket (see ``FastPath``). Every
    /// other client, and any failure, goes through the X server as usual.
    public var fastPath = true

    /// How long a conversion waits for a lazy provider before the request is refused, in
    /// seconds. Providers run on a worker thread, never on the X thread: other requestors are
    /// served meanwhile. A provider that overruns keeps running; its result serves later requests.
    public var providerTimeout: Double = 20

    /// The defaults: 5 s read timeout, 30 s serve timeout, 20 s provider timeout, 4 GiB read limit.
    public init() {}
}

/// What the X thread tells the backend.
protocol X11SessionDelegate: AnyObject, Sendable {
    /// XFixes reported a new owner (or none) for a selection; `isOurs` marks our own acquisitions.
    func selectionOwnerChanged(selection: Atom, owner: Window, timestamp: Time, isOurs: Bool, session: X11Session)
    /// Another client took a selection we owned.
    func ownershipLost(selection: Atom)
    /// We converted a selection we own to a data target for a client (an INCR transfer counts
    /// when it starts).
    func served(selection: Atom, type: PasteboardType)
}

/// A property as read: its type, format, and bytes (format 32 as 32-bit units, not C longs).
struct PropertyValue {
    let type: Atom
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
}

/// Everything that lives on the X thread: the display, our window, atoms, the selections we own,
/// the transfers under way, timers, and error routes. Only ``X11Connection``'s thread touches it.
final class X11Session {
    let display: OpaquePointer
    let root: Window
    let window: Window
    let configuration: X11Configuration
    weak var delegate: (any X11SessionDelegate)?
    let chunkSize: Int
    private(set) var fixesEventBase: Int32 = -1

    private(set) var isDead = false
    private(set) var stopRequested = false

    // Atoms.
    private var atomsByName: [String: Atom] = [:]
    private var namesByAtom: [Atom: String] = [:]

    // Timers, by id.
    private var timers: [Int: (deadline: UInt64, action: () -> Void)] = [:]
    private var nextTimerID = 0

    // Error routes: a span of request serials and what to do with an error in it.
    private var errorRoutes: [(first: UInt, last: UInt, handler: (XErrorRecord) -> Void)] = []

    // Owner state.
    var owned: [Atom: OwnedSelection] = [:]
    var outgoing: [TransferKey: OutgoingState] = [:]
    var watchedRequestors: [Window: Int] = [:]
    /// Selections whose XFixes events we ask for.
    var watchedSelections: Set<Atom> = []
    /// Timestamps of our own ownership changes per selection, so that their XFixes events are
    /// recognised as ours and not counted twice.
    var ourChangeTimes: [Atom: [Time]] = [:]

    // Reader state.
    var conversions: [PendingConversion] = []
    var incoming: [Atom: IncomingState] = [:]
    var freeProperties: [Atom] = []
    var propertyCount = 0
    var timestampWaiters: [(Result<Time, any Error>) -> Void] = []
    var nextOperationID = 0

    /// Where file chunks are read before they are written to a property (chunkSize bytes, made
    /// on first use).
    private var scratch: UnsafeMutableRawBufferPointer?

    /// Hands a job to this session's own thread from any thread (set by the connection); false
    /// once the connection has stopped.
    var enqueue: (@Sendable (@escaping @Sendable (X11Session) -> Void) -> Bool)?
    /// Requests waiting for providers on a worker, with their deadline timers.
    var waitingForProviders: [Int: Int] = [:]

    /// The same-host fast path's listener, once this process owns something.
    var fastPath: FastPathServer?
    /// Descriptors besides the X connection that the loop polls, and what to do when one is ready.
    private(set) var descriptorHandlers: [Int32: () -> Void] = [:]

    /// Has the loop call `handler` whenever `fd` is readable.
    func watchDescriptor(_ fd: Int32, _ handler: @escaping () -> Void) { descriptorHandlers[fd] = handler }

    func unwatchDescriptor(_ fd: Int32) { descriptorHandlers.removeValue(forKey: fd) }

    /// The largest chunk we write by default: 1 MiB. Measured (Benchmarks/ceiling.c, 100 MB
    /// through one property on Xvfb) it moves data fastest: 132 ms, against 166 ms at 256 KiB and
    /// 161 ms at 3.9 MB. It also stays under what some readers fetch at once: xsel takes a chunk
    /// with one XGetWindowProperty of 1,000,000 units (4,000,000 bytes) and hangs on more.
    static let defaultChunkCap = 1 << 20

    init(display: OpaquePointer, configuration: X11Configuration, delegate: (any X11SessionDelegate)?) {
        self.display = display
        self.configuration = configuration
        self.delegate = delegate
        root = XDefaultRootWindow(display)
        window = XCreateSimpleWindow(display, root, -10, -10, 1, 1, 0, 0, 0)
        XSelectInput(display, window, PropertyChangeMask)
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
        // The atoms nearly every session uses, in one round trip instead of one each.
        _ = atoms(Self.commonAtoms)
        // Name our window so that `xpb info` and tools like xprop can tell who owns a selection.
        let title = "xpb"
        XStoreName(display, window, title)
        writeLongs(window, atom("_NET_WM_PID"), type: XA_CARDINAL_VALUE, [UInt(getpid())], onError: { _ in })
        XFlush(display)
    }

    deinit {
        scratch?.deallocate()
    }

    // MARK: Atoms

    static let commonAtoms = [
        "_NET_WM_PID", "CLIPBOARD", "PRIMARY", "TARGETS", "MULTIPLE", "TIMESTAMP", "SAVE_TARGETS", "INCR",
        "ATOM_PAIR", "NULL", "UTF8_STRING", "TEXT", "text/plain;charset=utf-8", "text/plain", Manifest.target,
        "XPB_SEL_1",
    ]

    /// The atom of a name, interned on first use.
    func atom(_ name: String) -> Atom {
        if let atom = atomsByName[name] { return atom }
        let atom = XInternAtom(display, name, 0)
        atomsByName[name] = atom
        namesByAtom[atom] = name
        return atom
    }

    /// The atoms of several names in one round trip.
    func atoms(_ names: [String]) -> [Atom] {
        let missing = Array(Set(names.filter { atomsByName[$0] == nil }))
        if !missing.isEmpty {
            var cStrings = missing.map { strdup($0) }
            defer { cStrings.forEach { free($0) } }
            var result = [Atom](repeating: 0, count: missing.count)
            let status = cStrings.withUnsafeMutableBufferPointer { buffer in
                XInternAtoms(display, buffer.baseAddress, Int32(missing.count), 0, &result)
            }
            if status != 0 {
                for (name, atom) in zip(missing, result) {
                    atomsByName[name] = atom
                    namesByAtom[atom] = name
                }
            } else {
                for name in missing { _ = atom(name) }
            }
        }
        return names.map { atomsByName[$0] ?? 0 }
    }

    /// The name of an atom, or nil for an atom the server does not know.
    func name(of atom: Atom) -> String? {
        names(of: [atom]).first ?? nil
    }

    /// The names of several atoms in one round trip; nil for atoms the server does not know.
    func names(of atoms: [Atom]) -> [String?] {
        let missing = Array(Set(atoms.filter { $0 != 0 && namesByAtom[$0] == nil }))
        if !missing.isEmpty {
            var pointers = [UnsafeMutablePointer<CChar>?](repeating: nil, count: missing.count)
            var copy = missing
            var failed = false
            routeErrors({
                if XGetAtomNames(display, &copy, Int32(missing.count), &pointers) == 0 { failed = true }
            }, onError: { _ in failed = true })
            if failed {
                // One bad atom fails the whole batch: ask one by one, so only the bad ones are lost.
                for atom in missing {
                    var pointer: UnsafeMutablePointer<CChar>? = nil
                    routeErrors({ pointer = XGetAtomName(display, atom) }, onError: { _ in })
                    if let pointer {
                        remember(atom, String(cString: pointer))
                        XFree(pointer)
                    }
                }
            } else {
                for (atom, pointer) in zip(missing, pointers) {
                    guard let pointer else { continue }
                    remember(atom, String(cString: pointer))
                    XFree(pointer)
                }
            }
        }
        return atoms.map { namesByAtom[$0] }
    }

    private func remember(_ atom: Atom, _ name: String) {
        namesByAtom[atom] = name
        atomsByName[name] = atom
    }

    // MARK: Errors

    /// Runs Xlib calls whose errors, when they arrive, go to `onError` instead of the log.
    /// Errors arrive asynchronously; the ones for calls that need an answer come before it.
    func routeErrors(_ body: () -> Void, onError: @escaping (XErrorRecord) -> Void) {
        let first = XNextRequest(display)
        body()
        let last = XNextRequest(display) &- 1
        if last >= first { errorRoutes.append((first, last, onError)) }
        collectErrors()
    }

    /// Routes the errors filed since the last call.
    func collectErrors() {
        for record in XErrorSink.take(display) {
            if let route = errorRoutes.last(where: { $0.first <= record.serial && record.serial <= $0.last }) {
                route.handler(record)
            }
        }
        let processed = XLastKnownRequestProcessed(display)
        errorRoutes.removeAll { $0.last < processed }
    }

    // MARK: Timers

    private static func nowNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Runs `action` on the X thread after `seconds`.
    @discardableResult
    func after(_ seconds: Double, _ action: @escaping () -> Void) -> Int {
        nextTimerID += 1
        let deadline = Self.nowNanoseconds() + UInt64(max(0, seconds) * 1e9)
        timers[nextTimerID] = (deadline, action)
        return nextTimerID
    }

    func cancelTimer(_ id: Int?) {
        if let id { timers.removeValue(forKey: id) }
    }

    /// Milliseconds until the next timer, or -1 (wait forever) when there is none.
    func nextTimerDelayMilliseconds() -> Int32 {
        guard let next = timers.values.map(\.deadline).min() else { return -1 }
        let now = Self.nowNanoseconds()
        guard next > now else { return 0 }
        return Int32(min((next - now + 999_999) / 1_000_000, 60_000))
    }

    private func fireDueTimers() {
        let now = Self.nowNanoseconds()
        let due = timers.filter { $0.value.deadline <= now }.sorted { $0.value.deadline < $1.value.deadline }
        for (id, timer) in due where timers.removeValue(forKey: id) != nil {
            timer.action()
        }
    }

    // MARK: The loop's work

    /// Whether Xlib holds events not yet handled.
    /// (XQLength reads Xlib's queue length; XEventsQueued, even with QueuedAlready, also tries a
    /// read of the connection in XCB-based Xlib: a system call per loop turn.)
    var hasQueuedEvents: Bool { !isDead && XQLength(display) > 0 }

    /// Handles everything the server sent, routes errors, fires due timers, flushes requests.
    func pump() {
        if checkDead() { return }
        // One read of the connection (XPending flushes, then reads what has arrived), then only
        // what Xlib has queued (events read while a handler waited for a reply): asking XPending
        // again would cost a read that finds nothing, on every wake-up. Anything that arrives
        // later makes poll() return at once.
        var queued = XPending(display)
        while queued > 0 {
            for _ in 0..<queued {
                var event = XEvent()
                XNextEvent(display, &event)
                dispatch(&event)
                collectErrors()
                if checkDead() { return }
            }
            queued = XQLength(display)
        }
        collectErrors()
        fireDueTimers()
        XFlush(display)
        _ = checkDead()
    }

    private func checkDead() -> Bool {
        if !isDead, XErrorSink.isDead(display) { isDead = true }
        return isDead
    }

    /// Asks the loop to stop after the current job.
    func requestStop() { stopRequested = true }

    /// Fails every pending operation and closes the display.
    func finish(reason: X11BackendError) {
        let failure: any Error = reason
        for conversion in conversions { conversion.completion(.failure(failure)) }
        conversions.removeAll()
        for (_, state) in incoming { state.completion(.failure(failure)) }
        incoming.removeAll()
        for waiter in timestampWaiters { waiter(.failure(failure)) }
        timestampWaiters.removeAll()
        outgoing.removeAll()
        owned.removeAll()
        closeFastPath()
        timers.removeAll()
        if !isDead {
            XDestroyWindow(display, window)
            XCloseDisplay(display)
        }
        // A dead display is left open: its memory is small and Xlib's state after an I/O error is
        // not safe to tear down from here.
        XErrorSink.forget(display)
    }

    private func dispatch(_ event: inout XEvent) {
        switch event.type {
        case SelectionRequest:
            handleSelectionRequest(event.xselectionrequest)
        case SelectionNotify:
            handleSelectionNotify(event.xselection)
        case SelectionClear:
            handleSelectionClear(event.xselectionclear)
        case PropertyNotify:
            handlePropertyNotify(event.xproperty)
        case DestroyNotify:
            handleRequestorGone(event.xdestroywindow.window)
        default:
            if fixesEventBase >= 0, event.type == fixesEventBase + XFixesSelectionNotify {
                let fixes = cx11_fixes_selection_event(&event)
                handleFixesSelection(fixes)
            }
        }
    }

    private func handlePropertyNotify(_ event: XPropertyEvent) {
        if event.window == window {
            if event.atom == atom("XPB_TIMESTAMP"), event.state == PropertyNewValue {
                if !timestampWaiters.isEmpty { timestampWaiters.removeFirst()(.success(event.time)) }
                return
            }
            if event.state == PropertyNewValue { continueIncoming(property: event.atom) }
        } else if event.state == PropertyDelete {
            continueOutgoing(TransferKey(requestor: event.window, property: event.atom))
        }
    }

    private func handleFixesSelection(_ event: XFixesSelectionNotifyEvent) {
        let isOurs = (event.owner == window || event.owner == 0)
            && consumeOurChange(event.selection, at: event.selection_timestamp)
        delegate?.selectionOwnerChanged(
            selection: event.selection, owner: event.owner, timestamp: event.selection_timestamp, isOurs: isOurs, session: self)
    }

    /// Whether an ownership change at `time` was ours (each of ours is recognised once).
    func consumeOurChange(_ selection: Atom, at time: Time) -> Bool {
        guard let index = ourChangeTimes[selection]?.firstIndex(of: time) else { return false }
        ourChangeTimes[selection]?.remove(at: index)
        return true
    }

    /// Asks XFixes for owner changes of a selection (once per selection).
    func watch(_ selection: Atom) {
        guard fixesEventBase >= 0, watchedSelections.insert(selection).inserted else { return }
        XFixesSelectSelectionInput(display, root, selection,
                                   UInt(XFixesSetSelectionOwnerNotifyMask | XFixesSelectionWindowDestroyNotifyMask | XFixesSelectionClientCloseNotifyMask))
    }

    /// A fresh server timestamp: a zero-length append to a property of our window, whose
    /// PropertyNotify carries the server's time (ICCCM §2.1; never CurrentTime).
    func serverTime(_ completion: @escaping (Result<Time, any Error>) -> Void) {
        timestampWaiters.append(completion)
        var nothing: UInt8 = 0
        XChangeProperty(display, window, atom("XPB_TIMESTAMP"), Atom(XA_INTEGER_VALUE), 8, PropModeAppend, &nothing, 0)
        XFlush(display)
        let deadline = configuration.readTimeout
        after(deadline) { [weak self] in
            guard let self, !self.timestampWaiters.isEmpty else { return }
            // The oldest waiter is the late one: the server answers appends in order.
            self.timestampWaiters.removeFirst()(.failure(PasteboardError.timedOut(operation: "getting a server timestamp", seconds: deadline)))
        }
    }

    // MARK: Properties

    /// Reads a whole property, handing its bytes (format 32 packed as 32-bit units) to `body`
    /// without an intermediate copy; nil when the property does not exist.
    func readProperty<T>(_ window: Window, _ property: Atom, delete: Bool,
                         _ body: (Atom, Int32, UnsafeRawBufferPointer) throws -> T) rethrows -> T? {
        var type: Atom = 0
        var format: Int32 = 0
        var count: UInt = 0
        var after: UInt = 0
        var pointer: UnsafeMutablePointer<UInt8>? = nil
        var failed = false
        routeErrors({
            let status = XGetWindowProperty(display, window, property, 0, 0x1FFF_FFFF, delete ? 1 : 0, 0,
                                            &type, &format, &count, &after, &pointer)
            failed = status != 0
        }, onError: { _ in failed = true })
        defer { if let pointer { XFree(pointer) } }
        guard !failed, type != 0 else { return nil }
        guard let pointer else { return try body(type, format, UnsafeRawBufferPointer(start: nil, count: 0)) }
        switch format {
        case 16:
            return try body(type, format, UnsafeRawBufferPointer(start: pointer, count: Int(count) * 2))
        case 32:
            // Xlib hands format-32 data over as C longs (8 bytes here): pack to 32-bit units.
            let longs = UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt.self)
            var packed = [UInt32](repeating: 0, count: Int(count))
            for index in 0..<Int(count) { packed[index] = UInt32(truncatingIfNeeded: longs[index]) }
            return try packed.withUnsafeBytes { try body(type, format, $0) }
        default:
            return try body(type, format, UnsafeRawBufferPointer(start: pointer, count: Int(count)))
        }
    }

    /// Reads a whole property into a value.
    func readProperty(_ window: Window, _ property: Atom, delete: Bool) -> PropertyValue? {
        readProperty(window, property, delete: delete) { type, format, bytes in
            PropertyValue(type: type, format: format, data: Data(bytes))
        }
    }

    /// Writes a format-32 property from values (as Xlib wants them: C longs).
    func writeLongs(_ window: Window, _ property: Atom, type: Atom, _ values: [UInt], onError: @escaping (XErrorRecord) -> Void) {
        var longs = values
        routeErrors({
            longs.withUnsafeMutableBytes { buffer in
                _ = XChangeProperty(display, window, property, type, 32, PropModeReplace,
                                    buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(values.count))
            }
        }, onError: onError)
    }

    /// Writes a format-8 property.
    func writeBytes(_ window: Window, _ property: Atom, type: Atom, _ data: Data, onError: @escaping (XErrorRecord) -> Void) {
        data.withUnsafeBytes { writeBytes(window, property, type: type, $0, onError: onError) }
    }

    func writeBytes(_ window: Window, _ property: Atom, type: Atom, _ bytes: UnsafeRawBufferPointer, onError: @escaping (XErrorRecord) -> Void) {
        routeErrors({
            _ = XChangeProperty(display, window, property, type, 8, PropModeReplace,
                                bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(bytes.count))
        }, onError: onError)
    }

    /// Writes bytes `range` of `source` (a chunk at most) to a property, reading a file into the
    /// session's one scratch buffer: no allocation per chunk or per small conversion.
    func writeBytes(_ window: Window, _ property: Atom, type: Atom, from source: TransferSource, range: Range<Int>,
                    onError: @escaping (XErrorRecord) -> Void) throws {
        if scratch == nil { scratch = .allocate(byteCount: chunkSize, alignment: 16) }
        try source.withBytes(offset: range.lowerBound, length: range.count, scratch: scratch!) {
            writeBytes(window, property, type: type, $0, onError: onError)
        }
    }

    /// A new operation id.
    func makeOperationID() -> Int {
        nextOperationID += 1
        return nextOperationID
    }
}

/// Xatom's constants are casts (`((Atom) 4)`), which Swift does not import.
let XA_ATOM_VALUE: UInt = 4
let XA_CARDINAL_VALUE: UInt = 6
let XA_INTEGER_VALUE: UInt = 19
let XA_STRING_VALUE: UInt = 31
let XA_WINDOW_VALUE: UInt = 33
