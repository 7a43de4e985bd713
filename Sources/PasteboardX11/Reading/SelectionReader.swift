internal import CX11
import FoundationEssentials
import PasteboardKit
import PasteboardSelections

/// Where one conversion's reply lands: a requestor window of the conversion's own, and a
/// property on it.
///
/// Each conversion has its own window because owners tell chunks apart by window, not by
/// property: xclip 0.13 sends the next INCR chunk on *any* PropertyDelete of the requestor's
/// window (it keeps listening to that window after the transfer, too). A reader that read a
/// second reply on the window of an INCR transfer (TARGETS beside a guess, the keeper's
/// concurrent reads) had a chunk overwritten before it was read: 1 MiB lost in the middle of a
/// paste that exited 0. A window of its own per conversion, destroyed when the conversion ends,
/// leaves no owner a delete it could take for another transfer's.
struct ReplySlot: Hashable {
    let window: X11Window
    let property: X11Atom
}

/// A conversion request waiting for the owner's SelectionNotify.
struct PendingConversion {
    let id: Int
    let selection: X11Atom
    let target: X11Atom
    /// The requestor window (this conversion's own) and the property the reply goes to.
    let slot: ReplySlot
    var timer: TimerHandle?
    /// The most bytes the reply may have.
    var limit: Int = .max
    /// Past the limit, keep the first `limit` bytes instead of failing (lists such as TARGETS).
    var truncate = false
    /// Where a streamed reply's chunks go (nil: collected in memory).
    var sink: StreamSink? = nil
    /// The whole conversion's deadline timer (INCR included).
    var deadline: TimerHandle? = nil
    let completion: (Result<PropertyValue?, any Error>) -> Void
}

/// The requests of one conversion sent to an owner that did not answer
/// (``X11Configuration/asksSilentOwnersAgain``): when the first went, how many went, and how
/// long the last one waits, twice the one before (a stopped owner that wakes answers a few, not
/// one per read timeout).
struct SilentOwnerAsks: Equatable {
    /// The X thread's clock when the first request went, in nanoseconds.
    let firstAsked: UInt64
    /// How long the latest request waits, in seconds.
    let wait: Double
    /// How many requests went.
    var count = 1
    /// The waits of the requests before the latest, in seconds.
    var waitedBefore = 0.0

    /// The waits of every request so far, in seconds: what a timeout says (the clock's count
    /// would be a little more, and read "1.001 s").
    var waited: Double { waitedBefore + wait }

    /// The next request, sent at `now`, if its wait ends within `deadline` seconds of the first.
    func next(now: UInt64, deadline: Double) -> SilentOwnerAsks? {
        let wait = self.wait * 2
        guard elapsed(now: now) + wait <= deadline else { return nil }
        return SilentOwnerAsks(firstAsked: firstAsked, wait: wait, count: count + 1, waitedBefore: waited)
    }

    /// Seconds since the first request.
    func elapsed(now: UInt64) -> Double { Double(now &- firstAsked) / 1e9 }

    /// What is left at `now` of `deadline` seconds from the first request (at least a millisecond).
    func remaining(now: UInt64, deadline: Double) -> Double { max(0.001, deadline - elapsed(now: now)) }
}

/// An INCR transfer we are receiving.
struct IncomingState {
    let id: Int
    /// The selection read (an ownership change may end the read).
    let selection: X11Atom
    var transfer: IncomingTransfer
    /// The size the owner announced (a hint: compared with what came, never trusted).
    let announced: Int?
    var type: X11Atom
    let description: String
    var timer: TimerHandle?
    var deadline: TimerHandle?
    var sink: StreamSink?
    /// A streamed chunk was read but the property not yet deleted: the consumer is behind.
    var paused = false
    /// The owner wrote the property again while the transfer was paused (before we asked):
    /// read when the transfer resumes, never deleted unread.
    var wroteWhilePaused = false
    let completion: (Result<PropertyValue?, any Error>) -> Void
}

/// The requestor windows of the conversions under way. A window serves one conversion (or one
/// MULTIPLE request). One that got a single reply is destroyed when it ends. One that carried an
/// INCR transfer, or whose owner may still write to it (the conversion failed or was given up),
/// rests first: the owner may still act on it (xsel, once the empty chunk's property is deleted,
/// changes the window's event mask, and its error handler exits on BadWindow), and must meet a
/// window that still exists. The one that rested longest goes when too many rest.
struct RequestorWindows {
    /// The most conversions in flight at once.
    static let maxInUse = 64
    /// The most windows left resting; past it the one that rested longest is destroyed.
    static let maxResting = 16

