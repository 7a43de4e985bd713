/// How fast devices' copies are taken: at most one every `interval`. A device that sends copies
/// faster than a person makes them (a flood, or a loop between two tools on the phone) has the
/// newest of each interval taken, and what came between it replaced, never queued: one copy is
/// held at most, whatever comes. The last copy of a burst is always taken, once the interval is
/// over.
///
/// A pure value (events in, actions out): the driver gives it arrivals and wakes it when asked.
package struct CopyPacing: Equatable, Sendable {
    /// A device's copy: its text, its time (ms since 1970) and the device's name.
    package struct Copy: Equatable, Sendable {
        package var text: String
        package var time: Int64
        package var device: String

        package init(text: String, time: Int64, device: String) {
            self.text = text
            self.time = time
            self.device = device
        }
    }

    package enum Action: Equatable, Sendable {
        /// Take this copy now.
        case take(Copy)
        /// Call ``woke(now:)`` at this time (seconds, the driver's clock).
        case wake(at: Double)
        case none
    }

    /// The shortest time between two copies taken, in seconds.
    package let interval: Double
    private var lastTaken = -Double.infinity
    private var held: Copy?
    /// Copies replaced before they were taken, since the start.
    package private(set) var replaced = 0

    package init(interval: Double) {
        self.interval = interval
    }

    /// A copy arrived at `now` (seconds).
    package mutating func arrived(_ copy: Copy, now: Double) -> Action {
        if held == nil, now >= lastTaken + interval {
            lastTaken = now
            return .take(copy)
        }
        let first = held == nil
        if !first { replaced += 1 }
        held = copy
        return first ? .wake(at: lastTaken + interval) : .none
    }

    /// The wake asked for came (at `now`).
    package mutating func woke(now: Double) -> Action {
        guard let copy = held else { return .none }
        guard now >= lastTaken + interval else { return .wake(at: lastTaken + interval) }
        held = nil
        lastTaken = now
        return .take(copy)
    }
}
