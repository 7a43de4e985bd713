import Foundation
import Testing
@testable import PasteboardKit

@Suite("Lazy providers")
struct ProviderTests {
    func lazyBoard(_ runs: RunCounter) throws -> Pasteboard {
        let board = Fixture().general
        var provider = ItemProvider()
        provider.register(.utf8PlainText) { runs.hit("text"); return Data("lazy text".utf8) }
        provider.register(.html) { runs.hit("html"); return Data("<b>lazy</b>".utf8) }
        provider.register(.png) { runs.hit("png"); return Data([0x89, 0x50, 0x4E, 0x47]) }
        try board.setItemProviders([provider], localOnly: true)
        return board
    }

    @Test("types, has… and containment never run a provider")
    func queriesRunNothing() throws {
        let runs = RunCounter()
        let board = try lazyBoard(runs)
        #expect(board.types == [.utf8PlainText, .html, .png])
        #expect(board.hasStrings && board.hasImages && !board.hasURLs && !board.hasColors)
        #expect(board.contains(pasteboardTypes: [.html]))
        #expect(board.itemSet(withPasteboardTypes: [.png]) == [0])
        #expect(board.numberOfItems == 1)
        #expect(board.options.isLocalOnly)
        _ = board.items
        _ = board.changeCount
        #expect(runs.total == 0)
    }

    @Test("reading one type runs that provider only, and only once")
    func oneProviderOnce() throws {
        let runs = RunCounter()
        let board = try lazyBoard(runs)
        #expect(try board.data(forPasteboardType: .html) == Data("<b>lazy</b>".utf8))
        #expect(runs.count("html") == 1 && runs.total == 1)
        #expect(try board.data(forPasteboardType: .html) == Data("<b>lazy</b>".utf8))
        #expect(board.string == "lazy text")
        #expect(board.string == "lazy text")
        #expect(runs.count("html") == 1 && runs.count("text") == 1 && runs.count("png") == 0)
        #expect(board.image == PasteboardImage(data: Data([0x89, 0x50, 0x4E, 0x47]), type: .png))
        #expect(runs.count("png") == 1 && runs.total == 3)
    }

    @Test("concurrent readers of one type run its provider once")
    func concurrentReaders() async throws {
        let runs = RunCounter()
        let board = try lazyBoard(runs)
        try await withThrowingTaskGroup(of: Data?.self) { group in
            for _ in 0..<16 { group.addTask { try board.data(forPasteboardType: .png) } }
            for try await data in group { #expect(data == Data([0x89, 0x50, 0x4E, 0x47])) }
        }
        #expect(runs.count("png") == 1)
    }

    @Test("a provider that throws gives a provider error for that type only")
    func failingProvider() throws {
        struct Boom: Error, CustomStringConvertible { var description: String { "disk on fire" } }
        let board = Fixture().general
        var provider = ItemProvider(type: .blob) { throw Boom() }
        provider.registerValue(.utf8PlainText) { .string("fine") }
        try board.setItemProviders([provider])
        #expect(throws: PasteboardError.providerFailed(type: .blob, message: "disk on fire")) {
            try board.data(forPasteboardType: .blob)
        }
        #expect(board.string == "fine")
    }

    @Test("a provider may produce property-list values")
    func valueProvider() throws {
        let board = Fixture().general
        let provider = { () -> ItemProvider in
            var provider = ItemProvider()
            provider.registerValue(.blob) { .dictionary(["n": .integer(3)]) }
            return provider
        }()
        try board.setItemProviders([provider])
        #expect(try board.value(forPasteboardType: .blob) == .dictionary(["n": .integer(3)]))
    }
}

// The limit is for a hang (a change never delivered), not for speed: on two cores Swift
// Testing's cooperative pool has two threads, and the X11 tests that wait on real processes can
// hold both for minutes under load, so one minute failed these quick tests in a loaded run.
@Suite("Change counts and notifications", .timeLimit(.minutes(10)))
struct ChangeTests {
    @Test("changeCount bumps exactly once per write, append and clear")
    func bumpsOncePerWrite() throws {
        let fixture = Fixture()
        let board = fixture.general
        #expect(board.changeCount == 0)
        board.string = "a"
        #expect(board.changeCount == 1)
        try board.setItems([[PasteboardType.utf8PlainText: "b"], [.utf8PlainText: "c"]])
        #expect(board.changeCount == 2)
        try board.addItems([[PasteboardType.html: "<p>d</p>"]])
        #expect(board.changeCount == 3)
        try board.addItems([PasteboardItem]())
        #expect(board.changeCount == 3)
        _ = board.strings
        _ = board.types
        #expect(board.changeCount == 3)
        try board.removeAllItems()
        #expect(board.changeCount == 4)
        #expect(fixture.log.entries.map(\.count) == [1, 2, 3, 4])
        let find = Pasteboard.find(of: fixture.backend)
        #expect(find.changeCount == 0)
    }

