/// The X thread's timers: deadlines on an injected monotonic clock (nanoseconds), pure state so
/// that tests can drive it without waiting.
struct TimerQueue<Action> {
    private var timers: [Int: (deadline: UInt64, action: Action)] = [:]
    private var nextID = 0

    /// Whether no timer is set.
    var isEmpty: Bool { timers.isEmpty }

    /// Sets a timer for `seconds` after `now`; returns its id.
    mutating func schedule(after seconds: Double, now: UInt64, _ action: Action) -> Int {
        nextID += 1
        // Clamped: a huge or negative delay from a configuration must never trap.
        let delay = seconds.isFinite ? UInt64(min(max(0, seconds), 1e9) * 1e9) : UInt64(1e18)
        timers[nextID] = (now &+ delay, action)
        return nextID
    }

    /// Cancels a timer (nothing for nil or a timer that already fired).
    mutating func cancel(_ id: Int?) {
        if let id { timers.removeValue(forKey: id) }
    }

    /// Milliseconds until the next deadline, rounded up, at most a minute; -1 when none is set.
    func millisecondsUntilNext(now: UInt64) -> Int32 {
        guard let next = timers.values.map(\.deadline).min() else { return -1 }
        guard next > now else { return 0 }
        return Int32(min((next - now + 999_999) / 1_000_000, 60_000))
    }

    /// The ids of the timers whose deadline has come, earliest first. Fire each with
    /// ``take(_:)``: an earlier action may cancel a later one, and timers set by the actions wait
    /// for the next pass.
    func due(now: UInt64) -> [Int] {
        timers.filter { $0.value.deadline <= now }.sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }.map(\.key)
    }

    /// Removes a timer and returns its action; nil if it was cancelled meanwhile.
    mutating func take(_ id: Int) -> Action? {
        timers.removeValue(forKey: id)?.action
    }
}
