@testable import PasteboardDaemon
import Testing

/// The rule of how far one D-Bus caller can delay another (``DBusCallFlow``), as rules.
@Suite("D-Bus call flow")
struct DBusCallFlowTests {
    typealias Flow = DBusCallFlow<Int>

    @Test("callers take turns, one call each: a call waits for at most one call of each other caller")
    func turns() {
        var flow = Flow()
        for call in 0..<100 { #expect(flow.arrived(call, from: ":1.1", small: nil) == .queued) }
        #expect(flow.arrived(1000, from: ":1.2", small: nil) == .queued)
        let first = flow.next()
        #expect(first?.caller == ":1.1" && first?.call == 0)
        _ = flow.replied(to: ":1.1", bytes: 100)
        #expect(flow.next()?.call == 1000, "the second caller goes next")
        _ = flow.replied(to: ":1.2", bytes: 100)
        #expect(flow.next()?.call == 1)
    }

    @Test("a caller that reads none of its replies is held past maxUnread, pinged once, and served again when its Ping is answered")
    func unreadRepliesHold() {
        var flow = Flow()
        for call in 0..<50 { _ = flow.arrived(call, from: ":1.1", small: nil) }
        var pings = 0
        var served = 0
        while let (caller, _) = flow.next() {
            served += 1
            if flow.replied(to: caller, bytes: 4 << 20) {
                pings += 1
                flow.pinged(caller, serial: UInt32(pings))
            }
        }
        #expect(pings == 1, "one Ping in flight at a time")
        #expect(served == Flow.maxUnread / (4 << 20) + 1, "served until it held more than maxUnread")
        #expect(flow.isHeld(":1.1") && !flow.hasTurn)
        // Another caller is served meanwhile, with a large reply too.
        _ = flow.arrived(7, from: ":1.9", small: nil)
        #expect(flow.next()?.call == 7)
        #expect(flow.mayReply(4 << 20))
        // The Ping's answer covers the first reply only: the rest went out after it.
        let answer = flow.answered(serial: 1)
        #expect(answer.wasPing && answer.pingAgain == ":1.1")
        #expect(!flow.isHeld(":1.1") && flow.hasTurn)
        #expect(flow.answered(serial: 99).wasPing == false, "another reply is not a Ping's")
    }

    @Test("a held caller's calls wait only while small and few; the rest are dropped, logged once")
    func heldQueue() {
        var flow = Flow()
        _ = flow.arrived(0, from: ":1.1", small: nil)
        _ = flow.next()
        _ = flow.replied(to: ":1.1", bytes: Flow.maxUnread + 1)
        #expect(flow.isHeld(":1.1"))
        #expect(flow.arrived(1, from: ":1.1", small: false) == .dropped(first: true))
        #expect(flow.arrived(2, from: ":1.1", small: false) == .dropped(first: false))
        for call in 0..<Flow.maxQueuedWhileHeld { #expect(flow.arrived(10 + call, from: ":1.1", small: true) == .queued) }
        #expect(flow.arrived(99, from: ":1.1", small: true) == .dropped(first: false))
        #expect(flow.next() == nil)
        #expect(flow.drain().count == Flow.maxQueuedWhileHeld, "the waiting calls are handed back to be freed")
    }

    @Test("a caller queues at most maxQueued calls; past it, each is refused")
    func queueBound() {
        var flow = Flow()
        for call in 0..<Flow.maxQueued { #expect(flow.arrived(call, from: ":1.1", small: nil) == .queued) }
        #expect(flow.arrived(-1, from: ":1.1", small: nil) == .refused)
        #expect(flow.arrived(-2, from: ":1.2", small: nil) == .queued, "another caller is not refused")
    }

    @Test("callers together hold at most maxUnreadInAll: past it, large replies are refused and callers with unread replies held, while small replies still go")
    func allCallers() {
        var flow = Flow()
        var caller = 0
        while flow.mayReply(Flow.smallReply + 1) {
            caller += 1
            _ = flow.arrived(caller, from: ":1.\(caller)", small: nil)
            _ = flow.next()
            _ = flow.replied(to: ":1.\(caller)", bytes: 30 << 20)
        }
        #expect(flow.unread > Flow.maxUnreadInAll && flow.unread <= Flow.maxUnreadInAll + (30 << 20))
        #expect(flow.isHeld(":1.1"), "under maxUnread itself, but the callers together are over")
        #expect(flow.mayReply(200), "pass's small reply goes")
        _ = flow.arrived(1, from: ":2.0", small: nil)
        #expect(flow.next()?.caller == ":2.0", "a caller with nothing unread is served")
    }

    @Test("callers that read everything leave no trace: the table holds only callers with work, unread replies or a Ping")
    func idleForgotten() {
        var flow = Flow()
        for index in 0..<10_000 {
            _ = flow.arrived(index, from: ":1.\(index)", small: nil)
            _ = flow.next()
            #expect(flow.replied(to: ":1.\(index)", bytes: 300) == false)
        }
        #expect(flow.unread == 0 && !flow.hasTurn && flow.drain().isEmpty)
        // A large reply is pinged; its answer forgets the caller.
        _ = flow.arrived(0, from: ":1.1", small: nil)
        _ = flow.next()
        #expect(flow.replied(to: ":1.1", bytes: 1 << 20) == true)
        flow.pinged(":1.1", serial: 5)
        #expect(flow.unread > 0)
        #expect(flow.answered(serial: 5).pingAgain == nil)
        #expect(flow.unread == 0)
        // A Ping that could not be sent does not hold the caller for good.
        _ = flow.replied(to: ":1.2", bytes: Flow.maxUnread + 1)
        #expect(flow.isHeld(":1.2"))
        flow.pingFailed(":1.2")
        #expect(!flow.isHeld(":1.2") && flow.unread == 0)
    }

    @Test("a seeded run of many callers, some never reading: readers are always served, unread bytes stay bounded")
    func simulation() {
        var random = SeededGenerator(seed: 57)
        var flow = Flow()
        var pings: [UInt32: String] = [:]
        var serial: UInt32 = 0
        let readers = (0..<8).map { ":1.r\($0)" }
        let silent = (0..<8).map { ":1.s\($0)" }
        var servedReaders = 0
        for step in 0..<20_000 {
            let caller = (readers + silent)[Int(random.next() % 16)]
            _ = flow.arrived(step, from: caller, small: flow.isHeld(caller) ? random.next() % 2 == 0 : nil)
            if let (who, _) = flow.next() {
                if readers.contains(who) { servedReaders += 1 }
                let bytes = flow.mayReply(8 << 20) ? Int(random.next() % (8 << 20)) : 200
                if flow.replied(to: who, bytes: bytes) {
                    serial += 1
                    flow.pinged(who, serial: serial)
                    pings[serial] = who
                }
            }
            // Readers answer their Pings (in a random order); silent callers never do.
            for (number, who) in pings where readers.contains(who) && random.next() % 3 == 0 {
                pings[number] = nil
                if let again = flow.answered(serial: number).pingAgain {
                    serial += 1
                    flow.pinged(again, serial: serial)
                    pings[serial] = again
                }
            }
            #expect(flow.unread <= Flow.maxUnreadInAll + 16 * (Flow.maxUnread + (8 << 20)))
        }
        #expect(servedReaders > 8_000, "readers kept being served: \(servedReaders)")
        let silentUnread = flow.unread
        #expect(silentUnread <= Flow.maxUnreadInAll + 8 * (Flow.maxUnread + (8 << 20)))
    }
}
