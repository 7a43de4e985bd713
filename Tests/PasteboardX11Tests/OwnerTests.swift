internal import CX11
import Foundation
import Synchronization
import Testing
@testable import PasteboardKit
@testable import PasteboardX11

/// Counts provider runs across threads.
final class Runs: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    func hit(_ key: String) { counts.withLock { $0[key, default: 0] += 1 } }
    func count(_ key: String) -> Int { counts.withLock { $0[key, default: 0] } }
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
}

@Suite("Owner: targets, lazy providers, MULTIPLE, several selections")
struct OwnerTests {
    @Test("xclip -o -t TARGETS lists exactly what the owner serves, and each listed target converts")
    func targetsListed() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3])
        try Pasteboard.general(of: backend).setItems([
            [PasteboardType.utf8PlainText: "plain ✓", .html: "<b>rich</b>", .png: png, .blob: Data([1, 2])],
            [.utf8PlainText: "second item"],
        ])
        let listed = try run("xclip", ["-o", "-selection", "clipboard", "-t", "TARGETS"], display: x)
        let targets = listed.text.split(separator: "\n").map(String.init)
        // Protocol targets first, then the first item's types (a dictionary item orders its
        // types by identifier) through the registry, then the manifest.
        #expect(targets == [
            "TARGETS", "MULTIPLE", "TIMESTAMP", "SAVE_TARGETS",
            "com.example.blob", "text/html", "image/png",
            "UTF8_STRING", "text/plain;charset=utf-8", "text/plain", "STRING", "TEXT",
            "XPB_MANIFEST",
        ])
        // MULTIPLE needs an ATOM_PAIR list, which xclip cannot send: tested on its own below.
        for target in targets where target != "MULTIPLE" {
            let out = try run("xclip", ["-o", "-selection", "clipboard", "-t", target], display: x)
            #expect(out.status == 0, "\(target): \(out.error)")
        }
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x).text == "<b>rich</b>")
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "image/png"], display: x).output == png)
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "STRING"], display: x).output == Data("plain ?".utf8))
    }

    @Test("URLs as text/uri-list (every URL item) and text/x-moz-url; colors as application/x-color")
    func urlsAndColors() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let board = Pasteboard.general(of: backend)
        board.urls = [URL(string: "https://example.org/a")!, URL(fileURLWithPath: "/tmp/b.txt")]
        let list = try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/uri-list"], display: x)
        #expect(list.text == "https://example.org/a\r\nfile:///tmp/b.txt\r\n")
        let moz = try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/x-moz-url"], display: x)
        #expect(try moz.output == TargetCodec.mozURL.encode(Data("https://example.org/a".utf8)))
        board.color = PasteboardColor(red: 1, green: 0.5, blue: 0, alpha: 1)
        let color = try run("xclip", ["-o", "-selection", "clipboard", "-t", "application/x-color"], display: x)
        #expect(color.output == PasteboardColor(red: 1, green: 0.5, blue: 0, alpha: 1).encoded)
        // And back: a uri-list owner reads as URLs.
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "text/uri-list", "-quiet"], display: x,
                             input: Data("# comment\r\nhttps://example.net/x\r\n".utf8))
        defer { owner.stop() }
        #expect(eventually { board.url == URL(string: "https://example.net/x") })
    }

    @Test("a provider runs only when its type is converted, and once per write")
    func lazyProviders() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let runs = Runs()
        var provider = ItemProvider()
        provider.register(.utf8PlainText) { runs.hit("text"); return Data("lazy".utf8) }
        provider.register(.html) { runs.hit("html"); return Data("<i>lazy</i>".utf8) }
        try Pasteboard.general(of: backend).setItemProviders([provider])
        _ = try run("xclip", ["-o", "-selection", "clipboard", "-t", "TARGETS"], display: x)
        #expect(runs.total == 0)
        for target in ["UTF8_STRING", "STRING", "TEXT", "text/plain"] {
            #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", target], display: x).text == "lazy")
        }
        #expect(runs.count("text") == 1 && runs.count("html") == 0)
        try Pasteboard.general(of: backend).setItemProviders([provider])
        _ = try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x)
        #expect(runs.count("html") == 1)
    }

    @Test("MULTIPLE: each pair converted, failed pairs set to None; a malformed list is refused")
    func multiple() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        let reader = try x.backend()
        defer { owner.close(handOff: false); reader.close(handOff: false) }
        try Pasteboard.general(of: owner).setItems([[PasteboardType.utf8PlainText: "multi", .html: "<p>m</p>"]])
        let reply = try #require(try reader.rawConvert(target: "MULTIPLE", parameters: [
            "UTF8_STRING", "XPB_TEST_A", "application/x-not-there", "XPB_TEST_B", "text/html", "XPB_TEST_C",
        ]))
        #expect(reply.format == 32)
        let names = try reader.atomNames(reply.atoms)
        #expect(names == ["UTF8_STRING", "XPB_TEST_A", nil, "XPB_TEST_B", "text/html", "XPB_TEST_C"])
        // An odd number of atoms is not an ATOM_PAIR list.
        #expect(try reader.rawConvert(target: "MULTIPLE", parameters: ["UTF8_STRING", "XPB_TEST_D", "TARGETS"]) == nil)
        // MULTIPLE with property None is invalid.
        #expect(try reader.rawConvert(target: "MULTIPLE", legacyNoProperty: true) == nil)
        // The owner keeps serving.
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "multi")
    }

    @Test("unknown targets are refused, property None is answered in the target's property")
    func oddRequests() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        let reader = try x.backend()
        defer { owner.close(handOff: false); reader.close(handOff: false) }
        Pasteboard.general(of: owner).string = "odd"
        let unknown = try run("xclip", ["-o", "-selection", "clipboard", "-t", "application/x-unknown"], display: x)
        #expect(unknown.status != 0)
        let legacy = try reader.rawConvert(target: "UTF8_STRING", legacyNoProperty: true)
        #expect(legacy?.data == Data("odd".utf8))
        let timestamp = try #require(try reader.rawConvert(target: "TIMESTAMP"))
        #expect(timestamp.format == 32 && (timestamp.longs.first ?? 0) > 0)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "odd")
    }

    @Test("PRIMARY is the find pasteboard, in both directions")
    func primary() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let find = Pasteboard.find(of: backend)
        find.string = "primary text"
        #expect(try run("xclip", ["-o", "-selection", "primary"], display: x).text == "primary text")
        #expect(try run("xsel", ["-o", "-p"], display: x).text == "primary text")
        #expect(Pasteboard.general(of: backend).string == nil)
        let owner = try Peer("xclip", ["-i", "-selection", "primary", "-quiet"], display: x, input: Data("from xclip".utf8))
        defer { owner.stop() }
        #expect(eventually { find.string == "from xclip" })
    }

    @Test("named pasteboards are separate selections and do not interfere")
    func namedPasteboards() throws {
        let x = try Xvfb()
        let writer = try x.backend()
        let reader = try x.backend()
        defer { writer.close(handOff: false); reader.close(handOff: false) }
        #expect(X11PasteboardBackend.selectionName(for: "alpha") == "XPB_PASTEBOARD:alpha")
        let alpha = try #require(Pasteboard(name: "alpha", create: true, backend: writer))
        let beta = try #require(Pasteboard(name: "beta", create: true, backend: writer))
        alpha.string = "A"
        try beta.setItems([[PasteboardType.blob: Data([0xBE])], [.utf8PlainText: "B2"]])
        #expect(Pasteboard(name: "gamma", create: false, backend: reader) == nil)
        let readAlpha = try #require(Pasteboard(name: "alpha", create: false, backend: reader))
        let readBeta = try #require(Pasteboard(name: "beta", create: false, backend: reader))
        #expect(readAlpha.string == "A")
        #expect(try readBeta.itemTypes() == [[.blob], [.utf8PlainText]])
        #expect(try readBeta.data(forPasteboardType: .blob) == Data([0xBE]))
        #expect(readBeta.strings == ["B2"])
        #expect(Pasteboard.general(of: reader).string == nil)
        Pasteboard.remove(withName: "alpha", backend: writer)
        #expect(eventually { readAlpha.string == nil })
        #expect(readBeta.strings == ["B2"])
    }

    @Test("all items reach an xpb reader through the manifest, lazily; other clients see the first")
    func manifest() throws {
        let x = try Xvfb()
        let writer = try x.backend()
        let reader = try x.backend()
        defer { writer.close(handOff: false); reader.close(handOff: false) }
        let runs = Runs()
        var first = ItemProvider()
        first.register(.utf8PlainText) { runs.hit("1") ; return Data("one".utf8) }
        var second = ItemProvider()
        second.register(.png) { runs.hit("2png"); return Data([0x89, 0x50]) }
        second.register(.utf8PlainText) { runs.hit("2text"); return Data("two".utf8) }
        var third = ItemProvider()
        third.register(.blob) { runs.hit("3"); return payload(300_000) }
        try Pasteboard.general(of: writer).setItemProviders([first, second, third])
        let board = Pasteboard.general(of: reader)
        #expect(try board.itemTypes() == [[.utf8PlainText], [.png, .utf8PlainText], [.blob]])
        #expect(runs.total == 0)
        #expect(try board.data(forPasteboardType: .blob) == payload(300_000))
        #expect(runs.count("3") == 1 && runs.total == 1)
        #expect(board.strings == ["one", "two"])
        #expect(runs.count("2png") == 0)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "one")
    }

    @Test("8 xclip readers at once each get 50 MiB byte-exact from one owner")
    func concurrentReaders() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let data = payload(50 << 20, seed: 42)
        try Pasteboard.general(of: backend).setData(data, forPasteboardType: .blob)
        let readers = try (0..<8).map { _ in try Peer("xclip", ["-o", "-selection", "clipboard", "-t", "com.example.blob"], display: x) }
        for reader in readers {
            let out = try reader.finish(timeout: 180)
            #expect(out.status == 0)
            #expect(out.output.count == data.count)
            #expect(out.output == data)
        }
        #expect(eventually { (try? backend.activeTransferCount()) == 0 })
    }
}

