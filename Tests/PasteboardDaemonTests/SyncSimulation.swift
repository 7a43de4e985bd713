import Foundation
import PasteboardWire
@testable import PasteboardDaemon
import X11TestSupport

/// Many ``SyncLedger``s, each with a simulated display and X thread, linked by a simulated
/// network: every link is an ordered stream each way with its own delays (as ssh is), nothing is
/// ordered across links, and links drop (losing what was in flight) and come back. Users copy
/// (shareable, secret, expiring), clear, and copy at the same moment on several displays. The
/// drivers' rules are the real ones: effects performed as ``SyncHub`` performs them, the X
/// thread's compare-and-own, the keeper's verdicts.
///
/// The checks (docs/sync-protocol.md, "Invariants") are asserted as the run goes and at
/// quiescence; a violation is returned with the seed's description.
struct SyncSimulation {
    enum Topology: String, CaseIterable { case star, chain, mesh }

    struct Copy {
        let node: Int
        let isShareable: Bool
        let expires: UInt64?
    }

    /// What a user of a display gets when pasting: a copy (by number) or nothing.
    enum Content: Equatable {
        case empty
        case copy(Int)
    }

    struct Display {
        var owner: UInt = 0
        var content: Content = .empty
    }

    enum XItem {
        case event(selection: String, owner: UInt, event: SyncLedger.OwnerEvent)
        case own(SyncAnnounce)
        case clear(selection: String, stamp: SyncStamp)
    }

    struct Node {
        var ledger: SyncLedger
        var displays: [String: Display] = [:]
        var xQueue: [XItem] = []
        /// The stamp of what each display shows, as far as this node's ledger decided it.
        var shownStamp: [String: SyncStamp] = [:]
        /// The stamps given to this node's own copies, by owner window.
        var stampOfWindow: [UInt: SyncStamp] = [:]
        var nextWindow: UInt = 100
        let skew: UInt64
    }

    enum Job {
        case deliver(from: Int, to: Int, generation: Int)
        case xThread(node: Int)
        case offer(node: Int, selection: String, stamp: SyncStamp, owner: UInt)
        case expire(node: Int, selection: String, stamp: SyncStamp)
        case relinquish(node: Int, selection: String, window: UInt)
    }

    struct Channel {
        var queue: [SyncMessage] = []
        var lastArrival: UInt64 = 0
        var generation = 0
    }

    static let ours: UInt = 1
    static let selections = ["CLIPBOARD", "PRIMARY"]

    let seed: UInt64
    let topology: Topology
    var random: SeededRandom
    var time: UInt64 = 1_000_000
    var nodes: [Node] = []
    var edges: [(Int, Int)] = []
    var isUp: [Int: Bool] = [:]
    var channels: [Int: Channel] = [:]
    var agenda: [(time: UInt64, order: Int, job: Job)] = []
    var order = 0
    var copies: [Int: Copy] = [:]
    var messages = 0
    var linkUps = 0
    /// Changes stamped on any node (copies and clears): the values that can cross links.
    var stampedChanges = 0
    var violations: [String] = []
    /// What happened, when tracing (to replay a failing seed).
    var isTracing = false
    var trace: [String] = []

    init(seed: UInt64, nodeCount: Int, topology: Topology) {
        self.seed = seed
        self.topology = topology
        random = SeededRandom(seed: seed)
        for index in 0 ..< nodeCount {
            nodes.append(Node(ledger: SyncLedger(node: String(format: "n%02d", index)), skew: UInt64.random(in: 0 ... 40, using: &random)))
        }
        switch topology {
        case .star: edges = (1 ..< nodeCount).map { (0, $0) }
        case .chain: edges = (1 ..< nodeCount).map { ($0 - 1, $0) }
        case .mesh:
            if nodeCount <= 8 {
                for a in 0 ..< nodeCount { for b in a + 1 ..< nodeCount { edges.append((a, b)) } }
            } else {
                // A ring plus random chords: connected, a few links per node.
                var set = Set<Int>()
                for a in 0 ..< nodeCount {
                    let b = (a + 1) % nodeCount
                    set.insert(Self.key(min(a, b), max(a, b)))
                }
                for a in 0 ..< nodeCount {
                    let b = Int.random(in: 0 ..< nodeCount, using: &random)
                    if a != b { set.insert(Self.key(min(a, b), max(a, b))) }
                }
                edges = set.sorted().map { ($0 / 1000, $0 % 1000) }
            }
        }
    }

    static func key(_ a: Int, _ b: Int) -> Int { a * 1000 + b }
    var description: String { "seed \(seed), \(nodes.count) nodes, \(topology.rawValue)" }

    // MARK: Running

