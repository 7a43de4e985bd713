internal import CX11
internal import CXEvents
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections

/// The wire to the X server: the display, our window, the atoms, and the Xlib call layer. Every
/// call that takes or gives atoms, windows and timestamps goes through here, wrapping and
/// unwrapping the typed handles; errors are routed by request serial; the events XCB reads
/// while a round trip waits are kept in the intake for the loop. It decides nothing: the loop
/// (``X11Session``) and its parts call it, on the X thread alone.
final class X11Wire {
    let display: OpaquePointer
    let root: X11Window
    /// Our window: the owner of our selections, and where server timestamps come.
    let window: X11Window
    /// The most bytes written to a property at once.
    let chunkSize: Int
    /// The names of the properties our conversions' replies go to: `XPB_SEL_<client>_<n>`, the
    /// client being our slot on the server (our window's resource base; the server hands slots
    /// out again, so the names are few). Every client's are its own: xsel finds an INCR transfer
    /// by its property's name alone, so two readers of one name (xpbd keeping a copy while xpb
    /// pastes it) drove each other's transfers, and one of them waited for good.
    let conversionPropertyPrefix: String
    /// XFixes' first event code, or -1 without XFixes.
    let fixesEventBase: Int32
    /// The thread that runs the loop, once it has started.
    var thread: pthread_t?
    /// The atoms the backend speaks by name.
    let known: WellKnownAtoms
    // Atoms by name and names by atom, as interned or looked up so far.
    private var atomsByName: [String: X11Atom] = [:]
    private var namesByAtom: [X11Atom: String] = [:]
    /// Error routes: a span of request serials and what to do with an error in it.
    private var errorRoutes: [ErrorRoute] = []
    /// Whether collectErrors is under way (a route's handler may call it again).
    private var collectingErrors = false
    /// The last request ``flush()`` handed to the server. A routed request after it (and after
    /// the last round trip) is still in Xlib's buffer: it cannot have failed yet, and asking XCB
    /// for its error would only read the connection in vain (a conversion answered made two such
    /// reads before its answer went out).
    private var flushedThrough: UInt = 0
    /// Errors of requests without a reply, which come with the events: collectErrors routes them.
    private(set) var wireErrors: [XErrorRecord] = []
    /// Events XCB read while a round trip waited, not handled yet.
    var intake = EventIntake()
    /// Where file chunks are read before they are written to a property (chunkSize bytes, made
    /// on first use).
    private var scratch: UnsafeMutableRawBufferPointer?
    /// The look-up of the clipboard manager's window sent right after the atoms' answer, its
    /// answer not taken yet (``takeManagerAtStart(stale:)``): a connection that may own asks it as
    /// it opens, so that its first change of a selection follows the manager's count without a
    /// round trip of its own.
    private var managerLookUp: UInt32?

    /// The largest chunk we write by default: 1 MiB. Measured (Benchmarks/ceiling.c, 100 MB
    /// through one property on Xvfb) it moves data fastest: 132 ms, against 166 ms at 256 KiB and
    /// 161 ms at 3.9 MB. It also stays under what some readers fetch at once: xsel takes a chunk
    /// with one XGetWindowProperty of 1,000,000 units (4,000,000 bytes) and hangs on more.
    static let defaultChunkCap = 1 << 20

