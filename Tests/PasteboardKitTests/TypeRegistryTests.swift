import Foundation
import Testing
@testable import PasteboardKit

@Suite("Type registry")
struct TypeRegistryTests {
    let registry = TypeRegistry.standard

    @Test("aliases resolve to their type", arguments: [
        ("UTF8_STRING", PasteboardType.utf8PlainText),
        ("text/plain;charset=utf-8", .utf8PlainText),
        ("text/plain; charset=UTF-8", .utf8PlainText),
        ("text/plain", .utf8PlainText),
        ("STRING", .utf8PlainText),
        ("TEXT", .utf8PlainText),
        ("text", .utf8PlainText),
        ("text/uri-list", .url),
        ("text/x-moz-url", .url),
        ("application/x-color", .color),
        ("image/png", .png),
        ("png", .png),
        ("text/html", .html),
        ("text/rtf", .rtf),
        ("application/rtf", .rtf),
        ("application/pdf", .pdf),
        ("public.png", .png),
    ])
    func aliases(name: String, expected: PasteboardType) throws {
        #expect(try registry.resolve(name) == expected)
    }

    @Test("unknown reverse-DNS and MIME names pass through unchanged", arguments: [
        "com.example.blob", "application/x-xpb-test", "x-special/xpb-test",
    ])
    func passThrough(name: String) throws {
        let type = try registry.resolve(name)
        #expect(type.identifier == name)
        #expect(registry.targets(for: type) == [TargetAlias(name)])
        #expect(registry.type(forTarget: name)?.type == type)
    }

    @Test("bad type names are rejected with a clear error", arguments: ["", "   ", "text\nplain", "a\u{0}b"])
    func badNames(name: String) {
        #expect(throws: PasteboardError.self) { try PasteboardType(name) }
        #expect(throws: PasteboardError.self) { try registry.resolve(name) }
        do {
            _ = try PasteboardType(name)
        } catch {
            #expect("\(error)".contains("invalid pasteboard type"))
        }
    }

    @Test("a type name's rules hold alike for printable ASCII (decided on its bytes) and for any other name", arguments: [
        ("public.utf8-plain-text", nil), ("text/plain;charset=utf-8", nil), ("a b", nil), (" ~", nil), ("café.type", nil),
        ("\u{3000}x", nil), (String(repeating: "a", count: 1024), nil),
        ("", "empty"), (" ", "only white space"), ("   ", "only white space"), ("\u{3000}", "only white space"),
        (" \t", "only white space"), ("a\tb", "control characters"), ("a\u{7F}", "control characters"),
        ("é\u{85}", "control characters"), (String(repeating: "a", count: 1025), "1024 bytes"),
        (String(repeating: "é", count: 513), "1024 bytes"),
    ] as [(String, String?)])
    func typeNameRules(name: String, problem: String?) {
        do {
            let type = try PasteboardType(name)
            #expect(problem == nil, "\(name.debugDescription) was taken as \(type)")
        } catch {
            #expect(problem.map { "\(error)".contains($0) } == true, "\(name.debugDescription): \(error)")
        }
    }

    @Test("conformance follows the tree")
    func conformance() throws {
        #expect(registry.conforms(.utf8PlainText, to: .plainText))
        #expect(registry.conforms(.utf8PlainText, to: .text))
        #expect(registry.conforms(.utf8PlainText, to: .data))
        #expect(registry.conforms(.plainText, to: .text))
        #expect(!registry.conforms(.text, to: .plainText))
        #expect(registry.conforms(.html, to: .text))
        #expect(!registry.conforms(.html, to: .plainText))
        #expect(registry.conforms(.png, to: .image))
        #expect(registry.conforms(.fileURL, to: .url))
        #expect(!registry.conforms(.png, to: .text))
        #expect(registry.conforms(try PasteboardType("text/x-custom"), to: .text))
        #expect(registry.conforms(try PasteboardType("image/x-custom"), to: .image))
        #expect(registry.conforms(.blob, to: .data))
        #expect(!registry.conforms(.blob, to: .text))
    }

