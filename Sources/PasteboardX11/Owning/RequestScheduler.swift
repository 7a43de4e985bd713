/// The conversion requests waiting to be served, and the flood rules: requests in, decisions
/// out. A value with no X calls in it; ``SelectionServer`` performs what it decides (answer, refuse,
/// watch or release a requestor window), so the rules are tested apart from any server.
///
/// Requestors are served in rotation, one request each, so a client that floods the owner
/// delays the others by one request at most per round.
///
/// A requestor whose queue is full has further requests dropped; once ``dropsBeforeFlooding``
/// of them were, it is flooding: its queued requests are dropped too, and so is every request it
/// makes until it has been quiet for ``floodCooldown``. Serving a flooder's requests would cost
/// round trips (a MULTIPLE's property is read), and the reply to a round trip comes after
/// everything the server queued for us before it: each one would pull the flood's backlog in.
///
/// A flood's every event passes through ``admit(_:now:)``, so the common case costs no hashing:
/// the last flooder seen is compared directly.
struct RequestScheduler {
    /// The most conversion requests one requestor window may have waiting, and all windows
    /// together: past them, requests are dropped unanswered. A client with that many requests
    /// outstanding is flooding (one MULTIPLE asks for any number of targets); answering each
    /// refusal would cost as much as the flood itself.
    static let maxQueuedPerRequestor = 8
    static let maxQueuedRequests = 512
    /// How long a requestor caught flooding is ignored, from its last request (nanoseconds).
    static let floodCooldown: UInt64 = 1_000_000_000
    /// How many requests a requestor may have dropped for a full queue (since it was last
    /// empty) before it counts as flooding: a burst of a few is an eager reader, not an attack.
    static let dropsBeforeFlooding = 64
    /// How many flooders are remembered before the quiet ones are forgotten.
    static let floodersRemembered = 64

    /// What became of a request.
    enum Admission: Equatable {
        /// It waits its turn.
        case queued
        /// It was dropped unanswered (a full queue, a flooder's).
        case dropped
        /// It names a window no requestor may use: refuse it.
        case refused
        /// Its requestor has just been caught flooding: watch `requestor` (its destruction must
        /// clear the mark: the id may go to another client's window), then release the windows
        /// in `release` (their queues are gone, or they have been quiet for the cool-down).
        case caughtFlooding(requestor: X11Window, release: [X11Window])
        /// Its requestor had been flooding and has been quiet since: release its watch. The
        /// request itself was then admitted as `then`.
        indirect case forgave(X11Window, then: Admission)
    }

    private var queues: [X11Window: [ConversionRequest]] = [:]
    private var order: [X11Window] = []
    private(set) var queuedCount = 0
    /// Requestors watched because their requests wait past a turn.
    private var watched: Set<X11Window> = []
    /// Requestors caught flooding, until when (the clock's nanoseconds).
    private var flooding: [X11Window: UInt64] = [:]
    /// Requests dropped for a full queue, per requestor, since its queue was last empty.
    private var overflowDrops: [X11Window: Int] = [:]
    /// The flooder compared first, and its deadline (kept here, not in the table, while it is).
    private var recent: (window: X11Window, until: UInt64) = (.none, 0)

    var isEmpty: Bool { order.isEmpty }

    /// Whether `window` is ignored as a flooder at `now`.
    func isFlooding(_ window: X11Window, now: UInt64) -> Bool {
        if window == recent.window, !window.isNone { return now < recent.until }
        return flooding[window].map { now < $0 } ?? false
    }

    /// The flooder whose every request ``admit(_:now:isForged:)`` would drop at `now` with no
    /// other effect than to restart its cool-down (the one compared first), or none. The event
    /// loop drops that window's requests before they are decoded, then calls
    /// ``droppedUnseen(from:now:)``: a flood's events then cost less than the server's work to send
    /// them, and no backlog builds up on a loaded machine.
    func flooderToDrop(now: UInt64) -> X11Window {
        !recent.window.isNone && now < recent.until ? recent.window : .none
    }

    /// Requests of `window`, which ``flooderToDrop(now:)`` named, were dropped unseen at `now`:
    /// as many admissions of them would have, its cool-down starts again (if it is still marked:
    /// a window destroyed meanwhile is forgotten).
    mutating func droppedUnseen(from window: X11Window, now: UInt64) {
        guard !window.isNone else { return }
        if window == recent.window {
            if now < recent.until { recent.until = now + Self.floodCooldown }
        } else if let until = flooding[window], now < until {
            flooding[window] = now + Self.floodCooldown
        }
    }

    /// How many requests of `window` wait.
    func waiting(for window: X11Window) -> Int { queues[window]?.count ?? 0 }

    /// Takes in a request read at `now`; `isForged` when it names our own window, the root or none.
    mutating func admit(_ request: ConversionRequest, now: UInt64, isForged: Bool) -> Admission {
        let requestor = request.requestor
        var forgiven: X11Window?
        if requestor == recent.window, !requestor.isNone {
            if now < recent.until {
                recent.until = now + Self.floodCooldown
                return .dropped
            }
            if forget(requestor) { forgiven = requestor }
        }
        let admission = admitAfterFastPath(request, now: now, isForged: isForged, forgiven: &forgiven)
        return forgiven.map { .forgave($0, then: admission) } ?? admission
    }