/// `xpb copy` owns the selection with the X loop inline (no thread), forks, and the child hands
/// the loop to an X thread of its own: the backend must then serve with no call of its own.
@Suite("Owner: an inline loop handed to an X thread")
struct InlineOwnerTests {
    @Test("an owner whose loop ran inline serves after startThread() with no call of its own, a reader that asked before included; then replaces its copy and gives it up")
    func inlineThenThread() throws {
        let x = try Xvfb()
        let backend = try X11PasteboardBackend(display: x.display, configuration: {
            var configuration = X11Configuration()
            configuration.runsOnCallersThread = true
            return configuration
        }())
        defer { backend.close(handOff: false) }
        let board = Pasteboard.general(of: backend)
        try board.setItems([[PasteboardType.utf8PlainText: "inline ✓"]])
        #expect(backend.isOwner(of: .general))
        // Nobody drives the loop now: a reader that asks meanwhile is answered once it has a thread.
        let reader = try Peer(try xclipPath(), ["-o", "-selection", "clipboard"], display: x)
        try backend.startThread()
        let answered = try reader.finish(timeout: 30)
        #expect(answered.status == 0 && answered.text == "inline ✓", "\(answered.error)")
        // Calls wait on the X thread now, as a backend made with one does.
        try board.setItems([[PasteboardType.utf8PlainText: "second"]])
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "second")
        #expect(try backend.activeTransferCount() == 0)
        try board.removeAllItems()
        #expect(try eventually(timeout: 10) { try run("xclip", ["-o", "-selection", "clipboard"], display: x).status != 0 })
        // A second start changes nothing.
        try backend.startThread()
        #expect(backend.isConnected)
    }
}