    @Test("a rich-text reader gets HTML before plain text; a plain-text reader gets plain text")
    func bestType() {
        let offered: [PasteboardType] = [.utf8PlainText, .html, .png]
        #expect(registry.bestType(among: offered, accepting: ReaderPreference.richText) == .html)
        #expect(registry.bestType(among: offered, accepting: ReaderPreference.plainText) == .utf8PlainText)
        #expect(registry.bestType(among: offered, accepting: ReaderPreference.image) == .png)
        #expect(registry.bestType(among: [.html], accepting: ReaderPreference.plainText) == nil)
        #expect(registry.bestType(among: [.jpeg, .gif], accepting: [.image]) == .jpeg)
        #expect(registry.bestType(among: [.utf16PlainText], accepting: ReaderPreference.plainText) == .utf16PlainText)
    }

    @Test("text targets: every alias, STRING as Latin-1, TEXT replied as UTF8_STRING")
    func textTargets() {
        let targets = registry.targets(for: .utf8PlainText)
        #expect(targets.map(\.name) == ["UTF8_STRING", "text/plain;charset=utf-8", "text/plain", "STRING", "TEXT"])
        #expect(targets.first { $0.name == "STRING" }?.codec == .latin1)
        #expect(targets.first { $0.name == "TEXT" }?.replyType == "UTF8_STRING")
        #expect(registry.type(forTarget: "STRING")?.alias.codec == .latin1)
    }

    @Test("the Latin-1 codec converts both ways and replaces what Latin-1 lacks")
    func latin1() throws {
        let utf8 = Data("café €".utf8)
        let latin1 = try TargetCodec.latin1.encode(utf8)
        #expect(latin1 == Data([0x63, 0x61, 0x66, 0xE9, 0x20, 0x3F]))
        #expect(TargetCodec.latin1.decode(Data([0x63, 0x61, 0x66, 0xE9, 0xFF])) == Data("café\u{FF}".utf8))
        let everyByte = Data((0...255).map { UInt8($0) })
        #expect(try TargetCodec.latin1.encode(TargetCodec.latin1.decode(everyByte)) == everyByte)
        // UTF-8 sent as STRING (as xsel does) stays UTF-8.
        #expect(TargetCodec.latin1.decode(Data("héllo ✓".utf8)) == Data("héllo ✓".utf8))
        #expect(TargetCodec.latin1.decode(Data("plain".utf8)) == Data("plain".utf8))
    }

    @Test("URL codecs: uri-list and x-moz-url")
    func urlCodecs() throws {
        let url = Data("https://example.org/a".utf8)
        #expect(try TargetCodec.uriList.encode(url) == Data("https://example.org/a\r\n".utf8))
        // Every URL of a list is kept, one per line (Qt's setUrls writes several).
        #expect(TargetCodec.uriList.decode(Data("# comment\r\nhttps://example.org/a\r\nfile:///b\r\n".utf8)) == Data("https://example.org/a\nfile:///b".utf8))
        #expect(try TargetCodec.uriList.encode(Data("file:///a\nfile:///b".utf8)) == Data("file:///a\r\nfile:///b\r\n".utf8))
        #expect(TargetCodec.gnomeCopiedFiles.encodeList(["file:///a", "file:///b"]) == Data("copy\nfile:///a\nfile:///b".utf8))
        #expect(TargetCodec.gnomeCopiedFiles.decode(Data("cut\nfile:///a\nfile:///b\n".utf8)) == Data("file:///a\nfile:///b".utf8))
        #expect(TargetCodec.uriListEntries(Data("# c\nhttps://a.example\n\nfile:///b".utf8)) == ["https://a.example", "file:///b"])
        let moz = try TargetCodec.mozURL.encode(url)
        #expect(moz.count == 2 * ("https://example.org/a\nhttps://example.org/a".utf16.count))
        #expect(moz.prefix(4) == Data([0x68, 0x00, 0x74, 0x00]))
        #expect(TargetCodec.mozURL.decode(moz) == url)
    }

