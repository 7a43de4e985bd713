import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Testing
import X11TestSupport
@testable import PasteboardDaemon

@Suite("the paste queue: whose turn, and what is left")
struct PasteQueueTests {
    @Test("a reader's TARGETS and data within the grace are one paste; a gone window, silence or another reader end it; the last item stays")
    func turns() {
        var turns = PasteTurns(count: 3)
        #expect(turns.request(10, .metadata, at: 0) == .init(item: 0, pasted: nil, holder: nil))
        #expect(turns.request(10, .metadata, at: 0.1) == .init(item: 0, pasted: nil, holder: nil))
        #expect(turns.paste(10, at: 0.2) == .init(item: 0, pasted: 0, holder: 10))
        #expect(turns.paste(10, at: 0.3) == .init(item: 0, pasted: nil, holder: 10), "a second text target: the same paste")
        #expect(turns.requestorGone(10, at: 0.35) == 1, "its paste is over: the next item is announced")
        // The same window id, given to the next client: a new paste.
        #expect(turns.paste(10, at: 0.4) == .init(item: 1, pasted: 1, holder: 10))
        // Silence past the grace ends a paste of a window that stays (a GTK app pasting again).
        #expect(turns.paste(10, at: 0.4 + PasteTurns.grace + 0.1).item == 2)
        #expect(turns.request(11, .metadata, at: 3).item == 2, "after the last, the last")
        #expect(turns.paste(11, at: 3.1) == .init(item: 2, pasted: nil, holder: 11))

        var watched = PasteTurns(count: 2)
        _ = watched.paste(5, at: 0)
        #expect(watched.request(6, .metadata, at: 0.1) == .init(item: 1, pasted: nil, holder: nil), "another reader's TARGETS sees the next item")
        #expect(watched.paste(5, at: 0.2) == .init(item: 1, pasted: 1, holder: 5), "an earlier paste's reader asking again takes it")
    }

    @Test("a paste that ends moves the queue on and names the item to announce, once: by silence, by a gone window, after another reader took one")
    func announces() {
        var turns = PasteTurns(count: 3)
        #expect(turns.request(10, .metadata, at: 0).item == 0)
        #expect(turns.deadline == nil, "no paste under way")
        #expect(turns.paste(10, at: 0.1).pasted == 0)
        #expect(turns.deadline == 0.1 + PasteTurns.grace)
        #expect(turns.tick(at: 0.6) == nil, "within the grace: the same paste")
        #expect(turns.paste(10, at: 0.7).item == 0)
        #expect(turns.tick(at: 0.7 + PasteTurns.grace + 0.01) == 1)
        #expect(turns.item == 1)
        #expect(turns.tick(at: 3) == nil, "announced once")
        #expect(turns.paste(10, at: 3.1) == .init(item: 1, pasted: 1, holder: 10))
        #expect(turns.requestorGone(10, at: 3.2) == 2)
        #expect(turns.deadline == nil)
        #expect(turns.paste(11, at: 3.3) == .init(item: 2, pasted: 2, holder: 11))
        #expect(turns.tick(at: 9) == nil, "the last item was announced: it stays")
        #expect(turns.requestorGone(11, at: 9.1) == nil)

        // Another reader takes the next item before the first's paste is over: the item it holds
        // is announced once its paste is.
        var other = PasteTurns(count: 2)
        _ = other.paste(5, at: 0)
        #expect(other.paste(6, at: 0.1) == .init(item: 1, pasted: 1, holder: 6))
        #expect(other.tick(at: 0.5) == nil, "a paste under way")
        #expect(other.tick(at: 0.1 + PasteTurns.grace + 0.01) == 1)

        // A reader that asks what the next item cannot answer (a type it lacks) is served the item
        // it sees, and takes nothing.
        var typed = PasteTurns(count: 2)
        _ = typed.paste(7, at: 0)
        #expect(typed.paste(8, at: 0.1, nextServes: false) == .init(item: 0, pasted: nil, holder: 7))
        #expect(typed.paste(8, at: 0.2) == .init(item: 1, pasted: 1, holder: 8))
    }

