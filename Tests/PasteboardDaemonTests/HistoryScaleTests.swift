import Foundation
import Logging
import PasteboardKit
import PasteboardWire
import Testing
@testable import PasteboardDaemon

/// The history at scale: what the open leaves to the upkeep in turns, the totals the triggers
/// keep, pruning in turns, and the search's places by its two ways. Each test fills a real SQLite
/// file as another writer would (an earlier xpbd, the benchmark): rows with no description and
/// not in the search index.
@Suite("History at scale (a real SQLite file)")
struct HistoryScaleTests {
    private let logger = Logger(label: "test")

    private func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("xpbd-scale-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// One row as another writer leaves it.
    struct Row {
        var text: String
        var used: Double
        var display = ":1"
        var expires: Double?
        var pinned = false
    }

    /// Adds `rows` to the history in `directory` (made by a store first) on a connection of
    /// the test's own, in one transaction; returns their ids, in order.
    @discardableResult
    private func fill(_ directory: URL, _ rows: [Row]) throws -> [Int64] {
        let database = try SQLiteDatabase(path: directory.appendingPathComponent("history.sqlite").path)
        return try database.transaction {
            var ids: [Int64] = []
            for row in rows {
                let data = Data(row.text.utf8)
                try database.query("""
                    INSERT INTO entries(selection, display, created, used, size, preview, text, advertised, expires, pinned)
                    VALUES ('general', ?, ?, ?, ?, ?, ?, 'TARGETS\nUTF8_STRING', ?, ?)
                    """, [.text(row.display), .real(row.used), .real(row.used), .integer(Int64(data.count)), .text(String(row.text.prefix(100))),
                          .text(row.text), row.expires.map { .real($0) } ?? .null, .integer(row.pinned ? 1 : 0)])
                let id = database.lastInsertedRow
                try database.query("INSERT INTO targets(entry, position, name, type, digest, size, data) VALUES (?, 0, 'UTF8_STRING', 'UTF8_STRING', ?, ?, ?)",
                                   [.integer(id), .text(Digest(of: data).hex), .integer(Int64(data.count)), .blob(data)])
                ids.append(id)
            }
            return ids
        }
    }

    /// What the file holds, counted row by row on a connection of the test's own.
    private func counted(_ directory: URL, _ condition: String = "1") throws -> (count: Int, bytes: Int) {
        let database = try SQLiteDatabase(path: directory.appendingPathComponent("history.sqlite").path)
        let row = try #require(try database.query("SELECT count(*), coalesce(sum(size), 0) FROM entries WHERE \(condition)").first)
        return (Int(row[0].integer ?? -1), Int(row[1].integer ?? -1))
    }

    private func snapshot(_ text: String, time: Date = Date()) -> Snapshot {
        let data = Data(text.utf8)
        return Snapshot(selection: .general, advertised: ["TARGETS", "UTF8_STRING"], targets: [KeptTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: data)],
                        time: time, source: "test", pid: 42)
    }

