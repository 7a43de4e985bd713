import Foundation
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization
import Testing
@testable import PasteboardDaemon

/// A host port in the test's hands, as NIOEmbedded gives protocol code a channel with no socket:
/// the daemon's core runs in-process over it, and the test plays the host, telling the daemon of
/// copies and reading what the daemon asked it to serve.
final class EmbeddedHost: ClipboardHost {
    let nodeName: String
    /// Its own, or those of the ports it stands for (a bridge's two).
    let displays: [String]
    let defaultSocketPath = "/nonexistent/embedded.socket"
    let surface: any SyncSurface = HeadlessClipboard()
    let keeps = ["CLIPBOARD"]
    let stopsWhenIdle = false
    let seesTakeBacks: Bool

    init(nodeName: String = "embedded", displays: [String]? = nil, seesTakeBacks: Bool = true) {
        self.nodeName = nodeName
        self.displays = displays ?? [nodeName]
        self.seesTakeBacks = seesTakeBacks
    }
    /// What the daemon asked the host to serve, and to clear, in order.
    let served = Mutex<[Snapshot]>([])
    let cleared = Mutex<[Pasteboard.Name]>([])

    func start(_ daemon: ClipboardDaemon) throws {}
    func connect(_ daemon: ClipboardDaemon) {}
    func serveSelected(_ snapshot: Snapshot) throws { served.withLock { $0.append(snapshot) } }
    func clearSelection(_ name: Pasteboard.Name) throws { cleared.withLock { $0.append(name) } }
    func answer(_ request: ControlRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        .failure(ControlFailure("the embedded host answers no control request"))
    }
    func changeCounts() -> [String: Int] { [:] }
    func reload(_ fresh: DaemonConfiguration) {}
    func stopping() {}
    func close() {}
}

@Suite("The daemon's core in-process, over an embedded host port: the keeper's pipeline, the rules, the history verbs")
struct InProcessDaemonTests {
    /// A daemon over an embedded host, its history in a directory of its own.
    private static func daemon(host: EmbeddedHost = EmbeddedHost(), _ adjust: (inout DaemonConfiguration) -> Void = { _ in }) throws -> (ClipboardDaemon, EmbeddedHost, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpbd-embedded-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = DaemonConfiguration(stateDirectory: directory)
        configuration.offersKlipper = false
        configuration.forgetClearedWithin = 120
        adjust(&configuration)
        var logger = Logger(label: "embedded")
        logger.logLevel = .critical
        return (try ClipboardDaemon(host: host, configuration: configuration, logger: logger), host, directory)
    }