    @Test("an item is pasted only once its reader has it whole: a transfer under way holds the paste open; one cut short (the reader gone, silent, refused) leaves the item for the next paste")
    func transfers() {
        var turns = PasteTurns(count: 3)
        #expect(turns.request(10, .data, at: 0) == .init(item: 0, pasted: 0, holder: 10))
        #expect(turns.deadline == nil, "an INCR transfer under way: no silence counts")
        #expect(turns.tick(at: 5) == nil && turns.item == 0)
        // It dies after 2 MB of 5: the item stays.
        #expect(turns.undelivered(10, at: 5.1) == true)
        #expect(turns.item == 0 && turns.deadline == nil)
        #expect(turns.tick(at: 9) == nil)
        // The next reader gets it, whole.
        #expect(turns.request(11, .data, at: 9.1) == .init(item: 0, pasted: 0, holder: 11))
        #expect(turns.delivered(11, at: 12) == 0, "pasted: reported once")
        #expect(turns.delivered(11, at: 12.1) == nil)
        #expect(turns.undelivered(11, at: 12.2) == false, "a later failed read of the same paste takes nothing back")
        #expect(turns.deadline == 12.1 + PasteTurns.grace, "silence counts from the end of the transfer")
        #expect(turns.tick(at: 12.1 + PasteTurns.grace + 0.01) == 1)

        // A reader that asks and is gone before any byte: nothing pasted.
        #expect(turns.request(12, .data, at: 20) == .init(item: 1, pasted: 1, holder: 12))
        #expect(turns.requestorGone(12, at: 20.5) == nil)
        #expect(turns.item == 1)
        #expect(turns.request(13, .data, at: 21).pasted == 1)
        // Another reader's failure is not this one's.
        #expect(turns.undelivered(14, at: 21.1) == false)
        #expect(turns.delivered(13, at: 21.2) == 1)

        // A reader that stopped mid-transfer holds nothing back: the next reader is served the
        // same item and pastes it; the first one's late end changes nothing.
        var stalled = PasteTurns(count: 2)
        _ = stalled.request(20, .data, at: 0)
        #expect(stalled.request(21, .metadata, at: 1).item == 0)
        #expect(stalled.request(21, .data, at: 1.1) == .init(item: 0, pasted: nil, holder: 21))
        #expect(stalled.delivered(21, at: 2) == 0)
        #expect(stalled.undelivered(20, at: 30) == false && stalled.delivered(20, at: 30) == nil)
        #expect(stalled.tick(at: 2 + PasteTurns.grace + 0.01) == 1)
    }

    @Test("seeded simulation: readers that read again only when the owner changes (Chromium) and readers that read each time take the items in order")
    func cachingReaders() {
        for seed in UInt64(1)...200 {
            var random = SeededRandom(seed: seed)
            let count = Int.random(in: 1...6, using: &random)
            var turns = PasteTurns(count: count)
            var now = 0.0
            var announces = 0
            // A caching reader's window, the announce count it read at, and the item it read.
            var cache: [UInt: (announces: Int, item: Int)] = [:]
            func advance(to time: Double) {
                // The driver's timer: a tick at each deadline passed.
                while let deadline = turns.deadline, deadline + 0.02 <= time {
                    if turns.tick(at: deadline + 0.02) != nil { announces += 1 }
                    if turns.deadline == deadline { break }
                }
                now = time
            }
            for paste in 0..<(count + 3) {
                let caching = Bool.random(using: &random)
                let window: UInt = caching ? 1 : UInt(Int.random(in: 2...4, using: &random))
                var got: Int
                if caching, let cached = cache[window], cached.announces == announces {
                    got = cached.item
                } else {
                    _ = turns.request(window, .metadata, at: now)
                    advance(to: now + Double.random(in: 0...0.2, using: &random))
                    got = turns.paste(window, at: now).item
                    if Bool.random(using: &random) {
                        advance(to: now + Double.random(in: 0...0.3, using: &random))
                        #expect(turns.paste(window, at: now).item == got, "seed \(seed): a second target of one paste")
                    }
                    if caching { cache[window] = (announces, got) }
                }
                #expect(got == min(paste, count - 1), "seed \(seed) paste \(paste) (caching: \(caching)): got item \(got)")
                // The next paste comes after this one is over: the window goes (not a caching
                // reader's: a browser stays) or it is silent past the grace.
                if !caching, Bool.random(using: &random) {
                    if turns.requestorGone(window, at: now) != nil { announces += 1 }
                }
                advance(to: now + PasteTurns.grace + Double.random(in: 0.1...1, using: &random))
            }
        }
    }

