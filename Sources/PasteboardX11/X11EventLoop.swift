internal import CX11
internal import CXEvents
import FoundationEssentials
import PasteboardKit

/// The loop's work on the X thread: timers, reading and dispatching events, routing errors.
extension X11Session {
    // MARK: Timers

    /// Runs `action` on the X thread after `seconds`.
    @discardableResult
    func after(_ seconds: Double, _ action: @escaping () -> Void) -> Int {
        timers.schedule(after: seconds, now: configuration.clock(), action)
    }

    func cancelTimer(_ id: Int?) {
        timers.cancel(id)
    }

    /// Milliseconds until the next timer, or -1 (wait forever) when there is none.
    func nextTimerDelayMilliseconds() -> Int32 {
        timers.millisecondsUntilNext(now: configuration.clock())
    }

    private func fireDueTimers() {
        for id in timers.due(now: configuration.clock()) {
            timers.take(id)?()
        }
    }

    // MARK: Events

    /// Whether events wait to be handled: taken from XCB already, or left by a turn that stopped
    /// at its budget (XCB may hold more it read, which poll() would not report).
    var hasQueuedEvents: Bool { !isDead && (turnCutShort || !intake.isEmpty || !requestOrder.isEmpty) }

    /// The most events one turn of the loop handles, conversion requests apart, before it looks
    /// at its jobs again.
    static let eventsPerTurn = 64
    /// The most events of any kind one turn reads: conversion requests included, so that a flood
    /// of them cannot keep the loop reading.
    static let readsPerTurn = 2048

    /// Handles what the server sent (a batch at most), routes errors, fires due timers, flushes
    /// requests.
    ///
    /// XCB owns the event queue (``X11Connection``): events are read from the connection only
    /// here, as many as one turn handles, so a client that floods the owner fills the socket and
    /// the server's buffer, not this process. (Xlib's own queue read everything the server had
    /// sent before it handed back one event: 360 MiB under a flood, with every other client's
    /// request behind it.)
    /// At most a batch of events per turn: a transfer whose every chunk brings the next event
    /// would otherwise keep the loop here, and jobs (other readers, writes) would starve. The
    /// loop comes back at once while events remain.
    /// Conversion requests count against a larger budget of their own: one only joins its
    /// requestor's queue or is dropped (queueRequest), which costs less than the server's work
    /// to send it, so a flood is read as fast as it comes, and an honest request behind it is
    /// reached within a turn or two.
    func pump() {
        assertOnXThread()
        if checkDead() { return }
        var budget = Self.eventsPerTurn
        var reads = Self.readsPerTurn
        turnClock = configuration.clock()
        turnCutShort = false
        while let event = nextEvent() {
            let isRequest = Int32(event.kind) == SelectionRequest
            if !isRequest { budget -= 1 }
            reads -= 1
            dispatch(event)
            if !isRequest {
                // A request only joined a queue or was dropped: no request of ours whose errors
                // to collect yet (the turn collects them after the batch).
                collectErrors()
                if checkDead() { return }
            }
            if budget == 0 || reads == 0 {
                turnCutShort = true
                break
            }
        }
        // A flood since the intake was last empty: its peak goes back to the system.
        if intake.holdsFloodPeak {
            intake.release()
            cxevents_trim()
        }
        collectErrors()
        serveQueuedRequests()
        collectErrors()
        fireDueTimers()
        XFlush(display)
        collectErrors()
        _ = checkDead()
    }