    init(display: OpaquePointer, configuration: X11Configuration) {
        self.display = display
        root = X11Window(rawValue: XDefaultRootWindow(display))
        window = X11Window(rawValue: XCreateSimpleWindow(display, root.rawValue, -10, -10, 1, 1, 0, 0, 0))
        // A slot's resource ids share the bits above the 18 lowest (2,048 clients at most).
        conversionPropertyPrefix = "XPB_SEL_\(String(UInt(window.rawValue) >> 18, radix: 16))_"
        XSelectInput(display, window.rawValue, PropertyChangeMask)
        // Name our window so that `xpb info` and tools like xprop can tell who owns a selection.
        // `WM_NAME` is a predefined atom, so the name goes out with the atoms' round trip below,
        // and its `PropertyNotify` (the connection's start time, ``X11Session/ownershipTime(_:)``)
        // comes back with their answer.
        XStoreName(display, window.rawValue, configuration.windowName)
        let bigRequest = XExtendedMaxRequestSize(display)
        let maxRequestBytes = (bigRequest > 0 ? bigRequest : XMaxRequestSize(display)) * 4
        chunkSize = configuration.chunkSize ?? max(4096, min(maxRequestBytes - 1024, Self.defaultChunkCap))
        var eventBase: Int32 = 0
        var errorBase: Int32 = 0
        // Two round trips, for owner changes: a one-shot read needs none.
        if configuration.watchesOwnerChanges, XFixesQueryExtension(display, &eventBase, &errorBase) != 0 {
            var major: Int32 = 5
            var minor: Int32 = 0
            _ = XFixesQueryVersion(display, &major, &minor)
            fixesEventBase = eventBase
        } else {
            fixesEventBase = -1
        }
        // The well-known atoms (and our first conversion property and our guess's, and what a
        // copy of text names) in one round trip.
        let names = WellKnown.allCases.map(\.rawValue) + [conversionPropertyPrefix + "1", conversionPropertyPrefix + "G"] + Self.prefetchedNames
        let interned = Self.internAtoms(display, names)
        atomsByName.reserveCapacity(64)
        namesByAtom.reserveCapacity(64)
        known = WellKnownAtoms(Array(interned.prefix(WellKnown.allCases.count)))
        for (name, atom) in zip(names, interned) where !atom.isNone { remember(atom, name) }
        if !configuration.exitsAfterClose {
            managerLookUp = cxevents_selection_owner_request(UnsafeMutableRawPointer(display), UInt32(truncatingIfNeeded: known[.clipboardManager].rawValue))
        }
        writeLongs(window, known[.netWMPID], type: .cardinal, [UInt(getpid())], onError: { _ in })
        flush()
    }

    deinit {
        scratch?.deallocate()
    }

    /// Stops in debug builds when called from a thread other than the X thread.
    func assertOnXThread(_ function: StaticString = #function) {
        assert(thread.map { pthread_equal($0, pthread_self()) != 0 } ?? true, "\(function) called off the X thread")
    }

    /// The clipboard manager's window as the connection opened (its look-up sent right after the
    /// atoms' answer), once: nil when it was not asked, was taken already, or got no answer. With
    /// `stale`, the answer is dropped unread, and nil.
    func takeManagerAtStart(stale: Bool) -> X11Window? {
        guard let sequence = managerLookUp else { return nil }
        managerLookUp = nil
        if stale || isDead {
            if !isDead { cxevents_discard_reply(UnsafeMutableRawPointer(display), sequence) }
            return nil
        }
        var answered: Int32 = 0
        let owner = cxevents_selection_owner_reply(UnsafeMutableRawPointer(display), sequence, &answered)
        return answered != 0 ? X11Window(rawValue: UInt(owner)) : nil
    }

    /// Whether the connection died (an I/O error: nothing more may be sent).
    var isDead: Bool { XErrorSink.isDead(display) }

    /// The resource id base of `window`'s client: the same for every window of one client.
    func clientBase(of window: X11Window) -> UInt {
        window.rawValue & ~UInt(cxevents_resource_mask(UnsafeMutableRawPointer(display)))
    }

    /// The process id of `window`'s client as the X-Resource extension gives it (a client of this
    /// host's server), else nil. Two round trips.
    func clientProcessID(of window: X11Window) -> Int? {
        let pid = cx11_client_pid(display, window.rawValue)
        return pid > 0 ? Int(pid) : nil
    }

    /// Whether two windows belong to one client: the server gives every client its own range of
    /// ids, the bits outside its resource mask (a reader may ask from a window of each conversion,
    /// a toolkit from another of its windows than the one that owns a selection).
    func isSameClient(_ a: X11Window, _ b: X11Window) -> Bool {
        let mask = UInt(cxevents_resource_mask(UnsafeMutableRawPointer(display)))
        return a.rawValue & ~mask == b.rawValue & ~mask
    }

    /// Destroys `windows` and ours, and closes the display (not after an I/O error: Xlib's state
    /// then is not safe to tear down, and its memory is small).
    ///
    /// `beforeExit`: the process ends right after, so the requests written are flushed and the
    /// socket closed, without `XCloseDisplay`'s round trip (the server carries out what it was
    /// sent before it sees the connection end, and destroys the windows itself) and without
    /// freeing what the exit frees.
    func close(destroying windows: [X11Window], connectionAlive: Bool, beforeExit: Bool = false) {
        if connectionAlive, beforeExit {
            XFlush(display)
            Glibc.shutdown(XConnectionNumber(display), Int32(SHUT_RDWR))
        } else if connectionAlive {
            for window in windows { XDestroyWindow(display, window.rawValue) }
            XDestroyWindow(display, window.rawValue)
            XCloseDisplay(display)
        }
        XErrorSink.forget(display)
    }

    // MARK: Atoms

