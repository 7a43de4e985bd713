import Testing
import X11TestSupport
@testable import PasteboardX11

/// The owner's fair queue and flood rules, as a value: requests in, decisions out.
@Suite("Request scheduler")
struct RequestSchedulerTests {
    static let second: UInt64 = 1_000_000_000

    static func request(_ requestor: UInt, property: UInt = 100, serial: UInt = 0) -> ConversionRequest {
        ConversionRequest(owner: X11Window(rawValue: 1), requestor: X11Window(rawValue: requestor), selection: X11Atom(rawValue: 2),
                          target: X11Atom(rawValue: 3), property: X11Atom(rawValue: property), time: X11Timestamp(rawValue: 0),
                          serial: serial)
    }

    static func window(_ raw: UInt) -> X11Window { X11Window(rawValue: raw) }

    @Test("requestors are served in rotation, one request each")
    func rotation() {
        var scheduler = RequestScheduler()
        for (requestor, property) in [(10, 1), (10, 2), (10, 3), (20, 1), (30, 1), (30, 2)] as [(UInt, UInt)] {
            do {
                let result = scheduler.admit(Self.request(requestor, property: property), now: 0, isForged: false)
                #expect(result == .queued)
            }
        }
        var served: [String] = []
        while let request = scheduler.next() { served.append("\(request.requestor.rawValue).\(request.property.rawValue)") }
        #expect(served == ["10.1", "20.1", "30.1", "10.2", "30.2", "10.3"])
        #expect(scheduler.queuedCount == 0 && scheduler.isEmpty)
    }

    @Test("a burst past a full queue loses its excess; only a requestor that keeps asking is flooding, until it is quiet")
    func flooding() {
        var scheduler = RequestScheduler()
        let flooder = Self.window(10)
        for property in 0..<UInt(RequestScheduler.maxQueuedPerRequestor) {
            do {
                let result = scheduler.admit(Self.request(10, property: 100 + property), now: 0, isForged: false)
                #expect(result == .queued)
            }
        }
        do {
            let result = scheduler.takeUnwatchedWaiting()
            #expect(result == [flooder])
        }
        let again = scheduler.takeUnwatchedWaiting()
        #expect(again.isEmpty)
        for property in 0..<UInt(RequestScheduler.dropsBeforeFlooding - 1) {
            do {
                let result = scheduler.admit(Self.request(10, property: 1000 + property), now: 0, isForged: false)
                #expect(result == .dropped)
            }
        }
        #expect(scheduler.waiting(for: flooder) == RequestScheduler.maxQueuedPerRequestor)
        #expect(!scheduler.isFlooding(flooder, now: 0))
        // The next drop makes it a flooder: its queue goes, and the watch taken for the queue is
        // released after the one taken for the mark.
        do {
            let result = scheduler.admit(Self.request(10, property: 5000), now: 0, isForged: false)
            #expect(result == .caughtFlooding(requestor: flooder, release: [flooder]))
        }
        #expect(scheduler.waiting(for: flooder) == 0 && scheduler.queuedCount == 0)
        // Every request meanwhile is dropped, and pushes the cool-down on.
        do {
            let result = scheduler.admit(Self.request(10, property: 1), now: Self.second / 2, isForged: false)
            #expect(result == .dropped)
        }
        do {
            let result = scheduler.admit(Self.request(10, property: 1), now: Self.second, isForged: false)
            #expect(result == .dropped)
        }
        #expect(scheduler.isFlooding(flooder, now: Self.second * 3 / 2))
        // Others are served meanwhile.
        do {
            let result = scheduler.admit(Self.request(20), now: Self.second, isForged: false)
            #expect(result == .queued)
        }
        // Quiet for the cool-down: served again, and its mark's watch released.
        do {
            let result = scheduler.admit(Self.request(10, property: 1), now: Self.second * 2 + 1, isForged: false)
            #expect(result == .forgave(flooder, then: .queued))
        }
        #expect(!scheduler.isFlooding(flooder, now: Self.second * 2 + 1))
        do {
            let result = scheduler.next()?.requestor
            #expect(result == Self.window(20))
        }
        do {
            let result = scheduler.next()?.requestor
            #expect(result == flooder)
        }
    }