extension X11PasteboardBackend {
    /// Whether this backend has asked the server for a timestamp of its own: a zero-length append
    /// to its window's `XPB_TIMESTAMP` (``X11Session/serverTime(_:)``) makes the property.
    func hasAskedForTimestamp() throws -> Bool {
        try connection.sync(timeout: 30) { session, done in
            done(Result { try session.wire.readProperty(session.wire.window, session.wire.known[.timestampProperty], delete: false) != nil })
        }
    }
}

@Suite("Owner: the first selection taken takes the connection's start time")
struct StartTimeTests {
    @Test("a selection taken right after connecting asks no timestamp of its own; the next one does")
    func firstOwnershipTakesStartTime() throws {
        let x = try Xvfb()
        let backend = try x.backend { $0.startTimeFreshness = 60_000_000_000 }
        defer { backend.close(handOff: false) }
        let board = Pasteboard.general(of: backend)
        board.string = "first"
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "first")
        #expect(try backend.owner(of: .general)?.window == backend.connection.sync(timeout: 30) { session, done in done(.success(session.wire.window)) })
        #expect(try !backend.hasAskedForTimestamp())
        board.string = "second"
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "second")
        #expect(try backend.hasAskedForTimestamp())
    }

    @Test("a start time older than another client's copy loses to it: the selection is taken again at a fresh timestamp")
    func staleStartTimeTakesFreshOne() throws {
        let x = try Xvfb()
        let backend = try x.backend { $0.startTimeFreshness = 60_000_000_000 }
        defer { backend.close(handOff: false) }
        // xclip owns the clipboard after our connection began: its change is newer than our
        // start time, and the server refuses an ownership at that time.
        let other = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("xclip's".utf8))
        defer { other.stop() }
        #expect(eventually { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x).text) == "xclip's" })
        try Pasteboard.general(of: backend).setItems([[.utf8PlainText: "ours"]])
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "ours")
        #expect(try backend.hasAskedForTimestamp())
        // xclip lost the selection to us, and exits.
        #expect(eventually { !other.isRunning })
    }

    @Test("two selections taken at once right after connecting: both are taken")
    func twoAtOnce() throws {
        let x = try Xvfb()
        for round in 0..<10 {
            // No round trip before the writes: both may be asked before the start time comes.
            let backend = try X11PasteboardBackend(display: x.display, changeCenter: ChangeCenter(), configuration: {
                var configuration = X11Configuration()
                configuration.startTimeFreshness = 60_000_000_000
                return configuration
            }())
            defer { backend.close(handOff: false) }
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let board = index == 0 ? Pasteboard.general(of: backend) : Pasteboard.find(of: backend)
                do { try board.setItems([[.utf8PlainText: "\(round) \(index)"]]) } catch { failures.withLock { $0.append("\(error)") } }
            }
            #expect(failures.withLock { $0 }.isEmpty)
            #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "\(round) 0")
            #expect(try run("xclip", ["-o", "-selection", "primary"], display: x).text == "\(round) 1")
        }
    }

    @Test("while xpbd runs, a write right after connecting waits for xpbd's count from the manager's window as the connection opened")
    func managerAtStart() throws {
        let x = try Xvfb()
        let daemon = try DaemonProcess(x, home: try DaemonHome(), arguments: ["--no-restore"])
        defer { _ = try? daemon.stop() }
        let watcher = try x.backend()
        var writers = [watcher]
        // Each writer stays: the next takes the clipboard from it (no owner goes away, so xpbd
        // takes nothing over between the rounds).
        defer { writers.forEach { $0.close(handOff: false) } }
        for round in 1...5 {
            let writer = try x.backend { $0.startTimeFreshness = 60_000_000_000 }
            writers.append(writer)
            let start = watcher.changeCount(of: .general)
            try Pasteboard.general(of: writer).setItems([[.utf8PlainText: "write \(round)"]])
            // Counted by xpbd before the write returned: the same count for both processes.
            #expect(writer.changeCount(of: .general) == start + 1)
            #expect(watcher.changeCount(of: .general) == start + 1)
            #expect(try !writer.hasAskedForTimestamp())
        }
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "write 5")
    }
}