    private mutating func admitAfterFastPath(_ request: ConversionRequest, now: UInt64, isForged: Bool,
                                             forgiven: inout X11Window?) -> Admission {
        let requestor = request.requestor
        guard !isForged else { return .refused }
        if let until = flooding[requestor] {
            if now < until {
                flooding[requestor] = now + Self.floodCooldown
                makeRecent(requestor)
                return .dropped
            }
            if forget(requestor) { forgiven = requestor }
        }
        let waiting = queues[requestor]?.count ?? 0
        // A request into a property that a waiting request of the same window names supersedes
        // it: a requestor asks again only once it gave up, and the window may be a new client's
        // that got a departed one's id. One answer goes into the property, not two. A requestor
        // that keeps doing it is flooding.
        let superseded = waiting > 0 ? queues[requestor]?.firstIndex { $0.replyProperty == request.replyProperty } : nil
        if let superseded { queues[requestor]?[superseded] = request }
        if superseded != nil || waiting >= Self.maxQueuedPerRequestor {
            // A burst past the queue loses its excess; only a requestor that keeps asking while
            // its queue is full is flooding.
            let dropped = (overflowDrops[requestor] ?? 0) + 1
            guard dropped >= Self.dropsBeforeFlooding else {
                overflowDrops[requestor] = dropped
                return superseded != nil ? .queued : .dropped
            }
            return markFlooding(requestor, now: now)
        }
        guard queuedCount < Self.maxQueuedRequests else { return .dropped }
        if waiting == 0 { order.append(requestor) }
        queues[requestor, default: []].append(request)
        queuedCount += 1
        return .queued
    }

    /// The next request to serve, in rotation.
    mutating func next() -> ConversionRequest? {
        while !order.isEmpty {
            let requestor = order.removeFirst()
            guard var queue = queues.removeValue(forKey: requestor), !queue.isEmpty else { continue }
            let request = queue.removeFirst()
            queuedCount -= 1
            if !queue.isEmpty {
                queues[requestor] = queue
                order.append(requestor)
            }
            return request
        }
        return nil
    }

    /// After a request of `requestor` was served: whether its watch (taken while it waited) is
    /// to be released, its queue now being empty. Asked after the answer, which may have taken a
    /// watch of its own (an INCR transfer): the window is not deselected and selected again.
    mutating func served(_ requestor: X11Window) -> Bool {
        guard queues[requestor] == nil else { return false }
        overflowDrops.removeValue(forKey: requestor)
        return watched.remove(requestor) != nil
    }

    /// The requestors whose requests wait past this turn and are not watched yet: the server
    /// watches them, so that if a window is destroyed its requests go with it (its id may come
    /// back as another client's window). A request answered in the turn that read it needs no
    /// watch, which saves two requests to the server per conversion.
    mutating func takeUnwatchedWaiting() -> [X11Window] {
        var unwatched: [X11Window] = []
        for requestor in order where !watched.contains(requestor) {
            watched.insert(requestor)
            unwatched.append(requestor)
        }
        return unwatched
    }

    /// A requestor window was destroyed: its requests and marks go. With `serial` (a request of
    /// ours that found the window gone), requests that came after the server processed it are
    /// another window's, of the same id: they stay queued.
    mutating func requestorGone(_ requestor: X11Window, asOf serial: UInt?) {
        let later = serial.map { serial in queues[requestor]?.filter { $0.serial >= serial } ?? [] } ?? []
        if let queued = queues.removeValue(forKey: requestor) {
            queuedCount -= queued.count
            order.removeAll { $0 == requestor }
        }
        watched.remove(requestor)
        flooding.removeValue(forKey: requestor)
        overflowDrops.removeValue(forKey: requestor)
        if recent.window == requestor { recent = (.none, 0) }
        if !later.isEmpty {
            queues[requestor] = later
            order.append(requestor)
            queuedCount += later.count
        }
    }

    // MARK: Flooders

    /// A requestor that kept asking past its queue is ignored until it has been quiet for the
    /// cool-down; what it has queued is dropped.
    private mutating func markFlooding(_ requestor: X11Window, now: UInt64) -> Admission {
        overflowDrops.removeValue(forKey: requestor)
        var release: [X11Window] = []
        // Many windows flooding in turn: forget the ones that have gone quiet.
        if flooding.count >= Self.floodersRemembered {
            makeRecent(.none)
            for (window, until) in flooding where until <= now {
                flooding.removeValue(forKey: window)
                release.append(window)
            }
        }
        flooding[requestor] = now + Self.floodCooldown
        makeRecent(requestor)
        if let queued = queues.removeValue(forKey: requestor) {
            queuedCount -= queued.count
            order.removeAll { $0 == requestor }
            if watched.remove(requestor) != nil { release.append(requestor) }
        }
        return .caughtFlooding(requestor: requestor, release: release)
    }

    /// Makes `window` (a marked flooder, or none) the one compared first, after writing the
    /// previous one's deadline back to the table.
    private mutating func makeRecent(_ window: X11Window) {
        if !recent.window.isNone, flooding[recent.window] != nil {
            flooding[recent.window] = recent.until
        }
        recent = (window, window.isNone ? 0 : flooding[window] ?? 0)
    }

    /// A flooder that has been quiet for the cool-down is served again; true when it was marked
    /// (its watch is to be released).
    private mutating func forget(_ window: X11Window) -> Bool {
        if recent.window == window { recent = (.none, 0) }
        return flooding.removeValue(forKey: window) != nil
    }
}
