import Testing
import X11TestSupport
@testable import KDEConnect

@Suite("KDE Connect: devices' copies paced")
struct PacingTests {
    private func copy(_ index: Int) -> CopyPacing.Copy { CopyPacing.Copy(text: "copy \(index)", time: Int64(index), device: "phone") }

    @Test("a copy after a quiet time is taken at once; a burst has its first taken at once and its last once the interval is over, the rest replaced")
    func burst() {
        var pacing = CopyPacing(interval: 0.05)
        #expect(pacing.arrived(copy(0), now: 10) == .take(copy(0)))
        #expect(pacing.arrived(copy(1), now: 10.001) == .wake(at: 10.05))
        for index in 2..<1000 { #expect(pacing.arrived(copy(index), now: 10.002) == .none) }
        #expect(pacing.replaced == 998)
        #expect(pacing.woke(now: 10.04) == .wake(at: 10.05))
        #expect(pacing.woke(now: 10.05) == .take(copy(999)))
        #expect(pacing.woke(now: 10.06) == .none)
        #expect(pacing.arrived(copy(1000), now: 10.2) == .take(copy(1000)))
    }

    @Test("seeded random arrivals: never two takes within the interval, at most one copy held, and the last copy of every run is taken")
    func seeded() {
        for seed in UInt64(1)...50 {
            var random = SeededRandom(seed: seed)
            var pacing = CopyPacing(interval: 0.05)
            var now = 0.0
            var wakeAt: Double?
            var taken: [(Double, CopyPacing.Copy)] = []
            var last: CopyPacing.Copy?
            let perform = { (action: CopyPacing.Action, at: Double) in
                switch action {
                case let .take(copy): taken.append((at, copy))
                case let .wake(at: time): wakeAt = time
                case .none: break
                }
            }
            for index in 0..<2000 {
                // Bursts (gaps of 0–2 ms) and pauses (up to 200 ms), the wakes due before each arrival first.
                now += Double(random.next() % 100 < 90 ? random.next() % 3 : random.next() % 200) / 1000
                while let due = wakeAt, due <= now {
                    wakeAt = nil
                    perform(pacing.woke(now: due), due)
                }
                let arriving = copy(index)
                last = arriving
                perform(pacing.arrived(arriving, now: now), now)
            }
            while let due = wakeAt {
                wakeAt = nil
                perform(pacing.woke(now: due), due)
            }
            #expect(taken.last?.1 == last, "seed \(seed)")
            for (earlier, later) in zip(taken, taken.dropFirst()) {
                #expect(later.0 - earlier.0 >= 0.05 - 1e-9, "seed \(seed)")
                #expect(later.1.time > earlier.1.time, "seed \(seed)")
            }
            #expect(taken.count + pacing.replaced == 2000, "seed \(seed)")
        }
    }
}
