import Foundation
import PasteboardWire
import Testing
@testable import PasteboardDaemon

@Suite("sync ordering (SyncLedger)")
struct SyncLedgerTests {
    static let all: Set<String> = ["CLIPBOARD"]

    func announce(_ clock: UInt64, _ node: String, _ target: String = "UTF8_STRING") -> SyncAnnounce {
        SyncAnnounce(selection: "CLIPBOARD", stamp: SyncStamp(clock: clock, node: node), origin: node, targets: [SyncTarget(target: target)])
    }

    @Test("a local copy is stamped when its event is read: an older announce that comes before its offer is read is relayed, never owned")
    func localCopyBeatsOlderAnnounce() {
        var ledger = SyncLedger(node: "a")
        _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
        _ = ledger.linkUp(2, sends: Self.all, receives: Self.all, now: Date())
        let effects = ledger.ownerChanged("CLIPBOARD", owner: 50, event: .copied, now: 1000)
        let stamp = SyncStamp(clock: 1000, node: "a")
        #expect(effects == [.readOffer(selection: "CLIPBOARD", stamp: stamp, owner: 50)])
        // Made elsewhere before ours, arriving before our offer is read.
        let older = announce(990, "b")
        #expect(ledger.announced(older, from: 1, now: 1001, wall: Date()) == [.send(.announce(older), to: [2])])
        #expect(!ledger.mayOwn("CLIPBOARD", stamp: older.stamp, actualOwner: 50, ours: 1))
        // Ours is read: announced to both links, over the older one.
        let ours = SyncLedger.Verdict.shareable(targets: [SyncTarget(target: "UTF8_STRING")], expires: nil, origin: "a")
        let sent = ledger.offerRead("CLIPBOARD", stamp: stamp, verdict: ours)
        #expect(sent == [.send(.announce(SyncAnnounce(selection: "CLIPBOARD", stamp: stamp, origin: "a", targets: [SyncTarget(target: "UTF8_STRING")])), to: [1, 2])])
    }

    @Test("a bridge's Wayland side: an ownership replaced by another before it was judged is passed over, so the compositor's echo after it leaves the bridge's own copy shared; judged as a copy, its 'replaced' verdict withdrew that copy everywhere")
    func supersededTakeKeepsTheCopy() {
        let copy = SyncLedger.Verdict.shareable(targets: [SyncTarget(target: "UTF8_STRING")], expires: nil, origin: "w")
        func shared() -> SyncLedger {
            var ledger = SyncLedger(node: "w")
            _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
            _ = ledger.ownerChanged("CLIPBOARD", owner: 50, event: .copied, now: 1000)
            _ = ledger.offerRead("CLIPBOARD", stamp: SyncStamp(clock: 1000, node: "w"), verdict: copy)
            return ledger
        }
        // The compositor takes CLIPBOARD twice (owners 60, then 61) for that copy; 61 is current
        // when 60 is judged.
        #expect(BridgeRules.judge(60, current: 61) { Issue.record("a replaced take is not read"); return .copy } == .passedOver)
        #expect(BridgeRules.judge(61, current: 61) { .echo } == .judged(.echo))
        #expect(BridgeRules.judge(60, current: nil) { .copy } == .judged(.copy), "an emptied selection's last copy is judged as before")
        var passedOver = shared()
        #expect(passedOver.ownerChanged("CLIPBOARD", owner: 60, event: .gone, now: 1001) == [])
        #expect(passedOver.ownerChanged("CLIPBOARD", owner: 61, event: .gone, now: 1002) == [], "the echo")
        #expect(passedOver.slots["CLIPBOARD"]?.shared?.announce != nil, "still shared: X keeps serving it")
        // What a take judged as a copy did.
        var judged = shared()
        _ = judged.ownerChanged("CLIPBOARD", owner: 60, event: .copied, now: 1001)
        let withdrawn = judged.offerRead("CLIPBOARD", stamp: SyncStamp(clock: 1001, node: "w"), verdict: .replaced)
        #expect(withdrawn == [.send(.withdraw(selection: "CLIPBOARD", stamp: SyncStamp(clock: 1000, node: "w")), to: [1])])
    }

