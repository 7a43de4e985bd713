import Foundation
import Testing
@testable import PasteboardKit

@Suite("Pasteboards: names, items, values")
struct PasteboardTests {
    @Test("general and find always exist and are persistent; named ones are not unless set")
    func systemPasteboards() throws {
        let fixture = Fixture()
        let general = try #require(Pasteboard(name: .general, create: false, backend: fixture.backend))
        let find = try #require(Pasteboard(name: .find, create: false, backend: fixture.backend))
        #expect(general.isPersistent && find.isPersistent)
        let named = try #require(Pasteboard(name: "notes", create: true, backend: fixture.backend))
        #expect(!named.isPersistent)
        named.isPersistent = true
        #expect(named.isPersistent)
        #expect(Pasteboard(name: "notes", create: false, backend: fixture.backend)?.isPersistent == true)
        Pasteboard.remove(withName: .general, backend: fixture.backend)
        #expect(Pasteboard(name: .general, create: false, backend: fixture.backend) != nil)
    }

    @Test("a named pasteboard exists only once created; bad names are refused")
    func namedPasteboards() throws {
        let fixture = Fixture()
        #expect(Pasteboard(name: "drafts", create: false, backend: fixture.backend) == nil)
        let drafts = try #require(Pasteboard(name: "drafts", create: true, backend: fixture.backend))
        drafts.string = "one"
        let again = try #require(Pasteboard(name: "drafts", create: false, backend: fixture.backend))
        #expect(again.string == "one")
        #expect(fixture.general.string == nil)
        #expect(Pasteboard(name: "", create: true, backend: fixture.backend) == nil)
        #expect(Pasteboard(name: "a\nb", create: true, backend: fixture.backend) == nil)
        #expect(throws: PasteboardError.self) { try Pasteboard.Name.validated(" ") }
    }

    @Test("withUniqueName never repeats a name")
    func uniqueNames() throws {
        let fixture = Fixture()
        var names = Set<Pasteboard.Name>()
        for _ in 0..<2000 {
            let board = try Pasteboard.withUniqueName(backend: fixture.backend)
            #expect(board.numberOfItems == 0)
            names.insert(board.name)
        }
        #expect(names.count == 2000)
    }

    @Test("removing a named pasteboard posts the removed notification; it is then gone")
    func removal() async throws {
        let fixture = Fixture()
        let board = try #require(Pasteboard(name: "temp", create: true, backend: fixture.backend))
        try board.setItems([[PasteboardType.utf8PlainText: "x", .html: "<b>x</b>"]])
        let changes = board.changes
        Pasteboard.remove(withName: "temp", backend: fixture.backend)
        #expect(Pasteboard(name: "temp", create: false, backend: fixture.backend) == nil)
        #expect(throws: PasteboardError.pasteboardRemoved("temp")) { try board.itemTypes() }
        #expect(throws: PasteboardError.self) { try board.setData(Data(), forPasteboardType: .blob) }
        let removed = fixture.log.entries.filter { $0.kind == .removed }
        #expect(removed.count == 1)
        #expect(removed.first?.board == "temp")
        #expect(Set(removed.first?.info["removed"] ?? []) == ["public.utf8-plain-text", "public.html"])
        var iterator = changes.makeAsyncIterator()
        let change = await iterator.next()
        #expect(change?.kind == .removed)
        #expect(change?.name == "temp")
    }

    @Test("setItems replaces the whole contents; addItems appends")
    func replaceAndAppend() throws {
        let board = Fixture().general
        try board.setItems([[PasteboardType.utf8PlainText: "a"], [.utf8PlainText: "b"]])
        #expect(board.numberOfItems == 2)
        try board.setItems([[PasteboardType.png: Data([1, 2, 3])]])
        #expect(board.numberOfItems == 1)
        #expect(board.types == [.png])
        try board.addItems([[PasteboardType.utf8PlainText: "c"], [.html: "<i>d</i>"]])
        #expect(try board.itemTypes() == [[.png], [.utf8PlainText], [.html]])
        #expect(board.strings == ["c"])
        try board.removeAllItems()
        #expect(board.numberOfItems == 0)
        #expect(board.types.isEmpty)
    }