    /// Users act for `actions` steps while links drop and come back; then every link comes up
    /// and the run goes on until nothing is left to do. Returns the violations found.
    mutating func run(actions: Int) -> [String] {
        for (a, b) in edges { setLink(a, b, up: true) }
        for _ in 0 ..< actions {
            time += UInt64.random(in: 0 ... 30, using: &random)
            drain(until: time)
            act()
        }
        for (a, b) in edges where isUp[Self.key(a, b)] != true { setLink(a, b, up: true) }
        drain(until: .max)
        checkQuiescence()
        return violations
    }

    /// For the benchmark: every link up, then `count` plain copies (shareable, not expiring) one
    /// at a time on random nodes, each left to settle. Per copy: the messages it took and the simulated ms until the last one
    /// was delivered (each hop 1–60 ms). Invariants are checked after each.
    mutating func measureCopies(_ count: Int) -> [(messages: Int, settleMilliseconds: UInt64)] {
        for (a, b) in edges where isUp[Self.key(a, b)] != true { setLink(a, b, up: true) }
        drain(until: .max)
        var results: [(Int, UInt64)] = []
        for _ in 0 ..< count {
            time += 1000
            let (messagesBefore, start) = (messages, time)
            let selection = "CLIPBOARD"
            userCopies(Int.random(in: 0 ..< nodes.count, using: &random), selection, plain: true)
            drain(until: .max)
            results.append((messages - messagesBefore, time - start))
            checkQuiescence()
        }
        return results
    }

    private mutating func act() {
        if isTracing { trace.append("\(time) act; displays \(nodes.map { $0.displays.mapValues(\.content) })") }
        let roll = Int.random(in: 0 ..< 100, using: &random)
        if roll < 8 {
            let (a, b) = edges[Int.random(in: 0 ..< edges.count, using: &random)]
            setLink(a, b, up: !(isUp[Self.key(a, b)] ?? false))
            return
        }
        // A few users at once: simultaneous copies.
        let users = roll < 20 ? min(nodes.count, 3) : 1
        for _ in 0 ..< users {
            let node = Int.random(in: 0 ..< nodes.count, using: &random)
            let selection = Int.random(in: 0 ..< 4, using: &random) == 0 ? "PRIMARY" : "CLIPBOARD"
            if Int.random(in: 0 ..< 10, using: &random) == 0 {
                userClears(node, selection)
            } else {
                userCopies(node, selection)
            }
        }
    }

    private mutating func userCopies(_ node: Int, _ selection: String, plain: Bool = false) {
        let id = copies.count + 1
        let isShareable = plain || Int.random(in: 0 ..< 7, using: &random) != 0
        let expires: UInt64? = !plain && Int.random(in: 0 ..< 12, using: &random) == 0 ? time + UInt64.random(in: 5 ... 400, using: &random) : nil
        copies[id] = Copy(node: node, isShareable: isShareable, expires: expires)
        let window = nodes[node].nextWindow
        nodes[node].nextWindow += 1
        nodes[node].displays[selection] = Display(owner: window, content: .copy(id))
        xEnqueue(node, .event(selection: selection, owner: window, event: .copied))
        // An expiring copy's owner gives the selection up at its date (as `xpb copy --expire` does).
        if let expires { schedule(at: expires, .relinquish(node: node, selection: selection, window: window)) }
    }

    private mutating func userClears(_ node: Int, _ selection: String) {
        nodes[node].displays[selection] = Display()
        xEnqueue(node, .event(selection: selection, owner: 0, event: .cleared))
    }

    private mutating func setLink(_ a: Int, _ b: Int, up: Bool) {
        let key = Self.key(a, b)
        guard (isUp[key] ?? false) != up else { return }
        isUp[key] = up
        for (from, to) in [(a, b), (b, a)] {
            channels[Self.key(from, to), default: Channel()].queue.removeAll()
            channels[Self.key(from, to), default: Channel()].generation += 1
        }
        if up {
            linkUps += 1
            let all = Set(Self.selections)
            perform(a, nodes[a].ledger.linkUp(b, sends: all, receives: all, now: date(time)))
            perform(b, nodes[b].ledger.linkUp(a, sends: all, receives: all, now: date(time)))
        } else {
            nodes[a].ledger.linkDown(b)
            nodes[b].ledger.linkDown(a)
        }
    }

    private mutating func drain(until end: UInt64) {
        while let next = agenda.indices.min(by: { (agenda[$0].time, agenda[$0].order) < (agenda[$1].time, agenda[$1].order) }),
              agenda[next].time <= end {
            let entry = agenda.remove(at: next)
            time = max(time, entry.time)
            runJob(entry.job)
        }
    }

    private mutating func schedule(at when: UInt64, _ job: Job) {
        order += 1
        agenda.append((when, order, job))
    }

    private func wall(_ node: Int) -> UInt64 { time + nodes[node].skew }
    private func date(_ ms: UInt64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }

