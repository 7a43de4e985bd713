import FoundationEssentials

/// Recognises a representation type from the first bytes of some data: images by their magic
/// numbers, PDF, SVG and HTML by their openings, and UTF-8 text. Reads at most 64 KiB.
public enum ContentSniffer {
    /// How many bytes are looked at, at most.
    public static let window = 64 * 1024

    /// The type the bytes look like, or nil for data of no recognised kind (binary).
    ///
    /// - Parameter totalSize: the size of the whole when `data` is only its first bytes (at
    ///   least ``window`` of them), so a character cut at the end is not taken for bad UTF-8.
    public static func sniff(_ data: Data, totalSize: Int? = nil) -> PasteboardType? {
        let head = data.prefix(window)
        func starts(_ bytes: [UInt8]) -> Bool { head.starts(with: bytes) }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return .gif }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return .tiff }
        if head.count >= 12, starts(Array("RIFF".utf8)), head.dropFirst(8).starts(with: Array("WEBP".utf8)) { return .webP }
        if starts(Array("%PDF-".utf8)) { return .pdf }
        if head.count >= 26, starts(Array("BM".utf8)), head[head.startIndex + 6] == 0, head[head.startIndex + 7] == 0 { return .bmp }
        guard let text = validUTF8Prefix(head, isWhole: head.count == (totalSize ?? data.count)), !text.contains("\u{0}") else { return nil }
        let opening = text.drop(while: { $0.isWhitespace || $0 == "\u{FEFF}" }).prefix(512).lowercased()
        if opening.hasPrefix("<svg") || (opening.hasPrefix("<?xml") && opening.contains("<svg")) { return .svg }
        if htmlOpenings.contains(where: { opening.hasPrefix($0) }) { return .html }
        return .utf8PlainText
    }

    static let htmlOpenings = [
        "<!doctype html", "<html", "<head", "<body", "<meta", "<div", "<span", "<p>", "<p ", "<table",
        "<a ", "<b>", "<i>", "<em>", "<strong>", "<ul", "<ol", "<li", "<br", "<img", "<pre",
        "<h1", "<h2", "<h3", "<h4", "<h5", "<h6", "<!--",
    ]

    /// Whether bytes read as ISO 8859-1 (Latin-1) text, the encoding of X11's `STRING` and of
    /// older files: some byte of 0xA0 or above (else they are ASCII, which is UTF-8), no NUL, no
    /// control character but tab, line feed, form feed and carriage return, and nothing in
    /// 0x7F–0x9F, which Latin-1 text does not use and binary data nearly always has. Meant for
    /// bytes that are not valid UTF-8.
    public static func isLatin1Text(_ data: Data) -> Bool {
        var hasHighByte = false
        for byte in data {
            switch byte {
            case 0x09, 0x0A, 0x0C, 0x0D, 0x20...0x7E: continue
            case 0xA0...0xFF: hasHighByte = true
            default: return false
            }
        }
        return hasHighByte
    }

    /// The text of `head` if it is valid UTF-8; a head cut from longer data may end inside a
    /// character, whose first bytes are then ignored.
    public static func validUTF8Prefix(_ head: Data, isWhole: Bool) -> String? {
        for cut in 0...(isWhole ? 0 : 3) where cut <= head.count {
            if let text = String(validating: head.dropLast(cut), as: UTF8.self) { return text }
        }
        return nil
    }
}
