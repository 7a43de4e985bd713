internal import CXEvents

/// An event or error as read from the connection, decoded into fixed fields (CXEvents.h).
typealias WireEvent = cxevents_event

/// The events XCB has read that the loop has not handled yet, oldest first.
///
/// XCB reads events whenever Xlib waits for a reply (every round trip), and keeps them; they are
/// moved here as soon as the round trip is over, so that the errors among them reach their routes
/// and the ownership changes among them can be handled ahead of the rest
/// (``X11Session/currentOwnerAfterQueuedChanges(_:)``). 32 bytes an event, in one array.
struct EventIntake {
    private var events: [WireEvent] = []
    private var head = 0
    /// The most events held at once since the intake was last emptied.
    private(set) var peak = 0

    var isEmpty: Bool { head == events.count }
    var count: Int { events.count - head }

    mutating func append(_ event: WireEvent) {
        events.append(event)
        peak = max(peak, events.count - head)
    }

    mutating func popFirst() -> WireEvent? {
        guard head < events.count else { return nil }
        let event = events[head]
        head += 1
        if head == events.count {
            events.removeAll(keepingCapacity: events.capacity <= Self.capacityKept)
            head = 0
        } else if head >= 4096, head * 2 >= events.count {
            events.removeFirst(head)
            head = 0
        }
        return event
    }

    /// Takes the events `isTaken` picks out of the intake, keeping the order of the rest.
    mutating func take(where isTaken: (WireEvent) -> Bool) -> [WireEvent] {
        guard !isEmpty else { return [] }
        var taken: [WireEvent] = []
        var kept: [WireEvent] = []
        kept.reserveCapacity(count)
        for event in events[head...] {
            if isTaken(event) { taken.append(event) } else { kept.append(event) }
        }
        events = kept
        head = 0
        return taken
    }

    /// Whether a flood passed through and left its peak allocated: once the intake is empty, it
    /// starts afresh and the heap is trimmed.
    var holdsFloodPeak: Bool { isEmpty && peak > Self.capacityKept }

    mutating func release() {
        self = EventIntake()
    }

    /// The capacity an emptied intake keeps for reuse (events): beyond it, a flood's peak is
    /// given back.
    static let capacityKept = 4096
}