    private static func copy(_ text: String, by app: String, at time: Date = Date()) -> Snapshot {
        let data = Data(text.utf8)
        var snapshot = Snapshot(.general, advertised: ["UTF8_STRING", "TARGETS"],
                                captured: [CapturedTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: data)], cap: 1 << 20)!
        snapshot.app = app
        snapshot.source = app
        snapshot.time = time
        return snapshot
    }

    /// The previews the history lists, newest first, once the storage queue has done its work.
    private static func listed(_ daemon: ClipboardDaemon) throws -> [String] {
        daemon.storage.sync {}
        return try daemon.history.page(offset: 0, limit: 100, thumbnails: false).entries.map(\.preview)
    }

    @Test("a control request that reads the history waits for the copies handed in before it: a copy kept (and logged) is listed by the next xpb history")
    func readsWaitForWrites() throws {
        let (daemon, _, directory) = try Self.daemon()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The disk is slow: the writes wait until the test lets them go.
        let disk = DispatchSemaphore(value: 0)
        daemon.storage.async { disk.wait() }
        daemon.record(Self.copy("kept just now", by: "mousepad"))
        let answered = DispatchSemaphore(value: 0)
        let count = Mutex<Int?>(nil)
        Thread.detachNewThread {
            var channel = FrameChannel(fd: -1)
            if case let .success(.reply(.status(status))) = daemon.answer(.status, on: &channel) {
                count.withLock { $0 = status.entryCount }
            }
            answered.signal()
        }
        // Not answered while the copy before it is unwritten (it would say 0 entries).
        #expect(answered.wait(timeout: .now() + 0.3) == .timedOut)
        disk.signal()
        #expect(answered.wait(timeout: .now() + 20) == .success)
        #expect(count.withLock { $0 } == 1)
        // A request that does not read the history does not wait for the disk.
        daemon.storage.async { disk.wait() }
        defer { disk.signal() }
        Thread.detachNewThread {
            var channel = FrameChannel(fd: -1)
            _ = daemon.answer(.offer(pasteboard: "CLIPBOARD"), on: &channel)
            answered.signal()
        }
        #expect(answered.wait(timeout: .now() + 20) == .success)
    }

    @Test("a copy the host reports is recorded and listed; selected again, the host is asked to serve it")
    func recordAndSelect() throws {
        let (daemon, host, directory) = try Self.daemon()
        defer { try? FileManager.default.removeItem(at: directory) }
        for text in ["first copy", "second copy"] {
            let snapshot = Self.copy(text, by: "mousepad")
            #expect(daemon.admits(snapshot, from: "mousepad", owner: 1))
            daemon.copyRead(.general, app: "mousepad", isEmpty: false)
            daemon.record(snapshot)
        }
        #expect(try Self.listed(daemon) == ["second copy", "first copy"])
        let selected = try daemon.history.select(.index(1))
        #expect(selected.preview == "first copy")
        #expect(host.served.withLock { $0.map(\.preview) } == ["first copy"])
        #expect(try Self.listed(daemon) == ["first copy", "second copy"])
        // A front door's refusal names the entry as that door does.
        #expect(throws: HistoryService.Refusal.self) { try daemon.history.select(.index(7)) }
        #expect(throws: HistoryService.Refusal.self) { try daemon.history.delete(.id(999)) }
    }

    @Test("one daemon over two ports, as a bridge keeps them: each port's copy is an entry of its own display, only the port that sees take-backs holds its copy, and the newest of either is the latest")
    func twoPorts() throws {
        // The X port stands for the bridge (its display names the daemon's node); the Wayland
        // port hands its copies in as a port of its own.
        let (daemon, x, directory) = try Self.daemon(host: EmbeddedHost(nodeName: ":9", displays: [":9", "wayland-9"]))
        defer { try? FileManager.default.removeItem(at: directory) }
        let wayland = EmbeddedHost(nodeName: "wayland-9", seesTakeBacks: false)
        // The newest entry on disk taken on `display` (nil: none of that display's).
        let onDisk = { (display: String) in
            try daemon.store.withLock { store -> String? in
                guard try store.disk.reading.newest(selection: .general, on: [display]) != nil else { return nil }
                return try store.disk.reading.latest(selection: .general, display: display)?.preview
            }
        }

        daemon.record(Self.copy("from Wayland", by: "unknown app (Wayland)", at: Date().addingTimeInterval(-10)), from: wayland)
        daemon.storage.sync {}
        #expect(try onDisk("wayland-9") == "from Wayland", "a Wayland copy is written at once, as its display's")
        #expect(try onDisk(":9") == nil)

        daemon.copyRead(.general, app: "mousepad", isEmpty: false)
        daemon.record(Self.copy("from X", by: "mousepad", at: Date().addingTimeInterval(-5)), from: x)
        daemon.storage.sync {}
        #expect(try onDisk(":9") == nil, "an X copy its app may take back is held")
        #expect(try daemon.history.latest(.general, madeOn: ":9")?.preview == "from X")
        #expect(try daemon.history.latest(.general, madeOn: "wayland-9")?.preview == "from Wayland")
        #expect(try daemon.history.latest(.general)?.preview == "from X", "the newest of either display")
        #expect(try Self.listed(daemon) == ["from X", "from Wayland"])
        // The Wayland copy selected again: the newest used, whichever display made it.
        _ = try daemon.history.select(.index(1))
        #expect(try daemon.history.latest(.general)?.preview == "from Wayland")
        #expect(try daemon.history.latest(.general, madeOn: ":9")?.preview == "from X")
    }

    @Test("the content rules refuse a copy before it is recorded")
    func contentRules() throws {
        let (daemon, _, directory) = try Self.daemon { $0.contentRules.minimumSize = 5 }
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(!daemon.admits(Self.copy("abc", by: "mousepad"), from: "mousepad", owner: 1))
        #expect(daemon.admits(Self.copy("long enough", by: "mousepad"), from: "mousepad", owner: 1))
    }

    @Test("a copy its app replaces with an empty one within the window is forgotten, and never reaches the disk")
    func takenBack() throws {
        let (daemon, _, directory) = try Self.daemon()
        defer { try? FileManager.default.removeItem(at: directory) }
        daemon.copyRead(.general, app: "unmarked-manager", isEmpty: false)
        daemon.record(Self.copy("hunter2-secret", by: "unmarked-manager"))
        // Listed while it is held in memory, its app able to take it back.
        #expect(try Self.listed(daemon) == ["hunter2-secret"])
        daemon.copyRead(.general, app: "unmarked-manager", isEmpty: true)
        #expect(try Self.listed(daemon).isEmpty)
        daemon.storage.sync {}
        let files = try FileManager.default.subpathsOfDirectory(atPath: directory.path)
        for file in files {
            let data = (try? Data(contentsOf: directory.appendingPathComponent(file))) ?? Data()
            #expect(data.range(of: Data("hunter2-secret".utf8)) == nil, "\(file)")
        }
    }

    @Test("a copy marked secret, set through a front door or handed in by a host, is served through the port and never kept")
    func secretThroughAFrontDoor() throws {
        let (daemon, host, directory) = try Self.daemon()
        defer { try? FileManager.default.removeItem(at: directory) }
        for marker in SecretMarking.markers.sorted() {
            let data = Data("s3cret".utf8)
            let snapshot = Snapshot(.general, advertised: ["UTF8_STRING", marker],
                                    captured: [CapturedTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: data),
                                               CapturedTarget(target: marker, type: marker, data: Data("secret".utf8))], cap: 1 << 20)!
            try daemon.serveAndKeep(snapshot, madeOverDBusBy: "SetContents")
        }
        #expect(host.served.withLock { $0.count } == SecretMarking.markers.count)
        #expect(try Self.listed(daemon).isEmpty)
        // The record's entrance refuses it whoever hands it in: a host too.
        var marked = Self.copy("handed in by a host", by: "mousepad")
        marked.advertised.append("org.nspasteboard.TransientType")
        daemon.record(marked)
        #expect(try Self.listed(daemon).isEmpty)
        // The user's clear reaches the port, and forgets nothing.
        try daemon.setClipboardText("kept text")
        try daemon.userClears(.general)
        #expect(host.cleared.withLock { $0 } == [.general])
        #expect(try Self.listed(daemon) == ["kept text"])
    }
}