    @Test("notifications and the stream say which types were added and removed")
    func addedAndRemoved() async throws {
        let fixture = Fixture()
        let board = fixture.general
        let stream = board.changes
        try board.setItems([[PasteboardType.utf8PlainText: "x", .html: "<b>x</b>"]])
        try board.setItems([[PasteboardType.utf8PlainText: "y", .png: Data([1])]])
        try board.addItems([[PasteboardType.blob: Data([2])]])
        let entries = fixture.log.entries
        #expect(entries.count == 3)
        #expect(entries.allSatisfy { $0.kind != .removed && $0.board == "general" })
        #expect(Set(entries[0].info["added"]!) == ["public.utf8-plain-text", "public.html"])
        #expect(entries[0].info["removed"] == [])
        #expect(entries[1].info["added"] == ["public.png"])
        #expect(entries[1].info["removed"] == ["public.html"])
        #expect(entries[2].info["added"] == ["com.example.blob"])
        #expect(entries[2].info["removed"] == [])

        var iterator = stream.makeAsyncIterator()
        let first = await iterator.next()
        let second = await iterator.next()
        let third = await iterator.next()
        #expect(first?.changeCount == 1 && second?.changeCount == 2 && third?.changeCount == 3)
        #expect(second?.typesAdded == [.png])
        #expect(second?.typesRemoved == [.html])
        #expect(third?.kind == .contentsChanged)
    }

    @Test("a stream sees only its own pasteboard")
    func streamsAreSeparate() async throws {
        let fixture = Fixture()
        let general = fixture.general
        let find = Pasteboard.find(of: fixture.backend)
        let stream = find.changes
        general.string = "general"
        find.string = "find"
        var iterator = stream.makeAsyncIterator()
        let change = await iterator.next()
        #expect(change?.name == .find)
        #expect(change?.changeCount == 1)
    }

    @Test("expiry removes the items at the date and bumps the count once (manual clock)")
    func expiryManualClock() throws {
        let fixture = Fixture()
        let board = fixture.general
        try board.setItems([[PasteboardType.utf8PlainText: "soon gone"]],
                           options: PasteboardOptions(expirationDate: fixture.clock.now.addingTimeInterval(30)))
        #expect(board.changeCount == 1)
        fixture.clock.advance(29)
        #expect(board.string == "soon gone")
        fixture.clock.advance(2)
        #expect(board.string == nil)
        #expect(board.numberOfItems == 0)
        #expect(board.changeCount == 2)
        #expect(board.changeCount == 2)
        fixture.backend.expireDueItems()
        #expect(board.changeCount == 2)
        let last = fixture.log.entries.last
        #expect(last?.count == 2)
        #expect(last?.info["removed"] == ["public.utf8-plain-text"])
        #expect(board.options == PasteboardOptions())
    }

    @Test("expiry happens on time with nobody reading: the timer bumps the count and notifies")
    func expiryTimer() async throws {
        let fixture = Fixture(realClock: true)
        let board = fixture.general
        let stream = board.changes
        try board.setItems([[PasteboardType.utf8PlainText: "brief"]], options: PasteboardOptions(expirationDate: Date().addingTimeInterval(0.2)))
        var iterator = stream.makeAsyncIterator()
        let written = await iterator.next()
        let expired = await iterator.next()
        #expect(written?.changeCount == 1)
        #expect(expired?.changeCount == 2)
        #expect(expired?.typesRemoved == [.utf8PlainText])
        #expect(board.changeCount == 2)
        #expect(board.string == nil)
    }

    @Test("a write before the expiry date cancels that expiry")
    func rewriteCancelsExpiry() throws {
        let fixture = Fixture()
        let board = fixture.general
        try board.setItems([[PasteboardType.utf8PlainText: "old"]], options: PasteboardOptions(expirationDate: fixture.clock.now.addingTimeInterval(5)))
        try board.setItems([[PasteboardType.utf8PlainText: "new"]])
        fixture.clock.advance(10)
        #expect(board.string == "new")
        #expect(board.changeCount == 2)
    }
}