    /// How long an owner may still act on the window of an INCR transfer that ended, when it
    /// cannot be asked: xsel sends a second SelectionNotify once it wrote the empty chunk, and
    /// exits on the BadWindow of a reader that closed its connection before the server took it
    /// (the next reader finds nobody owning the selection). A closing reader asks the owner for
    /// `TARGETS` instead (``unconfirmedSelection``): an owner answers requests in order, so its
    /// answer comes after its confirmation. This fixed wait is for when no probe can be made
    /// (measured: with no wait, 1 run in 2 of the xsel boundary matrix lost its owner; with one
    /// round trip alone, 1 in 6; with 10 ms, once in about ten full suites under two busy loops,
    /// xsel descheduled longer).
    static let settleNanoseconds: UInt64 = 10_000_000

    private(set) var inUse: Set<X11Window> = []
    private(set) var resting: [X11Window] = []
    /// The resting windows whose request was given up before any answer.
    private var givenUp: Set<X11Window> = []
    /// The windows in use that carried an INCR transfer, with the selection read.
    private var incremental: [X11Window: X11Atom] = [:]
    /// The last INCR transfer that ended: its selection and when (the X thread's clock), until
    /// its owner's confirmation came or a probe asked that owner.
    private var unconfirmed: (selection: X11Atom, ended: UInt64)?

    /// The selection whose owner has not confirmed the INCR transfer that ended last.
    var unconfirmedSelection: X11Atom? { unconfirmed?.selection }

    var isFull: Bool { inUse.count >= Self.maxInUse }

    func contains(_ window: X11Window) -> Bool { inUse.contains(window) }

    mutating func add(_ window: X11Window) { inUse.insert(window) }

    /// An INCR transfer began on `window`: its owner watches it.
    mutating func noteIncremental(_ window: X11Window, selection: X11Atom) { incremental[window] = selection }

    /// Ends a window's use at `now`: the windows to destroy now (itself when `clean` and it
    /// carried no INCR transfer, else perhaps the one that rested longest).
    mutating func end(_ window: X11Window, clean: Bool, now: UInt64) -> [X11Window] {
        guard inUse.remove(window) != nil else { return [] }
        let watched = incremental.removeValue(forKey: window)
        if clean && watched == nil { return [window] }
        if let watched { unconfirmed = (watched, now) }
        if !clean && watched == nil { givenUp.insert(window) }
        resting.append(window)
        guard resting.count > Self.maxResting else { return [] }
        let gone = resting.removeFirst()
        givenUp.remove(gone)
        return [gone]
    }

    /// An event came to a resting window: its owner is done with it.
    mutating func noteSettled(_ window: X11Window) {
        if resting.contains(window) { unconfirmed = nil }
    }

    /// Whether `window` rests after its request was given up unanswered (a timeout): an answer
    /// that comes to it now is late, and taken off it (``SelectionReader``'s late transfers).
    func awaitsLateReply(_ window: X11Window) -> Bool { givenUp.contains(window) }

    /// A probe was sent to the owner of ``unconfirmedSelection``: its answer, not the clock,
    /// ends the wait.
    mutating func noteProbed() {
        unconfirmed = nil
    }

    /// Nanoseconds to wait at `now` before closing, so that owners are done with our windows.
    func settleDelay(now: UInt64) -> UInt64 {
        guard let ended = unconfirmed?.ended, now < ended + Self.settleNanoseconds else { return 0 }
        return ended + Self.settleNanoseconds - now
    }

    /// Every window, for the session's end.
    mutating func removeAll() -> [X11Window] {
        defer { inUse.removeAll(); resting.removeAll(); incremental.removeAll(); givenUp.removeAll(); unconfirmed = nil }
        return Array(inUse) + resting
    }
}

/// The reader of other clients' selections: the conversions waiting for their owner's answer,
/// the INCR transfers coming in, and the requestor windows they use (``RequestorWindows``),
/// with the guess a paste asks for beside `TARGETS` (``SpeculativeRead``). The loop hands it
/// every `SelectionNotify` and each property change on one of its windows.
final class SelectionReader {
    private unowned let session: X11Session
    private let wire: X11Wire
    private var conversions: [PendingConversion] = []
    private var incoming: [ReplySlot: IncomingState] = [:]
    /// Each conversion's own requestor window (``ReplySlot``).
    private var requestorWindows = RequestorWindows()
    /// Replies that came by INCR to a resting window, after their reader gave up (a request
    /// sent again, ``X11Configuration/asksSilentOwnersAgain``, or a timeout): each chunk is
    /// deleted unread until the empty one, since an owner that serves one transfer at a time
    /// (xclip 0.13) waits for them without end and serves nobody else meanwhile.
    private var lateTransfers: Set<ReplySlot> = []
    /// Conversions waiting for a drained reply of their selection to end.
    private var heldConversions: [(selection: X11Atom, start: () -> Void, fail: (any Error) -> Void)] = []

    init(session: X11Session) {
        self.session = session
        wire = session.wire
    }

    /// How many INCR transfers are coming in.
    var incomingCount: Int { incoming.count }

    /// Whether `window` is one of our requestor windows in use.
    func usesWindow(_ window: X11Window) -> Bool {
        requestorWindows.contains(window) || lateTransfers.contains { $0.window == window }
    }