    @Test("compare-and-own: an owner the ledger has not seen yet (a newer copy whose event is unread) is never replaced")
    func compareAndOwn() {
        var ledger = SyncLedger(node: "a")
        _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
        _ = ledger.ownerChanged("CLIPBOARD", owner: 50, event: .copied, now: 1000)
        let newer = announce(2000, "b")
        #expect(ledger.announced(newer, from: 1, now: 1001, wall: Date()).first == .own(newer))
        #expect(ledger.mayOwn("CLIPBOARD", stamp: newer.stamp, actualOwner: 50, ours: 1), "the seen owner's copy is older")
        #expect(ledger.mayOwn("CLIPBOARD", stamp: newer.stamp, actualOwner: 0, ours: 1))
        #expect(ledger.mayOwn("CLIPBOARD", stamp: newer.stamp, actualOwner: 1, ours: 1))
        #expect(!ledger.mayOwn("CLIPBOARD", stamp: newer.stamp, actualOwner: 77, ours: 1), "window 77's copy is not stamped yet")
        // Its event is read: stamped after the announce (the clock saw 2000), so it wins.
        _ = ledger.ownerChanged("CLIPBOARD", owner: 77, event: .copied, now: 1002)
        #expect(ledger.slots["CLIPBOARD"]?.local?.stamp == SyncStamp(clock: 2001, node: "a"))
        #expect(!ledger.mayOwn("CLIPBOARD", stamp: newer.stamp, actualOwner: 77, ours: 1))
    }

    @Test("another bridge's take (a compositor's window manager on XWayland): the newest copy from elsewhere is owned again, over the taker; this display's own newest is not (its keeper serves it)")
    func takeBack() {
        var ledger = SyncLedger(node: "x")
        _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
        #expect(ledger.takeBack("CLIPBOARD") == [], "nothing newest yet")
        let wayland = announce(2000, "w")
        #expect(ledger.announced(wayland, from: 1, now: 2001, wall: Date()).first == .own(wayland))
        // The compositor takes the selection (its event reads as .gone: the same copy, not a new one).
        _ = ledger.ownerChanged("CLIPBOARD", owner: 0x200001, event: .gone, now: 2002)
        #expect(ledger.takeBack("CLIPBOARD") == [.own(wayland)])
        #expect(ledger.mayOwn("CLIPBOARD", stamp: wayland.stamp, actualOwner: 0x200001, ours: 1), "the taker is an owner the ledger has seen")
        // This display's own copy is newer: the ledger gives nothing to take back with.
        _ = ledger.ownerChanged("CLIPBOARD", owner: 50, event: .copied, now: 3000)
        _ = ledger.offerRead("CLIPBOARD", stamp: SyncStamp(clock: 3000, node: "x"),
                             verdict: .shareable(targets: [SyncTarget(target: "UTF8_STRING")], expires: nil, origin: "x"))
        _ = ledger.ownerChanged("CLIPBOARD", owner: 0x200001, event: .gone, now: 3001)
        #expect(ledger.takeBack("CLIPBOARD") == [])
        // Nor for a secret of its own (which keeps the older copy from elsewhere off the display).
        _ = ledger.ownerChanged("CLIPBOARD", owner: 51, event: .copied, now: 4000)
        _ = ledger.offerRead("CLIPBOARD", stamp: SyncStamp(clock: 4000, node: "x"), verdict: .notShared("marked secret"))
        #expect(ledger.takeBack("CLIPBOARD") == [])
    }

    @Test("hasRead: an owner change is read once its event is, and its offer once announced or kept home")
    func hasRead() {
        var ledger = SyncLedger(node: "w")
        #expect(!ledger.hasRead("CLIPBOARD", owner: 7), "no event yet")
        _ = ledger.ownerChanged("CLIPBOARD", owner: 7, event: .copied, now: 1000)
        #expect(ledger.hasRead("CLIPBOARD", owner: 7), "no link: nothing to announce, so nothing waits")
        _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
        _ = ledger.ownerChanged("CLIPBOARD", owner: 8, event: .copied, now: 1001)
        #expect(!ledger.hasRead("CLIPBOARD", owner: 8), "its offer is being read")
        #expect(!ledger.hasRead("CLIPBOARD", owner: 7), "no longer the owner")
        _ = ledger.offerRead("CLIPBOARD", stamp: SyncStamp(clock: 1001, node: "w"), verdict: .notShared("marked secret"))
        #expect(ledger.hasRead("CLIPBOARD", owner: 8))
        // An echo (a .gone event for a new owner) is read at once.
        _ = ledger.ownerChanged("CLIPBOARD", owner: 9, event: .gone, now: 1002)
        #expect(ledger.hasRead("CLIPBOARD", owner: 9))
    }

