import Foundation
import ImageCodecs
import Testing
@testable import PasteboardKit

@Suite("Conveniences: strings, URLs, images, colors")
struct ConvenienceTests {
    @Test("strings: one item per string; nil clears")
    func strings() {
        let board = Fixture().general
        #expect(board.string == nil && board.strings == nil)
        board.strings = ["α", "β", "γ"]
        #expect(board.numberOfItems == 3)
        #expect(board.strings == ["α", "β", "γ"])
        #expect(board.string == "α")
        board.string = "only"
        #expect(board.strings == ["only"])
        board.string = nil
        #expect(board.numberOfItems == 0)
    }

    @Test("strings read plain text of any encoding, never HTML markup")
    func stringsSkipRichText() throws {
        let board = Fixture().general
        try board.setItems([[PasteboardType.html: "<b>x</b>"], [.utf16PlainText: "wide"]])
        #expect(board.strings == ["wide"])
        #expect(board.hasStrings)
    }

    @Test("URLs, with file URLs under public.file-url")
    func urls() throws {
        let board = Fixture().general
        let web = URL(string: "https://example.org/path?q=1")!
        let file = URL(fileURLWithPath: "/tmp/a b.txt")
        board.urls = [web, file]
        #expect(board.hasURLs)
        #expect(board.types == [.url])
        #expect(try board.types(forItemSet: [1]) == [[.fileURL]])
        #expect(board.urls == [web, file])
        board.url = nil
        #expect(board.url == nil && !board.hasURLs)
    }

    @Test("images: bytes plus format; the format is recognised from the bytes")
    func images() throws {
        let board = Fixture().general
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3])
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0, 4, 5])
        let pngImage = try #require(PasteboardImage(data: png))
        #expect(pngImage.type == .png)
        #expect(PasteboardImage(data: Data("text".utf8)) == nil)
        board.images = [pngImage, PasteboardImage(data: jpeg, type: .jpeg)]
        #expect(board.hasImages)
        #expect(board.images?.map(\.type) == [.png, .jpeg])
        #expect(board.image?.data == png)
        try board.setItems([[PasteboardType.jpeg: jpeg, .png: png]])
        #expect(board.image?.type == .png)
    }

    @Test("an image in the format a reader wants: its own when the item has it, else converted from the best it has")
    func imageAsFormat() throws {
        let board = Fixture().general
        let pixels = Pixels(width: 3, height: 2, rgba: [255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255,
                                                         9, 9, 9, 255, 200, 100, 50, 255, 1, 2, 3, 255])
        let png = try ImageCodec.encode(pixels, as: .png)
        board.image = PasteboardImage(data: png, type: .png)
        let bmp = try #require(try board.readImage(as: .bmp))
        #expect(bmp.type == .bmp && bmp.data.starts(with: Data("BM".utf8)))
        #expect(try ImageCodec.decode(bmp.data) == pixels)
        #expect(try bmp.pixelSize() == (3, 2))
        #expect(try board.readImage(as: .png)?.data == png)
        #expect(throws: ImageError.self) { try board.readImage(as: .gif) }
        board.string = "no image"
        #expect(try board.readImage(as: .jpeg) == nil)
    }

    @Test("colors: application/x-color, four 16-bit channels")
    func colors() throws {
        let board = Fixture().general
        let red = PasteboardColor(red: 1, green: 0, blue: 0, alpha: 1)
        board.colors = [red, PasteboardColor(red: 0.5, green: 0.25, blue: 2, alpha: -1)]
        #expect(board.hasColors)
        #expect(try board.data(forPasteboardType: .color) == Data([0xFF, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF]))
        let colors = try #require(board.colors)
        #expect(colors[0] == red)
        #expect(abs(colors[1].red - 0.5) < 0.0001 && abs(colors[1].green - 0.25) < 0.0001)
        #expect(colors[1].blue == 1 && colors[1].alpha == 0)
        #expect(throws: PasteboardError.self) { try PasteboardColor(encoded: Data([1, 2, 3])) }
        #expect(try TypeRegistry.standard.resolve("application/x-color") == .color)
    }
}

@Suite("Pattern detection")
struct DetectionTests {
    static let patternCases: [(String, Set<DetectionPattern>)] = [
        ("https://example.org/a?b=c", [.probableWebURL]),
        ("www.example.org", [.probableWebURL]),
        ("example.com/path", [.probableWebURL]),
        ("  42  ", [.number]),
        ("-3.5", [.number]),
        ("1,234.5", [.number]),
        ("6.02e23", [.number]),
        ("best pizza near me", [.probableWebSearch]),
        ("user@example.org", [.probableWebSearch]),
        ("line one\nline two", []),
        ("", []),
    ]

    @Test("whole-text patterns", arguments: patternCases)
    func patterns(text: String, expected: Set<DetectionPattern>) {
        #expect(PatternDetector.patterns(in: text, for: Set(DetectionPattern.allCases)) == expected)
    }

    @Test("only the requested patterns are reported")
    func onlyRequested() {
        #expect(PatternDetector.patterns(in: "42", for: [.probableWebURL]) == [])
        #expect(PatternDetector.patterns(in: "42", for: []) == [])
    }

    @Test("values: links, email addresses, phone numbers, numbers")
    func values() {
        let text = "Mail ann@example.org or see https://example.org/docs, (also www.example.net). Call +1 555-123-4567 about the 3 boxes and 2.5 kg."
        let values = PatternDetector.values(in: text, for: Set(ValueDetectionPattern.allCases))
        #expect(values.emailAddresses == ["ann@example.org"])
        #expect(values.links == [URL(string: "https://example.org/docs")!, URL(string: "https://www.example.net")!])
        #expect(values.phoneNumbers == ["+1 555-123-4567"])
        #expect(values.numbers.contains(3) && values.numbers.contains(2.5))
        let onlyEmail = PatternDetector.values(in: text, for: [.emailAddresses])
        #expect(onlyEmail.links.isEmpty && onlyEmail.numbers.isEmpty && onlyEmail.phoneNumbers.isEmpty)
    }

    @Test("detection on a pasteboard reads only the text it needs")
    func onPasteboard() throws {
        let runs = RunCounter()
        let board = Fixture().general
        var first = ItemProvider()
        first.register(.png) { runs.hit("png"); return Data([0x89]) }
        first.register(.utf8PlainText) { runs.hit("text"); return Data("https://example.org".utf8) }
        var second = ItemProvider()
        second.register(.png) { runs.hit("png2"); return Data([0x89]) }
        try board.setItemProviders([first, second])
        #expect(try board.detectPatterns(for: []) == [])
        #expect(runs.total == 0)
        #expect(try board.detectPatterns(for: [.probableWebURL, .number]) == [.probableWebURL])
        #expect(runs.count("text") == 1 && runs.count("png") == 0)
        #expect(try board.detectPatterns(for: [.probableWebURL], inItemSet: nil) == [[.probableWebURL], []])
        #expect(runs.count("png2") == 0)
        #expect(try board.detectValues(for: [.links]).links == [URL(string: "https://example.org")!])
        #expect(try board.detectValues(for: [.links], inItemSet: [1]) == [DetectedValues()])
        #expect(runs.total == 1)
    }

    @Test("a URL item is detected as a web URL; an empty pasteboard detects nothing")
    func urlItemAndEmpty() throws {
        let board = Fixture().general
        #expect(try board.detectPatterns(for: Set(DetectionPattern.allCases)) == [])
        board.url = URL(string: "https://example.org/x")
        #expect(try board.detectPatterns(for: Set(DetectionPattern.allCases)) == [.probableWebURL])
    }
}
