import Foundation
import Testing
@testable import PasteboardDaemon
@testable import PasteboardX11
import PasteboardKit
@testable import PasteboardSelections

/// Targets of the given names and sizes.
private func targets(_ pairs: (String, Int)...) -> [EntryDescription.Target] {
    pairs.map { EntryDescription.Target(name: $0.0, size: $0.1) }
}

@Suite("the history's description of an entry: the content's types and size")
struct EntryDescriptionTests {
    @Test("an entry with text is its text: GTK's rich-text serialisation and a spreadsheet's own formats do not size it")
    func text() {
        let mousepad = EntryDescription.describe(targets(("GTK_TEXT_BUFFER_CONTENTS", 144), ("application/x-gtk-text-buffer-rich-text", 144),
                                                         ("UTF8_STRING", 43))) { _ in nil }
        #expect(mousepad == EntryDescription(types: ["text/plain", "application/x-gtk-text-buffer-rich-text"], size: 43))
        let calc = EntryDescription.describe(targets(("application/x-openoffice-embed-source-xml;windows_formatname=\"Star Embed Source (XML)\"", 4700),
                                                     ("text/rtf", 900), ("text/html", 1200), ("image/png", 3000), ("UTF8_STRING", 6))) { _ in nil }
        #expect(calc.types.prefix(3) == ["text/rtf", "text/html", "text/plain"] && calc.types.last?.hasPrefix("application/x-openoffice") == true, "\(calc)")
        #expect(calc.size == 6)
    }

    @Test("an entry without text: files, then images and other known types, then rich text, unknown types last")
    func withoutText() {
        let browserImage = EntryDescription.describe(targets(("text/html", 40), ("image/png", 5000))) { _ in nil }
        #expect(browserImage == EntryDescription(types: ["image/png", "text/html"], size: 5000))
        let files = EntryDescription.describe(targets(("x-special/gnome-copied-files", 30), ("text/uri-list", 28))) { _ in nil }
        #expect(files.types.first == "x-special/gnome-copied-files" || files.types.first == "text/uri-list", "\(files)")
        let vendor = EntryDescription.describe(targets(("application/x-vendor-thing", 10), ("image/jpeg", 900))) { _ in nil }
        #expect(vendor == EntryDescription(types: ["image/jpeg", "application/x-vendor-thing"], size: 900))
    }

    @Test("a text under a name no reader knows is text, by its bytes; markers never count")
    func sniffed() {
        let foo = EntryDescription.describe(targets(("FOO_BAR", 14))) { _ in Data("a FOO_BAR text".utf8) }
        #expect(foo == EntryDescription(types: ["text/plain"], size: 14))
        let marked = EntryDescription.describe(targets(("XPB_MANIFEST", 90), ("image/png", 800))) { _ in nil }
        #expect(marked.types == ["image/png"])
    }

    @Test("a snapshot of a FOO_BAR text has that text (the preview shows it); one beside a known type does not")
    func snapshotText() {
        let foo = Snapshot(selection: .general, advertised: ["FOO_BAR"], targets: [KeptTarget(target: "FOO_BAR", type: "FOO_BAR", data: Data("line one\nline two".utf8))])
        #expect(foo.text() == "line one\nline two" && foo.preview == "line one")
        let binary = Snapshot(selection: .general, advertised: ["FOO_BAR"], targets: [KeptTarget(target: "FOO_BAR", type: "FOO_BAR", data: Data([0, 1, 2, 0xFF]))])
        #expect(binary.text() == nil)
        let image = Snapshot(selection: .general, advertised: ["image/png", "FOO_BAR"],
                             targets: [KeptTarget(target: "image/png", type: "image/png", data: Data([0x89, 0x50])),
                                       KeptTarget(target: "FOO_BAR", type: "FOO_BAR", data: Data("caption".utf8))])
        #expect(image.text() == nil)
    }
}