    private mutating func runJob(_ job: Job) {
        if isTracing { trace.append("\(time) \(job)") }
        switch job {
        case let .deliver(from, to, generation):
            let key = Self.key(from, to)
            guard channels[key]?.generation == generation, let message = channels[key]?.queue.first else { return }
            channels[key]!.queue.removeFirst()
            receive(message, at: to, from: from)
        case let .xThread(node):
            guard !nodes[node].xQueue.isEmpty else { return }
            xThread(node, nodes[node].xQueue.removeFirst())
        case let .offer(node, selection, stamp, owner):
            let display = nodes[node].displays[selection] ?? Display()
            let verdict: SyncLedger.Verdict
            if display.owner == owner, owner != Self.ours, case let .copy(id) = display.content, let copy = copies[id] {
                verdict = copy.isShareable
                    ? .shareable(targets: [SyncTarget(target: "copy-\(id)")], expires: copy.expires.map(date), origin: "node \(node)")
                    : .notShared("marked secret")
            } else {
                verdict = .replaced
            }
            perform(node, checked(node) { $0.offerRead(selection, stamp: stamp, verdict: verdict) })
        case let .expire(node, selection, stamp):
            perform(node, checked(node) { $0.expired(selection, stamp: stamp) })
        case let .relinquish(node, selection, window):
            guard nodes[node].displays[selection]?.owner == window else { return }
            nodes[node].displays[selection] = Display()
            xEnqueue(node, .event(selection: selection, owner: 0, event: .cleared))
        }
    }

    private mutating func receive(_ message: SyncMessage, at node: Int, from link: Int) {
        let now = wall(node)
        switch message {
        case let .announce(announce):
            let wallDate = date(now)
            perform(node, checked(node) { $0.announced(announce, from: link, now: now, wall: wallDate) })
        case let .withdraw(selection, stamp):
            perform(node, checked(node) { $0.withdrawn(selection, stamp: stamp, from: link, now: now) })
        default:
            violations.append("\(description): an unexpected message \(message)")
        }
    }

    /// Before a compare-and-own or compare-and-clear, the X thread asks the server for the owner:
    /// every ownership change the server made before its answer is read first (as
    /// `X11Session.currentOwnerAfterQueuedChanges` does).
    private mutating func readQueuedEvents(_ node: Int) {
        while let index = nodes[node].xQueue.firstIndex(where: { if case .event = $0 { return true } else { return false } }) {
            let item = nodes[node].xQueue.remove(at: index)
            xThread(node, item)
        }
    }

    /// The X thread of a node: reads owner changes (stamping them in the ledger), and takes or
    /// clears the selection only if the ledger still agrees, against the display's real owner.
    private mutating func xThread(_ node: Int, _ item: XItem) {
        switch item {
        case let .event(selection, owner, event):
            let now = wall(node)
            let effects = checked(node) { $0.ownerChanged(selection, owner: owner, event: event, now: now) }
            if event == .copied || event == .cleared, let stamp = nodes[node].ledger.slots[selection]?.local?.stamp {
                stampedChanges += 1
                nodes[node].stampOfWindow[owner] = stamp
                nodes[node].shownStamp[selection] = stamp
            }
            perform(node, effects)
        case let .own(announce):
            let selection = announce.selection
            readQueuedEvents(node)
            let display = nodes[node].displays[selection] ?? Display()
            guard nodes[node].ledger.mayOwn(selection, stamp: announce.stamp, actualOwner: display.owner, ours: Self.ours) else { return }
            if display.owner != 0, display.owner != Self.ours {
                guard let stamp = nodes[node].stampOfWindow[display.owner], stamp < announce.stamp else {
                    violations.append("\(description): node \(node) replaced its own copy (window \(display.owner)) with the older or unordered \(announce.stamp)")
                    return
                }
            }
            if let shown = nodes[node].shownStamp[selection], announce.stamp < shown {
                violations.append("\(description): node \(node) took \(announce.stamp) over the newer \(shown) it showed")
            }
            guard let id = Int(announce.targets.first?.target.dropFirst("copy-".count) ?? ""), let copy = copies[id] else {
                violations.append("\(description): node \(node) owned an announce with no copy: \(announce)")
                return
            }
            if !copy.isShareable { violations.append("\(description): node \(node) shows the secret copy \(id) of node \(copy.node)") }
            nodes[node].displays[selection] = Display(owner: Self.ours, content: .copy(id))
            nodes[node].shownStamp[selection] = announce.stamp
            xEnqueue(node, .event(selection: selection, owner: Self.ours, event: .ours))
        case let .clear(selection, stamp):
            readQueuedEvents(node)
            let display = nodes[node].displays[selection] ?? Display()
            guard nodes[node].ledger.mayClear(selection, stamp: stamp, actualOwner: display.owner, ours: Self.ours) else { return }
            if let shown = nodes[node].shownStamp[selection], stamp < shown {
                violations.append("\(description): node \(node) cleared the newer \(shown) for \(stamp)")
            }
            nodes[node].displays[selection] = Display()
            nodes[node].shownStamp[selection] = stamp
            if display.owner != 0 { xEnqueue(node, .event(selection: selection, owner: 0, event: .ours)) }
        }
    }