    @Test("a secret stays here and keeps older copies off this display, but the shared value still moves on and is relayed")
    func secretStaysHere() {
        var ledger = SyncLedger(node: "a")
        _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
        _ = ledger.linkUp(2, sends: Self.all, receives: Self.all, now: Date())
        // This node's own shared copy, then a secret over it: the copy is withdrawn (its bytes are gone here).
        _ = ledger.ownerChanged("CLIPBOARD", owner: 49, event: .copied, now: 990)
        let first = SyncStamp(clock: 990, node: "a")
        _ = ledger.offerRead("CLIPBOARD", stamp: first, verdict: .shareable(targets: [SyncTarget(target: "UTF8_STRING")], expires: nil, origin: "a"))
        _ = ledger.ownerChanged("CLIPBOARD", owner: 50, event: .copied, now: 1000)
        let stamp = SyncStamp(clock: 1000, node: "a")
        #expect(ledger.offerRead("CLIPBOARD", stamp: stamp, verdict: .notShared("marked secret"))
            == [.send(.withdraw(selection: "CLIPBOARD", stamp: first), to: [1, 2])])
        let older = announce(995, "b")
        #expect(ledger.announced(older, from: 1, now: 1001, wall: Date()) == [.send(.announce(older), to: [2])])
        #expect(ledger.announced(announce(980, "c"), from: 2, now: 1001, wall: Date()) == [], "older than the withdrawn copy")
        let newer = announce(1100, "b")
        #expect(ledger.announced(newer, from: 1, now: 1101, wall: Date()) == [.own(newer), .send(.announce(newer), to: [2])])
    }

    @Test("a clear is a newer value: withdrawn everywhere, and a link that comes up later is told")
    func clearsPropagate() {
        var ledger = SyncLedger(node: "a")
        _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
        _ = ledger.announced(announce(900, "b"), from: 1, now: 1000, wall: Date())
        let effects = ledger.ownerChanged("CLIPBOARD", owner: 0, event: .cleared, now: 1000)
        let clear = SyncStamp(clock: 1000, node: "a")
        #expect(effects == [.clear(selection: "CLIPBOARD", stamp: clear), .send(.withdraw(selection: "CLIPBOARD", stamp: clear), to: [1])])
        #expect(ledger.mayClear("CLIPBOARD", stamp: clear, actualOwner: 1, ours: 1), "a proxy taken after the clear is dropped")
        #expect(ledger.linkUp(2, sends: Self.all, receives: Self.all, now: Date())
            == [.send(.withdraw(selection: "CLIPBOARD", stamp: SyncStamp(clock: 1000, node: "a")), to: [2])])
        // An older copy that arrives later changes nothing.
        #expect(ledger.announced(announce(950, "c"), from: 2, now: 1001, wall: Date()) == [])
    }

    @Test("a change whose owner lost the selection before its offer was read keeps nothing older off the display (seen: a display left empty)")
    func replacedBeforeRead() {
        // The hub took A's copy in the same millisecond as its own client copied (the X server
        // takes an owner change at the selection's own time): the client lost at once, but its
        // event was read after the proxy was taken, and stamped newer than what came next.
        var ledger = SyncLedger(node: "b")
        _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
        _ = ledger.linkUp(2, sends: Self.all, receives: Self.all, now: Date())
        _ = ledger.announced(announce(1000, "a"), from: 1, now: 1000, wall: Date())
        _ = ledger.ownerChanged("CLIPBOARD", owner: 1, event: .ours, now: 1001)
        _ = ledger.ownerChanged("CLIPBOARD", owner: 50, event: .copied, now: 1003)
        let local = SyncStamp(clock: 1003, node: "b")
        let newer = announce(1002, "c")
        // C's copy is newer than A's but older than the client's change: not taken yet.
        #expect(ledger.announced(newer, from: 2, now: 1003, wall: Date()) == [.send(.announce(newer), to: [1])])
        // The client's offer: its owner is gone (the proxy of A's copy holds the selection).
        #expect(ledger.offerRead("CLIPBOARD", stamp: local, verdict: .replaced) == [.own(newer)])
        #expect(ledger.mayOwn("CLIPBOARD", stamp: newer.stamp, actualOwner: 1, ours: 1), "the proxy of the older copy is replaced by the newest")
        #expect(!ledger.mayOwn("CLIPBOARD", stamp: newer.stamp, actualOwner: 77, ours: 1), "an owner not seen yet keeps the selection")
    }

    @Test("a change made while no link is up is read and announced when one comes; an equal stamp again is not relayed")
    func deferredAndEcho() {
        var ledger = SyncLedger(node: "a")
        #expect(ledger.ownerChanged("CLIPBOARD", owner: 50, event: .copied, now: 1000) == [])
        let stamp = SyncStamp(clock: 1000, node: "a")
        #expect(ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date()) == [.readOffer(selection: "CLIPBOARD", stamp: stamp, owner: 50)])
        let verdict = SyncLedger.Verdict.shareable(targets: [SyncTarget(target: "UTF8_STRING")], expires: nil, origin: "a")
        guard case let .send(.announce(sent), _)? = ledger.offerRead("CLIPBOARD", stamp: stamp, verdict: verdict).first else {
            Issue.record("not announced")
            return
        }
        #expect(ledger.announced(sent, from: 1, now: 1001, wall: Date()) == [], "our own copy came back: nothing")
    }

    @Test("announces with no targets, bad names or stamps a day ahead are refused")
    func malformed() {
        var empty = announce(1000, "b")
        empty.targets = []
        #expect(SyncLedger.malformation(of: empty, maxTargets: 10, maxTargetName: 10) != nil)
        #expect(SyncLedger.malformation(of: announce(1000, "b", "bad\u{1}name"), maxTargets: 10, maxTargetName: 20) != nil)
        #expect(SyncLedger.malformation(of: announce(1000, "b"), maxTargets: 10, maxTargetName: 20) == nil)
        // Plausible MIME and atom names only: what toolkits really offer passes.
        for name in ["UTF8_STRING", "text/plain;charset=utf-8", "_NETSCAPE_URL", "chromium/x-web-custom-data",
                     "application/x-openoffice-embed-source-xml;windows_formatname=\"Star Embed Source (XML)\""] {
            #expect(SyncLedger.isPlausibleTargetName(name), "\(name)")
        }
        for name in ["", "9lives", "/etc/passwd", " text", "tëxt/plain", "text\u{7F}", "emoji😀", "[x]", "@x", "`x", "{x"] {
            #expect(!SyncLedger.isPlausibleTargetName(name), "\(name)")
        }
        #expect(SyncLedger.malformation(of: announce(1000, "b", "ünïcode"), maxTargets: 10, maxTargetName: 20) != nil)
        // Bytes come with an announce for xpb's manifest alone, and a small one.
        var manifest = announce(1000, "b")
        manifest.targets.append(SyncTarget(target: "XPB_MANIFEST", size: 2, inline: Data("{}".utf8)))
        #expect(SyncLedger.malformation(of: manifest, maxTargets: 10, maxTargetName: 20) == nil)
        manifest.targets[1].inline = Data(count: SyncTarget.maxInline + 1)
        #expect(SyncLedger.malformation(of: manifest, maxTargets: 10, maxTargetName: 20)?.contains("at most") == true)
        var smuggled = announce(1000, "b")
        smuggled.targets[0].inline = Data("the text itself".utf8)
        #expect(SyncLedger.malformation(of: smuggled, maxTargets: 10, maxTargetName: 20)?.contains("only xpb's manifest") == true)
        var ledger = SyncLedger(node: "a")
        _ = ledger.linkUp(1, sends: Self.all, receives: Self.all, now: Date())
        #expect(ledger.announced(announce(1000 + SyncLedger.maxClockSkew + 1, "b"), from: 1, now: 1000, wall: Date()) == [])
        #expect(ledger.clock < 1000 + SyncLedger.maxClockSkew)
    }

    @Test("seeded simulation: star, chain and mesh of 3 to 8 nodes, delays, partitions, simultaneous copies, clears, secrets, expiry",
          arguments: SyncSimulation.Topology.allCases)
    func simulation(topology: SyncSimulation.Topology) {
        var failures: [String] = []
        for seed in UInt64(1) ... 400 {
            var simulation = SyncSimulation(seed: seed &* 7919 &+ UInt64(topology.hashValue & 0xff), nodeCount: 3 + Int(seed % 6), topology: topology)
            failures += simulation.run(actions: 40)
            if failures.count > 5 { break }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5).joined(separator: "\n"))")
    }

    @Test("seeded simulation: meshes of 50 nodes settle")
    func largeMesh() {
        var failures: [String] = []
        for seed in UInt64(1) ... 6 {
            var simulation = SyncSimulation(seed: seed, nodeCount: 50, topology: .mesh)
            failures += simulation.run(actions: 60).prefix(3)
        }
        #expect(failures.isEmpty, "\(failures.prefix(5).joined(separator: "\n"))")
    }
}