    /// Fails every read (the session is finishing); returns the windows to destroy.
    func finish(_ failure: any Error) -> [X11Window] {
        let held = heldConversions
        heldConversions.removeAll()
        for conversion in held { conversion.fail(failure) }
        for conversion in conversions { conversion.completion(.failure(failure)) }
        conversions.removeAll()
        for (_, state) in incoming { state.completion(.failure(failure)) }
        incoming.removeAll()
        lateTransfers.removeAll()
        return requestorWindows.removeAll()
    }

    /// The property a single conversion's reply goes to (every conversion has its own window).
    var replyProperty: X11Atom { conversionProperty(1) }

    /// Our `n`th conversion property (``X11Wire/conversionPropertyPrefix``).
    func conversionProperty(_ n: Int) -> X11Atom { wire.atom(wire.conversionPropertyPrefix + String(n)) }

    /// A new requestor window for one conversion (nil when too many are in flight): two
    /// requests, no round trip.
    func makeRequestorWindow() -> X11Window? {
        guard !requestorWindows.isFull else { return nil }
        let created = X11Window(rawValue: XCreateSimpleWindow(wire.display, wire.root.rawValue, -10, -10, 1, 1, 0, 0, 0))
        XSelectInput(wire.display, created.rawValue, PropertyChangeMask)
        requestorWindows.add(created)
        return created
    }

    /// The conversion on `window` ended; `clean`: the owner has nothing more to write to it
    /// (its reply was read whole, or it refused).
    func endRequestorWindow(_ window: X11Window, clean: Bool) {
        guard !session.isDead else { return }
        for gone in requestorWindows.end(window, clean: clean, now: session.configuration.clock()) {
            lateTransfers = lateTransfers.filter { $0.window != gone }
            XDestroyWindow(wire.display, gone.rawValue)
        }
    }

    /// Runs `body` once the owners of the transfers just read are done with our windows (closing
    /// the connection destroys them, and an owner that writes to a window gone gets BadWindow,
    /// which ends xclip and xsel): after one round trip to the server when an INCR transfer ended
    /// lately (its owner's last requests, sent with the empty chunk, are taken by the server
    /// before our answer; xsel's second SelectionNotify among them), and once every request
    /// asked is answered (a guess the reader gave up on: a slow owner answers it after the
    /// reader is done), for at most ``settleLimit``; at once when nothing is outstanding.
    func afterOwnersSettle(_ body: @escaping () -> Void) {
        guard ownersAreBusy, !session.isDead else { return body() }
        // The owner of an INCR transfer not confirmed yet: asked for TARGETS (every owner
        // answers it with its short list; xclip answers any other name with its whole data),
        // whose answer comes after whatever it still does with our windows (an owner handles
        // requests in order); the wait then lasts until that answer, not a fixed time.
        if let selection = requestorWindows.unconfirmedSelection, !requestorWindows.isFull {
            requestorWindows.noteProbed()
            convert(selection, to: wire.known[.targets], limit: Self.maxTargets * 4, truncate: true) { _ in }
        }
        // What the server took from the owner before our answer comes back as events.
        XSync(wire.display, 0)
        waitForOwnersToSettle(until: session.configuration.clock() + UInt64(min(Self.settleLimit, session.configuration.readTimeout) * 1e9), body)
    }

    /// The longest a closing reader waits for owners to answer what it asked (a loaded machine
    /// once took longer than the reader to refuse a guess, and xclip died of the window gone).
    static let settleLimit = 1.0

    /// Whether an owner may still write to one of our windows: an INCR ended moments ago, a
    /// request is not answered yet, or a reply given up on is still being drained.
    private var ownersAreBusy: Bool {
        requestorWindows.settleDelay(now: session.configuration.clock()) > 0 || !conversions.isEmpty
            || incoming.values.contains { $0.sink?.isCancelled == true }
    }

    /// Checks every 2 ms (the loop handles the events between) until the owners are done or
    /// `deadline` passed.
    private func waitForOwnersToSettle(until deadline: UInt64, _ body: @escaping () -> Void) {
        guard ownersAreBusy, session.configuration.clock() < deadline, !session.isDead else { return body() }
        session.after(0.002) { [weak self] in
            guard let self else { return body() }
            self.waitForOwnersToSettle(until: deadline, body)
        }
    }

    /// Whether a reply of `selection` whose reader gave up is still coming (drained).
    private func isDraining(_ selection: X11Atom) -> Bool {
        conversions.contains { $0.selection == selection && $0.sink?.isCancelled == true }
            || incoming.values.contains { $0.selection == selection && $0.sink?.isCancelled == true }
    }

    /// Starts the conversions of `selection` held while a reply was drained, once none is.
    private func releaseHeldConversions(of selection: X11Atom) {
        guard heldConversions.contains(where: { $0.selection == selection }), !isDraining(selection) else { return }
        let released = heldConversions.filter { $0.selection == selection }
        heldConversions.removeAll { $0.selection == selection }
        for conversion in released { conversion.start() }
    }

