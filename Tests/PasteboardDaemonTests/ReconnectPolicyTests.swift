@testable import PasteboardDaemon
import Testing

@Suite("when xpbd connects again")
struct ReconnectPolicyTests {
    @Test("a lost display is tried again at once, then at doubling waits, for giveUpAfter seconds in all")
    func outage() {
        var policy = ReconnectPolicy()
        #expect(policy.lost(after: 3600) == .retry(after: ReconnectPolicy.firstWait))
        var waits = [ReconnectPolicy.firstWait]
        while case let .retry(delay) = policy.failed() { waits.append(delay) }
        #expect(waits.prefix(4) == [0.1, 0.2, 0.4, 0.8])
        #expect(waits.allSatisfy { $0 <= ReconnectPolicy.longestWait })
        #expect(waits.reduce(0, +) <= ReconnectPolicy.giveUpAfter && waits.reduce(0, +) > ReconnectPolicy.giveUpAfter - ReconnectPolicy.longestWait)
        #expect(policy.failed() == .giveUp, "given up stays given up")
    }

    @Test("a server that keeps dropping xpbd soon after each connection is given up; one that held a minute starts a fresh outage")
    func repeatedDrops() {
        var policy = ReconnectPolicy()
        var drops = 0
        while case .retry = policy.lost(after: 5) { drops += 1 }
        #expect(drops >= 5 && drops < 20, "\(drops) drops before giving up")
        var stable = ReconnectPolicy()
        for _ in 0..<100 { #expect(stable.lost(after: ReconnectPolicy.stableAfter) == .retry(after: ReconnectPolicy.firstWait)) }
    }
}