    @Test("MIME types and file extensions")
    func mimeAndExtensions() {
        #expect(registry.preferredMIMEType(for: .html) == "text/html")
        #expect(registry.preferredMIMEType(for: .utf8PlainText) == "text/plain;charset=utf-8")
        #expect(registry.preferredMIMEType(for: .blob) == nil)
        #expect(registry.type(forMIMEType: "IMAGE/JPEG") == .jpeg)
        #expect(registry.type(forFileExtension: "JPG") == .jpeg)
        #expect(registry.type(forFileExtension: "htm") == .html)
        #expect(registry.type(forFileExtension: "pdf") == .pdf)
        #expect(registry.type(forFileExtension: "xyz") == nil)
    }

    @Test("a custom registry: the earlier row wins a shared name")
    func customRegistry() throws {
        let first = try PasteboardType("org.example.first")
        let second = try PasteboardType("org.example.second")
        let custom = TypeRegistry(descriptors: [
            TypeDescriptor(first, parents: [.text], mimeTypes: ["text/x-shared"]),
            TypeDescriptor(second, parents: [.data], mimeTypes: ["text/x-shared", "text/x-second"]),
        ])
        #expect(try custom.resolve("text/x-shared") == first)
        #expect(try custom.resolve("text/x-second") == second)
        #expect(custom.conforms(first, to: .text))
    }
}

