import Testing
@testable import PasteboardDaemon

@Suite("the bridge's rules about the compositor's own bridge (BridgeRules)")
struct BridgeRulesTests {
    @Test("a current Wayland take is what its kind says; one replaced before it was judged is passed over, unread")
    func judge() {
        for kind in [BridgeMemory.Kind.copy, .echo, .secretEcho] {
            let take = BridgeRules.judge(7, current: 7) { kind }
            #expect(take == .judged(kind))
            #expect(take.isEcho == (kind != .copy))
        }
        var asked = 0
        #expect(BridgeRules.judge(7, current: 8) { asked += 1; return .copy } == .passedOver)
        #expect(asked == 0, "its text is gone with it: not read")
        #expect(!BridgeRules.WaylandTake.passedOver.isEcho, "passed over, not remembered as an echo: the newer take is judged itself")
        #expect(BridgeRules.judge(7, current: nil) { .echo } == .judged(.echo), "an emptied selection's last take is judged")
    }

    @Test("after the compositor took an X selection: the hub takes it back where it can, the keeper's copy serves the bridge's own carry, a queue and an unshared copy are left to it")
    func takeBack() {
        var asked = 0
        let yes = { () -> Bool in asked += 1; return true }
        let no = { () -> Bool in asked += 1; return false }
        // A Wayland client's copy not read yet: look again soon, without asking the hub (its
        // announce is newer than what the hub holds), until the wait is over.
        #expect(BridgeRules.takeBack(.unread, elapsed: 0.2, hubTakesBack: yes) == .lookAgain(after: 0.05))
        #expect(BridgeRules.takeBack(.unread, elapsed: BridgeRules.announceWait, hubTakesBack: yes) == .gaveUp)
        #expect(asked == 0)
        // Read: the hub takes it back with the announce; not announced (secret, local-only),
        // looked at again until the wait is over, then left to the compositor.
        #expect(BridgeRules.takeBack(.read, elapsed: 0.2, hubTakesBack: yes) == .taken)
        #expect(BridgeRules.takeBack(.read, elapsed: 0.2, hubTakesBack: no) == .lookAgain(after: 0.1))
        #expect(BridgeRules.takeBack(.read, elapsed: BridgeRules.announceWait + 1, hubTakesBack: no) == .leftNotShared)
        // The bridge's own source: the hub's newest copy from Wayland, else the X copy the keeper
        // holds (the compositor took it for the bridge's carry of that X copy).
        #expect(BridgeRules.takeBack(.bridges, elapsed: 0.2, hubTakesBack: yes) == .taken)
        #expect(BridgeRules.takeBack(.bridges, elapsed: 0.2, hubTakesBack: no) == .serveKept)
        #expect(BridgeRules.takeBack(.bridges, elapsed: 60, hubTakesBack: no) == .serveKept, "no wait applies to the bridge's own")
        // The paste queue's item: X apps take their turns through the compositor.
        asked = 0
        #expect(BridgeRules.takeBack(.queue, elapsed: 0.2, hubTakesBack: yes) == .leftQueue)
        #expect(asked == 0, "a queue is never taken back")
    }
}