    @Test("seeded simulation: readers that ask at random, each within its paste, each take one item in order, whatever they ask")
    func simulation() {
        for seed in UInt64(1)...200 {
            var random = SeededRandom(seed: seed)
            let count = Int.random(in: 1...6, using: &random)
            var turns = PasteTurns(count: count)
            var now = 0.0
            var taken: [Int] = []
            for reader in 0..<(count + 3) {
                // Window ids repeat (the server reuses a gone client's).
                let window = UInt(Int.random(in: 1...3, using: &random))
                var seen: Set<Int> = []
                var pastedHere: [Int] = []
                for _ in 0..<Int.random(in: 0...3, using: &random) {
                    now += Double.random(in: 0...0.3, using: &random)
                    _ = turns.request(window, .metadata, at: now)
                }
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    now += Double.random(in: 0...0.3, using: &random)
                    let turn = turns.paste(window, at: now)
                    seen.insert(turn.item)
                    if let pasted = turn.pasted { pastedHere.append(pasted) }
                }
                #expect(seen.count == 1, "seed \(seed) reader \(reader): one paste got items \(seen)")
                #expect(pastedHere.count <= 1, "seed \(seed) reader \(reader)")
                taken += pastedHere
                #expect(seen.first == min(reader, count - 1), "seed \(seed) reader \(reader): got \(seen)")
                if Bool.random(using: &random) { _ = turns.requestorGone(window, at: now) } else { now += PasteTurns.grace + 0.01 }
            }
            #expect(taken == Array(0..<count), "seed \(seed): \(taken)")
        }
    }

    @Test("pastes leave the queue in order; a report of an older generation, or one counted, changes nothing; the size is bounded")
    func queue() throws {
        func item(_ text: String) -> Snapshot {
            Snapshot(.general, advertised: ["UTF8_STRING"], captured: [CapturedTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: Data(text.utf8))], cap: 1 << 20)!
        }
        var queue = PasteQueue()
        let first = try queue.add([item("a"), item("b")], maxBytes: 1 << 20)
        #expect(first.items.count == 2)
        #expect(queue.pasted(0, generation: first.generation) == 1)
        #expect(queue.pasted(0, generation: first.generation) == 0, "counted once")
        let second = try queue.add([item("c")], maxBytes: 1 << 20)
        #expect(second.items.map(\.preview) == ["b", "c"])
        #expect(queue.pasted(1, generation: first.generation) == 0, "an older generation's report")
        #expect(queue.pasted(1, generation: second.generation) == 2)
        #expect(queue.items.isEmpty)
        #expect(throws: ControlFailure.self) { try queue.add(Array(repeating: item("x"), count: PasteQueue.maxItems + 1), maxBytes: 1 << 20) }
        #expect(queue.items.isEmpty)
        #expect(throws: ControlFailure.self) { try queue.add([item("too large")], maxBytes: 4) }
        _ = try queue.add([item("d")], maxBytes: 1 << 20)
        #expect(queue.clear() == 1)
    }
}

extension PasteTurns {
    /// A data request whose transfer reaches its reader whole at once (as a small one does).
    fileprivate mutating func paste(_ requestor: UInt, at now: Double, nextServes: Bool = true) -> Turn {
        let turn = request(requestor, .data, at: now, nextServes: nextServes)
        _ = delivered(requestor, at: now)
        return turn
    }
}