    /// A late reply's property, or the next chunk of a late INCR transfer: its type and first
    /// bytes looked at, then deleted unread (which asks an INCR owner for the next chunk). The
    /// transfer ends with its empty chunk, or when the property is gone.
    private func takeLateReply(_ slot: ReplySlot) {
        let value = try? wire.readProperty(slot.window, slot.property, delete: false, limit: 16, truncate: true)
        wire.deleteProperty(slot.window, slot.property)
        wire.flush()
        if lateTransfers.contains(slot) {
            if value?.data.isEmpty ?? true { lateTransfers.remove(slot) }
        } else if value?.type == wire.known[.incr] {
            lateTransfers.insert(slot)
            session.configuration.debug?("a late answer by INCR on a request given up: its chunks are dropped as they come")
        }
    }

    /// Asks the owner of `selection` to convert it to `target` and reads the result, following
    /// INCR. Completes with nil when the owner refuses (or there is none), with an error when a
    /// deadline passes (no progress for the read timeout, or the whole transfer longer than the
    /// transfer deadline), the reply is larger than `limit`, or it is malformed.
    ///
    /// - Parameters:
    ///   - parameters: for targets that take them (`MULTIPLE`'s ATOM_PAIR list), format-32 values
    ///     written to the property before the request, with type `parameterType`.
    ///   - legacyNoProperty: sends the request with property None, as obsolete clients do (the
    ///     owner then replies in the property named like the target).
    ///   - sink: streams the reply's bytes there as they come (the completion's value then has
    ///     no data) instead of collecting them.
    ///   - property: the property to read into, instead of ``replyProperty``.
    ///   - window: the requestor window, made by the caller (MULTIPLE); ended by the caller too.
    func convert(_ selection: X11Atom, to target: X11Atom, parameters: [X11Atom]? = nil, parameterType: X11Atom = .none,
                 legacyNoProperty: Bool = false, limit: Int? = nil, truncate: Bool = false, sink: StreamSink? = nil,
                 into property: X11Atom? = nil, on window: X11Window? = nil, asking: SilentOwnerAsks? = nil, flushes: Bool = true,
                 completion: @escaping (Result<PropertyValue?, any Error>) -> Void) {
        // An owner that serves one transfer at a time (xclip 0.13) drops the requests that come
        // while it sends: while a reply this process gave up on is drained (continueIncoming),
        // new conversions of the selection wait for its end.
        if isDraining(selection) {
            heldConversions.append((selection, { [weak self] in
                self?.convert(selection, to: target, parameters: parameters, parameterType: parameterType, legacyNoProperty: legacyNoProperty,
                              limit: limit, truncate: truncate, sink: sink, into: property, on: window, asking: asking, completion: completion)
            }, { error in
                sink?.finish(.failure(error))
                completion(.failure(error))
            }))
            return
        }
        // The caller's, for a request sent again.
        let caller = completion
        // However the conversion ends, a stream's consumer learns it.
        let completion: (Result<PropertyValue?, any Error>) -> Void = { result in
            sink?.finish(result.map { _ in () })
            caller(result)
        }
        guard let requestor = window ?? makeRequestorWindow() else {
            return completion(.failure(PasteboardError.backendFailure(
                "too many conversions in flight (\(RequestorWindows.maxInUse)); the selection owner is not answering")))
        }
        let slot = ReplySlot(window: requestor, property: legacyNoProperty ? target : property ?? replyProperty)
        let id = session.makeOperationID()
        if let parameters {
            wire.writeAtoms(requestor, slot.property, type: parameterType, parameters, onError: { _ in })
        }
        wire.requestConversion(selection, to: target, property: legacyNoProperty ? .none : slot.property, requestor: requestor, at: .currentTime)
        // Without: the caller sends more with it, and flushes.
        if flushes { wire.flush() }
        // A window the caller made is the caller's to end.
        let ownsWindow = window == nil
        var conversion = PendingConversion(id: id, selection: selection, target: target, slot: slot, timer: nil,
                                           limit: limit ?? session.configuration.maxReadSize, truncate: truncate, sink: sink,
                                           completion: { [weak self] result in
            if ownsWindow, let self {
                // Clean when the owner answered and its reply was read whole (or refused).
                var clean = false
                if case .success = result { clean = true }
                self.endRequestorWindow(requestor, clean: clean)
            }
            completion(result)
            self?.releaseHeldConversions(of: selection)
        })
        let configuration = session.configuration
        let asks = asking ?? SilentOwnerAsks(firstAsked: configuration.clock(), wait: configuration.readTimeout)
        conversion.timer = session.after(asks.wait) { [weak self] in
            guard let self, let index = self.conversions.firstIndex(where: { $0.id == id }) else { return }
            let expired = self.conversions.remove(at: index)
            self.session.cancelTimer(expired.deadline)
            // Still waiting, so the selection kept its owner (a change would have ended this read).
            if ownsWindow, configuration.asksSilentOwnersAgain, configuration.abandonsReadsOnOwnerChange,
               let next = asks.next(now: configuration.clock(), deadline: configuration.transferDeadline) {
                configuration.debug?("\(self.wire.name(of: selection) ?? "?"): its owner did not answer \(self.wire.name(of: target) ?? "?") in "
                                     + "\(PasteboardError.format(asks.wait)) s (busy with another reader's transfer, or stopped): asked again")
                self.endRequestorWindow(requestor, clean: false)
                self.convert(selection, to: target, parameters: parameters, parameterType: parameterType, legacyNoProperty: legacyNoProperty,
                             limit: limit, truncate: truncate, sink: sink, into: property, asking: next, completion: caller)
                return
            }
            let what = "reading \(self.wire.name(of: target) ?? "?") from \(self.wire.name(of: selection) ?? "?")"
                + (asks.count > 1 ? " (asked \(asks.count) times; its owner answered none)" : "")
            expired.completion(.failure(PasteboardError.timedOut(operation: what, seconds: asks.waited)))
        }
        let total = asks.remaining(now: configuration.clock(), deadline: configuration.transferDeadline)
        conversion.deadline = session.after(total) { [weak self] in
            guard let self else { return }
            let what = "reading \(self.wire.name(of: target) ?? "?") from \(self.wire.name(of: selection) ?? "?") (the whole transfer)"
            // The deadline counts from the first request, whatever is left of it for this one.
            let failure = PasteboardError.timedOut(operation: what, seconds: configuration.transferDeadline)
            if let index = self.conversions.firstIndex(where: { $0.id == id }) {
                let expired = self.conversions.remove(at: index)
                self.session.cancelTimer(expired.timer)
                expired.completion(.failure(failure))
            } else if let state = self.incoming[slot], state.id == id {
                self.failIncoming(slot, failure)
            }
        }
        conversions.append(conversion)
    }