    @Test("types and containment per item set, with conformance")
    func typeQueries() throws {
        let board = Fixture().general
        try board.setItems([
            [PasteboardType.utf8PlainText: "hello", .html: "<b>hello</b>"],
            [.png: Data([0x89, 0x50])],
            [.blob: Data([9])],
        ])
        #expect(board.types == [.html, .utf8PlainText])
        #expect(try board.types(forItemSet: [1, 2]) == [[.png], [.blob]])
        // An item set is a set: item order, each item once, however it is written.
        #expect(try board.types(forItemSet: [2, 1, 2]) == [[.png], [.blob]])
        #expect(try board.types(forItemSet: nil).count == 3)
        #expect(throws: PasteboardError.itemIndexOutOfRange(3, count: 3)) { try board.types(forItemSet: [3]) }
        #expect(board.contains(pasteboardTypes: [.png]))
        #expect(board.contains(pasteboardTypes: [.text]))
        #expect(board.contains(pasteboardTypes: [.image], inItemSet: [1]))
        #expect(!board.contains(pasteboardTypes: [.image], inItemSet: [0]))
        #expect(!board.contains(pasteboardTypes: [.pdf]))
        #expect(board.itemSet(withPasteboardTypes: [.image, .blob]) == [1, 2])
        #expect(board.itemSet(withPasteboardTypes: [.text]) == [0])
        #expect(board.hasStrings && board.hasImages && !board.hasURLs && !board.hasColors)
    }

