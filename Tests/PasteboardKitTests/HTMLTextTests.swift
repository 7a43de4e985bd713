import Foundation
import Testing
@testable import PasteboardKit

@Suite("Text from HTML")
struct HTMLTextTests {
    func text(_ html: String) -> String { String(decoding: HTMLText.plainText(Data(html.utf8)), as: UTF8.self) }

    @Test("tags out, references decoded, blocks and <br> as lines, paragraphs apart, white space collapsed")
    func basics() {
        #expect(text("<b>bold</b> and <i>italic</i>") == "bold and italic")
        #expect(text("a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos; &#65;&#x42; &copy &amp") == "a & b <c> \"d\" 'e' AB © &")
        #expect(text("&unknownname; &; & alone &#; &#xZZ;") == "&unknownname; &; & alone &#; &#xZZ;")
        #expect(text("&#0; &#xD800; &#1114112; &#128; &#x1F41F;") == "\u{FFFD} \u{FFFD} \u{FFFD} € 🐟")
        #expect(text("<p>one</p><p>two</p><div>three</div><div>four</div>") == "one\n\ntwo\n\nthree\nfour")
        #expect(text("line<br>next<br/>last<BR >") == "line\nnext\nlast")
        #expect(text("  lots   of\n\n  space\t here  ") == "lots of space here")
        #expect(text("<ul>\n  <li>one</li>\n  <li>two</li>\n</ul>after") == "one\ntwo\nafter")
        #expect(text("<h2>Title</h2>body") == "Title\n\nbody")
        #expect(text("a&nbsp;&nbsp;b") == "a  b")
    }

    @Test("script, style, the head and comments are dropped; <pre> and <textarea> keep their text as it is")
    func hiddenAndPreformatted() {
        #expect(text("<script>if (a < b) { x = '<p>' }</script>shown<style>p > b { }</style>") == "shown")
        #expect(text("<SCRIPT type=x>never</script >yes") == "yes")
        #expect(text("<head><title>T</title><meta charset=utf-8></head><body>body</body>") == "body")
        #expect(text("<head><title>T</title><p>no end tag for the head</p>") == "no end tag for the head")
        #expect(text("a<!-- <p>comment</p> -->b<!DOCTYPE html><?xml x?>c") == "abc")
        #expect(text("<pre>\n  two  spaces\n\tand a tab</pre>after") == "  two  spaces\n\tand a tab\n\nafter")
        #expect(text("<textarea>x &lt; <b>y</b></textarea>") == "x &lt; <b>y</b>")
        #expect(text("<svg><text>drawn</text></svg>text") == "text")
    }

    @Test("tables: cells apart by tabs, rows by lines")
    func tables() {
        #expect(text("<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>after") == "a\tb\n1\t2\n\nafter")
    }

    @Test("tag soup and hostile input: attributes with > in quotes, stray <, unclosed everything, deep nesting in linear time")
    func malformed() {
        #expect(text("<a title=\"x > y\" href='<p>'>link</a>") == "link")
        #expect(text("1 < 2 and 3 <4 but <b>bold") == "1 < 2 and 3 <4 but bold")
        #expect(text("<p>unclosed <div>tags <b>everywhere") == "unclosed\ntags everywhere")
        #expect(text("<script>never closed") == "")
        #expect(text("<!-- never closed") == "")
        #expect(text("<") == "<" && text("&") == "&" && text("") == "")
        // What takes gumbo 24 GB (100,000 unclosed formatting elements) and 128 MB (4,000
        // nested divs): here one pass.
        let bomb = String(repeating: "<b>", count: 100_000) + "x" + String(repeating: "<div>", count: 100_000) + "y"
        #expect(text(bomb) == "x\ny")
    }

    @Test("UTF-16 with a byte order mark (as some browsers write text/html) and a UTF-8 one are read")
    func encodings() {
        let html = "<p>Grüße &amp; ✓</p>"
        var little = Data([0xFF, 0xFE])
        for unit in html.utf16 { little.append(contentsOf: [UInt8(unit & 0xFF), UInt8(unit >> 8)]) }
        var big = Data([0xFE, 0xFF])
        for unit in html.utf16 { big.append(contentsOf: [UInt8(unit >> 8), UInt8(unit & 0xFF)]) }
        for data in [little, big, Data([0xEF, 0xBB, 0xBF]) + Data(html.utf8)] {
            #expect(String(decoding: HTMLText.plainText(data), as: UTF8.self) == "Grüße & ✓")
        }
    }

    @Test("HTML is served under the text targets as its text; its own targets and other text types stay as they are")
    func servedTargets() throws {
        let registry = TypeRegistry.standard
        let html = registry.servedTargets(for: .html)
        #expect(html.first { $0.name == "text/html" }?.codec == .identity)
        #expect(html.first { $0.name == "UTF8_STRING" }?.codec == .textFromHTML)
        #expect(html.first { $0.name == "STRING" }?.codec == .latin1FromHTML)
        #expect(try TargetCodec.latin1FromHTML.encode(Data("<p>caf&eacute; &#8364;</p>".utf8)) == Data([0x63, 0x61, 0x66, 0xE9, 0x20, 0x3F]))
        let json = try? PasteboardType("public.json")
        if let json { #expect(registry.servedTargets(for: json).first { $0.name == "UTF8_STRING" }?.codec == .identity) }
    }

    /// Inputs that once cost more than one pass, or could: the work stays a small multiple of the
    /// input, at every size (quadratic work would pass the bound from a few kilobytes on).
    @Test(arguments: [
        "<p><br>",                  // each <br> after a <p> counted the whole run of newlines (1 MiB took 3.3 s)
        "<p> <br>\n",
        "<div><br><br></p>",
        "<tr><td>a</td><td><br></td></tr>",
        "<pre>\n\n</pre><br>",
        "<!--",                     // an unclosed comment, a tag, a reference each scan ahead once
        "<a href=\"",
        "&#1234567890",
        "<script>",
        "<b",
    ])
    func workIsLinear(_ unit: String) {
        for count in [1_000, 10_000, 30_000] {
            let html = Data(String(repeating: unit, count: count).utf8)
            let (_, steps) = HTMLText.plainTextWork(html)
            #expect(steps <= HTMLText.workBound(html.count), "\(unit.debugDescription) × \(count): \(steps) steps for \(html.count) bytes")
        }
    }

    @Test func paragraphsOfBreaksAreTheirLines() {
        // A <p> owes a blank line (two newlines, unless the text ends so already); each <br> is a
        // newline of its own.
        #expect(text("a<p><br><br>b") == "a\n\n\n\nb")
        let many = String(decoding: HTMLText.plainText(Data(("x" + String(repeating: "<p><br>", count: 50_000) + "y").utf8)), as: UTF8.self)
        #expect(many == "x" + String(repeating: "\n", count: 2 + 50_000) + "y", "\(many.count)")
    }
}