    func handleSelectionNotify(requestor: X11Window, selection: X11Atom, target: X11Atom, property: X11Atom) {
        // Our windows are our conversions': anything else (another client's event sent to a
        // window of ours) matches nothing.
        guard let index = conversions.firstIndex(where: { $0.slot.window == requestor && $0.selection == selection && $0.target == target })
        else {
            // xsel confirms a finished INCR transfer with a second SelectionNotify.
            requestorWindows.noteSettled(requestor)
            // A late answer to a request given up: taken off the window (drained, if INCR).
            if !property.isNone, requestorWindows.awaitsLateReply(requestor) { takeLateReply(ReplySlot(window: requestor, property: property)) }
            return
        }
        let conversion = conversions.remove(at: index)
        session.cancelTimer(conversion.timer)
        let slot = conversion.slot
        let finish: (Result<PropertyValue?, any Error>) -> Void = { [self] result in
            session.cancelTimer(conversion.deadline)
            conversion.completion(result)
        }
        guard !property.isNone else { return finish(.success(nil)) }
        let value: PropertyValue?
        do {
            // An INCR marker or the whole reply; a reply over the limit fails without being read.
            value = try wire.readProperty(slot.window, slot.property, delete: true, limit: conversion.limit, truncate: conversion.truncate)
        } catch let error as PropertyTooLarge {
            return finish(.failure(PasteboardError.backendFailure(
                "the selection owner's reply is \(error.size) bytes, more than the \(error.limit)-byte limit; raise the limit if this much is expected")))
        } catch {
            return finish(.failure(error))
        }
        guard let value else {
            return finish(.failure(PasteboardError.backendFailure(
                "the selection owner said it converted to \(wire.name(of: conversion.target) ?? "?") but the reply property does not exist (an owner's error, or a reply the X server could not hold)")))
        }
        if value.type == wire.known[.incr] {
            // Deleting the INCR property (done by the read) tells the owner to send the first chunk.
            let announced = IncomingTransfer.announcedSize(value.longs)
            if let announced, announced > conversion.limit {
                return finish(.failure(PasteboardError.backendFailure(
                    "the selection owner announced \(announced) bytes, more than the \(conversion.limit)-byte limit")))
            }
            conversion.sink?.noteSize(announced)
            let description = "reading \(wire.name(of: conversion.target) ?? "?") (INCR)"
            requestorWindows.noteIncremental(slot.window, selection: conversion.selection)
            incoming[slot] = IncomingState(
                id: conversion.id, selection: conversion.selection,
                transfer: IncomingTransfer(announcedSize: conversion.sink == nil ? announced ?? 0 : 0, limit: conversion.limit),
                announced: announced, type: .none, description: description, timer: nil, deadline: conversion.deadline,
                sink: conversion.sink, completion: conversion.completion)
            armIncomingTimer(slot)
            return
        }
        if let sink = conversion.sink {
            sink.noteType(value.type)
            sink.noteSize(value.data.count)
            sink.push(value.data)
            return finish(.success(PropertyValue(type: value.type, format: value.format, data: Data())))
        }
        finish(.success(value))
    }

