import CHistorySeal
import Foundation
import Logging
import PasteboardKit
import PasteboardWire
import Testing
@testable import PasteboardDaemon

/// The history sealed at rest: the sealing VFS and the sealed payload files on real SQLite files.
@Suite("History sealed at rest (real SQLite files)")
struct SealedHistoryTests {
    private let logger = Logger(label: "test")

    private func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("xpbd-sealed-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private func seal(_ byte: UInt8) -> HistorySeal {
        HistorySeal(key: (0 ..< 32).map { UInt8($0) &+ byte }, source: .keyFile("/dev/null"))!
    }

    private func snapshot(_ text: String, payload: Data? = nil) -> Snapshot {
        var targets = [KeptTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: Data(text.utf8))]
        if let payload { targets.append(KeptTarget(target: "text/html", type: "text/html", data: payload)) }
        return Snapshot(selection: .general, advertised: ["TARGETS"] + targets.map(\.target), targets: targets, time: Date(), source: "test", pid: 42)
    }

    /// Every file under `directory` whose bytes hold `needle`.
    private func files(under directory: URL, holding needle: String) -> [String] {
        let bytes = Data(needle.utf8)
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: directory.path)
        while let name = enumerator?.nextObject() as? String {
            let path = directory.appendingPathComponent(name).path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                  let contents = FileManager.default.contents(atPath: path) else { continue }
            if contents.range(of: bytes) != nil { found.append(name) }
        }
        return found
    }

    /// A payload larger than the database keeps inline (a file), the canary inside it.
    private func largePayload(_ canary: String) -> Data {
        Data((String(repeating: "<p>filler text of a web page</p>\n", count: 1200) + canary).utf8)
    }

    @Test("nothing a sealed history keeps is readable in its files (database, log, payloads, their names); search and the entries still find it")
    func nothingReadable() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = seal(1)
        let store = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, seals: [key], logger: logger)
        #expect(store.database.seal == key)
        let payload = largePayload("zebracanary in a file")
        for index in 0 ..< 40 { try store.add(snapshot("entry \(index) zebracanary inline", payload: index == 0 ? payload : nil), display: ":1") }
        #expect(try store.reading.summaries(search: "zebracanary").count == 40)
        #expect(try store.reading.snapshot(at: 39)?.targets.last?.data == payload)
        #expect(files(under: directory, holding: "zebracanary").isEmpty)
        #expect(files(under: directory, holding: "filler text").isEmpty)
        // Payload files are named by a keyed digest, not by the contents' SHA-256.
        let blobs = FileManager.default.enumerator(atPath: directory.appendingPathComponent("blobs").path)?.allObjects as? [String] ?? []
        let names = blobs.map { ($0 as NSString).lastPathComponent }.filter { $0.count == 64 }
        #expect(names.count == 1 && names[0] != Digest(of: payload).hex, "\(names)")
        // A page is a page: the same offsets, each reserving its nonce and tag.
        #expect(key.probe(store.database.path) == .opens)
        #expect(seal(2).probe(store.database.path) == .wrongKey)
    }

    @Test("a second connection reads a sealed history beside the first (a search's places counted on two cores), as a plain one; none for one in memory")
    func twinConnections() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for key in [seal(3), nil] as [HistorySeal?] {
            let path = directory.appendingPathComponent("twin-\(key == nil ? "plain" : "sealed").sqlite").path
            let database = try SQLiteDatabase(path: path, seal: key)
            try database.execute("PRAGMA journal_mode=WAL; CREATE TABLE numbers(n INTEGER); CREATE INDEX numbers_n ON numbers(n)")
            try database.execute("WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < 9999) INSERT INTO numbers SELECT n FROM c")
            let twin = try #require(try database.twin(), "a database on disk has a twin")
            #expect(try twin.query("SELECT count(*) FROM numbers").first?[0].integer == 10_000, "the twin reads what the first wrote (\(key == nil ? "plain" : "sealed"))")
            // Many ranges, half counted by each connection: the same counts as one connection's.
            var ranges: [[SQLiteValue]] = []
            var wanted: [Int64?] = []
            for range in 0..<200 {
                let first = Int64(range * 50)
                let last = first + 49 - Int64(range % 7)
                ranges.append([.integer(first), .integer(last)])
                wanted.append(last - first + 1)
            }
            let sql = "SELECT count(*) FROM numbers WHERE n >= ?1 AND n <= ?2"
            let counted: [Int64?] = try database.integersOnTwo(sql, each: ranges)
            #expect(counted == wanted)
        }
        let memory = try SQLiteDatabase(path: ":memory:")
        #expect(try memory.twin() == nil, "no other connection sees a database in memory")
    }

    @Test("a plain history is sealed in place at its open: every entry kept, no plain page or file left, the payload files sealed")
    func plainSealedInPlace() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let payload = largePayload("plaincanary in a file")
        do {
            let plain = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, logger: logger)
            for index in 0 ..< 30 { try plain.add(snapshot("plain \(index) plaincanary", payload: index == 3 ? payload : nil), display: ":1") }
            #expect(!files(under: directory, holding: "plaincanary").isEmpty, "the plain history is plain")
        }
        let key = seal(3)
        let store = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, seals: [key], logger: logger)
        #expect(store.database.seal == key)
        #expect(try store.reading.summaries().count == 30)
        #expect(try store.reading.summaries(search: "plaincanary").count == 30)
        #expect(try store.reading.snapshot(at: 26)?.targets.last?.data == payload)
        #expect(files(under: directory, holding: "plaincanary").isEmpty)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!left.contains { $0.hasSuffix(".plain-old") || $0.contains(".sealing") }, "\(left)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("blobs/.sealing").path))
        // Written to after, and opened again.
        try store.add(snapshot("after plaincanary"), display: ":1")
        let again = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, seals: [key], logger: logger)
        #expect(try again.reading.summaries(search: "plaincanary").count == 31)
    }

    @Test("a history sealed with another key is left as it is, byte for byte; the key that opens it among several is used")
    func otherKey() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = seal(4)
        do {
            let store = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, seals: [first], logger: logger)
            try store.add(snapshot("sealed with the first key"), display: ":1")
            #expect(store.database.checkpoint())
        }
        let path = directory.appendingPathComponent("history.sqlite").path
        let before = try #require(FileManager.default.contents(atPath: path))
        #expect(throws: HistorySealError.self) {
            _ = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, seals: [seal(5)], logger: logger)
        }
        #expect(FileManager.default.contents(atPath: path) == before)
        #expect(HistorySeal.isSealedDatabase(path))
        let store = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, seals: [seal(5), first], logger: logger)
        #expect(store.database.seal == first)
        #expect(try store.reading.summaries().map(\.preview) == ["sealed with the first key"])
    }

    @Test("a sealed page changed on disk is damage: the check finds it, and the file is moved aside for a new one")
    func changedPage() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = seal(6)
        let path = directory.appendingPathComponent("history.sqlite").path
        do {
            let store = try HistoryStore(directory: directory, maxEntries: 1000, maxBytes: 1 << 30, seals: [key], logger: logger)
            for index in 0 ..< 300 { try store.add(snapshot("entry \(index) " + String(repeating: "x", count: 400)), display: ":1") }
            #expect(store.database.checkpoint())
        }
        #expect(HistorySchema.damage(at: path, seal: key) == nil)
        // One byte of a middle page flipped: its tag no longer matches.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        let size = try handle.seekToEnd()
        let offset = (size / 4096 / 2) * 4096 + 100
        try handle.seek(toOffset: offset)
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data([byte ^ 0x40]))
        try handle.close()
        let damage = try #require(HistorySchema.damage(at: path, seal: key))
        #expect(damage.isCorrupt, "\(damage)")
        let store = try HistoryStore(directory: directory, maxEntries: 1000, maxBytes: 1 << 30, seals: [key], logger: logger)
        store.database.replaceDamaged(damage, generation: store.database.generation)
        try store.add(snapshot("after the damage"), display: ":1")
        #expect(try store.reading.summaries().map(\.preview) == ["after the damage"])
        let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".corrupt-") }
        #expect(!aside.isEmpty)
    }

    @Test("a sealing cut short by a crash: a second name of the history itself is only unlinked; one of the plain file left behind is overwritten")
    func conversionCutShort() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("history.sqlite").path
        do {
            let plain = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, logger: logger)
            try plain.add(snapshot("the plain history"), display: ":1")
            #expect(plain.database.checkpoint())
        }
        // Cut before the sealed copy took the name: the second name is the history itself.
        #expect(link(path, HistorySealing.plainPath(path)) == 0)
        _ = FileManager.default.createFile(atPath: HistorySealing.sealingPath(path), contents: Data("half a copy".utf8))
        HistorySealing.finishConversion(path, logger: logger)
        #expect(!FileManager.default.fileExists(atPath: HistorySealing.plainPath(path)))
        #expect(!FileManager.default.fileExists(atPath: HistorySealing.sealingPath(path)))
        #expect(files(under: directory, holding: "the plain history").contains("history.sqlite"), "the history is whole")
        // Cut after: the plain file's second name is another file, overwritten and removed.
        let key = seal(7)
        let store = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, seals: [key], logger: logger)
        #expect(try store.reading.summaries().map(\.preview) == ["the plain history"])
        let stale = HistorySealing.plainPath(path)
        _ = FileManager.default.createFile(atPath: stale, contents: Data("a plain page: the plain history".utf8))
        let holder = open(stale, O_RDONLY)
        defer { close(holder) }
        HistorySealing.finishConversion(path, logger: logger)
        #expect(!FileManager.default.fileExists(atPath: stale))
        var bytes = [UInt8](repeating: 1, count: 31)
        #expect(pread(holder, &bytes, 31, 0) == 31 && bytes.allSatisfy { $0 == 0 }, "overwritten before it went")
    }

    @Test("sealed payload files open whole and in part across chunk edges; a changed, cut or other-key file does not open")
    func payloadFiles() throws {
        let key = seal(8)
        for size in [0, 1, 65_535, 65_536, 65_537, 200_000] {
            let plain = Data((0 ..< size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })
            let sealed = try #require(key.seal(plain))
            #expect(sealed.count == Int(xpbseal_sealed_size(UInt64(size))))
            #expect(HistorySeal.isSealed(sealed))
            #expect(key.open(sealed) == plain, "\(size)")
            for (offset, count) in [(0, 64), (65_530, 20), (size / 2, 70_000), (size, 10)] {
                let start = min(offset, size)
                #expect(key.open(sealed, offset: offset, count: count) == plain.subdata(in: start ..< min(size, start + count)), "\(size) \(offset) \(count)")
            }
            if size > 0 {
                var changed = sealed
                changed[changed.count - 20] ^= 1
                #expect(key.open(changed) == nil)
                #expect(key.open(sealed.dropLast(1)) == nil)
                #expect(seal(9).open(sealed) == nil)
                #expect(sealed.range(of: plain.prefix(32)) == nil || size < 32)
            }
        }
    }

    @Test("the sealing VFS under a rollback journal: a rolled-back transaction and a checked reopen, no plain byte in any file")
    func rollbackJournal() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = seal(10)
        let path = directory.appendingPathComponent("journal.sqlite").path
        do {
            let database = try SQLiteDatabase(path: path, seal: key)
            try database.execute("PRAGMA journal_mode=DELETE; PRAGMA cache_size=4; CREATE TABLE t(x)")
            try database.execute("BEGIN; " + (0 ..< 200).map { "INSERT INTO t VALUES('kept row \($0) journalcanary " + String(repeating: "k", count: 300) + "');" }.joined() + " COMMIT")
            try database.execute("BEGIN; UPDATE t SET x = 'changed journalcanary'; DELETE FROM t WHERE rowid % 3 = 0;")
            #expect(files(under: directory, holding: "journalcanary").isEmpty, "the journal's pages are sealed")
            try database.execute("ROLLBACK")
        }
        let database = try SQLiteDatabase(path: path, seal: key)
        #expect(try database.query("PRAGMA integrity_check").first?.first?.text == "ok")
        #expect(try database.query("SELECT count(*) FROM t WHERE x LIKE 'kept row %'").first?.first?.integer == 200)
        #expect(files(under: directory, holding: "journalcanary").isEmpty)
    }

    @Test("a log's last frame torn by a crash ends the log there, as without sealing: the transactions before it are read, and nothing counts as damage")
    func tornLogFrame() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = seal(11)
        let path = directory.appendingPathComponent("crashed.sqlite").path
        let copy = directory.appendingPathComponent("copy.sqlite").path
        let database = try SQLiteDatabase(path: path, seal: key)
        try database.execute("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x)")
        for word in ["one", "two", "three"] { try database.execute("INSERT INTO t VALUES('\(word)')") }
        // The files as a crash leaves them (the connection still open), the last frame torn.
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix) }
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: copy + "-wal"))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size - 2000)
        try handle.write(contentsOf: Data(repeating: 0x55, count: 16))
        try handle.close()
        let crashed = try SQLiteDatabase(path: copy, seal: key)
        #expect(try crashed.query("SELECT x FROM t ORDER BY rowid").map { $0[0].text } == ["one", "two"])
        #expect(try crashed.query("PRAGMA integrity_check").first?.first?.text == "ok")
        #expect(try database.query("SELECT count(*) FROM t").first?.first?.integer == 3)
    }

    @Test("a plain history's log as a crash left it: its frames reach the sealed copy, and its plain pages are overwritten before the file goes")
    func plainLogOverwritten() throws {
        let running = try temporaryDirectory()
        let crashed = try temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: running)
            try? FileManager.default.removeItem(at: crashed)
        }
        let plain = try HistoryStore(directory: running, maxEntries: 100, maxBytes: 1 << 30, logger: logger)
        for index in 0 ..< 5 { try plain.add(snapshot("entry \(index) logcanary"), display: ":1") }
        try FileManager.default.createDirectory(at: crashed.appendingPathComponent("blobs"), withIntermediateDirectories: true)
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(atPath: running.appendingPathComponent("history.sqlite").path + suffix,
                                             toPath: crashed.appendingPathComponent("history.sqlite").path + suffix)
        }
        let log = crashed.appendingPathComponent("history.sqlite-wal").path
        let size = try #require(try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int)
        #expect(size > 0 && !files(under: crashed, holding: "logcanary").isEmpty, "the log holds plain pages")
        let holder = open(log, O_RDONLY)
        defer { close(holder) }
        let store = try HistoryStore(directory: crashed, maxEntries: 100, maxBytes: 1 << 30, seals: [seal(12)], logger: logger)
        #expect(try store.reading.summaries(search: "logcanary").count == 5, "the log's frames were read")
        #expect(files(under: crashed, holding: "logcanary").isEmpty)
        var bytes = [UInt8](repeating: 1, count: size)
        #expect(pread(holder, &bytes, size, 0) == size && bytes.allSatisfy { $0 == 0 }, "the plain log was overwritten")
        withExtendedLifetime(plain) {}
    }

    @Test("the copies kept in memory while the keyring was locked move into the sealed history once it opens: oldest first, with their times, pins, pastes and large payloads; an expired one stays out; the same content already on disk is not repeated")
    func memoryEntriesMoveIn() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let disk = try HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, seals: [seal(3)], logger: logger)
        try disk.add(snapshot("on disk before"), display: ":1")
        try disk.add(snapshot("copied again"), display: ":1")
        let memory = try HistoryStore(inMemoryFor: directory, maxEntries: 100, maxBytes: 1 << 30, logger: logger)
        let page = largePayload("movecanary")
        let first = try memory.add(snapshot("kept meanwhile 1", payload: page), display: ":1")
        try memory.touch(first, at: 1_000)
        let second = try memory.add(snapshot("kept meanwhile 2"), display: ":1")
        try memory.touch(second, at: 2_000)
        #expect(try memory.pin(index: 0, true))
        let pasted = PasteRecord(time: Date(timeIntervalSince1970: 1_500), app: "firefox", pid: 9)
        try memory.addPaste(pasted, to: first)
        var expiring = snapshot("expired meanwhile")
        expiring.expires = Date(timeIntervalSinceNow: -1)
        try memory.add(expiring, display: ":1")
        let again = try memory.add(snapshot("copied again"), display: ":1")
        try memory.touch(again, at: 3_000)

        #expect(try memory.moveEntries(into: disk) == 3)
        let listed = try disk.reading.summaries()
        #expect(listed.map(\.preview) == ["on disk before", "copied again", "kept meanwhile 2", "kept meanwhile 1"])
        let moved2 = try #require(listed.first { $0.preview == "kept meanwhile 2" })
        #expect(moved2.pinned == true && moved2.time == Date(timeIntervalSince1970: 2_000))
        let moved1 = try #require(listed.first { $0.preview == "kept meanwhile 1" })
        #expect(moved1.pastes == [pasted] && moved1.pinned != true)
        #expect(try disk.reading.snapshot(at: 3)?.targets.last?.data == page)
        #expect(files(under: directory, holding: "movecanary").isEmpty, "the moved payload is sealed too")
    }

}