    /// Runs a ledger step and checks that the shared register never goes back.
    private mutating func checked(_ node: Int, _ step: (inout SyncLedger) -> [SyncLedger.Effect]) -> [SyncLedger.Effect] {
        let before = nodes[node].ledger.slots.mapValues { $0.shared?.stamp }
        let effects = step(&nodes[node].ledger)
        for (selection, stamp) in before {
            guard let stamp else { continue }
            if let after = nodes[node].ledger.slots[selection]?.shared?.stamp, after < stamp {
                violations.append("\(description): node \(node)'s \(selection) went back from \(stamp) to \(after)")
            }
        }
        return effects
    }

    private mutating func perform(_ node: Int, _ effects: [SyncLedger.Effect]) {
        if isTracing, !effects.isEmpty { trace.append("\(time) node \(node): \(effects)") }
        for effect in effects {
            switch effect {
            case let .readOffer(selection, stamp, owner):
                schedule(at: time + UInt64.random(in: 0 ... 25, using: &random), .offer(node: node, selection: selection, stamp: stamp, owner: owner))
            case let .send(message, links):
                if case let .announce(announce) = message, let id = Int(announce.targets.first?.target.dropFirst("copy-".count) ?? ""),
                   copies[id]?.isShareable != true {
                    violations.append("\(description): node \(node) sent the secret copy \(id)")
                }
                for link in links { send(message, from: node, to: link) }
            case let .own(announce):
                xEnqueue(node, .own(announce))
            case let .clear(selection, stamp):
                xEnqueue(node, .clear(selection: selection, stamp: stamp))
            case let .expireAt(date, selection, stamp):
                let when = UInt64(max(0, date.timeIntervalSince1970 * 1000).rounded())
                schedule(at: max(time, when), .expire(node: node, selection: selection, stamp: stamp))
            }
        }
    }

    private mutating func send(_ message: SyncMessage, from: Int, to: Int) {
        guard isUp[Self.key(min(from, to), max(from, to))] == true else {
            violations.append("\(description): node \(from) sent on the link to \(to), which is down")
            return
        }
        messages += 1
        let key = Self.key(from, to)
        var channel = channels[key, default: Channel()]
        channel.queue.append(message)
        channel.lastArrival = max(channel.lastArrival, time + UInt64.random(in: 1 ... 60, using: &random))
        channels[key] = channel
        schedule(at: channel.lastArrival, .deliver(from: from, to: to, generation: channel.generation))
    }

    private mutating func xEnqueue(_ node: Int, _ item: XItem) {
        nodes[node].xQueue.append(item)
        schedule(at: time + UInt64.random(in: 0 ... 15, using: &random), .xThread(node: node))
    }

    // MARK: Quiescence

    /// Every node holds the same shared value per selection; every display shows it unless a
    /// newer change of its own is there; no display is empty unless that value is a clear (or
    /// a withdrawn copy); and the messages stayed within their bound.
    private mutating func checkQuiescence() {
        for selection in Self.selections {
            let values = nodes.map { $0.ledger.slots[selection]?.shared }
            let stamps = Set(values.map { $0?.stamp })
            if stamps.count != 1 {
                violations.append("\(description): \(selection) did not converge: \(values.map { $0.map { "\($0.stamp)\($0.announce == nil ? " (gone)" : "")" } ?? "nothing" })")
                continue
            }
            for (index, node) in nodes.enumerated() {
                guard let shared = node.ledger.slots[selection]?.shared else { continue }
                if let local = node.ledger.slots[selection]?.local, local.stamp > shared.stamp, local.state != .replaced { continue }
                let shown = node.displays[selection] ?? Display()
                let expected: Content
                if let announce = shared.announce, let id = Int(announce.targets.first?.target.dropFirst("copy-".count) ?? "") {
                    expected = .copy(id)
                } else {
                    expected = .empty
                }
                if shown.content != expected {
                    violations.append("\(description): node \(index)'s \(selection) shows \(shown.content), not the newest \(expected) (\(shared.stamp))")
                }
            }
        }
        // Each value crosses each link at most once each way as an announce and once as a
        // withdraw, plus what a link that comes up is told (per selection, each way).
        let bound = stampedChanges * 2 * 2 * edges.count + 2 * Self.selections.count * linkUps
        if messages > bound { violations.append("\(description): \(messages) messages, over the bound \(bound)") }
    }
}
