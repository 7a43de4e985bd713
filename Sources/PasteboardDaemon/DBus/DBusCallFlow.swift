/// How far one D-Bus caller can delay another: which call xpbd serves next, and what it may send.
///
/// The bus buffers each reply until its caller reads it, and counts every byte buffered for
/// xpbd's replies against xpbd (the session bus: 1 GB). Past that it stops reading from xpbd, and
/// every caller waits: 3,000 calls for a 4 MiB entry, never read, stalled pass's
/// `clearClipboardHistory` for as long as that caller lived. So:
///
/// - **Turns.** Calls wait in one queue per caller, and callers take turns, one call each: a call
///   waits for at most one call of each other caller.
/// - **Unread replies.** A caller that holds more than ``maxUnread`` of replies it may not have
///   read is *held*: its calls wait until it shows it read them. It shows that by answering a
///   `Peer.Ping` xpbd sends after its replies (every D-Bus library answers one as it reads it; the
///   bus answers for a caller that left). A caller is pinged once it holds more than
///   ``smallReply``, so one that reads is never held for long.
/// - **All callers.** While callers together hold more than ``maxUnreadInAll``, every caller with
///   more than ``smallReply`` unread is held, and a reply larger than ``smallReply`` is refused
///   with a short error: the bus's count of xpbd stays far under its limit, and a caller whose
///   replies are small (pass, a Ping) is served.
/// - **Bounded waits.** A caller queues at most ``maxQueued`` calls (past it: refused with an
///   error); a held one at most ``maxQueuedWhileHeld`` calls whose arguments are small (others
///   are dropped with no reply: it reads none anyway).
///
/// A pure value: events in, decisions out. ``DBusService`` performs them.
struct DBusCallFlow<Call> {
    static var maxUnread: Int { 32 << 20 }
    static var maxUnreadInAll: Int { 256 << 20 }
    static var smallReply: Int { 64 << 10 }
    static var maxQueued: Int { 256 }
    static var maxQueuedWhileHeld: Int { 32 }

    private struct Caller {
        var queue: [Call] = []
        /// Reply bytes sent that the caller may not have read.
        var unread = 0
        /// The Ping in flight (its serial) and the unread bytes it will acknowledge.
        var ping: (serial: UInt32, covers: Int)?
        /// Whether a call was dropped since it was last served (logged once).
        var dropping = false
    }

    private var callers: [String: Caller] = [:]
    /// Callers in the order they take turns.
    private var turns: [String] = []
    private var unreadInAll = 0

    /// What became of a call that arrived.
    enum Arrival: Equatable {
        /// It waits for its turn.
        case queued
        /// It is answered at once with `LimitsExceeded` (its caller queued too many).
        case refused
        /// It is dropped with no reply (its caller reads none); `first` when this is the first
        /// since the caller was last served.
        case dropped(first: Bool)
    }

    /// Whether `caller` is held: its calls wait until it reads its replies.
    func isHeld(_ caller: String) -> Bool {
        guard let state = callers[caller] else { return false }
        return state.unread > Self.maxUnread || (state.unread > Self.smallReply && unreadInAll > Self.maxUnreadInAll)
    }

    /// A call arrived from `caller`; `small` says whether its arguments are small (asked only of
    /// a held caller's calls: nil when not known).
    mutating func arrived(_ call: Call, from caller: String, small: Bool?) -> Arrival {
        var state = callers[caller] ?? Caller()
        let held = isHeld(caller)
        if held, small != true || state.queue.count >= Self.maxQueuedWhileHeld {
            let first = !state.dropping
            state.dropping = true
            callers[caller] = state
            return .dropped(first: first)
        }
        guard state.queue.count < Self.maxQueued else { return .refused }
        state.queue.append(call)
        if callers[caller] == nil { turns.append(caller) }
        callers[caller] = state
        return .queued
    }

    /// Whether any call may be served now.
    var hasTurn: Bool { turns.contains { !(callers[$0]?.queue.isEmpty ?? true) && !isHeld($0) } }

    /// The next call to serve, taking callers in turn; nil when every waiting caller is held.
    mutating func next() -> (caller: String, call: Call)? {
        for index in turns.indices {
            let caller = turns[index]
            guard var state = callers[caller], !state.queue.isEmpty, !isHeld(caller) else { continue }
            let call = state.queue.removeFirst()
            state.dropping = false
            callers[caller] = state
            // The caller goes to the back of the line.
            turns.remove(at: index)
            turns.append(caller)
            return (caller, call)
        }
        return nil
    }

    /// Whether a reply of `bytes` may be sent now; when not, a short error goes instead.
    func mayReply(_ bytes: Int) -> Bool {
        bytes <= Self.smallReply || unreadInAll <= Self.maxUnreadInAll
    }

    /// A reply of `bytes` was sent to `caller`. Returns whether to ping it now (it holds more than
    /// a small reply unread, and no Ping is in flight).
    mutating func replied(to caller: String, bytes: Int) -> Bool {
        var state = callers[caller] ?? Caller()
        if callers[caller] == nil { turns.append(caller) }
        state.unread += bytes
        unreadInAll += bytes
        callers[caller] = state
        let ping = state.unread > Self.smallReply && state.ping == nil
        forgetIfIdle(caller)
        return ping
    }

    /// The Ping to `caller` went out with `serial`: its answer acknowledges every reply before it.
    mutating func pinged(_ caller: String, serial: UInt32) {
        guard var state = callers[caller] else { return }
        state.ping = (serial, state.unread)
        callers[caller] = state
    }

    /// The Ping could not be sent (xpbd is out of memory): the caller's replies count as read,
    /// rather than holding it for good.
    mutating func pingFailed(_ caller: String) {
        guard var state = callers[caller] else { return }
        unreadInAll -= state.unread
        state.unread = 0
        callers[caller] = state
        forgetIfIdle(caller)
    }

    /// A reply (or error) to message `serial` arrived. Returns whether it was a Ping's: then the
    /// caller read every reply before it (or left the bus, which frees them), and whether to
    /// ping it again (more went out since).
    mutating func answered(serial: UInt32) -> (wasPing: Bool, pingAgain: String?) {
        guard let caller = callers.first(where: { $0.value.ping?.serial == serial })?.key, var state = callers[caller],
              let ping = state.ping else { return (false, nil) }
        state.unread -= ping.covers
        unreadInAll -= ping.covers
        state.ping = nil
        callers[caller] = state
        let again = state.unread > Self.smallReply
        forgetIfIdle(caller)
        return (true, again ? caller : nil)
    }

    /// The calls still waiting (handed back when xpbd stops, to be freed).
    mutating func drain() -> [Call] {
        defer { callers = [:]; turns = []; unreadInAll = 0 }
        return turns.flatMap { callers[$0]?.queue ?? [] }
    }

    /// Unread bytes of all callers (for tests and logs).
    var unread: Int { unreadInAll }

    /// A caller with nothing queued, nothing unread past a small reply and no Ping in flight is
    /// forgotten (what it holds counts as read): the table holds only callers that matter.
    private mutating func forgetIfIdle(_ caller: String) {
        guard let state = callers[caller], state.queue.isEmpty, state.ping == nil, state.unread <= Self.smallReply else { return }
        unreadInAll -= state.unread
        callers[caller] = nil
        turns.removeAll { $0 == caller }
    }
}