    /// The next event to handle: the oldest XCB read during a round trip, else one from XCB's
    /// queue or a read of the connection. Errors met on the way are filed for collectErrors.
    private func nextEvent() -> WireEvent? {
        if let event = intake.popFirst() { return event }
        var event = WireEvent()
        while true {
            switch cxevents_next(UnsafeMutableRawPointer(display), 1, fixesEventBase, &event) {
            case 1:
                lastEventSequence = event.sequence
                if event.kind == 0 {
                    fileWireError(event)
                    continue
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

    /// Moves the events XCB read while a round trip waited into the intake (no read of the
    /// connection), and files the errors among them.
    func absorbQueuedEvents() {
        var event = WireEvent()
        while true {
            switch cxevents_next(UnsafeMutableRawPointer(display), 0, fixesEventBase, &event) {
            case 1:
                lastEventSequence = event.sequence
                if event.kind == 0 { fileWireError(event) } else { intake.append(event) }
            case 0:
                return
            default:
                XErrorSink.markDead(display)
                return
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

    // MARK: Fair serving

    /// The most conversion requests one requestor window may have waiting, and all windows
    /// together: past them, requests are dropped unanswered. A client with that many requests
    /// outstanding is flooding (one MULTIPLE asks for any number of targets); answering each
    /// refusal would cost as much as the flood itself.
    static let maxQueuedPerRequestor = 8
    static let maxQueuedRequests = 512
    /// The most requests answered per turn of the loop.
    static let requestsPerTurn = 16
    /// How long a requestor caught flooding is ignored, from its last request (nanoseconds).
    static let floodCooldown: UInt64 = 1_000_000_000
    /// How many requests a requestor may have dropped for a full queue (since it was last
    /// empty) before it counts as flooding: a burst of a few is an eager reader, not an attack.
    static let dropsBeforeFlooding = 64

    /// A request waits its turn: requestors are served in rotation, one request each, so a
    /// client that floods the owner delays the others by one request at most per round.
    ///
    /// A requestor whose queue is full has further requests dropped; once ``dropsBeforeFlooding``
    /// of them were, it is flooding: its queued requests are dropped too, and so is every request
    /// it makes until it has been quiet for ``floodCooldown``.
    /// Serving a flooder's requests would cost round trips (a MULTIPLE's property is read), and
    /// the reply to a round trip comes after everything the server queued for us before it:
    /// each one would pull the flood's backlog into memory at once.
    ///
    /// A flood's every event passes here, so the common case costs no hashing and no clock: the
    /// last flooder seen is compared directly, against the clock read once per turn.
    private func queueRequest(_ request: ConversionRequest) {
        let now = turnClock
        if request.requestor == recentFlooder.window, !recentFlooder.window.isNone {
            if now < recentFlooder.until {
                recentFlooder.until = now + Self.floodCooldown
                return
            }
            forgetFlooder(request.requestor)
        }
        guard !isForgedRequestor(request) else { return notify(request, succeeded: false) }
        if let until = floodingRequestors[request.requestor] {
            if now < until {
                floodingRequestors[request.requestor] = now + Self.floodCooldown
                makeRecentFlooder(request.requestor)
                return
            }
            forgetFlooder(request.requestor)
        }
        let waiting = requestQueues[request.requestor]?.count ?? 0
        // A request into a property that a waiting request of the same window names supersedes
        // it: a requestor asks again only once it gave up, and the window may be a new client's
        // that got a departed one's id. One answer goes into the property, not two (a reader
        // started while the owner was stopped took the departed reader's answer, then saw it
        // replaced, and pasted nothing). A requestor that keeps doing it is flooding.
        let superseded = waiting > 0 ? requestQueues[request.requestor]?.firstIndex { $0.replyProperty == request.replyProperty } : nil
        if let superseded { requestQueues[request.requestor]?[superseded] = request }
        if superseded != nil || waiting >= Self.maxQueuedPerRequestor {
            // A burst past the queue loses its excess, as before; only a requestor that keeps
            // asking while its queue is full is flooding.
            let dropped = (overflowDrops[request.requestor] ?? 0) + 1
            guard dropped >= Self.dropsBeforeFlooding else {
                overflowDrops[request.requestor] = dropped
                return
            }
            markFlooding(request.requestor, now: now)
            return
        }
        guard queuedRequestCount < Self.maxQueuedRequests else { return }
        if waiting == 0 { requestOrder.append(request.requestor) }
        requestQueues[request.requestor, default: []].append(request)
        queuedRequestCount += 1
    }

    /// A requestor that kept asking past its queue is ignored until it has been quiet for the
    /// cool-down; what it has queued is dropped.
    private func markFlooding(_ requestor: X11Window, now: UInt64) {
        overflowDrops.removeValue(forKey: requestor)
        // Many windows flooding in turn: forget the ones that have gone quiet.
        if floodingRequestors.count >= 64 {
            makeRecentFlooder(.none)
            for (window, until) in floodingRequestors where until <= now {
                floodingRequestors.removeValue(forKey: window)
                releaseRequestor(window)
            }
        }
        // Watched while marked: once the window is destroyed (handleRequestorGone) its id may
        // be given to another client's window, which must not inherit the mark.
        floodingRequestors[requestor] = now + Self.floodCooldown
        makeRecentFlooder(requestor)
        _ = watchRequestor(requestor)
        if let queued = requestQueues.removeValue(forKey: requestor) {
            queuedRequestCount -= queued.count
            requestOrder.removeAll { $0 == requestor }
            if queueWatched.remove(requestor) != nil { releaseRequestor(requestor) }
        }
    }

    /// Makes `window` (a marked flooder, or none) the one compared first, after writing the
    /// previous one's deadline back to the table.
    private func makeRecentFlooder(_ window: X11Window) {
        if !recentFlooder.window.isNone, floodingRequestors[recentFlooder.window] != nil {
            floodingRequestors[recentFlooder.window] = recentFlooder.until
        }
        recentFlooder = (window, window.isNone ? 0 : floodingRequestors[window] ?? 0)
    }

    /// A flooder that has been quiet for the cool-down is served again.
    private func forgetFlooder(_ window: X11Window) {
        if recentFlooder.window == window { recentFlooder = (.none, 0) }
        if floodingRequestors.removeValue(forKey: window) != nil { releaseRequestor(window) }
    }

    /// Requestors whose requests wait past this turn are watched: if the window is destroyed its
    /// requests go with it (its id may come back as another client's window). A request answered
    /// in the turn that read it needs no watch, which saves selecting input on the requestor's
    /// window and deselecting it again: two requests to the server per conversion.
    private func watchWaitingRequestors() {
        for requestor in requestOrder where !queueWatched.contains(requestor) {
            queueWatched.insert(requestor)
            _ = watchRequestor(requestor)
        }
    }

    private func serveQueuedRequests() {
        var budget = Self.requestsPerTurn
        while budget > 0, !requestOrder.isEmpty, !isDead {
            let requestor = requestOrder.removeFirst()
            guard var queue = requestQueues.removeValue(forKey: requestor), !queue.isEmpty else { continue }
            let request = queue.removeFirst()
            queuedRequestCount -= 1
            if !queue.isEmpty {
                requestQueues[requestor] = queue
                requestOrder.append(requestor)
            }
            handleSelectionRequest(request)
            if queue.isEmpty {
                overflowDrops.removeValue(forKey: requestor)
                if queueWatched.remove(requestor) != nil { releaseRequestor(requestor) }
            }
            budget -= 1
        }
        watchWaitingRequestors()
    }

    private func checkDead() -> Bool {
        if !isDead, XErrorSink.isDead(display) { lifecycle = .dead }
        return isDead
    }

    private func dispatch(_ event: WireEvent) {
        switch Int32(event.kind) {
        case SelectionRequest:
            queueRequest(ConversionRequest(event, serial: serial(ofSequence: event.sequence)))
        case SelectionNotify:
            handleSelectionNotify(requestor: X11Window(rawValue: UInt(event.window)), selection: X11Atom(rawValue: UInt(event.selection)),
                                  target: X11Atom(rawValue: UInt(event.target)), property: X11Atom(rawValue: UInt(event.property)))
        case SelectionClear:
            handleSelectionClear(window: X11Window(rawValue: UInt(event.window)), selection: X11Atom(rawValue: UInt(event.selection)),
                                 time: X11Timestamp(rawValue: UInt(event.time)))
        case PropertyNotify:
            handlePropertyNotify(window: X11Window(rawValue: UInt(event.window)), property: X11Atom(rawValue: UInt(event.property)),
                                 time: X11Timestamp(rawValue: UInt(event.time)), isNewValue: Int32(event.detail) == PropertyNewValue)
        case DestroyNotify:
            handleRequestorGone(X11Window(rawValue: UInt(event.window)))
        default:
            if isFixesSelectionEvent(event) { handleFixesSelection(event) }
        }
    }

    private func isFixesSelectionEvent(_ event: WireEvent) -> Bool {
        fixesEventBase >= 0 && Int32(event.kind) == fixesEventBase + XFixesSelectionNotify
    }

    private func handleFixesSelection(_ event: WireEvent) {
        handleFixesSelection(selection: X11Atom(rawValue: UInt(event.selection)), owner: X11Window(rawValue: UInt(event.owner)),
                             time: X11Timestamp(rawValue: UInt(event.time)), reason: OwnerChangeReason(subtype: Int32(event.detail)))
    }

    private func handlePropertyNotify(window: X11Window, property: X11Atom, time: X11Timestamp, isNewValue: Bool) {
        if window == self.window {
            if property == known[.timestampProperty], isNewValue {
                if !timestampWaiters.isEmpty { timestampWaiters.removeFirst()(.success(time)) }
                return
            }
            if isNewValue { continueIncoming(property: property) }
        } else if !isNewValue {
            continueOutgoing(TransferKey(requestor: window, property: property))
        }
    }

    /// The owner of `selection` now, for a compare-and-own or compare-and-clear: the round trip
    /// that asks has XCB read every event the server sent before its answer, and the
    /// ownership changes among them are handled here first. So whoever decides knows of every
    /// change up to that owner, even when the X server gave its window id to an earlier owner
    /// that is gone (a check of the id alone would take that for a change already seen).
    func currentOwnerAfterQueuedChanges(_ selection: X11Atom) -> X11Window {
        let owner = selectionOwner(selection)
        guard fixesEventBase >= 0 else { return owner }
        absorbQueuedEvents()
        for event in intake.take(where: isFixesSelectionEvent) { handleFixesSelection(event) }
        return owner
    }

    private func handleFixesSelection(selection: X11Atom, owner: X11Window, time: X11Timestamp, reason: OwnerChangeReason) {
        let isOurs = (owner == window || owner.isNone) && reason == .setOwner && consumeOurChange(selection, at: time)
        abandonReads(of: selection)
        if reason != .setOwner { failConversionsOfVanishedOwner(selection) }
        delegate?.selectionOwnerChanged(selection: selection, owner: owner, timestamp: time, reason: reason, isOurs: isOurs, session: self)
    }

    /// Whether an ownership change at `time` was ours (each of ours is recognised once).
    func consumeOurChange(_ selection: X11Atom, at time: X11Timestamp) -> Bool {
        guard let index = ourChangeTimes[selection]?.firstIndex(of: time) else { return false }
        ourChangeTimes[selection]?.remove(at: index)
        return true
    }
}
