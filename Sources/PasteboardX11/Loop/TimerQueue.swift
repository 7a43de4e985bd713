/// A timer set on a ``TimerQueue``: what cancels it. A type of its own, so that a timer is never
/// confused with an operation, request or transfer id.
struct TimerHandle: Hashable, Sendable {
    fileprivate let id: Int
}

/// The X thread's timers: deadlines on an injected monotonic clock (nanoseconds), pure state so
/// that tests can drive it without waiting.
struct TimerQueue<Action> {
    private var timers: [TimerHandle: (deadline: UInt64, action: Action)] = [:]
    private var nextID = 0

    /// Whether no timer is set.
    var isEmpty: Bool { timers.isEmpty }

    /// Sets a timer for `seconds` after `now`.
    mutating func schedule(after seconds: Double, now: UInt64, _ action: Action) -> TimerHandle {
        nextID += 1
        // Clamped: a huge or negative delay from a configuration must never trap.
        let delay = seconds.isFinite ? UInt64(min(max(0, seconds), 1e9) * 1e9) : UInt64(1e18)
        let handle = TimerHandle(id: nextID)
        timers[handle] = (now &+ delay, action)
        return handle
    }

    /// Cancels a timer (nothing for nil or a timer that already fired).
    mutating func cancel(_ handle: TimerHandle?) {
        if let handle { timers.removeValue(forKey: handle) }
    }

    /// Milliseconds until the next deadline, rounded up, at most a minute; -1 when none is set.
    /// Asked before every sleep of the loop, so it walks the timers once and makes nothing: a key
    /// path into the generic entry (`map(\.deadline)`) was built anew by the runtime each call,
    /// 9 % of an owner's processor per conversion.
    func millisecondsUntilNext(now: UInt64) -> Int32 {
        var earliest: UInt64?
        for timer in timers.values where earliest.map({ timer.deadline < $0 }) ?? true { earliest = timer.deadline }
        guard let next = earliest else { return -1 }
        guard next > now else { return 0 }
        return Int32(min((next - now + 999_999) / 1_000_000, 60_000))
    }

    /// The timers whose deadline has come, earliest first (in the order they were set for equal
    /// deadlines). Fire each with ``take(_:)``: an earlier action may cancel a later one, and
    /// timers set by the actions wait for the next pass.
    func due(now: UInt64) -> [TimerHandle] {
        var due: [(deadline: UInt64, handle: TimerHandle)] = []
        for (handle, timer) in timers where timer.deadline <= now { due.append((timer.deadline, handle)) }
        guard !due.isEmpty else { return [] }
        return due.sorted { ($0.deadline, $0.handle.id) < ($1.deadline, $1.handle.id) }.map { $0.handle }
    }

    /// Removes a timer and returns its action; nil if it was cancelled meanwhile.
    mutating func take(_ handle: TimerHandle) -> Action? {
        timers.removeValue(forKey: handle)?.action
    }
}
