internal import CX11
internal import CXEvents
import FoundationEssentials
import PasteboardKit

/// The loop's work on the X thread: timers, reading and dispatching events, routing errors.
extension X11Session {
    // MARK: Timers

    /// Runs `action` on the X thread after `seconds`.
    @discardableResult
    func after(_ seconds: Double, _ action: @escaping () -> Void) -> TimerHandle {
        timers.schedule(after: seconds, now: configuration.clock(), action)
    }

    func cancelTimer(_ timer: TimerHandle?) {
        timers.cancel(timer)
    }

    /// Milliseconds until the next timer, or -1 (wait forever) when there is none.
    func nextTimerDelayMilliseconds() -> Int32 {
        timers.millisecondsUntilNext(now: configuration.clock())
    }

    private func fireDueTimers() {
        for timer in timers.due(now: configuration.clock()) {
            timers.take(timer)?()
        }
    }

    // MARK: Events

    /// Whether events wait to be handled, asked before the loop sleeps: left by a turn that
    /// stopped at its budget, or read by XCB since the turn's end (any call into XCB may read the
    /// connection, and poll() does not report what has been read already), or in the intake.
    func hasQueuedEvents() -> Bool {
        guard !isDead else { return false }
        absorbQueuedEvents()
        return turnCutShort || !intake.isEmpty || !wireErrors.isEmpty || !scheduler.isEmpty
    }

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
        if XNextRequest(display) &- XLastKnownRequestProcessed(display) > Self.requestsBeforeSync {
            XSync(display, 0)
        }
        XFlush(display)
        collectErrors()
        _ = checkDead()
    }

    /// How many requests may go out after the last one the server answered before a turn ends
    /// with a round trip: until one reads past them, Xlib keeps a note of each request and XCB the
    /// error of each that failed (an owner that only answers conversions makes no round trip).
    static let requestsBeforeSync: UInt = 4096

    /// The next event to handle: the oldest XCB read during a round trip, else one from XCB's
    /// queue or a read of the connection.
    private func nextEvent() -> WireEvent? {
        intake.popFirst() ?? takeFromXCB(reading: true)
    }

    /// Moves the events XCB read while a round trip waited into the intake (no read of the
    /// connection), and files the errors among them.
    func absorbQueuedEvents() {
        while let event = takeFromXCB(reading: false) { intake.append(event) }
    }

    /// XCB's next event: one it has read already, else (`reading`) one from a read of the
    /// connection. Errors met on the way are filed for collectErrors; a failed connection is
    /// marked dead.
    private func takeFromXCB(reading: Bool) -> WireEvent? {
        var event = WireEvent()
        while true {
            switch cxevents_next(UnsafeMutableRawPointer(display), reading ? 1 : 0, fixesEventBase, &event) {
            case 1:
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

    /// The most requests answered per turn of the loop.
    static let requestsPerTurn = 16

    /// A request joins the scheduler's rotation, or is dropped or refused (``RequestScheduler``).
    private func queueRequest(_ request: ConversionRequest) {
        perform(scheduler.admit(request, now: turnClock, isForged: isForgedRequestor(request)), for: request)
    }

    private func perform(_ admission: RequestScheduler.Admission, for request: ConversionRequest) {
        switch admission {
        case .queued, .dropped:
            return
        case .refused:
            notify(request, succeeded: false)
        case let .caughtFlooding(requestor, release):
            _ = watchRequestor(requestor)
            release.forEach(releaseRequestor)
        case let .forgave(window, then):
            releaseRequestor(window)
            perform(then, for: request)
        }
    }

    private func serveQueuedRequests() {
        var budget = Self.requestsPerTurn
        while budget > 0, !isDead, let request = scheduler.next() {
            handleSelectionRequest(request)
            if scheduler.served(request.requestor) { releaseRequestor(request.requestor) }
            budget -= 1
        }
        for requestor in scheduler.takeUnwatchedWaiting() { _ = watchRequestor(requestor) }
    }

    private func checkDead() -> Bool {
        if !isDead, XErrorSink.isDead(display) { lifecycle = .dead }
        return isDead
    }

    private func dispatch(_ event: WireEvent) {
        // Property changes, lost ownership and destroyed windows are the server's word only: any
        // client may send an event to our windows, and a forged PropertyNotify would have us read
        // a chunk twice, send the next before the requestor took the last, or take its time for
        // a server timestamp.
        if event.sent != 0, [PropertyNotify, SelectionClear, DestroyNotify].contains(Int32(event.kind)) { return }
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
            requestorGone(X11Window(rawValue: UInt(event.window)))
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
        } else if requestorWindows.contains(window) {
            // Our own deletes come back too: only a new value matters to a reader.
            if isNewValue { continueIncoming(ReplySlot(window: window, property: property)) }
        } else if property == known[.changeCounts], !sharedCountWaiters.isEmpty {
            sharedCountsChanged(on: window)
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