    @Test("the flooder the event loop drops unseen is exactly one whose every request admit drops: seeded runs of requests, gone windows and time")
    func droppedUnseenAgreesWithAdmit() {
        var dropsSeen = 0
        defer { #expect(dropsSeen > 1000, "the runs met flooders") }
        for seed in UInt64(1)...40 {
            var random = SeededRandom(seed: seed)
            // Two schedulers fed the same events: one admits every request, the other lets the
            // loop's rule drop the flooder's requests unseen.
            var admitting = RequestScheduler()
            var skipping = RequestScheduler()
            var now: UInt64 = 0
            for _ in 0..<3000 {
                // Now and then a pause past the cool-down: a flooder that was quiet is served again.
                let pause = Int.random(in: 0..<100, using: &random) == 0
                now += pause ? RequestScheduler.floodCooldown + 1 : UInt64.random(in: 0...(Self.second / 50), using: &random)
                let requestor = UInt.random(in: 10...13, using: &random)
                switch Int.random(in: 0..<100, using: &random) {
                case 0:
                    admitting.requestorGone(Self.window(requestor), asOf: nil)
                    skipping.requestorGone(Self.window(requestor), asOf: nil)
                case 1...3:
                    _ = admitting.next()
                    _ = skipping.next()
                default:
                    let request = Self.request(requestor, property: UInt.random(in: 1...40, using: &random))
                    let admitted = admitting.admit(request, now: now, isForged: false)
                    if skipping.flooderToDrop(now: now) == request.requestor {
                        #expect(admitted == .dropped, "seed \(seed)")
                        skipping.droppedUnseen(from: request.requestor, now: now)
                        dropsSeen += 1
                    } else {
                        let other = skipping.admit(request, now: now, isForged: false)
                        #expect(other == admitted, "seed \(seed)")
                    }
                }
                for window in 10...13 {
                    #expect(admitting.isFlooding(Self.window(UInt(window)), now: now) == skipping.isFlooding(Self.window(UInt(window)), now: now))
                }
            }
        }
    }

    @Test("a request into a property that a waiting request names replaces it; one that keeps doing so is flooding")
    func supersede() {
        var scheduler = RequestScheduler()
        do {
            let result = scheduler.admit(Self.request(10, property: 7, serial: 1), now: 0, isForged: false)
            #expect(result == .queued)
        }
        do {
            let result = scheduler.admit(Self.request(10, property: 8, serial: 2), now: 0, isForged: false)
            #expect(result == .queued)
        }
        do {
            let result = scheduler.admit(Self.request(10, property: 7, serial: 3), now: 0, isForged: false)
            #expect(result == .queued)
        }
        #expect(scheduler.queuedCount == 2)
        do {
            let result = scheduler.next()?.serial
            #expect(result == 3)
        }
        for serial in 0..<UInt(RequestScheduler.dropsBeforeFlooding - 2) {
            do {
                let result = scheduler.admit(Self.request(10, property: 8, serial: 10 + serial), now: 0, isForged: false)
                #expect(result == .queued)
            }
        }
        guard case .caughtFlooding = scheduler.admit(Self.request(10, property: 8), now: 0, isForged: false) else {
            Issue.record("a requestor that keeps replacing its request is flooding")
            return
        }
    }

    @Test("all queues together hold a bounded number of requests; a forged requestor is refused")
    func bounds() {
        var scheduler = RequestScheduler()
        let windows = RequestScheduler.maxQueuedRequests / RequestScheduler.maxQueuedPerRequestor
        for window in 0..<UInt(windows) {
            for property in 0..<UInt(RequestScheduler.maxQueuedPerRequestor) {
                do {
                    let result = scheduler.admit(Self.request(100 + window, property: 100 + property), now: 0, isForged: false)
                    #expect(result == .queued)
                }
            }
        }
        #expect(scheduler.queuedCount == RequestScheduler.maxQueuedRequests)
        do {
            let result = scheduler.admit(Self.request(99), now: 0, isForged: false)
            #expect(result == .dropped)
        }
        do {
            let result = scheduler.admit(Self.request(98), now: 0, isForged: true)
            #expect(result == .refused)
        }
    }

    @Test("a destroyed requestor's requests go, except those made after the request of ours that found it gone")
    func requestorGone() {
        var scheduler = RequestScheduler()
        for serial in [UInt(5), 6, 9, 12] {
            _ = scheduler.admit(Self.request(10, property: serial, serial: serial), now: 0, isForged: false)
        }
        _ = scheduler.admit(Self.request(20), now: 0, isForged: false)
        _ = scheduler.takeUnwatchedWaiting()
        scheduler.requestorGone(Self.window(10), asOf: 9)
        #expect(scheduler.queuedCount == 3)
        var served: [UInt] = []
        while let request = scheduler.next() { served.append(request.serial) }
        #expect(served == [0, 9, 12])
        // The kept requests are a new window's: it is not counted as watched.
        do {
            let result = scheduler.served(Self.window(10))
            #expect(!result)
        }
        scheduler.requestorGone(Self.window(20), asOf: nil)
        #expect(scheduler.isEmpty)
    }

    @Test("a requestor's watch is released once its queue is empty, not before")
    func watchRelease() {
        var scheduler = RequestScheduler()
        _ = scheduler.admit(Self.request(10, property: 1), now: 0, isForged: false)
        _ = scheduler.admit(Self.request(10, property: 2), now: 0, isForged: false)
        do {
            let result = scheduler.takeUnwatchedWaiting()
            #expect(result == [Self.window(10)])
        }
        do {
            let result = scheduler.next()
            #expect(result != nil)
        }
        do {
            let result = scheduler.served(Self.window(10))
            #expect(!result)
        }
        do {
            let result = scheduler.next()
            #expect(result != nil)
        }
        do {
            let result = scheduler.served(Self.window(10))
            #expect(result)
        }
        do {
            let result = scheduler.served(Self.window(10))
            #expect(!result)
        }
    }

    /// Honest readers (each with at most a full queue outstanding, asking again only once
    /// answered) and flooders, interleaved at random. Checks, for every seed: every honest request
    /// is served once and in its reader's order; no honest reader is ever taken for a flooder;
    /// every flooder is caught; the count matches the queues; and every watch the scheduler asked
    /// for is released by the end.
    @Test("seeded simulation: honest readers are all served, flooders caught, watches balanced", arguments: 0..<UInt64(40))
    func simulation(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var scheduler = RequestScheduler()
        let honest = (1...Int(random.next() % 6 + 1)).map { UInt(100 + $0) }
        let flooders = (1...Int(random.next() % 3 + 1)).map { UInt(900 + $0) }
        var sent: [UInt: [UInt]] = [:]
        var outstanding: [UInt: Int] = [:]
        var served: [UInt: [UInt]] = [:]
        var watches: [UInt: Int] = [:]
        var caught: Set<UInt> = []
        var now: UInt64 = 0
        var serial: UInt = 0

        func perform(_ admission: RequestScheduler.Admission, requestor: UInt) {
            switch admission {
            case .queued, .dropped:
                break
            case .refused:
                Issue.record("seed \(seed): a requestor was refused")
            case let .caughtFlooding(window, release):
                #expect(!honest.contains(window.rawValue), "seed \(seed): honest \(window.rawValue) taken for a flooder")
                caught.insert(window.rawValue)
                watches[window.rawValue, default: 0] += 1
                for window in release { watches[window.rawValue, default: 0] -= 1 }
            case let .forgave(window, then):
                watches[window.rawValue, default: 0] -= 1
                perform(then, requestor: requestor)
            }
        }

        func serveSome(_ count: Int) {
            for _ in 0..<count {
                guard let request = scheduler.next() else { break }
                let window = request.requestor.rawValue
                served[window, default: []].append(request.serial)
                if honest.contains(window) { outstanding[window, default: 0] -= 1 }
                if scheduler.served(request.requestor) { watches[window, default: 0] -= 1 }
            }
            for window in scheduler.takeUnwatchedWaiting() { watches[window.rawValue, default: 0] += 1 }
        }

        for _ in 0..<4000 {
            now += random.next() % 2_000_000
            switch random.next() % 10 {
            case 0..<4:
                let reader = honest[Int(random.next() % UInt64(honest.count))]
                guard outstanding[reader, default: 0] < RequestScheduler.maxQueuedPerRequestor else { continue }
                serial += 1
                outstanding[reader, default: 0] += 1
                sent[reader, default: []].append(serial)
                perform(scheduler.admit(Self.request(reader, property: serial, serial: serial), now: now, isForged: false), requestor: reader)
            case 4..<8:
                let flooder = flooders[Int(random.next() % UInt64(flooders.count))]
                for _ in 0..<Int(random.next() % 40) {
                    serial += 1
                    perform(scheduler.admit(Self.request(flooder, property: serial, serial: serial), now: now, isForged: false), requestor: flooder)
                }
            default:
                serveSome(Int(random.next() % 4))
            }
            #expect(scheduler.queuedCount <= RequestScheduler.maxQueuedRequests)
        }
        serveSome(Int.max)
        // Quiet past the cool-down, each flooder asks once more: forgiven, and served.
        now += RequestScheduler.floodCooldown + 1
        for flooder in flooders {
            serial += 1
            perform(scheduler.admit(Self.request(flooder, property: serial, serial: serial), now: now, isForged: false), requestor: flooder)
        }
        serveSome(Int.max)

        #expect(scheduler.isEmpty && scheduler.queuedCount == 0, "seed \(seed)")
        for reader in honest {
            #expect(served[reader, default: []] == sent[reader, default: []], "seed \(seed): reader \(reader) lost or reordered requests")
        }
        #expect(caught == Set(flooders), "seed \(seed): flooders \(flooders), caught \(caught.sorted())")
        for (window, count) in watches {
            #expect(count == 0, "seed \(seed): window \(window) left with \(count) watches")
        }
    }
}