/// The rule alone: which ownership takes the connection's start time, in every order of events.
@Suite("StartTimeRule: the first ownership takes the start time, every other asks the server")
struct StartTimeRuleTests {
    private func time(_ value: UInt) -> X11Timestamp { X11Timestamp(rawValue: value) }

    @Test("asked before it came: the first waits for it, a second meanwhile asks the server")
    func waits() {
        var rule = StartTimeRule()
        let answer1 = rule.ask(fresh: true)
        #expect(answer1 == .wait)
        let answer2 = rule.ask(fresh: true)
        #expect(answer2 == .askServer)
        let answer3 = rule.came(time(5))
        #expect(answer3)
        #expect(rule.state == .spent)
        let answer4 = rule.ask(fresh: true)
        #expect(answer4 == .askServer)
    }

    @Test("come before it is asked: the first takes it, the next asks the server")
    func seen() {
        var rule = StartTimeRule()
        let answer5 = rule.came(time(7))
        #expect(!answer5)
        // The name written again: not a start time.
        let answer6 = rule.came(time(9))
        #expect(!answer6)
        let answer7 = rule.ask(fresh: true)
        #expect(answer7 == .use(time(7)))
        let answer8 = rule.ask(fresh: true)
        #expect(answer8 == .askServer)
    }

    @Test("too old: asked once stale, it is never taken, come or not")
    func stale() {
        var seen = StartTimeRule()
        _ = seen.came(time(7))
        let answer9 = seen.ask(fresh: false)
        #expect(answer9 == .askServer)
        let answer10 = seen.ask(fresh: true)
        #expect(answer10 == .askServer)
        var coming = StartTimeRule()
        let answer11 = coming.ask(fresh: false)
        #expect(answer11 == .askServer)
        let answer12 = coming.came(time(3))
        #expect(!answer12)
        let answer13 = coming.ask(fresh: true)
        #expect(answer13 == .askServer)
    }

    @Test("a wait given up (the time never came, the connection ended) spends it")
    func givenUp() {
        var rule = StartTimeRule()
        let answer14 = rule.giveUp()
        #expect(!answer14)
        let answer15 = rule.ask(fresh: true)
        #expect(answer15 == .wait)
        let answer16 = rule.giveUp()
        #expect(answer16)
        let answer17 = rule.came(time(1))
        #expect(!answer17)
        let answer18 = rule.ask(fresh: true)
        #expect(answer18 == .askServer)
    }
}
