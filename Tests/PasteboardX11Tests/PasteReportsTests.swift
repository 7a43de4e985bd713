import Foundation
import PasteboardKit
import PasteboardSelections
import Testing
import X11TestSupport

/// Which conversions of kept contents are reported as pastes, as a value: conversions in,
/// decisions out.
@Suite("Paste reports")
struct PasteReportsTests {
    static let second: UInt64 = 1_000_000_000

    /// One conversion: looked up if a token is left, then a new paste or not.
    static func convert(_ reports: inout PasteReports, pid: Int, selection: UInt = 1, at now: UInt64) -> Bool {
        reports.mayLookUp(now: now) && reports.isNewPaste(PasteReports.Reader(selection: selection, processID: pid), now: now)
    }

    @Test("one reader's conversions close together are one paste; after a pause, or of another selection, another")
    func coalescing() {
        var reports = PasteReports()
        #expect(Self.convert(&reports, pid: 10, at: 0))
        // The text, then HTML, then an image type, each within the gap of the one before.
        #expect(!Self.convert(&reports, pid: 10, at: Self.second))
        #expect(!Self.convert(&reports, pid: 10, at: 2 * Self.second))
        #expect(!Self.convert(&reports, pid: 10, at: 4 * Self.second))
        // Another selection, another reader: their own pastes.
        #expect(Self.convert(&reports, pid: 10, selection: 2, at: 4 * Self.second))
        #expect(Self.convert(&reports, pid: 11, at: 4 * Self.second))
        // Past the gap: a new paste.
        #expect(Self.convert(&reports, pid: 10, at: 7 * Self.second))
        // A reader known only by its client is not any process.
        let lookedUp = reports.mayLookUp(now: 7 * Self.second)
        let byClient = reports.isNewPaste(PasteReports.Reader(selection: 1, client: 10), now: 7 * Self.second)
        #expect(lookedUp && byClient)
    }

    @Test("look-ups are bounded: a burst of 16, then 4 a second")
    func rate() {
        var reports = PasteReports()
        let burst = (0..<40).filter { Self.convert(&reports, pid: 100 + $0, at: 0) }
        #expect(burst.count == PasteReports.burst)
        // A second later, four more.
        let next = (0..<40).filter { Self.convert(&reports, pid: 200 + $0, at: Self.second) }
        #expect(next.count == PasteReports.perSecond)
        // Quiet for long enough, the whole burst again, never more.
        let later = (0..<40).filter { Self.convert(&reports, pid: 300 + $0, at: 100 * Self.second) }
        #expect(later.count == PasteReports.burst)
    }

    @Test("a seeded flood of readers: look-ups stay within the rate, memory within its bound, and a reader after it is reported", arguments: [1, 2, 3, 42])
    func flood(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var reports = PasteReports()
        var now: UInt64 = 0
        var lookUps = 0
        var reported = 0
        for _ in 0..<100_000 {
            now += UInt64.random(in: 0..<200_000, using: &random)
            guard reports.mayLookUp(now: now) else { continue }
            lookUps += 1
            let pid = Int.random(in: 1..<5_000, using: &random)
            if reports.isNewPaste(PasteReports.Reader(selection: UInt.random(in: 1...3, using: &random), processID: pid), now: now) { reported += 1 }
            #expect(reports.rememberedCount <= PasteReports.readersRemembered)
        }
        let seconds = Double(now) / 1e9
        #expect(Double(lookUps) <= Double(PasteReports.burst) + seconds * Double(PasteReports.perSecond) + 1)
        #expect(reported <= lookUps)
        // After a quiet second, a real reader is noted.
        #expect(Self.convert(&reports, pid: 999_999, at: now + Self.second))
    }
}

/// `--refuse-secret-to` as values: which readers a secret is refused to, and how often they may
/// be looked up.
@Suite("Secret refusal")
struct SecretRefusalRuleTests {
    @Test("a rule refuses the apps it names, in any case, by any name the reader goes by; while it names any, a reader that cannot be named; an empty rule refuses nobody")
    func matching() {
        let rule = SecretRefusal(apps: ["FireFox", "", "wl-paste"])
        #expect(rule.apps == ["firefox", "wl-paste"])
        #expect(rule.refuses(readerNames: ["firefox-esr", "firefox"]))
        #expect(rule.refuses(readerNames: ["cat", "WL-PASTE"]))
        #expect(!rule.refuses(readerNames: ["xsel", "bash"]))
        // Unknown: nil (not looked up, or gone) and no names at all alike.
        #expect(rule.refuses(readerNames: nil))
        #expect(rule.refuses(readerNames: []))
        let none = SecretRefusal(apps: [String]())
        #expect(none.isEmpty && !none.refuses(readerNames: nil) && !none.refuses(readerNames: ["firefox"]))
    }

    @Test("look-ups: a burst, then as many a second as the rate gives back; never more")
    func budget() {
        var budget = LookUpBudget(burst: 4, perSecond: 2)
        let second: UInt64 = 1_000_000_000
        var burst = 0
        for _ in 0..<4 where budget.take(now: 0) { burst += 1 }
        #expect(burst == 4)
        let took1 = budget.take(now: 0)
        #expect(!took1)
        // Half a second gives one back; a clock that steps back gives none.
        let took2 = budget.take(now: second / 2)
        #expect(took2)
        let took3 = budget.take(now: second / 4)
        #expect(!took3)
        let took4 = budget.take(now: second / 2)
        #expect(!took4)
        // A long pause fills the bucket to its burst, no further.
        var refilled = 0
        for _ in 0..<4 where budget.take(now: 100 * second) { refilled += 1 }
        #expect(refilled == 4)
        let took5 = budget.take(now: 100 * second)
        #expect(!took5)
        // A flood of a thousand look-ups over ten seconds gets the burst and the rate's worth.
        var flooded = LookUpBudget(burst: 32, perSecond: 8)
        var taken = 0
        for step in 0..<1000 where flooded.take(now: UInt64(step) * second / 100) { taken += 1 }
        #expect(taken >= 32 + 79 && taken <= 32 + 80, "\(taken)")
    }

    @Test("a reader goes by its own names, its parent's (wl-paste runs cat) and its job's; the rule matches any of them")
    func readerNames() throws {
        // This test's own process as the reader: its parent (the test runner) has names of its own.
        let me = Int(getpid())
        let names = LocalProcess.readerNames(of: me)
        let own = LocalProcess.names(of: me)
        let parents = LocalProcess.names(of: Int(getppid()))
        #expect(!own.isEmpty && Array(names.prefix(own.count)) == own, "\(names)")
        #expect(!parents.isEmpty && parents.allSatisfy(names.contains), "\(names) \(parents)")
        let parent = try #require(parents.first { !own.contains($0) })
        #expect(SecretRefusal(apps: [parent.uppercased()]).refuses(process: me))
        #expect(!SecretRefusal(apps: ["no-such-app"]).refuses(process: me))
        #expect(SecretRefusal(apps: ["no-such-app"]).refuses(process: nil))
    }
}