    private func armIncomingTimer(_ slot: ReplySlot) {
        guard let state = incoming[slot] else { return }
        session.cancelTimer(state.timer)
        let seconds = session.configuration.readTimeout
        let id = state.id
        incoming[slot]?.timer = session.after(seconds) { [weak self] in
            guard let self, let state = self.incoming[slot], state.id == id else { return }
            self.failIncoming(slot, PasteboardError.timedOut(operation: state.description, seconds: seconds))
        }
    }

    /// Ends an INCR transfer with an error. Its window rests (``RequestorWindows``): the owner
    /// may still write to it.
    func failIncoming(_ slot: ReplySlot, _ error: any Error) {
        guard let state = incoming.removeValue(forKey: slot) else { return }
        session.cancelTimer(state.timer)
        session.cancelTimer(state.deadline)
        state.completion(.failure(error))
    }

    /// A property of one of our requestor windows has a new value: the next chunk of an INCR
    /// transfer, or (while the transfer is paused) one the owner wrote before we asked.
    func continueIncoming(_ slot: ReplySlot) {
        if lateTransfers.contains(slot) { return takeLateReply(slot) }
        // Asked of the dictionary, not of a copy of the state: a copy would share the buffer.
        guard let paused = incoming[slot]?.paused else { return }
        if paused {
            // Read when the transfer resumes: deleting it unread would lose a chunk.
            incoming[slot]?.wroteWhilePaused = true
            return
        }
        // Take the state out of the dictionary so that appending does not copy the buffer. No
        // other copy of the state may live meanwhile: a `let` bound to it here kept the buffer
        // shared, and every chunk copied all the bytes received so far (a 50 MB capture took
        // 2 s of memcpy and page faults).
        guard var state = incoming.removeValue(forKey: slot) else { return }
        var chunkType = X11Atom.none
        var chunkFormat: Int32 = 8
        let streaming = state.sink != nil
        let outcome: Result<Bool, any Error>?
        do {
            outcome = try wire.readProperty(slot.window, slot.property, delete: !streaming, limit: state.transfer.remaining) { type, format, bytes in
                chunkType = type
                chunkFormat = format
                if let sink = state.sink {
                    return Result { try state.transfer.count(bytes.count) }.map { isComplete in
                        sink.noteType(type)
                        if !isComplete { sink.push(bytes.data) }
                        return isComplete
                    }
                }
                return Result { try bytes.withUnsafeBytes { try state.transfer.append(bytes: $0) } }
            }
        } catch is PropertyTooLarge {
            outcome = .failure(IncomingTransfer.overLimit(state.transfer.limit))
        } catch {
            outcome = .failure(error)
        }
        guard let outcome else {
            // No property (a new value already deleted, or an event of no transfer's): wait on.
            incoming[slot] = state
            return
        }
        switch outcome {
        case let .failure(error):
            incoming[slot] = state
            failIncoming(slot, error)
        case let .success(isComplete):
            if isComplete {
                session.cancelTimer(state.timer)
                session.cancelTimer(state.deadline)
                // The end is acknowledged as every chunk is: an owner waits for the delete of the
                // empty property to finish (xsel), and must have it before the window goes.
                if streaming { wire.deleteProperty(slot.window, slot.property) }
                if let announced = state.announced, announced != state.transfer.received {
                    warnSizeMismatch(state, announced: announced)
                }
                let type = state.type.isNone ? chunkType : state.type
                state.completion(.success(PropertyValue(type: type, format: chunkFormat, data: state.transfer.data)))
            } else {
                if state.type.isNone { state.type = chunkType }
                if let sink = state.sink {
                    // The next chunk is asked for (by deleting the property) only while the consumer
                    // keeps up: memory holds a bounded backlog, however fast the owner sends. A
                    // consumer that gave up has the rest drained and dropped: an owner left
                    // waiting mid-INCR (xclip) would serve nobody else again.
                    if sink.wantsMore || sink.isCancelled {
                        wire.deleteProperty(slot.window, slot.property)
                    } else {
                        state.paused = true
                        let id = state.id
                        let enqueue = session.enqueue
                        sink.onDrained {
                            _ = enqueue? { session in session.reader.resumeIncoming(slot, id: id) }
                        }
                    }
                }
                incoming[slot] = state
                armIncomingTimer(slot)
            }
        }
    }

    /// The owner's INCR announcement and the bytes that came disagree: the protocol has no
    /// checksum, so this is all a reader can tell (the announcement is a lower bound by ICCCM,
    /// and many owners announce the exact size).
    private func warnSizeMismatch(_ state: IncomingState, announced: Int) {
        let received = state.transfer.received
        let what = received < announced ? "fewer bytes than it announced: some may be lost" : "more bytes than it announced"
        session.configuration.warning?("\(state.description): the selection owner sent \(received) bytes, \(what) (\(announced))")
    }

