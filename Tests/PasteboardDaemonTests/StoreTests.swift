import Foundation
import Logging
import PasteboardKit
import PasteboardWire
import Testing
@testable import PasteboardDaemon

private func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("xpbd-store-\(getpid())-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

private func snapshot(_ text: String, extra: Data? = nil, time: Date = Date()) -> Snapshot {
    var targets = [KeptTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: Data(text.utf8)),
                   KeptTarget(target: "text/plain;charset=utf-8", type: "text/plain;charset=utf-8", data: Data(text.utf8))]
    if let extra { targets.append(KeptTarget(target: "image/png", type: "image/png", data: extra)) }
    return Snapshot(selection: .general, advertised: ["TARGETS"] + targets.map(\.target), targets: targets, time: time, source: "test", pid: 42)
}

private let logger = Logger(label: "test")

@Suite("History store (a real SQLite file)")
struct StoreTests {
    /// Files written by any version are found again by their names: the digest is SHA-256,
    /// checked against FIPS 180-2's vectors (and one that crosses many blocks).
    @Test("payload names are SHA-256 digests: the standard's test vectors")
    func payloadNames() {
        #expect(Digest(of: Data()).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Digest(of: Data("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Digest(of: Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)).hex
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(Digest(of: Data(repeating: UInt8(ascii: "a"), count: 1_000_000)).hex
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("entries come back newest first with every target; identical payloads are one file")
    func roundTrip() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10, maxBytes: 1 << 30, logger: logger)
        let big = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 * 31) })
        try store.add(snapshot("first", extra: big, time: Date(timeIntervalSinceNow: -10)), display: ":1")
        var second = snapshot("second", extra: big)
        second.targets.append(KeptTarget(target: "image/x-copy", type: "image/x-copy", data: big))
        try store.add(second, display: ":1")
        let summaries = try store.reading.summaries()
        #expect(summaries.map(\.preview) == ["second", "first"])
        #expect(summaries[0].targets == ["UTF8_STRING", "text/plain;charset=utf-8", "image/png", "image/x-copy"])
        #expect(summaries[0].keptBytes == 6 + big.count, "identical bytes counted once")
        // An entry with text is its text (a spreadsheet's cells come with a picture of them):
        // the text first and its size; then what else a person recognises, a type the registry
        // does not know last.
        #expect(summaries[0].types == ["text/plain", "image/png", "image/x-copy"], "the text's entry")
        #expect(summaries[0].size == 6, "the size of the text")
        let loaded = try #require(try store.reading.snapshot(at: 0))
        #expect(loaded.targets.map(\.data) == [Data("second".utf8), Data("second".utf8), big, big])
        let blobs = FileManager.default.enumerator(atPath: directory.appendingPathComponent("blobs").path)?.allObjects as? [String] ?? []
        #expect(blobs.filter { $0.count > 3 }.map { ($0 as NSString).lastPathComponent } == [Digest(of: big).hex], "one content-addressed file")
        var info = stat()
        #expect(stat(directory.path, &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    @Test("the listing's version stays while nothing is written, moves with every kind of write and ends at the next expiry")
    func listingVersion() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 3, maxBytes: 1 << 30, logger: logger)
        var versions = [try #require(store.reading.listingVersion())]
        try store.add(snapshot("one"), display: ":1")
        var expiring = snapshot("two")
        let expiry = Date(timeIntervalSinceNow: 60)
        expiring.expires = expiry
        try store.add(expiring, display: ":1")
        versions.append(try #require(store.reading.listingVersion()))
        _ = try store.reading.summaries()
        #expect(store.reading.listingVersion() == versions.last, "listing writes nothing")
        #expect(versions.last?.nextExpiry == expiry.timeIntervalSince1970)
        // Past the expiry the listing differs without any write: no version then.
        #expect(store.reading.listingVersion(now: expiry.timeIntervalSince1970 + 1)?.nextExpiry == nil)
        #expect(store.reading.listingVersion(now: expiry.timeIntervalSince1970 + 1) != versions.last)
        #expect(try store.pin(index: 0, true))
        versions.append(try #require(store.reading.listingVersion()))
        try store.add(snapshot("one"), display: ":1")   // the same contents: moved to the top
        versions.append(try #require(store.reading.listingVersion()))
        #expect(try store.removal.delete(index: 1))
        versions.append(try #require(store.reading.listingVersion()))
        for number in 0..<3 { try store.add(snapshot("more \(number)"), display: ":1") }   // past the cap: evictions
        versions.append(try #require(store.reading.listingVersion()))
        try store.removal.clear(includingPinned: true)
        versions.append(try #require(store.reading.listingVersion()))
        #expect(Set(versions.map(\.changes)).count == versions.count, "each write moved the version: \(versions.map(\.changes))")
        // Another daemon (another display) writing to the same history moves it too.
        let other = try HistoryStore(directory: directory, maxEntries: 3, maxBytes: 1 << 30, logger: logger)
        let before = try #require(store.reading.listingVersion())
        #expect(store.reading.listingVersion() == before)
        try other.add(snapshot("from another display"), display: ":2")
        #expect(store.reading.listingVersion() != before, "a commit of another connection")
        #expect(try store.reading.summaries().map(\.preview) == ["from another display"])
    }

    @Test("the same contents twice is one entry moved to the top; caps prune the oldest and their files")
    func dedupeAndCaps() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 3, maxBytes: 250_000, logger: logger)
        try store.add(snapshot("same"), display: ":1")
        try store.add(snapshot("same"), display: ":1")
        #expect(try store.reading.summaries().count == 1)
        for number in 0..<4 {
            try store.add(snapshot("entry \(number)", extra: Data(repeating: UInt8(number), count: 100_000)), display: ":1")
        }
        let previews = try store.reading.summaries().map(\.preview)
        #expect(previews == ["entry 3", "entry 2"], "the byte cap leaves two of 100 kB")
        let files = (FileManager.default.enumerator(atPath: directory.appendingPathComponent("blobs").path)?.allObjects as? [String] ?? [])
            .filter { $0.count > 3 }
        #expect(files.count == 2, "pruned entries' files are deleted: \(files)")
        #expect(try store.removal.delete(index: 0))
        #expect(try store.reading.summaries().map(\.preview) == ["entry 2"])
        try store.removal.clear()
        #expect(try store.reading.summaries().isEmpty)
    }

    @Test("copying what an older entry holds moves that entry to the top: one row, whatever the targets that served it")
    func dedupeOlder() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10, maxBytes: 1 << 30, logger: logger)
        try store.add(snapshot("Grüße"), display: ":1")
        try store.add(snapshot("other"), display: ":1")
        try store.add(snapshot("Grüße"), display: ":1")
        #expect(try store.reading.summaries().map(\.preview) == ["Grüße", "other"])
        try store.add(snapshot("other"), display: ":1")
        // The same text from another owner (xpb: Latin-1 STRING, its manifest and item target).
        let text = Data("Grüße".utf8)
        let xpb = Snapshot(selection: .general, advertised: ["TARGETS", "UTF8_STRING", "STRING", "XPB_MANIFEST"], targets: [
            KeptTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: text),
            KeptTarget(target: "STRING", type: "STRING", data: Data([0x47, 0x72, 0xFC, 0xDF, 0x65])),
            KeptTarget(target: "XPB_MANIFEST", type: "UTF8_STRING", data: Data("xpb-manifest\t1\titems=1\n0\tpublic.utf8-plain-text\tXPB_ITEM_0_0\n".utf8)),
            KeptTarget(target: "XPB_ITEM_0_0", type: "UTF8_STRING", data: text),
        ], source: "xpb", pid: 7)
        try store.add(xpb, display: ":1")
        let listed = try store.reading.summaries()
        #expect(listed.map(\.preview) == ["Grüße", "other"])
        #expect(listed.first?.source == "xpb", "the newer copy's targets and source replace the older row")
        #expect(listed.first?.size == text.count && listed.first?.types == ["text/plain"])
        // Other contents with the same text are another entry.
        try store.add(snapshot("Grüße", extra: Data([1, 2, 3])), display: ":1")
        #expect(try store.reading.summaries().count == 3)
    }

    @Test("a person's listing: 19 characters are 19 B; more lines counted and searchable; an image under a vendor's name alone is an image")
    func readableListing() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10, maxBytes: 1 << 30, logger: logger)
        try store.add(snapshot("nineteen characters"), display: ":1")
        var listed = try store.reading.summaries()
        #expect(listed.first?.size == 19 && listed.first?.moreLines == 0 && listed.first?.rest == "")
        try store.add(snapshot("\n  first line\nsecond line\n\nfourth line\n"), display: ":1")
        listed = try store.reading.summaries()
        #expect(listed.first?.preview == "first line")
        #expect(listed.first?.moreLines == 3 && listed.first?.rest == "second line ⏎ fourth line")
        #expect(try store.reading.summaries(search: "FOURTH").map(\.preview) == ["first line"])
        // Chromium's token first, then a PNG under a vendor's name: the image, by its bytes.
        let png = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Peers/image.png"))
        let image = Snapshot(selection: .general, advertised: ["TARGETS", "chromium/x-internal-source-rfh-token", "application/x-qt-image"], targets: [
            KeptTarget(target: "chromium/x-internal-source-rfh-token", type: "chromium/x-internal-source-rfh-token", data: Data(repeating: 0x41, count: 24)),
            KeptTarget(target: "application/x-qt-image", type: "application/x-qt-image", data: png),
        ])
        try store.add(image, display: ":1")
        listed = try store.reading.summaries()
        #expect(listed.first?.types == ["image/png"] && listed.first?.size == png.count)
        #expect(listed.first?.preview.hasPrefix("[image/png ") == true, "\(listed.first?.preview ?? "")")
        #expect(try store.reading.summaries(search: "image").count == 1)
    }

    @Test("an entry whose row cannot be written (a full disk) leaves no payload file behind; the next one is written")
    func failedRowLeavesNoFile() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10, maxBytes: 1 << 30, logger: logger)
        // Another connection makes every new row fail, as a full disk does.
        let side = try SQLiteDatabase(path: directory.appendingPathComponent("history.sqlite").path)
        try side.execute("CREATE TRIGGER refuse BEFORE INSERT ON entries BEGIN SELECT RAISE(ABORT, 'database or disk is full (test)'); END;")
        let big = Data(repeating: 0x42, count: 100_000)
        #expect(throws: SQLiteError.self) { try store.add(snapshot("lost", extra: big), display: ":1") }
        let files = { (FileManager.default.enumerator(atPath: directory.appendingPathComponent("blobs").path)?.allObjects as? [String] ?? []).filter { $0.count > 3 } }
        #expect(files().isEmpty, "payload files no row names: \(files())")
        try side.execute("DROP TRIGGER refuse")
        try store.add(snapshot("kept", extra: big), display: ":1")
        #expect(try store.reading.summaries().map(\.preview) == ["kept"])
        #expect(files().count == 1)
    }

    @Test("a damaged database is moved aside and a new one opened; leftover files are collected")
    func damage() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try HistoryStore(directory: directory, maxEntries: 10, maxBytes: 1 << 30, logger: logger)
            try store.add(snapshot("before"), display: ":1")
            store.database.checkpoint()
        }
        let path = directory.appendingPathComponent("history.sqlite").path
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path))
        let orphan = directory.appendingPathComponent("blobs/tmp-1-1")
        try Data("half".utf8).write(to: orphan)
        // Left by a crash a while ago: a fresh one may be another daemon's write under way.
        let fresh = directory.appendingPathComponent("blobs/tmp-2-1")
        try Data("under way".utf8).write(to: fresh)
        let past = Date(timeIntervalSinceNow: -(PayloadFiles.garbageAge + 60))
        try FileManager.default.setAttributes([.modificationDate: past], ofItemAtPath: orphan.path)
        let store = try HistoryStore(directory: directory, maxEntries: 10, maxBytes: 1 << 30, logger: logger)
        #expect(try store.reading.summaries().isEmpty)
        try store.add(snapshot("after"), display: ":1")
        #expect(try store.reading.summaries().map(\.preview) == ["after"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).contains { $0.hasPrefix("history.sqlite.corrupt-") })
        #expect(!FileManager.default.fileExists(atPath: orphan.path))
        #expect(FileManager.default.fileExists(atPath: fresh.path), "another daemon's write under way is left alone")
    }

    @Test("latest prefers the display it was taken on, and never returns expired contents")
    func latest() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, maxEntries: 10, maxBytes: 1 << 30, logger: logger)
        try store.add(snapshot("on one", time: Date(timeIntervalSinceNow: -5)), display: ":1")
        try store.add(snapshot("on two"), display: ":2")
        var expired = snapshot("expired")
        expired.expires = Date(timeIntervalSinceNow: -1)
        try store.add(expired, display: ":1")
        #expect(try store.reading.latest(selection: .general, display: ":1")?.text() == "on one")
        #expect(try store.reading.latest(selection: .general, display: ":9")?.text() == "on two")
        #expect(try store.reading.summaries().map(\.preview) == ["on two", "on one"])
    }
}

