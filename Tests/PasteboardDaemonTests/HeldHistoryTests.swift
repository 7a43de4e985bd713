import Foundation
import Logging
import PasteboardKit
import PasteboardWire
import Testing
@testable import PasteboardDaemon

/// The history with copies held in memory while their app may take them back (``History``):
/// over a real SQLite file, whose directory is searched for the held bytes.
@Suite("History with held copies (a real SQLite file)")
struct HeldHistoryTests {
    private let logger = Logger(label: "test")

    private func directory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("xpbd-held-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private func copy(_ text: String, _ selection: Pasteboard.Name = .general, at time: Date, app: String? = nil) -> Snapshot {
        let targets = [KeptTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: Data(text.utf8))]
        var snapshot = Snapshot(selection: selection, advertised: ["TARGETS", "UTF8_STRING"], targets: targets, time: time, source: "test", pid: 7)
        snapshot.app = app
        return snapshot
    }

    /// Whether any file under `directory` holds `text`.
    private func onDisk(_ text: String, in directory: URL) -> Bool {
        let walker = FileManager.default.enumerator(atPath: directory.path)
        while let relative = walker?.nextObject() as? String {
            if let bytes = FileManager.default.contents(atPath: directory.appendingPathComponent(relative).path),
               bytes.range(of: Data(text.utf8)) != nil { return true }
        }
        return false
    }

    private func history(_ directory: URL) throws -> History {
        try History(disk: HistoryStore(directory: directory, maxEntries: 100, maxBytes: 1 << 30, logger: logger), logger: logger)
    }

    @Test("pastes noted on an entry: newest first, 16 kept, carried when a held copy is written, gone with the entry; none for an entry gone")
    func pastes() throws {
        let folder = try directory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let history = try history(folder)
        let now = Date()
        let written = try history.add(copy("on disk", at: now.addingTimeInterval(-10)), display: ":1")
        for reader in 0..<20 {
            try history.addPaste(PasteRecord(time: now.addingTimeInterval(Double(reader)), app: "reader\(reader)", pid: 100 + reader), to: written)
        }
        let kept = try history.pastes(of: written)
        #expect(kept.count == PasteRecord.maxPerEntry)
        #expect(kept.compactMap(\.app) == (4..<20).reversed().map { "reader\($0)" })
        #expect(try history.listing().entries.first { $0.id == written }?.pastes == kept)

        // A held copy's pastes go with it to disk, under its new id.
        let held = try history.add(copy("held", at: now, app: "app"), display: ":1", holding: true)
        try history.addPaste(PasteRecord(time: now, app: nil, pid: nil, unknown: "no reader named"), to: held)
        try history.addPaste(PasteRecord(time: now.addingTimeInterval(1), app: "xsel", pid: 9), to: held)
        let moved = try #require(try history.writeHeld(except: []).first)
        #expect(try history.pastes(of: moved.disk).map { $0.app ?? $0.unknown ?? "" } == ["xsel", "no reader named"])
        // Named by its held id still (a host noted the id before the write).
        try history.addPaste(PasteRecord(time: now.addingTimeInterval(2), app: "xclip", pid: 10), to: held)
        #expect(try history.pastes(of: held).first?.app == "xclip")

        // Gone with the entry; a paste of an entry gone is not noted.
        #expect(try history.disk.removal.delete(entry: written))
        #expect(try history.disk.reading.pastes(of: written).isEmpty)
        try history.addPaste(PasteRecord(time: now, app: "late", pid: 11), to: written)
        #expect(try history.disk.reading.pastes(of: written).isEmpty)
    }

    @Test("a held copy is listed, searched, read and counted in its place, touches no file, and is dropped or written as told")
    func heldInPlace() throws {
        let folder = try directory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let history = try history(folder)
        let now = Date()
        for (number, age) in [(1, 30.0), (2, 20), (3, 10)] {
            try history.add(copy("note \(number)", at: now.addingTimeInterval(-age)), display: ":1")
        }
        let secret = "hunter2-\(UUID().uuidString)"
        let heldID = try history.add(copy(secret, at: now, app: "buttercup"), display: ":1", holding: true)
        #expect(heldID > History.heldIDs)
        history.checkpoint()
        #expect(!onDisk(secret, in: folder), "held: in memory only")

        let listing = try history.listing()
        #expect(listing.entries.map(\.preview) == [secret, "note 3", "note 2", "note 1"])
        #expect(listing.entries.map(\.index) == [0, 1, 2, 3])
        #expect(listing.total == 4 && history.totals().count == 4)
        // Pages and searches put it in its place too.
        let page = try history.listing(offset: 1, limit: 2)
        #expect(page.entries.map(\.preview) == ["note 3", "note 2"] && page.entries.map(\.index) == [1, 2] && page.total == 4)
        let first = try history.listing(offset: 0, limit: 1)
        #expect(first.entries.map(\.preview) == [secret] && first.total == 4)
        #expect(try history.listing(search: "hunter2").entries.map(\.index) == [0])
        #expect(try history.listing(search: "note 2").entries.map(\.index) == [2])
        #expect(try history.snapshot(at: 0)?.text() == secret && history.snapshot(at: 1)?.text() == "note 3")
        #expect(try history.index(ofEntry: heldID) == 0 && history.snapshot(entry: heldID)?.text() == secret)
        #expect(try history.texts(limit: 100, budget: .max) == [secret, "note 3", "note 2", "note 1"])
        #expect(try history.latest(selection: .general, display: ":1")?.text() == secret)

        // A disk entry used again stands before it.
        let third = try #require(try history.listing().entries[1].id)
        try history.touch(third)
        #expect(try history.listing().entries.map(\.preview) == ["note 3", secret, "note 2", "note 1"])
        #expect(try history.listing().entries.map(\.index) == [0, 1, 2, 3])
        #expect(try history.snapshot(at: 1)?.text() == secret && history.index(ofEntry: heldID) == 1)
        #expect(try history.latest(selection: .general, display: ":1")?.text() == "note 3")

        // Taken back: gone, never on disk.
        #expect(try history.forgetSecret(entry: heldID, selection: .general, time: now, display: ":1"))
        #expect(try history.listing().entries.map(\.preview) == ["note 3", "note 2", "note 1"])
        history.checkpoint()
        #expect(!onDisk(secret, in: folder))

        // Held, then written: the same place, its held id still names it.
        let note = "note 4 \(UUID().uuidString)"
        let held = try history.add(copy(note, at: now.addingTimeInterval(1)), display: ":1", holding: true)
        let kept = History.HeldKey(.general, time: now.addingTimeInterval(1))
        #expect(try history.writeHeld(except: [kept]).isEmpty)
        #expect(!onDisk(note, in: folder))
        let written = try history.writeHeld(except: [])
        #expect(written.count == 1 && written[0].held == held && written[0].disk < History.heldIDs)
        history.checkpoint()
        #expect(onDisk(note, in: folder))
        #expect(try history.snapshot(entry: held)?.text() == note && history.index(ofEntry: held) == 0)
        #expect(try history.listing().entries.map(\.preview) == [note, "note 3", "note 2", "note 1"])
    }

    @Test("deleting a held entry drops it; pinning it writes it; a clear and a password tool's forget reach it; another selection's held copy has its own place")
    func heldChanges() throws {
        let folder = try directory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let history = try history(folder)
        let now = Date()
        try history.add(copy("old", at: now.addingTimeInterval(-5)), display: ":1")
        try history.add(copy("clip", at: now.addingTimeInterval(-2), app: "pass"), display: ":1", holding: true)
        try history.add(copy("primary", .find, at: now.addingTimeInterval(-1)), display: ":1", holding: true)
        #expect(try history.listing().entries.map(\.preview) == ["primary", "clip", "old"])
        #expect(try history.latest(selection: .general, display: ":1")?.text() == "clip")
        #expect(try history.latest(selection: .find, display: ":1")?.text() == "primary")

        #expect(try history.delete(index: 0))
        #expect(try history.listing().entries.map(\.preview) == ["clip", "old"])
        #expect(try history.pin(index: 0, true))
        let pinned = try history.listing().entries
        #expect(pinned.map(\.preview) == ["clip", "old"] && pinned[0].pinned == true && pinned[0].id.map { $0 < History.heldIDs } == true)
        history.checkpoint()
        #expect(onDisk("clip", in: folder) && !onDisk("primary", in: folder))

        try history.add(copy("generated", at: now, app: "pass"), display: ":1", holding: true)
        #expect(try history.forgetCopies(since: now.addingTimeInterval(-0.5), byApps: ["pass"]) == 1)
        #expect(try history.listing().entries.map(\.preview) == ["clip", "old"])
        try history.add(copy("another", at: now.addingTimeInterval(1)), display: ":1", holding: true)
        try history.clear()
        #expect(try history.listing().entries.map(\.preview) == ["clip"], "pinned kept, held gone")
        #expect(try history.writeHeld(except: []).isEmpty)

        // A bridge's two sides share one history: each writes only its own display's held copies.
        try history.add(copy("from X", at: now.addingTimeInterval(2)), display: ":1", holding: true)
        #expect(try history.writeHeld(except: [], of: "wayland-1").isEmpty)
        #expect(try history.writeHeld(except: [], of: ":1").map(\.selection) == [.general])
    }
}