    /// The consumer of a paused stream caught up (or gave up): ask for the next chunk, or read
    /// the one the owner wrote meanwhile.
    func resumeIncoming(_ slot: ReplySlot, id: Int) {
        guard incoming[slot]?.id == id, incoming[slot]?.paused == true else { return }
        incoming[slot]?.paused = false
        if incoming[slot]?.wroteWhilePaused == true {
            incoming[slot]?.wroteWhilePaused = false
            continueIncoming(slot)
        } else {
            wire.deleteProperty(slot.window, slot.property)
            armIncomingTimer(slot)
        }
    }

    /// The most targets read from an owner's `TARGETS` (toolkits offer a few dozen).
    static let maxTargets = 1024

    /// Reads the `TARGETS` of `selection` as atom names (nil when the owner refuses).
    func targets(of selection: X11Atom, flushes: Bool = true, completion: @escaping (Result<[String]?, any Error>) -> Void) {
        // At most maxTargets atoms are read: a list of millions would cost memory and a look-up each.
        convert(selection, to: wire.known[.targets], limit: Self.maxTargets * 4, truncate: true, flushes: flushes) { [weak self] result in
            guard let self else { return }
            completion(result.flatMap { value in
                guard let value else { return .success(nil) }
                guard value.format == 32 else {
                    return .failure(PasteboardError.backendFailure("the selection owner answered TARGETS with format \(value.format) instead of 32"))
                }
                return .success(self.wire.names(of: value.atoms).compactMap { $0 })
            })
        }
    }
    /// `selection` changed owner: with ``X11Configuration/abandonsReadsOnOwnerChange``, every
    /// read of it (waiting for the owner's answer, or mid-INCR) ends now with an error.
    func abandonReads(of selection: X11Atom) {
        guard session.configuration.abandonsReadsOnOwnerChange else { return }
        let failure = PasteboardError.backendFailure("\(wire.name(of: selection) ?? "the selection") changed owner during the read")
        endWaitingConversions(of: selection, with: .failure(failure))
        for (slot, state) in incoming where state.selection == selection {
            failIncoming(slot, failure)
        }
    }

    /// The owner of `selection` went away (its client closed or its window was destroyed): the
    /// conversions still waiting for its SelectionNotify will never get one, so they end now
    /// instead of at their deadline (transfers already under way keep their own timers).
    func failConversionsOfVanishedOwner(_ selection: X11Atom) {
        endWaitingConversions(of: selection, with: .success(nil))
    }

    /// Ends the conversions of `selection` still waiting for the owner's answer with `result`.
    private func endWaitingConversions(of selection: X11Atom, with result: Result<PropertyValue?, any Error>) {
        let waiting = conversions.filter { $0.selection == selection }
        conversions.removeAll { $0.selection == selection }
        for conversion in waiting {
            session.cancelTimer(conversion.timer)
            session.cancelTimer(conversion.deadline)
            conversion.completion(result)
        }
    }

    /// Converts `selection` to several targets with one `MULTIPLE` request, following INCR for
    /// each reply that needs it. Completes with one value per target (nil where the owner
    /// refused that one), or nil when the owner refused `MULTIPLE` itself (ask one by one then).
    /// With `deadline`, the INCR replies not finished that many seconds after the owner answered
    /// end as refused (the finished ones are kept).
    func convertMultiple(_ selection: X11Atom, targets: [X11Atom], limit: Int, deadline: Double? = nil,
                         completion: @escaping (Result<[PropertyValue?]?, any Error>) -> Void) {
        // One window for the request: its pairs' properties are our conversion properties 1 …, the request's own
        // property the one after them. Atoms are never freed, so the count is capped.
        guard !targets.isEmpty, targets.count < RequestorWindows.maxInUse, let window = makeRequestorWindow() else {
            return completion(.success(nil))
        }
        let properties = (1...targets.count).map { conversionProperty($0) }
        let pairs = zip(targets, properties).flatMap { [$0, $1] }
        // Whether every reply was read whole: the window is then destroyed at once, else it rests.
        var clean = true
        convert(selection, to: wire.known[.multiple], parameters: pairs, parameterType: wire.known[.atomPair], limit: pairs.count * 4,
                into: conversionProperty(targets.count + 1), on: window) { [weak self] result in
            guard let self else { return }
            let answered: [X11Atom]
            switch result {
            case let .failure(error):
                self.endRequestorWindow(window, clean: false)
                return completion(.failure(error))
            case let .success(value):
                guard let value, value.format == 32 else {
                    self.endRequestorWindow(window, clean: true)
                    return completion(.success(nil))
                }
                answered = value.atoms
            }
            var results = [PropertyValue?](repeating: nil, count: targets.count)
            var remaining = targets.count
            let settle: (Int, PropertyValue?, Bool) -> Void = { [weak self] index, value, whole in
                results[index] = value
                clean = clean && whole
                remaining -= 1
                if remaining == 0 {
                    self?.endRequestorWindow(window, clean: clean)
                    completion(.success(results))
                }
            }
            var streaming: [(ReplySlot, Int)] = []
            for (index, property) in properties.enumerated() {
                // The owner sets a pair's property to None when it could not convert that target.
                let refused = answered.count > index * 2 + 1 && answered[index * 2 + 1].isNone
                let value = refused ? nil : (try? self.wire.readProperty(window, property, delete: true, limit: limit)) ?? nil
                guard let value, value.type == self.wire.known[.incr] else {
                    settle(index, value, true)
                    continue
                }
                let announced = IncomingTransfer.announcedSize(value.longs)
                if let announced, announced > limit {
                    // The owner waits for a delete that never comes: the window must rest.
                    settle(index, nil, false)
                    continue
                }
                let id = self.session.makeOperationID()
                let slot = ReplySlot(window: window, property: property)
                self.requestorWindows.noteIncremental(window, selection: selection)
                self.incoming[slot] = IncomingState(
                    id: id, selection: selection, transfer: IncomingTransfer(announcedSize: announced ?? 0, limit: limit),
                    announced: announced, type: .none,
                    description: "reading \(self.wire.name(of: targets[index]) ?? "?") (MULTIPLE, INCR)", timer: nil, deadline: nil,
                    sink: nil, completion: { result in
                        let value = (try? result.get()) ?? nil
                        settle(index, value, value != nil)
                    })
                self.armIncomingTimer(slot)
                streaming.append((slot, id))
            }
            guard let deadline, !streaming.isEmpty else { return }
            self.session.after(deadline) { [weak self] in
                for (slot, id) in streaming where self?.incoming[slot]?.id == id {
                    self?.failIncoming(slot, PasteboardError.timedOut(operation: "reading a MULTIPLE reply", seconds: deadline))
                }
            }
        }
    }