@Suite("Keep policy")
struct KeepPolicyTests {
    @Test("protocol, resource and toolkit-private targets are skipped")
    func skipList() {
        let offered = ["TARGETS", "MULTIPLE", "TIMESTAMP", "DELETE", "INSERT_SELECTION", "INSERT_PROPERTY", "SAVE_TARGETS", "PIXMAP",
                       "BITMAP", "DRAWABLE", "x-special/gnome-copied-files", "x-special/nautilus-clipboard",
                       "application/vnd.portal.filetransfer", "_QT_SELECTION", "UTF8_STRING", "text/html", "image/png",
                       "XPB_MANIFEST", "XPB_ITEM_0_0", "XPB_SEL_1", "UTF8_STRING"]
        #expect(KeepPolicy.keptTargets(offered) == ["x-special/gnome-copied-files", "UTF8_STRING", "text/html", "image/png",
                                                    "XPB_MANIFEST", "XPB_ITEM_0_0"])
    }

    @Test("one text and one image are fetched: GTK's and Qt's six text targets become their first UTF-8 one")
    func oneTextOneImage() {
        let gtk = ["TIMESTAMP", "TARGETS", "MULTIPLE", "SAVE_TARGETS", "UTF8_STRING", "COMPOUND_TEXT", "TEXT", "STRING",
                   "text/plain;charset=utf-8", "text/plain"]
        #expect(KeepPolicy.fetchedTargets(gtk) == ["UTF8_STRING"])
        let qt = ["TARGETS", "text/plain", "text/plain;charset=utf-8", "UTF8_STRING", "STRING", "TEXT", "COMPOUND_TEXT",
                  "text/html", "image/png", "image/bmp", "image/jpeg", "application/x-qt-image"]
        #expect(KeepPolicy.fetchedTargets(qt) == ["UTF8_STRING", "text/html", "image/png", "application/x-qt-image"])
        // A MIME spelling with spaces and capitals is the same target.
        #expect(KeepPolicy.fetchedTargets(["text/plain; charset=UTF-8", "STRING", "TEXT"]) == ["text/plain; charset=UTF-8"])
        // No UTF-8 target: the text targets there are fetched as they are.
        #expect(KeepPolicy.fetchedTargets(["STRING", "TEXT", "COMPOUND_TEXT"]) == ["STRING", "TEXT", "COMPOUND_TEXT"])
        // HTML and the other text/* types are contents of their own, never made from the text.
        #expect(KeepPolicy.fetchedTargets(["UTF8_STRING", "text/html", "text/uri-list", "STRING"]) == ["UTF8_STRING", "text/html", "text/uri-list"])
    }

    @Test("any of the three markers makes data secret, whatever its value")
    func secrets() {
        #expect(SecretMarking.isSecret(["UTF8_STRING", "x-kde-passwordManagerHint"]))
        #expect(SecretMarking.isSecret(["org.nspasteboard.ConcealedType"]))
        #expect(SecretMarking.isSecret(["org.nspasteboard.TransientType", "STRING"]))
        #expect(!SecretMarking.isSecret(["UTF8_STRING", "text/html"]))
    }
}

