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

    /// Runs the timers that are due; whether any was.
    private func fireDueTimers() -> Bool {
        let due = timers.due(now: configuration.clock())
        for timer in due {
            timers.take(timer)?()
        }
        return !due.isEmpty
    }

    // MARK: Events

    /// Whether events wait to be handled, asked before the loop sleeps: left by a turn that
    /// stopped at its budget, or read by XCB since the turn's end (any call into XCB may read the
    /// connection, and poll() does not report what has been read already), or in the intake.
    func hasQueuedEvents() -> Bool {
        guard !isDead else { return false }
        let now = configuration.clock()
        beginFloodSkip(now: now)
        wire.absorbQueuedEvents()
        endFloodSkip(now: now)
        return turnCutShort || !wire.intake.isEmpty || !wire.wireErrors.isEmpty || owner.hasQueuedRequests
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
    /// Returns whether it handled anything (an event, a timer): a waiter on the loop's own thread
    /// looks again before the loop sleeps.
    @discardableResult
    func pump() -> Bool {
        wire.assertOnXThread()
        if checkDead() { return true }
        var handled = false
        var budget = Self.eventsPerTurn
        var reads = Self.readsPerTurn
        turnClock = configuration.clock()
        turnCutShort = false
        beginFloodSkip(now: turnClock)
        defer { endFloodSkip(now: turnClock) }
        while true {
            let skippedBefore = wire.floodSkip.skipped
            let next = nextEvent(skipLimit: reads)
            reads -= wire.floodSkip.skipped - skippedBefore
            guard let event = next else {
                turnCutShort = reads <= 0
                break
            }
            let isRequest = Int32(event.kind) == SelectionRequest
            if !isRequest { budget -= 1 }
            reads -= 1
            handled = true
            dispatch(event)
            if !isRequest {
                // A request only joined a queue or was dropped: no request of ours whose errors
                // to collect yet (the turn collects them after the batch).
                wire.collectErrors()
                if checkDead() { return true }
            }
            if budget == 0 || reads == 0 {
                turnCutShort = true
                break
            }
        }
        // A flood since the intake was last empty: its peak goes back to the system. So does
        // XCB's, for a flood dropped unseen, once a turn drops nothing.
        if wire.intake.holdsFloodPeak {
            wire.intake.release()
            cxevents_trim()
        } else if floodTrimDue, wire.floodSkip.skipped == 0 {
            // (``endFloodSkip(now:)`` marks it due.)
            floodTrimDue = false
            cxevents_trim()
        }
        wire.collectErrors()
        owner.serveQueuedRequests()
        wire.collectErrors()
        if fireDueTimers() { handled = true }
        if XNextRequest(wire.display) &- XLastKnownRequestProcessed(wire.display) > Self.requestsBeforeSync {
            XSync(wire.display, 0)
        }
        wire.flush()
        wire.collectErrors()
        _ = checkDead()
        return handled || wire.floodSkip.skipped > 0
    }

    /// How many requests may go out after the last one the server answered before a turn ends
    /// with a round trip: until one reads past them, Xlib keeps a note of each request and XCB the
    /// error of each that failed (an owner that only answers conversions makes no round trip).
    static let requestsBeforeSync: UInt = 4096

    /// The next event to handle: the oldest XCB read during a round trip, else one from XCB's
    /// queue or a read of the connection (dropping up to `skipLimit` of a flooder's requests on
    /// the way: ``X11Wire/FloodSkip``).
    private func nextEvent(skipLimit: Int) -> WireEvent? {
        wire.intake.popFirst() ?? wire.takeFromXCB(reading: true, skipLimit: skipLimit)
    }

    /// From here until ``endFloodSkip(now:)``, events taken from XCB leave out the requests of
    /// the window whose every request the owner's scheduler drops at `now`: a flood then costs
    /// this process a pop and a free per event, well under the server's cost to send it, so no
    /// backlog builds up however little of the processor the owner gets.
    private func beginFloodSkip(now: UInt64) {
        wire.floodSkip = X11Wire.FloodSkip(window: owner.flooderToSkip(now: now))
    }

    /// Tells the scheduler what was dropped unseen since ``beginFloodSkip(now:)`` (as many
    /// admissions would have: the cool-down starts again). XCB's memory for them goes back at the
    /// next turn that drops nothing, whether a turn or the look before the loop sleeps dropped
    /// them.
    private func endFloodSkip(now: UInt64) {
        let skip = wire.floodSkip
        wire.floodSkip = X11Wire.FloodSkip()
        guard skip.skipped > 0 else { return }
        owner.skippedFloodRequests(of: skip.window, now: now)
        floodTrimDue = true
    }

    private func checkDead() -> Bool {
        if !isDead, wire.isDead { lifecycle = .dead }
        return isDead
    }


    /// Sends each event to the part that asked for it.
    private func dispatch(_ event: WireEvent) {
        // Property changes, lost ownership and destroyed windows are the server's word only: any
        // client may send an event to our windows, and a forged PropertyNotify would have us read
        // a chunk twice, send the next before the requestor took the last, or take its time for
        // a server timestamp.
        if event.sent != 0, [PropertyNotify, SelectionClear, DestroyNotify].contains(Int32(event.kind)) { return }
        switch Int32(event.kind) {
        case SelectionRequest:
            owner.queue(ConversionRequest(event, serial: wire.serial(ofSequence: event.sequence)), now: turnClock)
        case SelectionNotify:
            reader.handleSelectionNotify(requestor: X11Window(rawValue: UInt(event.window)), selection: X11Atom(rawValue: UInt(event.selection)),
                                         target: X11Atom(rawValue: UInt(event.target)), property: X11Atom(rawValue: UInt(event.property)))
        case SelectionClear:
            owner.handleSelectionClear(window: X11Window(rawValue: UInt(event.window)), selection: X11Atom(rawValue: UInt(event.selection)),
                                       time: X11Timestamp(rawValue: UInt(event.time)))
        case PropertyNotify:
            handlePropertyNotify(window: X11Window(rawValue: UInt(event.window)), property: X11Atom(rawValue: UInt(event.property)),
                                 time: X11Timestamp(rawValue: UInt(event.time)), isNewValue: Int32(event.detail) == PropertyNewValue,
                                 sequence: event.sequence)
        case DestroyNotify:
            requestorGone(X11Window(rawValue: UInt(event.window)))
        default:
            if wire.isFixesSelectionEvent(event) { handleFixesSelection(event) }
        }
    }

    private func handleFixesSelection(_ event: WireEvent) {
        handleFixesSelection(selection: X11Atom(rawValue: UInt(event.selection)), owner: X11Window(rawValue: UInt(event.owner)),
                             time: X11Timestamp(rawValue: UInt(event.time)), reason: OwnerChangeReason(subtype: Int32(event.detail)))
    }

    /// A property changed: on our window, a server timestamp; on a window of one of our reads,
    /// the reader's next chunk; on the clipboard manager's, its counts; else a requestor took a
    /// chunk of one of our sends.
    private func handlePropertyNotify(window: X11Window, property: X11Atom, time: X11Timestamp, isNewValue: Bool, sequence: UInt32) {
        if window == wire.window {
            if property == wire.known[.timestampProperty], isNewValue {
                timestampCame(time)
            } else if property == wire.known[.wmName], isNewValue {
                startTimeCame(time)
            }
        } else if reader.usesWindow(window) {
            // Our own deletes come back too: only a new value matters to a reader.
            if isNewValue { reader.continueIncoming(ReplySlot(window: window, property: property)) }
        } else if property == wire.known[.changeCounts], manager.isWaitingForCounts {
            manager.sharedCountsChanged(on: window)
        } else if manager.isWaitingForCounts, isNewValue, let index = manager.countIndex(ofProperty: property) {
            manager.sharedCountChanged(on: window, index: index, sequence: sequence)
        } else if !isNewValue {
            owner.sends.continueSend(TransferKey(requestor: window, property: property))
        }
    }

    /// The owner of `selection` now, for a compare-and-own or compare-and-clear: the round trip
    /// that asks has XCB read every event the server sent before its answer, and the
    /// ownership changes among them are handled here first. So whoever decides knows of every
    /// change up to that owner, even when the X server gave its window id to an earlier owner
    /// that is gone (a check of the id alone would take that for a change already seen).
    func currentOwnerAfterQueuedChanges(_ selection: X11Atom) -> X11Window {
        let owner = wire.selectionOwner(selection)
        guard wire.fixesEventBase >= 0 else { return owner }
        wire.absorbQueuedEvents()
        for event in wire.intake.take(where: wire.isFixesSelectionEvent) { handleFixesSelection(event) }
        return owner
    }

    private func handleFixesSelection(selection: X11Atom, owner: X11Window, time: X11Timestamp, reason: OwnerChangeReason) {
        let isOurs = (owner == wire.window || owner.isNone) && reason == .setOwner && consumeOurChange(selection, at: time)
        reader.abandonReads(of: selection)
        if reason != .setOwner { reader.failConversionsOfVanishedOwner(selection) }
        delegate?.selectionOwnerChanged(selection: selection, owner: owner, timestamp: time, reason: reason, isOurs: isOurs, session: self)
    }
}