    @Test("data and values by type, per item set")
    func dataAndValues() throws {
        let board = Fixture().general
        try board.setItems([
            [PasteboardType.utf8PlainText: "first", .blob: Data([1])],
            [.utf8PlainText: "second"],
            [.blob: Data([3])],
        ])
        #expect(try board.data(forPasteboardType: .utf8PlainText) == Data("first".utf8))
        #expect(try board.data(forPasteboardType: .plainText) == Data("first".utf8))
        #expect(try board.data(forPasteboardType: .pdf) == nil)
        #expect(try board.data(forPasteboardType: .blob, inItemSet: nil) == [Data([1]), Data([3])])
        #expect(try board.data(forPasteboardType: .blob, inItemSet: [1, 2]) == [Data([3])])
        #expect(try board.value(forPasteboardType: .utf8PlainText) == .string("first"))
        #expect(try board.values(forPasteboardType: .text, inItemSet: nil) == [.string("first"), .string("second")])
        #expect(throws: PasteboardError.itemIndexOutOfRange(7, count: 3)) {
            try board.data(forPasteboardType: .blob, inItemSet: [7])
        }
        try board.setData(Data([0xDE, 0xAD]), forPasteboardType: .blob)
        #expect(board.numberOfItems == 1)
        #expect(try board.value(forPasteboardType: .blob) == .data(Data([0xDE, 0xAD])))
    }

    static var propertyListValues: [(String, Any, PropertyListValue)] { [
        ("string", "héllo", .string("héllo")),
        ("data", Data([0, 1, 2]), .data(Data([0, 1, 2]))),
        ("int", 42, .integer(42)),
        ("negative", -7, .integer(-7)),
        ("double", 2.5, .double(2.5)),
        ("bool", true, .bool(true)),
        ("date", Date(timeIntervalSince1970: 1_700_000_000), .date(Date(timeIntervalSince1970: 1_700_000_000))),
        ("url", URL(string: "https://example.org/x?y=1")!, .url(URL(string: "https://example.org/x?y=1")!)),
        ("array", [1, "two", false] as [Any], .array([.integer(1), .string("two"), .bool(false)])),
        ("dictionary", ["a": 1, "b": ["c": "d"]] as [String: Any], .dictionary(["a": .integer(1), "b": .dictionary(["c": .string("d")])])),
    ] }

    @Test("property-list values round trip under a custom type", arguments: propertyListValues.indices)
    func valueRoundTrip(index: Int) throws {
        let (_, input, expected) = Self.propertyListValues[index]
        let board = Fixture().general
        try board.setValue(input, forPasteboardType: .blob)
        let value = try board.value(forPasteboardType: .blob)
        if case let .url(url) = expected {
            // A URL under a non-URL type is stored in a property list as its string.
            #expect(value == .string(url.absoluteString))
        } else {
            #expect(value == expected)
        }
    }

    @Test("strings under text types and URLs under URL types are stored as plain UTF-8")
    func valueEncodings() throws {
        let board = Fixture().general
        try board.setValue("ünïcode", forPasteboardType: .utf8PlainText)
        #expect(try board.data(forPasteboardType: .utf8PlainText) == Data("ünïcode".utf8))
        try board.setValue(URL(string: "https://example.org")!, forPasteboardType: .url)
        #expect(try board.data(forPasteboardType: .url) == Data("https://example.org".utf8))
        #expect(try board.value(forPasteboardType: .url) == .url(URL(string: "https://example.org")!))
        try board.setValue("hi", forPasteboardType: .utf16PlainText)
        #expect(try board.data(forPasteboardType: .utf16PlainText) == Data([0x68, 0, 0x69, 0]))
        #expect(board.string == "hi")
    }

    @Test("a value that is not a property list gets a clear error and changes nothing")
    func notAPropertyList() throws {
        struct Opaque {}
        let fixture = Fixture()
        let board = fixture.general
        board.string = "keep me"
        let count = board.changeCount
        #expect(throws: PasteboardError.self) { try board.setValue(Opaque(), forPasteboardType: .blob) }
        do {
            try board.setValue(["ok": 1, "bad": [Opaque()]] as [String: Any], forPasteboardType: .blob)
            Issue.record("expected an error")
        } catch let error as PasteboardError {
            #expect(error.description.contains("Opaque"))
            #expect(error.description.contains("[\"bad\"][0]"))
            #expect(error.description.contains("not a property list"))
        }
        #expect(throws: PasteboardError.self) { try board.setItems([[PasteboardType.blob: Opaque()]]) }
        #expect(board.string == "keep me")
        #expect(board.changeCount == count)
    }

    @Test("local-only and expiration options are kept with the contents")
    func options() throws {
        let fixture = Fixture()
        let board = fixture.general
        let date = fixture.clock.now.addingTimeInterval(60)
        try board.setItems([[PasteboardType.utf8PlainText: "x"]], options: PasteboardOptions(localOnly: true, expirationDate: date))
        #expect(board.options == PasteboardOptions(localOnly: true, expirationDate: date))
        try board.addItems([[PasteboardType.utf8PlainText: "y"]])
        #expect(board.options.isLocalOnly)
        try board.setItems([[PasteboardType.utf8PlainText: "z"]])
        #expect(board.options == PasteboardOptions())
    }

    @Test("a file representation reads the file when asked, in pieces or whole")
    func fileRepresentation() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-file-\(UUID().uuidString)")
        try Data("0123456789".utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let file = try FileContents(path: url.path)
        #expect(file.size == 10)
        #expect(try file.read(offset: 3, length: 4) == Data("3456".utf8))
        #expect(try file.read(offset: 8, length: 100) == Data("89".utf8))
        let board = Fixture().general
        var item = PasteboardItem()
        item.setFile(file, for: .utf8PlainText)
        try board.setItems([item])
        #expect(board.string == "0123456789")
        #expect(throws: PasteboardError.self) { try FileContents(path: "/nonexistent/xpb") }
        #expect(throws: PasteboardError.self) { try FileContents(path: "/tmp") }
    }

    @Test("a program can install the default backend; general and find use it")
    func defaultBackend() throws {
        // Installing first means the test never looks for a display.
        let backend = InMemoryPasteboardBackend(changeCenter: ChangeCenter())
        PasteboardSystem.bootstrapInternal(backend)
        #expect(Pasteboard.general.backend === backend)
        #expect(Pasteboard.general === Pasteboard.general)
        #expect(Pasteboard.find.backend === backend)
        #expect(Pasteboard.general.name == .general)
        #expect(Pasteboard.find.name == .find)
    }

    @Test("an unavailable backend says why on every read and write, and holds nothing")
    func unavailableBackend() throws {
        let backend = UnavailablePasteboardBackend(reason: "no pasteboard backend: no X display: $DISPLAY is not set")
        let board = Pasteboard.general(of: backend)
        #expect(throws: PasteboardError.unavailable(backend.reason)) { try board.setString("hi") }
        #expect(throws: PasteboardError.unavailable(backend.reason)) { try board.readString() }
        #expect(throws: PasteboardError.unavailable(backend.reason)) { try board.readTypes() }
        #expect(throws: PasteboardError.unavailable(backend.reason)) { try Pasteboard.withUniqueName(backend: backend) }
        // The non-throwing forms read as nothing and write nothing.
        board.string = "lost"
        #expect(board.string == nil)
        #expect(board.types.isEmpty)
        #expect(!board.isPersistent)
        #expect(PasteboardError.unavailable(backend.reason).description.contains("$DISPLAY"))
    }
}
