import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("xpbd with a large history", .serialized)
struct LargeHistoryTests {
    /// The JSON rows of `xpb history ARGUMENTS --json`.
    private func rows(_ arguments: [String], _ x: Xvfb, _ home: DaemonHome) throws -> [[String: Any]] {
        let outcome = try xpb(["history"] + arguments + ["--json"], x, home)
        return try JSONSerialization.jsonObject(with: outcome.output) as? [[String: Any]] ?? []
    }

    @Test("a history of 30,000 rows another writer left opens at once; copies, pastes and listings go on while it is described, indexed and pruned in turns")
    func upkeepBesideCopies() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        try home.writeConfig("--max-entries 40000\n")
        try DaemonProcess(x, home: home, arguments: ["--plain-history"]).stop()
        let database = home.historyDirectory.appendingPathComponent("history.sqlite").path
        try fillHistory(database, count: 30_000, text: "\"entry %d\" % n", on: x)

        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        // Listed at once, the newest first, before any of it is described or indexed.
        let newest = try rows(["--count", "2"], x, home)
        #expect(newest.map { $0["preview"] as? String } == ["entry 29999", "entry 29998"], "\(newest)")
        #expect((newest.first?["types"] as? [String]) == ["text/plain"], "described for the listing: \(newest)")
        // A copy kept, and served once its owner is gone, while the upkeep goes on.
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("a copy during the upkeep".utf8))
        #expect(try eventually(timeout: 20) { try rows(["--count", "1"], x, home).first?["preview"] as? String == "a copy during the upkeep" },
                "\(daemon.log.suffix(2000))")
        owner.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        #expect(try xclipOut(x).text == "a copy during the upkeep")

        try daemon.waitForLog("history upkeep: described 30000, indexed 30000 for search and pruned 0 entries", timeout: 180)
        let found = try rows(["search", "entry 2999"], x, home)
        #expect(found.map { $0["preview"] as? String } == (0...9).reversed().map { "entry 2999\($0)" } + ["entry 2999"], "\(found.map { $0["preview"] ?? "" })")
        #expect(found.map { $0["index"] as? Int } == (1...10).map { $0 } + [1 + 30_000 - 1 - 2999], "each match's place in the whole history")
        // A search of many matches (11,111: "entry 1…"), past the few the index is asked for
        // whole: the page, its places, and "more may match" instead of a count it did not make.
        let many = try xpb(["history", "search", "ENTRY 1", "--count", "5"], x, home)
        #expect(many.text.split(separator: "\n").map { $0.prefix(5).trimmingCharacters(in: .whitespaces) } == (10_001...10_005).map(String.init),
                "entry 19999 is at 10,001, below the copy and entries 20000-29999: \(many.text)")
        #expect(many.error.contains("the newest 5 entries found (more may match); --count N shows more"), "\(many.error)")
        // Every match, a page at a time, each page resuming the last one's walk.
        let every = try rows(["search", "entry 1", "--all"], x, home)
        #expect(every.count == 11_111, "1, 10-19, 100-199, 1000-1999, 10000-19999")
        #expect(every.map { $0["index"] as? Int ?? -1 } == every.map { 30_000 - Int(($0["preview"] as? String ?? "").dropFirst(6))! },
                "each match's place in the whole history")

        // Caps lowered by 29,000 on SIGHUP: met in turns, the newest kept, a paste served throughout.
        try home.writeConfig("--max-entries 1000\n")
        daemon.peer.signal(SIGHUP)
        var pastes = 0
        while !daemon.log.contains("pruned 29001 entries") {
            #expect(try xclipOut(x).text == "a copy during the upkeep", "paste \(pastes) while pruning")
            pastes += 1
            guard pastes < 2_000 else { break }
        }
        try daemon.waitForLog("pruned 29001 entries", timeout: 120)
        let kept = try rows(["--all"], x, home)
        #expect(kept.count == 1000)
        #expect(kept.first?["preview"] as? String == "a copy during the upkeep" && kept.last?["preview"] as? String == "entry 29001",
                "\(kept.first ?? [:]) … \(kept.last ?? [:])")
        let status = try xpb(["daemon", "status", "--json"], x, home)
        let entries = ((try JSONSerialization.jsonObject(with: status.output) as? [String: Any])?["status"] as? [String: Any])?["entryCount"] as? Int
        #expect(entries == 1000, "\(status.text)")
        #expect(!daemon.log.contains("could not describe"), "\(daemon.log.suffix(2000))")
    }
}
