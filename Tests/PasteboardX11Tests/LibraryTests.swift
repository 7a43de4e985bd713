import Dispatch
import Foundation
import PasteboardKit
import Synchronization
import Testing
@testable import PasteboardX11

/// A gate a provider waits at until the test opens it: the order of events is then fixed by the
/// test, not by timing.
final class Gate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let entered = Mutex(0)
    func wait() { entered.withLock { $0 += 1 }; semaphore.wait() }
    func open() { semaphore.signal() }
    var hasEntered: Bool { entered.withLock { $0 > 0 } }
}

/// The library as a program uses it: providers, errors, async, order of changes, lifecycle.
@Suite("Library on X11")
struct LibraryTests {
    @Test("a provider that is still running does not hold up other conversions of the same owner")
    func slowProviderOffTheXThread() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        let reader = try x.backend()
        defer { owner.close(handOff: false); reader.close(handOff: false) }
        let gate = Gate()
        var provider = ItemProvider()
        provider.register(.html) { gate.wait(); return Data("<b>slow</b>".utf8) }
        provider.register(.utf8PlainText) { Data("fast".utf8) }
        try Pasteboard.general(of: owner).setItemProviders([provider])

        // A requestor converts to the slow type and waits; its provider blocks until the gate opens.
        let slow = try Peer("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x)
        #expect(eventually { gate.hasEntered })
        // Meanwhile, with the provider still blocked, other conversions are answered.
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "UTF8_STRING"], display: x, timeout: 10).text == "fast")
        #expect(try Pasteboard.general(of: reader).readString() == "fast")
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "TARGETS"], display: x, timeout: 10).text.contains("text/html"))
        // Once the provider returns, the waiting requestor gets its bytes.
        gate.open()
        #expect(try slow.finish(timeout: 10).text == "<b>slow</b>")
    }

    @Test("a provider that overruns the provider timeout gets its request refused; later requests get its result")
    func providerTimeout() throws {
        let x = try Xvfb()
        let owner = try x.backend { $0.providerTimeout = 0.5 }
        let reader = try x.backend()
        defer { owner.close(handOff: false); reader.close(handOff: false) }
        let gate = Gate()
        let board = Pasteboard.general(of: owner)
        try board.setItemProviders([ItemProvider(type: .html) { gate.wait(); return Data("<i>late</i>".utf8) }])
        #expect(try Pasteboard.general(of: reader).data(forPasteboardType: .html) == nil)
        gate.open()
        #expect(eventually { (try? Pasteboard.general(of: reader).data(forPasteboardType: .html)) == Data("<i>late</i>".utf8) })
    }

    @Test("a provider may read another pasteboard (it runs off the X thread)")
    func providerReadsAnotherPasteboard() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        defer { owner.close(handOff: false) }
        let primary = try Peer("xclip", ["-i", "-selection", "primary", "-quiet"], display: x, input: Data("from primary".utf8))
        defer { primary.stop() }
        #expect(eventually { (try? run("xclip", ["-o", "-selection", "primary"], display: x).text) == "from primary" })
        let find = Pasteboard.find(of: owner)
        try Pasteboard.general(of: owner).setItemProviders([
            ItemProvider(type: .utf8PlainText) { Data("got: \(try find.readString() ?? "nil")".utf8) },
        ])
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x, timeout: 15).text == "got: from primary")
    }

    @Test("string, url, image and color read the first item only: no other item's provider runs")
    func singularReadsFirstItemOnly() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        let reader = try x.backend()
        defer { owner.close(handOff: false); reader.close(handOff: false) }
        let runs = Mutex([String]())
        func item(_ name: String) -> ItemProvider {
            var provider = ItemProvider()
            provider.register(.utf8PlainText) { runs.withLock { $0.append(name) }; return Data(name.utf8) }
            provider.register(.url) { runs.withLock { $0.append(name + "-url") }; return Data("https://\(name).example".utf8) }
            return provider
        }
        try Pasteboard.general(of: owner).setItemProviders([item("first"), item("second")])
        let board = Pasteboard.general(of: reader)
        #expect(try board.readString() == "first")
        #expect(try board.readURL() == URL(string: "https://first.example"))
        #expect(board.image == nil && board.color == nil)
        #expect(runs.withLock { $0 } == ["first", "first-url"])
        #expect(try board.readStrings() == ["first", "second"])
    }

    @Test("failures surface through the throwing forms; the properties read as nothing")
    func errorsSurface() throws {
        let x = try Xvfb()
        let reader = try x.backend { $0.readTimeout = 1 }
        let board = Pasteboard.general(of: reader)
        // A stopped owner: the throwing form says it timed out, the property reads nil.
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("held".utf8))
        #expect(eventually { (try? board.readString()) == "held" })
        owner.signal(SIGSTOP)
        defer { owner.signal(SIGCONT); owner.stop() }
        // The offer is cached while the owner stays: a new conversion is what stalls.
        #expect(throws: PasteboardError.self) { try board.data(forPasteboardType: .utf8PlainText) }
        do {
            _ = try board.readString()
            Issue.record("reading from a stopped owner did not fail")
        } catch let error as PasteboardError {
            guard case .timedOut = error else { Issue.record("expected a timeout, got \(error)"); return }
        }
        #expect(board.string == nil)
        // A lost X server: reads and writes throw connectionLost; the setter changes nothing.
        x.kill()
        #expect(eventually { !reader.isConnected })
        #expect(throws: X11BackendError.connectionLost) { try board.readTypes() }
        #expect(throws: X11BackendError.connectionLost) { try board.setString("lost") }
        board.string = "lost"
        #expect(board.types.isEmpty && !board.hasStrings && board.numberOfItems == 0)
    }

    @Test("subscribers see change counts in order, ours and other clients' mixed; the observer is given the pasteboard")
    func changesInOrder() async throws {
        let x = try Xvfb()
        let seen = Mutex([Int]())
        let otherObject = Mutex(0)
        let holder = Mutex<Pasteboard?>(nil)
        let backend = try X11PasteboardBackend(display: x.display, changeCenter: ChangeCenter { change, changed in
            guard change.name == .general else { return }
            seen.withLock { $0.append(change.changeCount) }
            if changed !== holder.withLock({ $0 }) { otherObject.withLock { $0 += 1 } }
        })
        defer { backend.close(handOff: false) }
        let board = Pasteboard.general(of: backend)
        holder.withLock { $0 = board }
        #expect(board === Pasteboard.general(of: backend))
        let changes = board.changes
        var expected = 0
        for round in 0..<5 {
            try await board.perform { try $0.setString("ours \(round)") }
            let peer = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("theirs \(round)".utf8))
            expected += 2
            let target = expected
            #expect(eventually { board.changeCount >= target })
            peer.stop()
            expected += 1
            let afterExit = expected
            #expect(eventually { board.changeCount >= afterExit })
        }
        try await board.perform { try $0.setString("last") }
        expected += 1
        var iterator = changes.makeAsyncIterator()
        var streamed: [Int] = []
        while streamed.last != expected, let change = await iterator.next() { streamed.append(change.changeCount) }
        #expect(streamed == Array(1...expected))
        #expect(eventually { seen.withLock { $0.count } == expected })
        #expect(seen.withLock { $0 } == Array(1...expected))
        #expect(otherObject.withLock { $0 } == 0)
    }

    @Test("the async API from an actor: writes, reads, detection, without blocking the actor's thread")
    func asyncFromAnActor() async throws {
        let x = try Xvfb()
        let backend = try x.backend { $0.readTimeout = 2 }
        defer { backend.close(handOff: false) }
        actor Editor {
            let board: Pasteboard
            init(board: Pasteboard) { self.board = board }
            func copyAndInspect() async throws -> (String?, [PasteboardType], Set<DetectionPattern>, DetectedValues) {
                try await board.perform { try $0.setString("see https://example.org or mail a@example.org") }
                // Several reads in one hop to a worker thread.
                return try await board.perform {
                    (try $0.readString(), try $0.readTypes(), try $0.detectPatterns(for: [.probableWebURL, .number]),
                     try $0.detectValues(for: [.links, .emailAddresses]))
                }
            }
        }
        let editor = Editor(board: Pasteboard.general(of: backend))
        let (text, types, patterns, values) = try await editor.copyAndInspect()
        #expect(text == "see https://example.org or mail a@example.org")
        #expect(types == [.utf8PlainText])
        #expect(patterns.isEmpty)
        #expect(values.links == [URL(string: "https://example.org")!])
        #expect(values.emailAddresses == ["a@example.org"])
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == text)
    }

    @Test("a removed named pasteboard refuses writes instead of coming back")
    func removedPasteboardRefusesWrites() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let board = try #require(Pasteboard(name: "notes", create: true, backend: backend))
        try board.setString("one")
        Pasteboard.remove(withName: "notes", backend: backend)
        #expect(throws: PasteboardError.pasteboardRemoved("notes")) { try board.setString("two") }
        #expect(!backend.exists("notes"))
        #expect(try run("xclip", ["-o", "-selection", "XPB_PASTEBOARD:notes"], display: x).status != 0)
        // Created again, it takes writes.
        let again = try #require(Pasteboard(name: "notes", create: true, backend: backend))
        try again.setString("three")
        #expect(try again.readString() == "three")
    }

    @Test("isPersistent is true only while a clipboard manager runs; flushing without one reports false")
    func persistenceTellsTheTruth() throws {
        let x = try Xvfb()
        let backend = try x.backend { $0.handOffTimeout = 1 }
        let manager = try x.backend()
        defer { manager.close(handOff: false) }
        let board = Pasteboard.general(of: backend)
        #expect(!board.isPersistent)
        #expect(!Pasteboard.find(of: backend).isPersistent)
        try manager.ownRaw("CLIPBOARD_MANAGER")
        #expect(board.isPersistent)
        #expect(!Pasteboard.find(of: backend).isPersistent)
        manager.close(handOff: false)
        #expect(eventually { !board.isPersistent })
        try board.setString("kept only while we run")
        #expect(try backend.flushToClipboardManager() == false)
        #expect(!backend.isConnected)
        #expect(throws: X11BackendError.self) { try board.setString("after close") }
    }
}

extension X11PasteboardBackend {
    /// Owns a raw selection (by atom name) with a text item: for a stand-in clipboard manager.
    func ownRaw(_ selection: String) throws {
        var item = PasteboardItem()
        item.setData(Data("manager".utf8), for: .utf8PlainText)
        let items = [item]
        let registry = self.registry
        let _: X11Timestamp = try connection.sync(timeout: 10) { session, done in
            session.owner.own(session.wire.atom(selection), items: items, options: PasteboardOptions(), registry: registry) { done($0) }
        }
    }
}