@Suite("Type names users type")
struct TypeNameTests {
    @Test("file name extensions resolve like short names; unknown bare words are flagged, with the nearest names")
    func namesAndTypos() throws {
        let registry = TypeRegistry.standard
        #expect(try registry.resolve("txt") == registry.resolve("text"))
        #expect(try registry.resolve("htm") == .html)
        for known in ["png", "text", "html", "txt", "image/x-foo", "org.example.thing", "COMPOUND_TEXT", "UTF8_STRING"] {
            #expect(registry.isKnownName(known), "\(known)")
        }
        for typo in ["pgn", "hmtl", "jsno", "zzzqq"] { #expect(!registry.isKnownName(typo), "\(typo)") }
        #expect(registry.nearestNames(to: "pgn") == ["png"])
        #expect(registry.nearestNames(to: "hmtl") == ["html"])
        #expect(registry.nearestNames(to: "zzzqq").isEmpty)
    }

    @Test("text types are served under the plain-text targets too; readers still ask by their own")
    func servedAsText() throws {
        let registry = TypeRegistry.standard
        let markdown = try PasteboardType("text/markdown")
        for type in [PasteboardType.json, .rtf, .html, .svg, markdown] {
            let served = registry.servedTargets(for: type).map(\.name)
            #expect(served.contains("UTF8_STRING") && served.contains("STRING"), "\(type): \(served)")
            #expect(served.first == registry.targets(for: type).first?.name, "its own target first: \(served)")
        }
        #expect(!registry.targets(for: .json).map(\.name).contains("UTF8_STRING"), "reading JSON never takes plain text")
        #expect(!registry.servedTargets(for: .png).map(\.name).contains("UTF8_STRING"))
        #expect(registry.servedTargets(for: .utf8PlainText).map(\.name) == registry.targets(for: .utf8PlainText).map(\.name))
    }
}

@Suite("Content sniffing")
struct ContentSnifferTests {
    @Test("formats are recognised from their first bytes", arguments: [
        (Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0]), PasteboardType.png),
        (Data([0xFF, 0xD8, 0xFF, 0xE0, 1]), .jpeg),
        (Data("GIF89a....".utf8), .gif),
        (Data([0x49, 0x49, 0x2A, 0x00, 8]), .tiff),
        (Data("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8), .webP),
        (Data("%PDF-1.7\n".utf8), .pdf),
        (Data("  <!DOCTYPE html><html></html>".utf8), .html),
        (Data("<p>hello</p>".utf8), .html),
        (Data("<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8), .svg),
        (Data("héllo wörld\n".utf8), .utf8PlainText),
    ])
    func sniff(data: Data, expected: PasteboardType) {
        #expect(ContentSniffer.sniff(data) == expected)
    }

    @Test("binary data and invalid UTF-8 are not text")
    func binary() {
        #expect(ContentSniffer.sniff(Data([0x00, 0x01, 0x02, 0xFF])) == nil)
        #expect(ContentSniffer.sniff(Data([0x61, 0xC3])) == nil)
        #expect(ContentSniffer.sniff(Data([0x61, 0x00, 0x62])) == nil)
    }

    @Test("a long text cut inside a character still reads as text")
    func longText() {
        let text = String(repeating: "a", count: ContentSniffer.window - 1) + "é and more"
        #expect(ContentSniffer.sniff(Data(text.utf8)) == .utf8PlainText)
    }

    @Test("foreign X targets: known MIME names under any spelling map to their type; bare X atoms stay out")
    func foreignTargets() {
        #expect(TypeRegistry.standard.type(forTarget: "image/x-MS-bmp")?.type == .bmp)
        #expect(TypeRegistry.standard.type(forTarget: "Image/PNG")?.type == .png)
        #expect(TypeRegistry.standard.type(forTarget: "x-special/gnome-copied-files")?.type == .fileURL)
        #expect(TypeRegistry.standard.type(forTarget: "text/uri-list")?.type == .url)
        #expect(TypeRegistry.standard.type(forTarget: "UTF8_STRING")?.type == .utf8PlainText)
        for atom in ["COMPOUND_TEXT", "PIXMAP", "BITMAP", "_QT_SELECTION", "GTK_TEXT_BUFFER_CONTENTS"] {
            #expect(TypeRegistry.standard.type(forTarget: atom) == nil, "\(atom)")
        }
        // URLs are served as text too; the text rows keep the text targets when reading.
        #expect(TypeRegistry.standard.targets(for: .url).map(\.name).contains("UTF8_STRING"))
        #expect(TypeRegistry.standard.targets(for: .fileURL).map(\.name).prefix(2) == ["text/uri-list", "x-special/gnome-copied-files"])
    }

    @Test("the default type: plain text, else an image (PNG first), else the first that is data; markers never")
    func defaultType() throws {
        let registry = TypeRegistry.standard
        let token = try PasteboardType("chromium/x-internal-source-rfh-token")
        let qt = try PasteboardType("application/x-qt-image")
        let special = try PasteboardType("x-special/nautilus-clipboard")
        #expect(registry.defaultType(among: [token, .png]) == .png)
        #expect(registry.defaultType(among: [token, .jpeg, .html, .utf8PlainText]) == .utf8PlainText)
        #expect(registry.defaultType(among: [qt, .jpeg, .png]) == .png)
        #expect(registry.defaultType(among: [special, .html, .png]) == .png)
        #expect(registry.defaultType(among: [token, .pdf, .html]) == .pdf)
        #expect(registry.defaultType(among: [token, qt, special]) == nil)
        #expect(registry.defaultType(among: []) == nil)
        for name in ["chromium/x-source-url", "x-special/gnome-icon-list", "application/x-qt-windows-mime;value=\"x\"",
                     "SAVE_TARGETS", "TARGETS", "_QT_SELECTION", "XPB_MANIFEST", "application/vnd.portal.filetransfer"] {
            #expect(TypeRegistry.isPrivate(name), "\(name)")
        }
        for name in ["x-special/gnome-copied-files", "text/html", "image/png", "UTF8_STRING", "text/uri-list"] {
            #expect(!TypeRegistry.isPrivate(name), "\(name)")
        }
    }
}
