import FoundationEssentials

/// Plain text from HTML, as a reader that asks an HTML-only copy for text should get it: tags
/// removed, character references decoded, block elements and `<br>` as line breaks, table cells
/// apart, `<pre>` kept as it is, and what is never shown (script, style, the title, templates)
/// left out. Close to what a browser's `innerText` gives.
///
/// It works at the level of HTML's tokenizer (tags, comments, raw text, character references),
/// in one pass, in time and memory linear in the input: plain text needs no document tree. A tree
/// builder would cost more than it brings here, and the one at hand is not safe with what any
/// owner can put on a clipboard: gumbo (Debian's libgumbo) takes memory quadratic in the nesting
/// depth (4,000 nested `<div>` need 128 MB; 100,000 unclosed `<b>`, 500 KB of input, took 24 GB
/// and were killed), and libxml2's parser would bring ICU into the static binaries.
public enum HTMLText {
    /// The text of `html` (UTF-8; UTF-16 with a byte order mark is read too), as UTF-8.
    public static func plainText(_ html: Data) -> Data {
        var converter = Converter(bytes: Self.utf8(html))
        converter.run()
        return Data(converter.output)
    }

    /// The text, and the work its conversion took: every byte the converter looked at, of the
    /// input and of the output so far. Linear means a small multiple of the input's size, whatever
    /// the input (the fuzz target and the tests hold it to that).
    package static func plainTextWork(_ html: Data) -> (text: Data, steps: Int) {
        var converter = Converter(bytes: Self.utf8(html))
        converter.run()
        return (Data(converter.output), converter.steps)
    }

    /// The most work a conversion of `count` bytes may take (``plainTextWork(_:)``).
    package static func workBound(_ count: Int) -> Int { 16 * count + 64 }

