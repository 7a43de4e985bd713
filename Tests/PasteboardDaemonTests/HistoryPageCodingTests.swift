import Foundation
import PasteboardWire
import Testing
@testable import PasteboardDaemon

@Suite("the compact history page")
struct HistoryPageCodingTests {
    /// Entries with every optional field present and absent, text of every width, extreme numbers.
    private func entries(_ rng: inout SeededGenerator, count: Int) -> [HistoryEntrySummary] {
        let texts = ["", "a", "naïve café ⏎ 日本語", "emoji 👩‍💻 and \u{0} nul", String(repeating: "x", count: 300), "line\nbreak\ttab \"quoted\""]
        func text() -> String { texts[Int(rng.next() % UInt64(texts.count))] }
        func maybe<T>(_ value: T) -> T? { rng.next() % 2 == 0 ? value : nil }
        let numbers = [0, 1, -1, 127, 128, Int.max, Int.min, 1 << 40]
        func number() -> Int { numbers[Int(rng.next() % UInt64(numbers.count))] }
        return (0..<count).map { n in
            let pastes = maybe((0..<Int(rng.next() % 3)).map { _ in
                PasteRecord(time: Date(timeIntervalSince1970: Double(rng.next() % 2_000_000_000) + 0.25), app: maybe(text()), pid: maybe(number() & 0xFFFF),
                            unknown: maybe(text()))
            })
            return HistoryEntrySummary(index: n, id: maybe(Int64(number())), selection: rng.next() % 2 == 0 ? "CLIPBOARD" : "PRIMARY",
                                       time: Date(timeIntervalSince1970: Double(rng.next() % 2_000_000_000) + 0.125),
                                       targets: (0..<Int(rng.next() % 4)).map { _ in text() }, types: (0..<Int(rng.next() % 3)).map { _ in text() },
                                       size: number(), keptBytes: number(), source: maybe(text()), pid: maybe(number()), preview: text(),
                                       moreLines: number(), rest: text(), pixelWidth: maybe(number()), pixelHeight: maybe(number()),
                                       thumbnail: maybe(text()), app: maybe(text()), pinned: rng.next() % 2 == 0, pastes: pastes)
        }
    }

    @Test("a page comes back as it went, every field, every optional present and absent (seeded)")
    func roundTrip() throws {
        for seed in UInt64(1)...20 {
            var rng = SeededGenerator(seed: seed)
            let page = entries(&rng, count: Int(rng.next() % 50))
            let partial = seed % 2 == 0
            let decoded = try HistoryPageCoding.decode(HistoryPageCoding.encode(entries: page, total: 1_234_567, partial: partial))
            #expect(decoded.entries == page, "seed \(seed)")
            #expect(decoded.total == 1_234_567 && decoded.partial == partial)
        }
        let empty = try HistoryPageCoding.decode(HistoryPageCoding.encode(entries: [], total: 0, partial: false))
        #expect(empty.entries.isEmpty && empty.total == 0 && !empty.partial)
    }

    @Test("a page cut short, grown, with a byte changed, or claiming more than it holds is refused, never half read")
    func malformed() throws {
        var rng = SeededGenerator(seed: 7)
        let good = HistoryPageCoding.encode(entries: entries(&rng, count: 12), total: 12, partial: false)
        for cut in stride(from: 0, to: good.count, by: 1) {
            #expect(throws: HistoryPageCoding.Malformed.self, "cut at \(cut)") { try HistoryPageCoding.decode(good.prefix(cut)) }
        }
        #expect(throws: HistoryPageCoding.Malformed.self) { try HistoryPageCoding.decode(good + Data([0])) }
        #expect(throws: HistoryPageCoding.Malformed.self) { try HistoryPageCoding.decode(Data("XPBPAGE1".utf8) + Data([0, 0, 0xFE, 0xFF, 0xFF, 0xFF, 0x0F])) }
        #expect(throws: HistoryPageCoding.Malformed.self, "a number past 64 bits") {
            try HistoryPageCoding.decode(Data("XPBPAGE1".utf8) + Data(repeating: 0xFF, count: 11) + Data([1]))
        }
        #expect(throws: HistoryPageCoding.Malformed.self, "not a page") { try HistoryPageCoding.decode(Data("[{}]".utf8)) }
        // Any byte changed: refused or read as some page, never a trap (the fuzz target's hook too).
        for position in 0..<good.count {
            var changed = good
            changed[position] ^= UInt8(truncatingIfNeeded: rng.next() | 1)
            _ = try? HistoryPageCoding.decode(changed)
            HistoryPageCoding.exercise(changed)
            UntrustedPeerInput.exercise(Frame(kind: .page, payload: changed).encoded)
        }
        for _ in 0..<2_000 {
            let noise = Data((0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            HistoryPageCoding.exercise(noise)
        }
    }
}