extension SyncLedgerTests {
    /// Replays one seed with its trace: `XPB_SIM_SEED=N XPB_SIM_NODES=N XPB_SIM_TOPOLOGY=mesh swift test --filter replay`.
    @Test("replay of one simulation seed (XPB_SIM_SEED), with its trace")
    func replay() {
        let environment = ProcessInfo.processInfo.environment
        guard let seed = environment["XPB_SIM_SEED"].flatMap(UInt64.init) else { return }
        var simulation = SyncSimulation(seed: seed, nodeCount: environment["XPB_SIM_NODES"].flatMap(Int.init) ?? 3,
                                        topology: environment["XPB_SIM_TOPOLOGY"].flatMap(SyncSimulation.Topology.init) ?? .mesh)
        simulation.isTracing = true
        let failures = simulation.run(actions: Int(environment["XPB_SIM_ACTIONS"] ?? "") ?? 40)
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))\n\(simulation.trace.joined(separator: "\n"))")
    }

    /// For `Benchmarks/sync.sh`: `XPB_SIM_MEASURE=SEEDS swift test --filter simulationMeasure`
    /// prints messages per change and the simulated time to quiescence on 50-node meshes.
    @Test("measure: messages per change and time to quiescence on 50-node meshes (XPB_SIM_MEASURE)")
    func simulationMeasure() {
        guard let seeds = ProcessInfo.processInfo.environment["XPB_SIM_MEASURE"].flatMap(UInt64.init), seeds > 0 else { return }
        var perCopy: [(messages: Int, settleMilliseconds: UInt64)] = []
        var edges = 0
        let started = Date()
        for seed in 1 ... seeds {
            var simulation = SyncSimulation(seed: seed, nodeCount: 50, topology: .mesh)
            edges += simulation.edges.count
            perCopy += simulation.measureCopies(20)
            #expect(simulation.violations.isEmpty, "\(simulation.violations.prefix(3).joined(separator: "\n"))")
        }
        let messages = perCopy.map(\.messages).sorted()
        let settle = perCopy.map(\.settleMilliseconds).sorted()
        let at = { (values: [UInt64], p: Double) in values[min(values.count - 1, Int((p / 100 * Double(values.count - 1)).rounded()))] }
        let mean = Double(messages.reduce(0, +)) / Double(messages.count)
        print("XPB_SIM_MEASURE copies=\(perCopy.count) links=\(Double(edges) / Double(seeds)) messagesPerChange=\(String(format: "%.1f", mean)) messagesMax=\(messages.last ?? 0) settleP50=\(at(settle, 50)) settleP99=\(at(settle, 99)) settleMax=\(settle.last ?? 0) wallSeconds=\(String(format: "%.2f", Date().timeIntervalSince(started)))")
    }
}