@Suite("the lines after a preview")
struct MoreLinesTests {
    /// The rule as first written: every line split, the rest measured again after each line.
    func naive(_ head: String, _ lineFeeds: Int, _ endsWithLineFeed: Bool, _ limit: Int) -> (Int, String) {
        let lines = head.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.firstIndex(where: { !$0.trimmingWhitespace().isEmpty }) else { return (0, "") }
        var rest = ""
        for line in lines.dropFirst(first + 1) {
            let trimmed = line.trimmingWhitespace()
            guard !trimmed.isEmpty else { continue }
            rest += (rest.isEmpty ? "" : " ⏎ ") + trimmed
            if rest.count >= limit {
                rest = String(rest.prefix(limit - 1)) + "…"
                break
            }
        }
        return (max(0, lineFeeds + (endsWithLineFeed ? 0 : 1) - first - 1), rest)
    }

    @Test("found line by line, the same as splitting every line and measuring again (seeded texts)")
    func sameAsNaive() {
        var generator = SeededGenerator(seed: 42)
        let pieces = ["a", "bc", " ", "\n", "\n\n", "é", "日本", "  x  ", "line"]
        for round in 0..<300 {
            let head = (0..<Int.random(in: 0...60, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let feeds = head.filter { $0 == "\n" }.count
            let limit = [5, 12, 1000][round % 3]
            let fast = EntryDescription.moreLines(head: head, lineFeeds: feeds, endsWithLineFeed: head.hasSuffix("\n"), limit: limit)
            let slow = naive(head, feeds, head.hasSuffix("\n"), limit)
            #expect(fast.count == slow.0 && fast.rest == slow.1, "\(head.debugDescription) limit \(limit)")
        }
    }
}

/// A small deterministic generator (SplitMix64) for the seeded tests.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("what a kept copy offers and keeps")
struct KeptCopyTests {
    @Test("a kept PNG offers every format an xpb owner writes, after the owner's own targets; HTML that has text offers text")
    func offers() throws {
        let png = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers/image.png"))
        let kept = KeptSelection(advertised: ["image/png", "text/html"],
                                 targets: [CapturedTarget(target: "image/png", type: "image/png", data: png),
                                           CapturedTarget(target: "text/html", type: "text/html", data: Data("<img src=a.png>".utf8))])
        #expect(kept.targets == ["image/png", "image/jpeg", "image/bmp", "image/x-bmp", "image/x-MS-bmp", "image/tiff", "image/webp", "text/html"])
        #expect(try kept.bytes(for: "image/jpeg")?.data.starts(with: [0xFF, 0xD8, 0xFF]) == true)
        #expect(kept.size(of: "image/jpeg") == nil, "a conversion's size is not known before it is made")
        let page = KeptSelection(advertised: ["text/html"], targets: [CapturedTarget(target: "text/html", type: "text/html",
                                                                                     data: Data("<p>Grüße &amp; <b>mehr</b></p>".utf8))])
        #expect(page.targets.first == "text/html" && Set(page.targets) == ["text/html", "UTF8_STRING", "text/plain;charset=utf-8", "TEXT", "STRING", "text/plain"])
        #expect(try page.bytes(for: "UTF8_STRING")?.data == Data("Grüße & mehr".utf8))
        #expect(try page.bytes(for: "TEXT")?.type == "UTF8_STRING")
        #expect(try page.bytes(for: "STRING")?.data == Data([0x47, 0x72, 0xFC, 0xDF, 0x65]) + Data(" & mehr".utf8))
    }

    @Test("of an xpb owner, the image's own format is kept (its manifest says which), not the PNG it converts to")
    func ownImage() {
        let advertised = ["image/png", "image/jpeg", "image/bmp", "image/tiff", "image/webp"]
        #expect(KeepPolicy.withOneImage(advertised) == ["image/png"])
        #expect(KeepPolicy.withOneImage(advertised, own: ["image/jpeg"]) == ["image/jpeg"])
        // An own format the owner did not list: the best it listed.
        #expect(KeepPolicy.withOneImage(advertised, own: ["image/x-unknown"]) == ["image/png"])
    }
}