    /// Names most connections use past the well-known ones, interned with them at no extra round
    /// trip: the targets text is served under, the first item target of the manifest, and who
    /// made the copy of each selection (``creditProperty(_:)``). An owner of one text item then
    /// interns nothing when it takes a selection.
    ///
    /// Written out (every connection's start read it, and working it out from the type registry
    /// was 4 % of a paste's instructions); ``derivedPrefetchedNames()`` says what it must be, and
    /// a test holds the two equal.
    static let prefetchedNames = ["text/plain;charset=utf-8", "text/plain", "STRING", "TEXT", "XPB_ITEM_0_0",
                                  "_XPB_COPIED_BY_CLIPBOARD", "_XPB_COPIED_BY_PRIMARY"]

    /// What ``prefetchedNames`` lists, from the tables it is made of: the registry's targets for
    /// text, the manifest's first item target and the two credit properties, less the well-known
    /// names, each once.
    static func derivedPrefetchedNames() -> [String] {
        var names = TypeRegistry.standard.servedTargets(for: .utf8PlainText).map(\.name)
        names += [Manifest.itemTarget(item: 0, index: 0)] + [WellKnown.clipboard, .primary].map { creditPropertyPrefix + $0.rawValue }
        let known = Set(WellKnown.allCases.map(\.rawValue))
        var seen = Set<String>()
        return names.filter { !known.contains($0) && seen.insert($0).inserted }
    }

    /// Interns several names in one round trip, through XCB (every request before the first
    /// reply; Xlib's `XInternAtoms` took 3,300 instructions a name, callgrind); a failed batch
    /// falls back to one call per name.
    static func internAtoms(_ display: OpaquePointer, _ names: [String]) -> [X11Atom] {
        guard !names.isEmpty else { return [] }
        // The names back to back, each ended by its NUL: one buffer, not a C string per name
        // (those were a third of the connection's atoms' instructions). A name is cut at a NUL
        // of its own, as its C string was: the next name must start where the C side looks.
        var packed: [UInt8] = []
        packed.reserveCapacity(names.reduce(names.count) { $0 + $1.utf8.count })
        for var name in names {
            name.withUTF8 { bytes in packed.append(contentsOf: bytes[..<(bytes.firstIndex(of: 0) ?? bytes.count)]) }
            packed.append(0)
        }
        var result = [UInt32](repeating: 0, count: names.count)
        let complete = packed.withUnsafeBytes { buffer in
            cxevents_intern_atoms(UnsafeMutableRawPointer(display), buffer.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(names.count), 0, &result)
        }
        if complete == 0 {
            for (index, name) in names.enumerated() where result[index] == 0 { result[index] = UInt32(truncatingIfNeeded: XInternAtom(display, name, 0)) }
        }
        return result.map { X11Atom(rawValue: UInt($0)) }
    }

    /// The atom of a name, interned on first use.
    func atom(_ name: String) -> X11Atom {
        intern(name, onlyIfExists: false)
    }

    /// The atom of a name, from the cache or the server (which makes it unless `onlyIfExists`;
    /// then None for a name it does not know, not cached).
    private func intern(_ name: String, onlyIfExists: Bool) -> X11Atom {
        if let atom = atomsByName[name] { return atom }
        let atom = X11Atom(rawValue: XInternAtom(display, name, onlyIfExists ? 1 : 0))
        if !atom.isNone { remember(atom, name) }
        return atom
    }

    /// The atoms of several names in one round trip.
    func atoms(_ names: [String]) -> [X11Atom] {
        let missing = Array(Set(names.filter { atomsByName[$0] == nil }))
        for (name, atom) in zip(missing, Self.internAtoms(display, missing)) { remember(atom, name) }
        return names.map { atomsByName[$0] ?? .none }
    }

    /// Our guess property (``SpeculativeRead``): `XPB_SEL_<client>_G`, our client's own, as the
    /// conversion properties are.
    var guessProperty: X11Atom { atom(conversionPropertyPrefix + "G") }

    /// Whether a request's property is an xpb reader's guess: any client's `XPB_SEL_<client>_G`,
    /// or `XPB_GUESS` (the one name of earlier versions). A name not cached costs a round trip
    /// (once: then it is).
    func isGuessProperty(_ property: X11Atom) -> Bool {
        if property == known[.guess] { return true }
        guard let name = name(of: property) else { return false }
        return name.hasPrefix("XPB_SEL_") && name.hasSuffix("_G")
    }

    /// The name of an atom, or nil for an atom the server does not know.
    func name(of atom: X11Atom) -> String? {
        // Asked per conversion served (``isGuessProperty(_:)``): a cached name costs one look-up.
        if let cached = namesByAtom[atom] { return cached }
        return names(of: [atom]).first ?? nil
    }