@Suite("KeptCopies: the newest copy kept per selection, as every keeping host holds it")
struct KeptCopiesTests {
    private static func copy(_ text: String, at time: Date) -> Snapshot {
        var snapshot = Snapshot(.general, advertised: ["UTF8_STRING"],
                                captured: [CapturedTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: Data(text.utf8))], cap: 1 << 20)!
        snapshot.time = time
        return snapshot
    }

    @Test("an entry's id and an expiry reach only the copy they were for: a newer copy stays as it is")
    func onlyTheCopyItWasFor() {
        var kept = KeptCopies()
        let old = Date(timeIntervalSince1970: 1000), new = Date(timeIntervalSince1970: 2000)
        kept[.general] = Self.copy("old", at: old)
        kept[.general] = Self.copy("new", at: new)
        kept.written(7, .general, madeAt: old)
        #expect(kept[.general]?.id == nil)
        #expect(kept.drop(.general, madeAt: old) == nil)
        #expect(kept[.general]?.preview == "new")
        kept.written(8, .general, madeAt: new)
        #expect(kept[.general]?.id == 8)
        #expect(kept.drop(.general, madeAt: new)?.preview == "new")
        #expect(kept[.general] == nil)
        kept[.find] = Self.copy("primary", at: old)
        #expect(kept.drop(.find)?.preview == "primary")
        #expect(kept.drop(.find) == nil)
    }
}

@Suite("The headless pasteboards' watchers")
struct HeadlessWatcherTests {
    @Test("changes made on several threads at once reach a watcher in the order they were counted")
    func inOrder() {
        let clipboard = HeadlessClipboard()
        guard let watcher = Watcher<PasteboardChangeNote>(selection: nil) else {
            Issue.record("no pipe for the watcher")
            return
        }
        _ = clipboard.watchers.add(watcher)
        var counts: [Int] = []
        for _ in 0..<20 {
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                for _ in 0..<200 { clipboard.clearForClient("CLIPBOARD") }
            }
            counts += watcher.take().map(\.changeCount)
        }
        #expect(counts.count == 16_000)
        #expect(counts == Array(1...16_000), "first out of order: \(zip(counts, counts.dropFirst()).first { $0.0 >= $0.1 }.map { "\($0)" } ?? "none")")
    }
}