    // MARK: Offers

    /// Reads what `owner` offers for `selection`: its targets, and its manifest when it lists one
    /// (an xpb owner). The one way an offer is read, for reads and for describing a change alike,
    /// so both list the same types in the same order.
    ///
    /// `speculation` is asked for right after `TARGETS`, in the same flush: the owner answers both
    /// in turn, with no round trip between. With `flushes` false, neither is sent yet: the caller
    /// sends more with them (``X11PasteboardBackend/foreignOffer(_:speculation:fresh:)`` looks the
    /// owner up), and `owner` is asked when the offer is complete.
    func readOffer(of selection: X11Atom, owner: @escaping () -> X11Window, speculation: SpeculativeRead? = nil, flushes: Bool = true,
                   completion: @escaping @Sendable (Result<ForeignOffer, any Error>) -> Void) {
        defer { speculation?.issue(selection, in: session, flushes: flushes) }
        targets(of: selection, flushes: flushes && speculation == nil) { result in
            let owner = owner()
            switch result {
            case let .failure(error): completion(.failure(error))
            case .success(nil): completion(.success(ForeignOffer(owner: owner, targets: [], manifest: nil)))
            case let .success(targets?):
                guard targets.contains(Manifest.target) else {
                    return completion(.success(ForeignOffer(owner: owner, targets: targets, manifest: nil)))
                }
                self.convert(selection, to: self.wire.known[.manifest]) { result in
                    let manifest = ((try? result.get()) ?? nil).flatMap { Manifest(decoding: $0.data) }
                    completion(.success(ForeignOffer(owner: owner, targets: targets, manifest: manifest)))
                }
            }
        }
    }

    // MARK: Hand-off

    /// Offers an owned selection to the clipboard manager (`CLIPBOARD_MANAGER`, `SAVE_TARGETS`,
    /// the freedesktop clipboard-manager protocol) and waits at most `timeout` seconds for it to
    /// copy the data, serving its requests meanwhile. Completes with whether the manager answered
    /// that it saved.
    func handOff(_ selection: X11Atom, timeout: Double, completion: @escaping (Bool) -> Void) {
        let manager = wire.known[.clipboardManager]
        guard let state = session.owner.owned[selection], !wire.selectionOwner(manager).isNone else { return completion(false) }
        let skipped = wire.known.protocolTargets
        let property = wire.known[.saveTargetsProperty]
        wire.writeAtoms(wire.window, property, state.advertised.filter { !skipped.contains($0) }, onError: { _ in })
        let target = wire.known[.saveTargets]
        wire.requestConversion(manager, to: target, property: property, at: state.timestamp)
        wire.flush()
        let id = session.makeOperationID()
        var finished = false
        let timer = session.after(timeout) { [weak self] in
            self?.conversions.removeAll { $0.id == id }
            if !finished { finished = true; completion(false) }
        }
        conversions.append(PendingConversion(id: id, selection: manager, target: target, slot: ReplySlot(window: wire.window, property: property), timer: timer) { result in
            if !finished {
                finished = true
                completion((try? result.get()) != nil)
            }
        })
    }
}
