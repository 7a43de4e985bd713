import Foundation
import PasteboardKit
import Testing
@testable import PasteboardX11

/// URLs and types as GTK 3 and Qt 5 (real toolkits, through Debian's python3-gi and
/// python3-pyqt5) and xclip expect them.
@Suite("URLs and types with GTK, Qt and xclip")
struct ToolkitTests {
    @Test("a file URL is served as text/uri-list, GNOME's copied-files list and text")
    func fileURL() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let url = URL(fileURLWithPath: "/tmp/xpb test/notes.txt")
        try Pasteboard.general(of: backend).setURL(url)
        let targets = try run("xclip", ["-o", "-selection", "clipboard", "-t", "TARGETS"], display: x).text
        for target in ["text/uri-list", "x-special/gnome-copied-files", "UTF8_STRING", "STRING"] {
            #expect(targets.contains(target), "\(target) missing from \(targets)")
        }
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/uri-list"], display: x).text == url.absoluteString + "\r\n")
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "x-special/gnome-copied-files"], display: x).text
            == "copy\n" + url.absoluteString)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == url.absoluteString)

        let gtk = try toolkitPeer("gtk_clipboard.py", ["uris"], display: x).finish()
        #expect(gtk.text == url.absoluteString + "\n", "GTK: \(gtk.error)")
        let qt = try toolkitPeer("qt_clipboard.py", ["read"], display: x).finish()
        #expect(qt.text.contains("hasUrls True"), "Qt: \(qt.text) \(qt.error)")
        #expect(qt.text.contains("url \(url.absoluteString)"))
    }

    @Test("an HTML-only copy is read as clean text by xclip, GTK's wait_for_text and Qt's text(); its markup stays under text/html")
    func htmlOnlyAsText() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let html = """
            <html><head><title>hidden</title><style>b{}</style></head><body><h1>Fish &amp; Chips</h1>
            <p>Caf&eacute;&nbsp;prices: &euro;5 &#8212; <b>cheap</b><br>next line</p><script>var s = "<p>no</p>";</script>
            <ul><li>one</li><li>two &lt;b&gt;</li></ul></body></html>
            """
        try Pasteboard.general(of: backend).setData(Data(html.utf8), forPasteboardType: .html)
        let text = "Fish & Chips\n\nCafé prices: €5 — cheap\nnext line\n\none\ntwo <b>"
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == text)
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x).text == html)
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "STRING"], display: x).output
            == Data("Fish & Chips\n\nCaf\u{E9} prices: ?5 ? cheap\nnext line\n\none\ntwo <b>".unicodeScalars.map { UInt8($0.value) }))
        let gtk = try toolkitPeer("gtk_clipboard.py", ["text"], display: x).finish()
        #expect(gtk.text == text + "\n", "GTK: \(gtk.text) \(gtk.error)")
        let qt = try toolkitPeer("qt_clipboard.py", ["read"], display: x).finish()
        #expect(qt.text.contains("text " + text), "Qt: \(qt.text) \(qt.error)")
    }

    @Test("a web URL is served as text too")
    func webURL() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        try Pasteboard.general(of: backend).setURL(URL(string: "https://example.org/a?b=c")!)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "https://example.org/a?b=c")
        let gtk = try toolkitPeer("gtk_clipboard.py", ["text"], display: x).finish()
        #expect(gtk.text == "https://example.org/a?b=c\n", "GTK: \(gtk.error)")
        let qt = try toolkitPeer("qt_clipboard.py", ["read"], display: x).finish()
        #expect(qt.text.contains("hasUrls True") && qt.text.contains("url https://example.org/a?b=c"), "Qt: \(qt.text) \(qt.error)")
    }

    @Test("several URL items reach GTK and Qt as one list")
    func severalURLs() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let urls = [URL(fileURLWithPath: "/tmp/a.txt"), URL(fileURLWithPath: "/tmp/b.txt")]
        try Pasteboard.general(of: backend).setURLs(urls)
        let gtk = try toolkitPeer("gtk_clipboard.py", ["uris"], display: x).finish()
        #expect(gtk.text == urls.map(\.absoluteString).joined(separator: "\n") + "\n", "GTK: \(gtk.error)")
        let qt = try toolkitPeer("qt_clipboard.py", ["read"], display: x).finish()
        for url in urls { #expect(qt.text.contains("url \(url.absoluteString)"), "Qt: \(qt.text)") }
    }

    @Test("Qt's setUrls with a web and a file URL reads back as two URLs")
    func qtSetURLs() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let qt = try toolkitPeer("qt_clipboard.py", ["set-urls", "https://example.org/x", "file:///tmp/y.txt"], display: x)
        defer { qt.stop() }
        try qt.waitForOutput("ready")
        let board = Pasteboard.general(of: backend)
        #expect(eventually { (try? board.readURLs()) == [URL(string: "https://example.org/x")!, URL(string: "file:///tmp/y.txt")!] })
        #expect(try board.readHasURLs())
        #expect(try board.readURL() == URL(string: "https://example.org/x"))
    }

    @Test("GTK's text reaches the library; our text reaches GTK and Qt")
    func textBothWays() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let gtkOwner = try toolkitPeer("gtk_clipboard.py", ["set-text", "naïve ✓ from GTK"], display: x)
        try gtkOwner.waitForOutput("ready")
        let board = Pasteboard.general(of: backend)
        #expect(eventually { (try? board.readString()) == "naïve ✓ from GTK" })
        gtkOwner.stop()
        try board.setString("naïve ✓ from xpb")
        #expect(try toolkitPeer("gtk_clipboard.py", ["text"], display: x).finish().text == "naïve ✓ from xpb\n")
        #expect(try toolkitPeer("qt_clipboard.py", ["read"], display: x).finish().text.contains("text naïve ✓ from xpb"))
    }

    @Test("raw X targets of foreign owners map to registry types or stay out of types", arguments: [
        ("image/x-MS-bmp", [PasteboardType.bmp]), ("COMPOUND_TEXT", []), ("PIXMAP", []), ("text/html", [PasteboardType.html]),
    ])
    func rawTargets(target: String, expected: [PasteboardType]) throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", target, "-quiet"], display: x, input: Data("BMx".utf8))
        defer { owner.stop() }
        let board = Pasteboard.general(of: backend)
        #expect(eventually { (try? backend.targets(of: .general))?.contains(target) == true })
        #expect(try board.readTypes() == expected)
    }
}