    /// The input as UTF-8 bytes: a UTF-16 byte order mark (as some browsers write `text/html`)
    /// converts, a UTF-8 one is dropped.
    static func utf8(_ data: Data) -> [UInt8] {
        let bytes = [UInt8](data)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return Array(bytes.dropFirst(3)) }
        if bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF]) {
            let little = bytes[0] == 0xFF
            var units: [UInt16] = []
            units.reserveCapacity(bytes.count / 2)
            var index = 2
            while index + 1 < bytes.count {
                units.append(little ? UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8 : UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]))
                index += 2
            }
            return Array(String(decoding: units, as: UTF16.self).utf8)
        }
        return bytes
    }

    /// Elements whose content is never shown as text.
    static let hidden: Set<String> = ["script", "style", "title", "template", "noscript", "svg", "math", "head", "iframe", "object"]
    /// What a document's head holds; any other start tag ends the head (its end tag is optional).
    static let headContent: Set<String> = ["base", "link", "meta", "title", "style", "script", "noscript", "template", "head"]
    /// Elements whose content is raw text: no tags inside until their end tag.
    static let rawText: Set<String> = ["script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "plaintext"]
    /// Elements that break lines around themselves.
    static let blocks: Set<String> = [
        "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog", "dir", "div", "dl",
        "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup",
        "hr", "html", "legend", "li", "main", "menu", "nav", "ol", "option", "p", "pre", "section", "summary", "table", "tbody",
        "thead", "tfoot", "tr", "ul", "listing",
    ]
    /// Blocks set apart by a blank line.
    static let paragraphs: Set<String> = ["p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "figure", "hr"]

    private struct Converter {
        let bytes: [UInt8]
        var index = 0
        var output: [UInt8] = []
        /// Line breaks owed before the next text (the larger request wins).
        var pendingBreaks = 0
        /// A space owed before the next text (collapsed white space).
        var pendingSpace = false
        /// Depths inside `<pre>`/`<textarea>` (white space kept) and inside hidden elements.
        var preformatted = 0
        var hiddenDepth: [String: Int] = [:] {
            didSet { isHidden = hiddenDepth.values.contains { $0 > 0 } }
        }
        /// Whether the text is inside a hidden element now (asked for every byte: kept, not derived).
        private(set) var isHidden = false
        /// Whether a cell was written in the current table row (the next one is set apart by a tab).
        var cellInRow = false
        /// The bytes looked at so far (``HTMLText/plainTextWork(_:)``).
        var steps = 0

        init(bytes: [UInt8]) {
            self.bytes = bytes
            output.reserveCapacity(bytes.count / 2)
        }

        mutating func run() {
            while index < bytes.count {
                steps += 1
                let byte = bytes[index]
                if byte == UInt8(ascii: "<"), tag() { continue }
                if byte == UInt8(ascii: "&") {
                    index += 1
                    text(reference())
                    continue
                }
                index += 1
                if isSpace(byte) {
                    if preformatted > 0 { text(CollectionOfOne(byte == 0x0D ? 0x0A : byte)) } else { pendingSpace = true }
                } else {
                    text(CollectionOfOne(byte))
                }
            }
            while let last = output.last, isSpace(last) {
                output.removeLast()
                steps += 1
            }
        }

        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0C || byte == 0x0D }

        func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z") }

        /// Writes text (already decoded), after the breaks and space owed.
        mutating func text<Piece: Collection<UInt8>>(_ piece: Piece) {
            guard !isHidden, !piece.isEmpty else { return }
            if !output.isEmpty {
                if pendingBreaks > 0 {
                    while let last = output.last, last == 0x20 || last == 0x09 && !cellInRow {
                        output.removeLast()
                        steps += 1
                    }
                    // Only as many trailing newlines as are owed need counting: counting them all
                    // made every <br> after a <p> cost the length of the run (quadratic).
                    let trailing = output.reversed().prefix(pendingBreaks).prefix { $0 == 0x0A }.count
                    steps += trailing + 1
                    output += [UInt8](repeating: 0x0A, count: max(0, pendingBreaks - trailing))
                } else if pendingSpace, let last = output.last, last != 0x0A, last != 0x20, last != 0x09 {
                    output.append(0x20)
                }
            }
            pendingBreaks = 0
            pendingSpace = false
            output += piece
        }

        mutating func lineBreaks(_ count: Int) {
            guard !isHidden else { return }
            pendingBreaks = max(pendingBreaks, count)
            pendingSpace = false
        }

        /// A tag, comment or declaration at `index` (a `<`): handled, and true; false when the
        /// `<` is text.
        mutating func tag() -> Bool {
            let next = index + 1 < bytes.count ? bytes[index + 1] : 0
            if next == UInt8(ascii: "!") {
                if bytes[index...].starts(with: Array("<!--".utf8)) {
                    index = find(Array("-->".utf8), from: index + 4).map { $0 + 3 } ?? bytes.count
                } else {
                    index = find([UInt8(ascii: ">")], from: index + 2).map { $0 + 1 } ?? bytes.count
                }
                return true
            }
            if next == UInt8(ascii: "?") {
                index = find([UInt8(ascii: ">")], from: index + 2).map { $0 + 1 } ?? bytes.count
                return true
            }
            let closing = next == UInt8(ascii: "/")
            let nameStart = index + (closing ? 2 : 1)
            guard nameStart < bytes.count, isLetter(bytes[nameStart]) else { return false }
            var nameEnd = nameStart
            while nameEnd < bytes.count, !isSpace(bytes[nameEnd]), bytes[nameEnd] != UInt8(ascii: ">"), bytes[nameEnd] != UInt8(ascii: "/") {
                nameEnd += 1
            }
            steps += nameEnd - nameStart
            let name = String(decoding: bytes[nameStart ..< nameEnd].map { isLetter($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
            index = endOfTag(from: nameEnd)
            steps += index - nameEnd
            if closing { end(name) } else { start(name) }
            return true
        }

        /// Past the `>` that ends a tag, attributes' quoted values (which may hold `>`) skipped.
        func endOfTag(from start: Int) -> Int {
            var position = start
            var quote: UInt8?
            while position < bytes.count {
                let byte = bytes[position]
                if let open = quote {
                    if byte == open { quote = nil }
                } else if byte == UInt8(ascii: "\""), position > start, bytes[position - 1] == UInt8(ascii: "=") || isSpace(bytes[position - 1]) {
                    quote = byte
                } else if byte == UInt8(ascii: "'"), position > start, bytes[position - 1] == UInt8(ascii: "=") || isSpace(bytes[position - 1]) {
                    quote = byte
                } else if byte == UInt8(ascii: ">") {
                    return position + 1
                }
                position += 1
            }
            return bytes.count
        }

        mutating func start(_ name: String) {
            if hiddenDepth["head", default: 0] > 0, !HTMLText.headContent.contains(name) { hiddenDepth["head"] = 0 }
            if HTMLText.hidden.contains(name) { hiddenDepth[name, default: 0] += 1 }
            if HTMLText.rawText.contains(name) {
                // No markup inside: straight to the end tag.
                let end = find(Array("</\(name)".utf8), caseless: true, from: index) ?? bytes.count
                if !isHidden { text(bytes[index ..< end]) }
                index = end
                if end == bytes.count, HTMLText.hidden.contains(name) { hiddenDepth[name, default: 1] -= 1 }
                return
            }
            switch name {
            case "br":
                guard !isHidden else { return }
                if output.isEmpty { output.append(0x0A) } else { text([0x0A]) }
                pendingSpace = false
            case "pre", "textarea", "listing":
                preformatted += 1
                lineBreaks(2)
                // A newline right after the start tag is not part of the content.
                if index < bytes.count, bytes[index] == 0x0A { index += 1 }
            case "tr":
                cellInRow = false
                lineBreaks(1)
            case "td", "th":
                if cellInRow { text([0x09]) }
                cellInRow = true
            default:
                if HTMLText.blocks.contains(name) { lineBreaks(HTMLText.paragraphs.contains(name) ? 2 : 1) }
            }
        }

        mutating func end(_ name: String) {
            if let depth = hiddenDepth[name], depth > 0 {
                hiddenDepth[name] = depth - 1
                return
            }
            switch name {
            case "pre", "textarea", "listing":
                preformatted = max(0, preformatted - 1)
                lineBreaks(2)
            case "br":
                start("br")
            case "table":
                cellInRow = false
                lineBreaks(2)
            default:
                if HTMLText.blocks.contains(name) { lineBreaks(HTMLText.paragraphs.contains(name) ? 2 : 1) }
            }
        }

        /// Where `needle` is next, from `start`; `caseless` for ASCII letters (an end tag's name).
        mutating func find(_ needle: [UInt8], caseless: Bool = false, from start: Int) -> Int? {
            let fold: UInt8 = caseless ? 0x20 : 0
            var position = start
            while position + needle.count <= bytes.count {
                var matches = true
                for offset in 0 ..< needle.count where bytes[position + offset] | fold != needle[offset] | fold {
                    matches = false
                    break
                }
                steps += 1
                if matches { return position }
                position += 1
            }
            return nil
        }

        /// A character reference after `&` (at `index`): its UTF-8, or `&` itself when it is none.
        mutating func reference() -> [UInt8] {
            let ampersand: [UInt8] = [UInt8(ascii: "&")]
            guard index < bytes.count else { return ampersand }
            if bytes[index] == UInt8(ascii: "#") {
                var position = index + 1
                let hex = position < bytes.count && bytes[position] | 0x20 == UInt8(ascii: "x")
                if hex { position += 1 }
                var value: UInt32 = 0
                var digits = 0
                while position < bytes.count, let digit = digitValue(bytes[position], hex: hex) {
                    value = min(value &* (hex ? 16 : 10) &+ digit, 0x110000)
                    digits += 1
                    position += 1
                }
                steps += position - index
                guard digits > 0 else { return ampersand }
                if position < bytes.count, bytes[position] == UInt8(ascii: ";") { position += 1 }
                index = position
                let scalar = Unicode.Scalar(Self.windows1252[value] ?? value).flatMap { value == 0 ? nil : $0 } ?? "\u{FFFD}"
                return scalar == "\u{A0}" ? [0x20] : Array(String(Character(scalar)).utf8)
            }
            var end = index
            while end < bytes.count, end - index < 32, isLetter(bytes[end]) || (bytes[end] >= UInt8(ascii: "0") && bytes[end] <= UInt8(ascii: "9")) {
                end += 1
            }
            steps += end - index
            let name = String(decoding: bytes[index ..< end], as: UTF8.self)
            let terminated = end < bytes.count && bytes[end] == UInt8(ascii: ";")
            guard let scalar = HTMLEntities.named[name], terminated || HTMLEntities.legacy.contains(name) else { return ampersand }
            index = terminated ? end + 1 : end
            return scalar == "\u{A0}" ? [0x20] : Array(String(Character(scalar)).utf8)
        }

        func digitValue(_ byte: UInt8, hex: Bool) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0") ... UInt8(ascii: "9"): return UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a") ... UInt8(ascii: "f") where hex: return UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A") ... UInt8(ascii: "F") where hex: return UInt32(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
        }

        /// Numeric references in 0x80–0x9F mean Windows-1252's characters (HTML's rule).
        static let windows1252: [UInt32: UInt32] = [
            0x80: 0x20AC, 0x82: 0x201A, 0x83: 0x0192, 0x84: 0x201E, 0x85: 0x2026, 0x86: 0x2020, 0x87: 0x2021, 0x88: 0x02C6,
            0x89: 0x2030, 0x8A: 0x0160, 0x8B: 0x2039, 0x8C: 0x0152, 0x8E: 0x017D, 0x91: 0x2018, 0x92: 0x2019, 0x93: 0x201C,
            0x94: 0x201D, 0x95: 0x2022, 0x96: 0x2013, 0x97: 0x2014, 0x98: 0x02DC, 0x99: 0x2122, 0x9A: 0x0161, 0x9B: 0x203A,
            0x9C: 0x0153, 0x9E: 0x017E, 0x9F: 0x0178,
        ]
    }
}