    @Test("the totals the triggers keep agree with the rows after every kind of write, another writer's too")
    func totals() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 5, maxBytes: 1 << 30, logger: logger)
        func agree(_ step: String) throws {
            let rows = try counted(directory)
            #expect(store.reading.totals() == rows, "after \(step): kept \(store.reading.totals()), counted \(rows)")
        }
        for number in 0..<8 {
            try store.add(snapshot("copy \(number) " + String(repeating: "x", count: number * 10)), display: ":1")
            try agree("copy \(number)")
        }
        #expect(store.reading.totals().count == 5, "the cap applies: \(store.reading.totals())")
        #expect(try store.pin(index: 3, true))
        try agree("a pin")
        try store.add(snapshot("copy 7 " + String(repeating: "x", count: 70)), display: ":1")
        try agree("the same content copied again")
        #expect(try store.removal.delete(index: 0))
        try agree("a deletion")
        try fill(directory, [Row(text: "another writer's", used: 5), Row(text: "and a pinned one", used: 6, pinned: true)])
        try agree("another writer's rows")
        #expect(try store.pin(index: 0, false))
        try agree("an unpin")
        try store.removal.clear()
        try agree("a clear")
        #expect(try counted(directory) == counted(directory, "pinned = 1"), "the pinned stay")
        try store.removal.clear(includingPinned: true)
        try agree("a clear of the pinned too")
        #expect(store.reading.totals() == (0, 0))
    }

    @Test("caps lowered by thousands are met in turns, the oldest first; the pinned and the newest stay")
    func pruneInTurns() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        var rng = SeededGenerator(seed: 60)
        let rows = (0..<2_600).map { n in
            Row(text: "entry \(n) " + String(repeating: "y", count: Int(rng.next() % 200)), used: Double(rng.next() % 2_000), pinned: n % 997 == 5)
        }
        let ids = try fill(directory, rows)
        /// What the caps keep, counted from the newest as a person reads the list.
        func expected(maxEntries: Int, maxBytes: Int) -> Set<Int64> {
            let order = zip(ids, rows).sorted { ($0.1.used, $0.0) > ($1.1.used, $1.0) }
            var kept = Set(order.filter { $0.1.pinned }.map(\.0))
            var bytes = 0
            for (position, (id, row)) in order.filter({ !$0.1.pinned }).enumerated() {
                bytes += row.text.utf8.count
                if position > 0, position >= maxEntries || bytes > maxBytes { break }
                kept.insert(id)
            }
            return kept
        }
        func keptIDs() throws -> Set<Int64> {
            let database = try SQLiteDatabase(path: directory.appendingPathComponent("history.sqlite").path)
            return Set(try database.query("SELECT id FROM entries").compactMap { $0[0].integer })
        }
        store.removal.maxEntries = 100
        var turns = 0
        var before = store.reading.totals().count
        #expect(try store.removal.prune(), "a copy's own prune takes a few")
        #expect(before - store.reading.totals().count == HistoryUpkeep.copyTurn)
        before = store.reading.totals().count
        while try store.removal.prune(atMost: TurnPacing.most) {
            turns += 1
            let after = store.reading.totals().count
            #expect(before - after <= TurnPacing.most && after < before, "a turn deletes at most \(TurnPacing.most): \(before) → \(after)")
            before = after
        }
        #expect(turns == 2, "2,489 entries in turns of 1,000: two turns with more to do, then the last")
        #expect(try keptIDs() == expected(maxEntries: 100, maxBytes: 1 << 30))
        #expect(try counted(directory, "pinned = 1").count == 3)

        store.removal.maxBytes = try counted(directory, "pinned = 0").bytes / 2
        while try store.removal.prune(atMost: TurnPacing.most) {}
        #expect(try keptIDs() == expected(maxEntries: 100, maxBytes: store.removal.maxBytes))
        store.removal.maxBytes = 0
        var calls = 0
        while try store.removal.prune() { calls += 1 }
        #expect(calls > 0 && calls < 100, "a few at a call: \(calls)")
        #expect(try !store.removal.prune())
        #expect(try counted(directory, "pinned = 0").count == 1, "the newest is always kept")
    }

    @Test("rows another writer added are described and indexed after the open, in turns; listings and searches are right meanwhile")
    func upkeepInTurns() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        try fill(directory, (0..<2_300).map { n in Row(text: "entry \(n)\(n % 100 == 7 ? " needle" : "")", used: Double(n)) })
        let opened = Date()
        let store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        #expect(Date().timeIntervalSince(opened) < 5)
        #expect(try counted(directory, "types IS NULL").count == 2_300, "the open describes nothing")
        func check(_ moment: String) throws {
            let page = try store.reading.listing(offset: 0, limit: 3)
            #expect(page.entries.map(\.preview) == ["entry 2299", "entry 2298", "entry 2297"], "\(moment)")
            #expect(page.entries.first?.types == ["text/plain"], "\(moment): described for the listing")
            #expect(page.total == 2_300, "\(moment)")
            let found = try store.reading.listing(search: "NEEDLE", offset: 0, limit: 100)
            #expect(found.total == 23, "\(moment)")
            #expect(found.entries.map(\.index) == (0..<23).map { 2_299 - (2_207 - 100 * $0) }, "\(moment): \(found.entries.map(\.index))")
        }
        try check("before the upkeep")
        var turns = 0
        while store.upkeep.maintain() {
            turns += 1
            if turns == 3 { try check("in the middle of the upkeep") }
        }
        #expect(turns >= 6, "at most \(TurnPacing.most) entries a turn: three turns of describing or more, as many of indexing")
        #expect(try counted(directory, "types IS NULL OR content_key IS NULL").count == 0)
        #expect(try counted(directory, "indexed = 0").count == 0)
        try check("after the upkeep")
        #expect(!store.upkeep.maintain(), "nothing left")
    }

    @Test("a search's places are those of a full listing, by the few matches' rows and by the walk alike (seeded)")
    func searchPlaces() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        let now = Date().timeIntervalSince1970
        let words = ["alpha", "beta", "gamma", "delta", "omega", "rare"]
        for seed in UInt64(1)...4 {
            try store.removal.clear(includingPinned: true)
            var rng = SeededGenerator(seed: seed)
            // Ties in `used` (500 values for 1,500 rows), some expired, some expiring later.
            let rows = (0..<1_500).map { n -> Row in
                let text = words.filter { word in rng.next() % (word == "rare" ? 100 : 3) == 0 }.joined(separator: " ") + " #\(n)"
                let expiry = rng.next() % 30
                return Row(text: text, used: Double(rng.next() % 500), expires: expiry == 0 ? now - 10 : expiry == 1 ? now + 3_600 : nil)
            }
            let ids = try fill(directory, rows)
            while store.upkeep.maintain() {}
            let listed = zip(ids, rows).filter { $0.1.expires.map { $0 > now } ?? true }.sorted { ($0.1.used, $0.0) > ($1.1.used, $1.0) }
            let database = try SQLiteDatabase(path: directory.appendingPathComponent("history.sqlite").path)
            for word in words {
                let matches = listed.enumerated().filter { $0.element.1.text.contains(word) }.map { (id: $0.element.0, place: $0.offset) }
                for (offset, limit) in [(0, 1_000), (0, 7), (5, 10), (matches.count - 2, 50), (matches.count + 3, 10), (0, Int?.none)] as [(Int, Int?)] {
                    let wanted = Array(matches.dropFirst(max(0, offset)).prefix(limit ?? .max))
                    for sparse in [0, 5, Int.max] {
                        let found = try HistoryIndex.search(word.uppercased(), offset: max(0, offset), limit: limit, in: database, now: now, sparse: sparse)
                        if found.partial {
                            // The walk stopped at the page's end: it counted the matches up to it.
                            let end = max(0, offset) + (limit ?? 0)
                            #expect(limit != nil && found.total == end && matches.count >= end, "seed \(seed) \(word) sparse \(sparse)")
                        } else {
                            #expect(found.total == matches.count, "seed \(seed) \(word) sparse \(sparse)")
                        }
                        #expect(found.page.map(\.id) == wanted.map(\.id) && found.page.map(\.place) == wanted.map(\.place),
                                "seed \(seed) \(word) offset \(offset) limit \(String(describing: limit)) sparse \(sparse)")
                    }
                }
                // Every match a page at a time, each page resuming the last one's walk: as one listing.
                for query in [word, String(word.prefix(2))] {
                    let all = listed.enumerated().filter { $0.element.1.text.contains(query) }.map { (id: $0.element.0, place: $0.offset) }
                    var paged: [(id: Int64, place: Int)] = []
                    var cursor: HistoryIndex.SearchCursor?
                    var pages = 0
                    repeat {
                        let found = try HistoryIndex.search(query, offset: paged.count, limit: 40, in: database, now: now, resume: cursor, sparse: 0)
                        paged += found.page
                        cursor = found.cursor
                        #expect(found.partial == (cursor != nil), "a cursor where more may follow")
                        pages += 1
                    } while cursor != nil && pages < 1_000
                    #expect(paged.map(\.id) == all.map(\.id) && paged.map(\.place) == all.map(\.place), "seed \(seed) \(query) paged")
                }
            }
        }
    }

    @Test("the newest copy of a selection: the display's own, else the newest of any display, never an expired one")
    func latest() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        let now = Date().timeIntervalSince1970
        try fill(directory, [
            Row(text: "one on :1", used: 10, display: ":1"), Row(text: "newer on :1", used: 20, display: ":1"),
            Row(text: "on :2", used: 30, display: ":2"), Row(text: "newest, on :3", used: 40, display: ":3"),
            Row(text: "newer still, expired", used: 50, display: ":3", expires: now - 1),
            Row(text: "expired on :4", used: 60, display: ":4", expires: now - 1),
        ])
        #expect(try store.reading.latest(selection: .general, display: ":1")?.text() == "newer on :1")
        #expect(try store.reading.latest(selection: .general, display: ":2")?.text() == "on :2")
        #expect(try store.reading.latest(selection: .general, display: ":9")?.text() == "newest, on :3")
        #expect(try store.reading.latest(selection: .general, display: ":4")?.text() == "newest, on :3")
        #expect(try store.reading.latest(selection: .find, display: ":1") == nil)
    }

    @Test("the texts a menu shows: the newest first, as many as the budget holds, read a thousand at a time")
    func textsWithinBudget() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        // Ties in `used` across the pages' edges: the page after one goes on where it ended.
        try fill(directory, (0..<2_500).map { Row(text: String(format: "text %05d", $0), used: Double($0 / 3)) })
        let all = try store.reading.texts(limit: 4096, budget: .max)
        #expect(all.map(\.text) == (0..<2_500).reversed().map { String(format: "text %05d", $0) })
        #expect(try store.reading.texts(limit: 4096, budget: 100).count == 10, "10 bytes each")
        #expect(try store.reading.texts(limit: 4, budget: 100).map(\.text).first == "text")
        #expect(try store.reading.texts(limit: 4096, budget: 0).count == 1, "the newest always")
    }

    @Test("a check of the whole file finds damage inside it that the open does not; a check of an old file changes nothing")
    func damageInside() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var store: HistoryStore? = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        try fill(directory, (0..<3_000).map { Row(text: "entry \($0) " + String(repeating: "z", count: 300), used: Double($0)) })
        store?.database.checkpoint()
        let path = directory.appendingPathComponent("history.sqlite").path
        #expect(HistorySchema.damage(at: path) == nil)
        store = nil
        // A page in the middle of the entries' table overwritten, the header and schema left whole.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: 4096 * 100 + 100)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 2_000))
        try handle.close()
        store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        let generation = try #require(store?.database.generation)
        let damage = try #require(HistorySchema.damage(at: path), "the check reads every page")
        store?.database.replaceDamaged(damage, generation: generation + 1)
        #expect(try !FileManager.default.contentsOfDirectory(atPath: directory.path).contains { $0.contains(".corrupt-") },
                "a check of a file the store no longer has changes nothing")
        store?.database.replaceDamaged(damage, generation: generation)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).contains { $0.contains(".corrupt-") })
        #expect(store?.reading.totals().count == 0)
        try store?.add(snapshot("after the damage"), display: ":1")
        #expect(try store?.reading.summaries().map(\.preview) == ["after the damage"])
    }

    @Test("a turn of upkeep takes what the last turn's pace fits in 25 ms: at most twice the last, between 8 and 1,000")
    func pacing() {
        var pacing = TurnPacing()
        #expect(pacing.size == 64)
        pacing.took(0.000_02 * 64, for: 64)
        #expect(pacing.size == 128, "fast: twice as many, no more")
        for _ in 0..<10 { pacing.took(0.000_02 * Double(pacing.size), for: pacing.size) }
        #expect(pacing.size == 1_000)
        pacing.took(0.001 * 1_000, for: 1_000)
        #expect(pacing.size == 25, "1 ms an entry (pruning): 25 fit")
        pacing.took(0.5, for: 25)
        #expect(pacing.size == TurnPacing.fewest)
        pacing.took(0.2, for: 0)
        #expect(pacing.size == TurnPacing.fewest, "a turn with nothing done says nothing of the pace")
    }

    @Test("a history from the version before (no totals, no index by display, no partial indexes) or from a newer one (a column and a table it does not know) opens whole")
    func otherVersions() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("history.sqlite").path
        do {
            let store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
            try store.add(snapshot("written by xpbd"), display: ":1")
        }
        try fill(directory, (0..<50).map { Row(text: "older row \($0)", used: Double($0), display: $0 % 2 == 0 ? ":1" : ":2", pinned: $0 == 3) })
        // The version before this one: what it did not have, gone.
        do {
            let database = try SQLiteDatabase(path: path)
            try database.execute("""
                DROP TRIGGER entries_counted; DROP TRIGGER entries_uncounted; DROP TRIGGER entries_recounted; DROP TABLE entry_totals;
                DROP INDEX entries_latest; DROP INDEX entries_undescribed; DROP INDEX targets_files;
                """)
            // Written by it after: no trigger counts these.
            try database.query("DELETE FROM entries WHERE text = 'older row 0'")
        }
        try fill(directory, [Row(text: "after the old version", used: 100)])
        var store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        #expect(store.reading.totals() == (try counted(directory)), "counted once at the open: \(store.reading.totals())")
        #expect(try counted(directory, "pinned = 1").count == 1)
        #expect(try store.reading.latest(selection: .general, display: ":2")?.text() == "older row 49")
        #expect(try store.reading.listing(offset: 0, limit: 1).entries.first?.preview == "written by xpbd")
        // A newer version's additions are left alone, and its rows are read.
        do {
            let database = try SQLiteDatabase(path: path)
            try database.execute("ALTER TABLE entries ADD COLUMN sealed BLOB; CREATE TABLE future(x); PRAGMA user_version = 99")
        }
        try fill(directory, [Row(text: "by a newer version", used: 200)])
        store = try HistoryStore(directory: directory, maxEntries: 10_000, maxBytes: 1 << 30, logger: logger)
        while store.upkeep.maintain() {}
        #expect(try store.reading.listing(search: "newer version", offset: 0, limit: 5).entries.map(\.preview) == ["by a newer version"])
        #expect(store.reading.totals() == (try counted(directory)))
        let database = try SQLiteDatabase(path: path)
        #expect(try database.query("SELECT count(*) FROM future").first?[0].integer == 0)
        #expect(try database.query("PRAGMA user_version").first?[0].integer == 99)
    }
}