    /// The names of several atoms, in one round trip when all exist; nil for atoms the server
    /// does not know. One unknown atom fails a whole batch (`BadAtom`): the batch is then split
    /// in halves, so k unknown atoms among n cost about 2k·log n round trips, not n.
    func names(of atoms: [X11Atom]) -> [String?] {
        let missing = Array(Set(atoms.filter { !$0.isNone && namesByAtom[$0] == nil }))
        if !missing.isEmpty {
            // A hostile owner's lists must not grow the cache without bound.
            if namesByAtom.count + missing.count > Self.maxCachedNames { forgetCachedNames() }
            var resolved: [(X11Atom, String)] = []
            lookUpNames(missing[...], into: &resolved)
            for (atom, name) in resolved { remember(atom, name) }
        }
        return atoms.map { namesByAtom[$0] }
    }

    /// The most atom names cached; past it the cache starts again from the well-known atoms.
    static let maxCachedNames = 8192

    private func forgetCachedNames() {
        let kept = Set(known.all)
        namesByAtom = namesByAtom.filter { kept.contains($0.key) || $0.value.hasPrefix("XPB_") }
        atomsByName = Dictionary(namesByAtom.map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }

    private func lookUpNames(_ batch: ArraySlice<X11Atom>, into resolved: inout [(X11Atom, String)]) {
        var pointers = [UnsafeMutablePointer<CChar>?](repeating: nil, count: batch.count)
        var raw = batch.map(\.rawValue)
        var failed = false
        routeErrors({
            if XGetAtomNames(display, &raw, Int32(batch.count), &pointers) == 0 { failed = true }
        }, onError: { _ in failed = true })
        if !failed {
            for (atom, pointer) in zip(batch, pointers) {
                guard let pointer else { continue }
                resolved.append((atom, String(cString: pointer)))
                XFree(pointer)
            }
            return
        }
        for pointer in pointers { if let pointer { XFree(pointer) } }
        guard batch.count > 1 else { return }
        let middle = batch.startIndex + batch.count / 2
        lookUpNames(batch[..<middle], into: &resolved)
        lookUpNames(batch[middle...], into: &resolved)
    }

    /// The atom of a name only if the server already knows it (no atom is made: names that come
    /// from other clients, such as fast-path requests, must not grow the server's atom table).
    func existingAtom(_ name: String) -> X11Atom? {
        let atom = intern(name, onlyIfExists: true)
        return atom.isNone ? nil : atom
    }

    func remember(_ atom: X11Atom, _ name: String) {
        namesByAtom[atom] = name
        atomsByName[name] = atom
    }

    /// The window property that names who made the copy of `selection` we own
    /// (``CopyCredit``): `_XPB_COPIED_BY_<SELECTION>`.
    func creditProperty(_ selection: X11Atom) -> X11Atom? {
        name(of: selection).map { atom(Self.creditPropertyPrefix + $0) }
    }

    /// What ``creditProperty(_:)``'s names begin with; the selection's name follows.
    static let creditPropertyPrefix = "_XPB_COPIED_BY_"

    // MARK: Errors

    /// Runs Xlib calls whose errors, when they arrive, go to `onError` instead of the log.
    /// Errors arrive asynchronously; the ones for calls that need an answer come before it.
    func routeErrors(_ body: () -> Void, onError: @escaping (XErrorRecord) -> Void) {
        assertOnXThread()
        let first = XNextRequest(display)
        body()
        let last = XNextRequest(display) &- 1
        if last >= first { errorRoutes.append(ErrorRoute(first: first, last: last, next: first, handler: onError)) }
        collectErrors()
    }

    /// Routes the errors that have come in: those XCB keeps for the routed requests, asked for
    /// one request at a time, oldest first, as far as XCB has read the server's answers (a route
    /// is done once each of its requests is); those Xlib handed its error handler (a request with
    /// a reply fails as it is read, others at Xlib's next round trip); and those read with the
    /// events. Asking XCB may read the connection, so the events read go to the intake last.
    ///
    /// A route is retired only after the errors filed elsewhere were matched against it: Xlib's
    /// round trips take the errors of every request sent before them (`_XReply` waits for each
    /// in turn), so XCB then reports the route's requests complete with no error, and the error
    /// is in Xlib's handler's records. Retired first, the route would have lost it: a requestor
    /// window gone before the server took our watch of it would have been reported by no error we
    /// saw, and its INCR send would have waited out the serve timeout.
    func collectErrors() {
        // A handler may route more requests and collect again: the outer call goes on with them.
        guard !collectingErrors else { return routeFiledErrors() }
        collectingErrors = true
        defer { collectingErrors = false }
        pollRoutedErrors()
        routeFiledErrors()
        var done = 0
        while done < errorRoutes.count, errorRoutes[done].next > errorRoutes[done].last { done += 1 }
        if done > 0 { errorRoutes.removeFirst(done) }
    }

    /// The errors Xlib's handler filed and those read with the events, each to its route (the
    /// routes whose requests are all complete included), until no more come in (a handler's own
    /// requests may make Xlib read more).
    private func routeFiledErrors() {
        while true {
            absorbQueuedEvents()
            var records = XErrorSink.take(display)
            if !wireErrors.isEmpty {
                records += wireErrors
                wireErrors.removeAll()
            }
            guard !records.isEmpty else { return }
            for record in records {
                if let route = errorRoutes.last(where: { $0.first <= record.serial && record.serial <= $0.last }) {
                    route.handler(record)
                }
            }
        }
    }

    private func pollRoutedErrors() {
        // Routes are in the order of their requests: the first one not sent ends the polling.
        let sent = max(flushedThrough, XLastKnownRequestProcessed(display))
        var index = 0
        polling: while index < errorRoutes.count {
            while errorRoutes[index].next <= errorRoutes[index].last {
                let serial = errorRoutes[index].next
                if serial > sent { break polling }
                var event = WireEvent()
                let answer = cxevents_poll_error(UnsafeMutableRawPointer(display), serial, &event)
                // Not read yet, nor anything after it.
                if answer == 0 { break polling }
                errorRoutes[index].next = serial + 1
                if answer == 2 {
                    errorRoutes[index].handler(XErrorRecord(serial: serial, errorCode: event.detail, requestCode: event.major,
                                                            minorCode: UInt8(truncatingIfNeeded: event.minor), resource: UInt(event.window)))
                }
            }
            index += 1
        }
    }

    /// Hands Xlib's buffered requests to the server. Every flush of the X thread goes through it,
    /// so that ``collectErrors()`` knows which routed requests can have failed.
    func flush() {
        XFlush(display)
        flushedThrough = XNextRequest(display) &- 1
    }

    // MARK: Events read on the way

    /// Moves the events XCB read while a round trip waited into the intake (no read of the
    /// connection), and files the errors among them.
    func absorbQueuedEvents() {
        while let event = takeFromXCB(reading: false) { intake.append(event) }
    }

    /// A flooder whose conversion requests are dropped as they come out of XCB, unseen (no
    /// decoding, no dispatch), and how many were. The event loop sets it for one turn to the
    /// window the owner's scheduler drops every request of, and hands the count back to the
    /// scheduler at the turn's end. It ends at that window's destruction: the window's id may
    /// then be another client's.
    struct FloodSkip {
        var window: X11Window = .none
        var skipped = 0
    }

    var floodSkip = FloodSkip()

    /// XCB's next event: one it has read already, else (`reading`) one from a read of the
    /// connection. Errors met on the way are filed for collectErrors; a failed connection is
    /// marked dead. Conversion requests of ``floodSkip``'s window are dropped on the way, at most
    /// `skipLimit` of them (then it returns nil).
    func takeFromXCB(reading: Bool, skipLimit: Int = Int(Int32.max)) -> WireEvent? {
        var event = WireEvent()
        var count: Int32 = 0
        defer { floodSkip.skipped += Int(count) }
        while true {
            let requestor = UInt32(truncatingIfNeeded: floodSkip.window.rawValue)
            switch cxevents_next(UnsafeMutableRawPointer(display), reading ? 1 : 0, fixesEventBase, requestor,
                                 Int32(clamping: skipLimit), &count, &event) {
            case 1:
                if event.kind == 0 {
                    fileWireError(event)
                    continue
                }
                if Int32(event.kind) == DestroyNotify, event.sent == 0, UInt(event.window) == floodSkip.window.rawValue,
                   !floodSkip.window.isNone {
                    floodSkip.window = .none
                }
                return event
            case 0:
                return nil
            default:
                XErrorSink.markDead(display)
                return nil
            }
        }
    }

    private func fileWireError(_ event: WireEvent) {
        wireErrors.append(XErrorRecord(serial: serial(ofSequence: event.sequence), errorCode: event.detail,
                                       requestCode: event.major, minorCode: UInt8(truncatingIfNeeded: event.minor),
                                       resource: UInt(event.window)))
    }

    /// The full serial of a request whose low 32 bits the server reported: the latest serial sent
    /// that ends in them (the server cannot speak of a request it was not sent yet).
    func serial(ofSequence sequence: UInt32) -> UInt {
        let last = XNextRequest(display) &- 1
        let serial = (last & ~UInt(UInt32.max)) | UInt(sequence)
        return serial > last && serial > UInt(UInt32.max) ? serial - (UInt(UInt32.max) + 1) : serial
    }

    /// Whether an event is XFixes' news of a selection's owner.
    func isFixesSelectionEvent(_ event: WireEvent) -> Bool {
        fixesEventBase >= 0 && Int32(event.kind) == fixesEventBase + XFixesSelectionNotify
    }

    // MARK: Selections

    /// The owner of a selection (``X11Window/none`` when nobody owns it).
    func selectionOwner(_ selection: X11Atom) -> X11Window {
        X11Window(rawValue: XGetSelectionOwner(display, selection.rawValue))
    }

    /// Sets (or, with ``X11Window/none``, clears) the owner of a selection as of `time`.
    func setSelectionOwner(_ selection: X11Atom, _ owner: X11Window, at time: X11Timestamp) {
        XSetSelectionOwner(display, selection.rawValue, owner.rawValue, time.rawValue)
    }

    /// Runs `body` with the server grabbed: no other client's request is processed meanwhile,
    /// so a look at a selection's owner and a change of it are one step (compare-and-own). The
    /// body must only talk to the server, never wait for another client.
    func withServerGrabbed<T>(_ body: () -> T) -> T {
        XGrabServer(display)
        defer {
            XUngrabServer(display)
            flush()
        }
        return body()
    }

    /// Asks the owner of `selection` to convert it to `target` into `property` of `requestor`
    /// (by default our window).
    func requestConversion(_ selection: X11Atom, to target: X11Atom, property: X11Atom, requestor: X11Window? = nil, at time: X11Timestamp) {
        XConvertSelection(display, selection.rawValue, target.rawValue, property.rawValue, (requestor ?? window).rawValue, time.rawValue)
    }

    /// Tells a requestor how its conversion went (`SelectionNotify`; property None for a refusal).
    func sendSelectionNotify(to requestor: X11Window, selection: X11Atom, target: X11Atom, property: X11Atom, time: X11Timestamp) {
        var message = cx11_selection_notify(display, requestor.rawValue, selection.rawValue, target.rawValue, property.rawValue, time.rawValue)
        // Unrouted: an error (the requestor vanished) has nothing to change, and a flood of
        // refusals must cost no bookkeeping.
        _ = XSendEvent(display, requestor.rawValue, 0, 0, &message)
    }

    /// Asks for events of another client's window; false when the window is gone.
    @discardableResult
    func selectInput(_ window: X11Window, _ mask: Int) -> Bool {
        var failed = false
        routeErrors({ XSelectInput(display, window.rawValue, mask) }, onError: { _ in failed = true })
        return !failed
    }

    // MARK: Windows

    /// Whether a window exists now (one round trip).
    func windowExists(_ window: X11Window) -> Bool {
        var failed = false
        routeErrors({
            var attributes = XWindowAttributes()
            if XGetWindowAttributes(display, window.rawValue, &attributes) == 0 { failed = true }
        }, onError: { _ in failed = true })
        XSync(display, 0)
        return !failed
    }

    /// Whether a pointer button is held now (a selection may still be being dragged).
    func isPointerButtonHeld() -> Bool {
        var rootReturn: UInt = 0
        var childReturn: UInt = 0
        var rootX: Int32 = 0, rootY: Int32 = 0, windowX: Int32 = 0, windowY: Int32 = 0
        var mask: UInt32 = 0
        guard XQueryPointer(display, root.rawValue, &rootReturn, &childReturn, &rootX, &rootY, &windowX, &windowY, &mask) != 0 else {
            return false
        }
        return mask & UInt32(Button1Mask | Button2Mask | Button3Mask) != 0
    }

    // MARK: Properties

    /// The bytes one `XGetWindowProperty` asks for: properties are read in pieces of this size
    /// (Xlib cannot take a reply of hundreds of megabytes in one piece).
    static let propertyPiece = 4 << 20

    /// Reads a property, handing its bytes (format 32 packed as 32-bit units) to `body`; nil when
    /// the property does not exist. A property that fits in one piece is passed without a copy.
    ///
    /// - Parameters:
    ///   - limit: the most bytes accepted (format 32 counted as 4 per value).
    ///   - truncate: past `limit`, pass only the first `limit` bytes instead of failing.
    /// - Throws: ``PasteboardError/backendFailure(_:)`` when the property is larger than `limit`
    ///   (without `truncate`), or the server fails a read part way.
    func readProperty<T>(_ window: X11Window, _ property: X11Atom, delete: Bool, limit: Int = .max, truncate: Bool = false,
                         _ body: (X11Atom, Int32, GatheredBytes) throws -> T) throws -> T? {
        let pieceUnits = min(Self.propertyPiece, max(limit, 4)) / 4
        var piece = PropertyPiece()
        // Asked to delete, the server deletes the property with this read when it is read whole
        // (and only then): no DeleteProperty request of its own.
        guard piece.fetch(self, window, property, offsetUnits: 0, units: pieceUnits, delete: delete) else { return nil }
        defer { piece.release() }
        guard piece.type != 0 else { return nil }
        let atom = X11Atom(rawValue: piece.type)
        let total = piece.byteCount + Int(piece.after)
        if piece.after == 0 || (truncate && piece.byteCount >= limit) {
            if delete, piece.after != 0 { deleteProperty(window, property) }
            return try piece.withPacked { bytes in
                try body(atom, piece.format, GatheredBytes(UnsafeRawBufferPointer(rebasing: bytes.prefix(truncate ? limit : bytes.count))))
            }
        }
        guard total <= limit || truncate else { throw PropertyTooLarge(size: total, limit: limit) }
        // Several pieces, gathered into one buffer.
        let wanted = min(total, limit)
        var gathered = Data(capacity: wanted)
        let format = piece.format
        piece.withPacked { gathered.append(contentsOf: $0) }
        while gathered.count < wanted {
            piece.release()
            guard piece.fetch(self, window, property, offsetUnits: gathered.count / 4, units: pieceUnits), piece.type == atom.rawValue,
                  piece.byteCount > 0 else {
                throw PasteboardError.backendFailure("the selection owner's reply (\(total) bytes) changed or vanished while it was read")
            }
            piece.withPacked { gathered.append(contentsOf: $0.prefix(wanted - gathered.count)) }
        }
        if delete { deleteProperty(window, property) }
        return try body(atom, format, GatheredBytes(gathered))
    }

    /// Reads a whole property into a value (a property read in pieces is not copied again).
    func readProperty(_ window: X11Window, _ property: X11Atom, delete: Bool, limit: Int = .max, truncate: Bool = false) throws -> PropertyValue? {
        try readProperty(window, property, delete: delete, limit: limit, truncate: truncate) { type, format, bytes in
            PropertyValue(type: type, format: format, data: bytes.data)
        }
    }

    /// Asks for a format-32 CARDINAL property of at most `maxValues` values without waiting for
    /// its answer (``takeCardinals(_:)``): the read takes its place among the requests before the
    /// ones sent after it, at no round trip of its own.
    func requestCardinals(_ window: X11Window, _ property: X11Atom, maxValues: Int) -> PendingRead {
        PendingRead(sequence: cxevents_property_request(UnsafeMutableRawPointer(display), UInt32(truncatingIfNeeded: window.rawValue),
                                                        UInt32(truncatingIfNeeded: property.rawValue), UInt32(maxValues)),
                    maxValues: maxValues)
    }

    /// The answer to ``requestCardinals(_:_:maxValues:)`` (waiting for it if it has not come): nil
    /// when the property is absent or not CARDINAL values, the window is gone or the connection is.
    func takeCardinals(_ read: PendingRead) -> [Int]? {
        guard !isDead else { return nil }
        var values = [UInt32](repeating: 0, count: read.maxValues)
        let count = Int(cxevents_cardinals_reply(UnsafeMutableRawPointer(display), read.sequence, &values, Int32(read.maxValues)))
        return count < 0 ? nil : values.prefix(count).map { Int($0) }
    }

    /// Drops the answer to a read not taken.
    func discard(_ read: PendingRead) {
        if !isDead { cxevents_discard_reply(UnsafeMutableRawPointer(display), read.sequence) }
    }

    func deleteProperty(_ window: X11Window, _ property: X11Atom) {
        // Unrouted: an error (the window vanished) has nothing to change.
        XDeleteProperty(display, window.rawValue, property.rawValue)
    }

    /// Writes a format-32 property from values (as Xlib wants them: C longs).
    func writeLongs(_ window: X11Window, _ property: X11Atom, type: X11Atom, _ values: [UInt], onError: @escaping (XErrorRecord) -> Void) {
        var longs = values
        routeErrors({
            longs.withUnsafeMutableBytes { buffer in
                _ = XChangeProperty(display, window.rawValue, property.rawValue, type.rawValue, 32, PropModeReplace,
                                    buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(values.count))
            }
        }, onError: onError)
    }

    /// Writes a format-32 property of atoms.
    func writeAtoms(_ window: X11Window, _ property: X11Atom, type: X11Atom = .atom, _ atoms: [X11Atom], onError: @escaping (XErrorRecord) -> Void) {
        writeLongs(window, property, type: type, atoms.map(\.rawValue), onError: onError)
    }

    /// Writes a format-8 property.
    func writeBytes(_ window: X11Window, _ property: X11Atom, type: X11Atom, _ bytes: UnsafeRawBufferPointer, onError: @escaping (XErrorRecord) -> Void) {
        routeErrors({
            _ = XChangeProperty(display, window.rawValue, property.rawValue, type.rawValue, 8, PropModeReplace,
                                bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(bytes.count))
        }, onError: onError)
    }

    /// Writes bytes `range` of `source` (a chunk at most) to a property, reading a file into the
    /// wire's one scratch buffer: no allocation per chunk or per small conversion.
    func writeBytes(_ window: X11Window, _ property: X11Atom, type: X11Atom, from source: TransferSource, range: Range<Int>,
                    onError: @escaping (XErrorRecord) -> Void) throws {
        if scratch == nil { scratch = .allocate(byteCount: chunkSize, alignment: 16) }
        try source.withBytes(offset: range.lowerBound, length: range.count, scratch: scratch!) {
            writeBytes(window, property, type: type, $0, onError: onError)
        }
    }
}

/// One `XGetWindowProperty` reply.
struct PropertyPiece {
    var type: Atom = 0
    var format: Int32 = 0
    var count: UInt = 0
    var after: UInt = 0
    var pointer: UnsafeMutablePointer<UInt8>? = nil

