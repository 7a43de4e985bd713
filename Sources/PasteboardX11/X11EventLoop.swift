internal import CX11
internal import CXlibQueue
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

    /// Whether Xlib holds events not yet handled.
    /// (XQLength reads Xlib's queue length; XEventsQueued, even with QueuedAlready, also tries a
    /// read of the connection in XCB-based Xlib: a system call per loop turn.)
    var hasQueuedEvents: Bool { !isDead && (XQLength(display) > 0 || !requestOrder.isEmpty) }

    /// The most events one turn of the loop handles before it looks at its jobs again.
    static let eventsPerTurn: Int32 = 64
    /// How many events are read between two releases of Xlib's spare queue nodes.
    static let eventsBeforeRelease = 1 << 16

    /// Handles what the server sent (a batch at most), routes errors, fires due timers, flushes
    /// requests.
    func pump() {
        assertOnXThread()
        if checkDead() { return }
        // One read of the connection (XPending flushes, then reads what has arrived), then only
        // what Xlib has queued (events read while a handler waited for a reply): asking XPending
        // again would cost a read that finds nothing, on every wake-up. Anything that arrives
        // later makes poll() return at once.
        // At most a batch of events per turn: a transfer whose every chunk brings the next event
        // would otherwise keep the loop here, and jobs (other readers, writes) would starve. The
        // loop comes back at once while events remain queued.
        // Conversion requests do not count against the batch: one only joins its requestor's
        // queue or is dropped (queueRequest), which costs less than the server's work to send
        // it, so every request read is handled in the same turn. Counted, a flood piled up in
        // Xlib's queue faster than the loop took it out (1.7 GB after a 4-second flood of
        // MULTIPLE requests, each read whole into memory as the handlers' round trips waited).
        var queued = XPending(display)
        var budget = Self.eventsPerTurn
        turnClock = configuration.clock()
        while queued > 0, budget > 0 {
            for _ in 0..<queued where budget > 0 {
                var event = XEvent()
                XNextEvent(display, &event)
                let isRequest = event.type == SelectionRequest
                if !isRequest { budget -= 1 }
                eventsSinceRelease &+= 1
                dispatch(&event)
                // A request only joined a queue or was dropped: no request of ours whose errors
                // to collect yet (the turn collects them after the batch), and it costs a flood's
                // every event two locks less.
                if isRequest { continue }
                collectErrors()
                if checkDead() { return }
            }
            queued = XQLength(display)
        }
        // Many events since the last look (a flood): once they are all handled, the queue's
        // spare nodes go back to the system instead of holding the flood's peak for good.
        if eventsSinceRelease >= Self.eventsBeforeRelease, XQLength(display) == 0 {
            eventsSinceRelease = 0
            _ = cxlibqueue_release_free_list(UnsafeMutableRawPointer(display))
        }
        collectErrors()
        serveQueuedRequests()
        collectErrors()
        fireDueTimers()
        XFlush(display)
        _ = checkDead()
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

    private func dispatch(_ event: inout XEvent) {
        switch event.type {
        case SelectionRequest:
            queueRequest(ConversionRequest(event.xselectionrequest))
        case SelectionNotify:
            let notify = event.xselection
            handleSelectionNotify(requestor: X11Window(rawValue: notify.requestor), selection: X11Atom(rawValue: notify.selection),
                                  target: X11Atom(rawValue: notify.target), property: X11Atom(rawValue: notify.property))
        case SelectionClear:
            let clear = event.xselectionclear
            handleSelectionClear(window: X11Window(rawValue: clear.window), selection: X11Atom(rawValue: clear.selection),
                                 time: X11Timestamp(rawValue: clear.time))
        case PropertyNotify:
            let property = event.xproperty
            handlePropertyNotify(window: X11Window(rawValue: property.window), property: X11Atom(rawValue: property.atom),
                                 time: X11Timestamp(rawValue: property.time), isNewValue: property.state == PropertyNewValue)
        case DestroyNotify:
            handleRequestorGone(X11Window(rawValue: event.xdestroywindow.window))
        default:
            if fixesEventBase >= 0, event.type == fixesEventBase + XFixesSelectionNotify {
                let fixes = cx11_fixes_selection_event(&event)
                handleFixesSelection(selection: X11Atom(rawValue: fixes.selection), owner: X11Window(rawValue: fixes.owner),
                                     time: X11Timestamp(rawValue: fixes.selection_timestamp), reason: OwnerChangeReason(subtype: fixes.subtype))
            }
        }
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
    /// that asks puts every event the server sent before its answer in Xlib's queue, and the
    /// ownership changes among them are handled here first. So whoever decides knows of every
    /// change up to that owner, even when the X server gave its window id to an earlier owner
    /// that is gone (a check of the id alone would take that for a change already seen).
    func currentOwnerAfterQueuedChanges(_ selection: X11Atom) -> X11Window {
        let owner = selectionOwner(selection)
        guard fixesEventBase >= 0 else { return owner }
        var event = XEvent()
        while XCheckTypedEvent(display, fixesEventBase + XFixesSelectionNotify, &event) != 0 {
            let fixes = cx11_fixes_selection_event(&event)
            handleFixesSelection(selection: X11Atom(rawValue: fixes.selection), owner: X11Window(rawValue: fixes.owner),
                                 time: X11Timestamp(rawValue: fixes.selection_timestamp), reason: OwnerChangeReason(subtype: fixes.subtype))
        }
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