@Suite("Control wire format")
struct WireTests {
    @Test("frames survive any split of the stream; an oversized length is refused before allocation")
    func frames() throws {
        let frames = [Frame(kind: .hello, payload: Data("{}".utf8)), Frame(kind: .request, payload: Data(repeating: 7, count: 70_000)),
                      Frame(kind: .reply, payload: Data())]
        let stream = frames.reduce(Data()) { $0 + $1.encoded }
        for step in [1, 3, 4096, stream.count] {
            var decoder = FrameDecoder()
            var decoded: [Frame] = []
            var offset = 0
            while offset < stream.count {
                decoder.append(stream.subdata(in: offset..<min(stream.count, offset + step)))
                offset += step
                while let frame = try decoder.next() { decoded.append(frame) }
            }
            #expect(decoded == frames)
        }
        var hostile = FrameDecoder()
        hostile.append(Data([0x7F, 0xFF, 0xFF, 0xFF, 2]))
        #expect(throws: WireError.self) { try hostile.next() }
        var unknown = FrameDecoder()
        unknown.append(Data([0, 0, 0, 0, 99]))
        #expect(throws: WireError.self) { try unknown.next() }
    }

    @Test("requests and replies round-trip as JSON; versions are checked")
    func messages() throws {
        for request in [ControlRequest.status, .history(search: "x"), .select(index: 3), .delete(index: 0), .clear] {
            #expect(try ControlCoding.decode(ControlRequest.self, from: ControlCoding.encode(request)) == request)
        }
        #expect(ControlHello.current.mismatch(with: ControlHello(protocol: "xpb-control", version: 2))?.contains("version 2") == true)
        #expect(ControlHello.current.mismatch(with: .current) == nil)
        #expect(ControlEndpoint.displayKey(":0.0") == "0" && ControlEndpoint.displayKey("host:1.0") == "host_1")
        #expect(ControlEndpoint.socketPath(display: ":3", environment: ["XDG_RUNTIME_DIR": "/run/user/7"], uid: 7) == "/run/user/7/xpb/xpbd-3.socket")
    }
}