    /// The piece's size in the property's own terms (format 32: 4 bytes a value).
    var byteCount: Int { Int(count) * (format == 32 ? 4 : format == 16 ? 2 : 1) }

    /// Reads `units` 32-bit units from `offsetUnits`; false when the server refused.
    /// With `delete`, the server deletes the property if this read reaches its end.
    mutating func fetch(_ wire: X11Wire, _ window: X11Window, _ property: X11Atom, offsetUnits: Int, units: Int,
                        delete: Bool = false) -> Bool {
        var failed = false
        wire.routeErrors({
            let status = XGetWindowProperty(wire.display, window.rawValue, property.rawValue, offsetUnits, units, delete ? 1 : 0, 0,
                                            &type, &format, &count, &after, &pointer)
            failed = status != 0
        }, onError: { _ in failed = true })
        return !failed
    }

    mutating func release() {
        if let pointer { XFree(pointer) }
        pointer = nil
    }

    /// The bytes, format-32 values packed from C longs to 32-bit units.
    func withPacked<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        guard let pointer else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        if format == 32 {
            // Xlib hands format-32 data over as C longs (8 bytes here): pack to 32-bit units.
            let longs = UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt.self)
            var packed = [UInt32](repeating: 0, count: Int(count))
            for index in 0..<Int(count) { packed[index] = UInt32(truncatingIfNeeded: longs[index]) }
            return try packed.withUnsafeBytes { try body($0) }
        }
        return try body(UnsafeRawBufferPointer(start: pointer, count: byteCount))
    }
}

/// A property read sent and not yet answered (``X11Wire/requestCardinals(_:_:maxValues:)``): its
/// answer is taken once (``X11Wire/takeCardinals(_:)``) or dropped (``X11Wire/discard(_:)``).
struct PendingRead {
    let sequence: UInt32
    /// The most values asked for (and taken).
    let maxValues: Int
}

/// A property larger than the reader accepts.
struct PropertyTooLarge: Error {
    let size: Int
    let limit: Int
}

/// A property's bytes as read: borrowed from Xlib's reply (one piece), or gathered from
/// several pieces into memory of our own.
struct GatheredBytes {
    private let borrowed: UnsafeRawBufferPointer?
    private let owned: Data?

    init(_ bytes: UnsafeRawBufferPointer) {
        borrowed = bytes
        owned = nil
    }

    init(_ data: Data) {
        borrowed = nil
        owned = data
    }

    var count: Int { owned?.count ?? borrowed?.count ?? 0 }

    /// The bytes as data: the gathered data itself, or a copy of the borrowed bytes.
    var data: Data { owned ?? Data(borrowed!) }

    func withUnsafeBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        if let owned { return try owned.withUnsafeBytes(body) }
        return try body(borrowed!)
    }
}
