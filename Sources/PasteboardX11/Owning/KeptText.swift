import FoundationEssentials
import ImageCodecs
import PasteboardKit

/// How a clipboard manager serves a target it did not fetch, made from one it did: another
/// format of the kept image, or the kept UTF-8 text in another text encoding.
enum KeptConversion: Sendable, Hashable {
    /// The kept image converted to this format (decoded and encoded whole: on a worker).
    case image(ImageFormat)
    /// The kept UTF-8 text as ISO 8859-1 (`STRING`); characters outside Latin-1 become `?`.
    case latin1
    /// The kept UTF-8 text as X11 Compound Text (``CompoundText``).
    case compoundText
    /// The kept HTML's text (``HTMLText``), as UTF-8; throws when the markup has none.
    case textFromHTML
    /// The kept HTML's text in ISO 8859-1 (`STRING`).
    case latin1FromHTML

    /// The converted bytes; throws when an image cannot be converted.
    func convert(_ source: Data) throws -> Data {
        switch self {
        case let .image(format): return try ImageCodec.convert(source, to: format)
        case .latin1: return try TargetCodec.latin1.encode(source)
        case .compoundText: return CompoundText.encode(utf8: source)
        case .textFromHTML: return try TargetCodec.textFromHTML.encode(source)
        case .latin1FromHTML: return try TargetCodec.latin1FromHTML.encode(source)
        }
    }

    var isHeavy: Bool {
        if case .image = self { return true }
        return false
    }
}

/// The text a clipboard manager keeps of an owner's offer. Toolkits offer one text under five
/// or six targets (GTK: `UTF8_STRING`, `COMPOUND_TEXT`, `TEXT`, `STRING`, two `text/plain`), each
/// converted on request; a manager that fetched them all moved the text six times, and GTK takes
/// seconds to make `COMPOUND_TEXT` of a large text. One UTF-8 target is fetched; the others the
/// owner offered are made from it when a reader asks.
extension X11PasteboardBackend {
    /// The UTF-8 targets a kept text is fetched from, best first.
    static let keptTextSources = ["UTF8_STRING", "text/plain;charset=utf-8"]

    /// The text targets made from the kept UTF-8 text, with how: the same bytes under this reply
    /// type (nil: the target itself), or converted.
    static let derivedTextTargets: [String: (replyType: String?, conversion: KeptConversion?)] = [
        "UTF8_STRING": (nil, nil),
        "text/plain;charset=utf-8": (nil, nil),
        "text/plain": (nil, nil),
        "TEXT": ("UTF8_STRING", nil),
        "STRING": (nil, .latin1),
        "COMPOUND_TEXT": (nil, .compoundText),
    ]

    /// The text target a clipboard manager fetches of an owner's offer: its first UTF-8 text
    /// target. Nil when it offers none (its text targets are then fetched as they are).
    public static func keptTextTarget(_ targets: [String]) -> String? {
        let normal = targets.map(Self.normalTextTarget)
        for source in keptTextSources {
            if let index = normal.firstIndex(of: source) { return targets[index] }
        }
        return nil
    }

    /// Whether a manager that keeps ``keptTextTarget(_:)`` can leave `target` out: a text
    /// target made from the kept text when asked.
    public static func isDerivableTextTarget(_ target: String) -> Bool {
        derivedTextTargets[normalTextTarget(target)] != nil
    }

    /// A MIME target as the table spells it (`text/plain; charset=UTF-8` is
    /// `text/plain;charset=utf-8`, ``TypeRegistry/normalizedMIME(_:)``); X atoms such as
    /// `UTF8_STRING` as they are.
    static func normalTextTarget(_ target: String) -> String {
        target.contains("/") ? TypeRegistry.normalizedMIME(target) : target
    }
}

/// X11 Compound Text (the X Consortium's standard, ISO 2022 based) written from UTF-8: what
/// `COMPOUND_TEXT` readers (Xt, Motif and Xlib's `XmbTextPropertyToTextList`) decode.
///
/// The initial state is ASCII in GL and the right half of ISO 8859-1 in GR, so text within
/// Latin-1 is its Latin-1 bytes. Other characters, and the C1 controls (which Compound Text
/// reserves), go in UTF-8 segments: `ESC % G`, the UTF-8 bytes, `ESC % @`. A malformed UTF-8
/// sequence becomes `?`.
enum CompoundText {
    static let utf8Start: [UInt8] = [0x1B, 0x25, 0x47]
    static let utf8End: [UInt8] = [0x1B, 0x25, 0x40]

    static func encode(utf8 data: Data) -> Data {
        var output: [UInt8] = []
        output.reserveCapacity(data.count + 16)
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var inSegment = false
            var index = 0
            while index < bytes.count {
                let lead = bytes[index]
                if lead < 0x80 {
                    if inSegment { output += utf8End; inSegment = false }
                    output.append(lead)
                    index += 1
                    continue
                }
                let length = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 && lead < 0xF0 ? 3 : lead >= 0xC2 && lead < 0xE0 ? 2 : 0
                var valid = length > 0 && index + length <= bytes.count
                if valid {
                    for offset in 1..<length where bytes[index + offset] & 0xC0 != 0x80 { valid = false }
                }
                if valid {
                    // Overlong forms, surrogates and past U+10FFFF.
                    let second = bytes[index + 1]
                    switch lead {
                    case 0xE0: valid = second >= 0xA0
                    case 0xED: valid = second < 0xA0
                    case 0xF0: valid = second >= 0x90
                    case 0xF4: valid = second < 0x90
                    default: break
                    }
                }
                guard valid else {
                    if inSegment { output += utf8End; inSegment = false }
                    output.append(UInt8(ascii: "?"))
                    index += 1
                    continue
                }
                if length == 2, lead >= 0xC2, lead <= 0xC3, !(lead == 0xC2 && bytes[index + 1] < 0xA0) {
                    // U+00A0 … U+00FF: the Latin-1 byte, in GR.
                    if inSegment { output += utf8End; inSegment = false }
                    output.append((lead & 0x1F) << 6 | (bytes[index + 1] & 0x3F))
                } else {
                    if !inSegment { output += utf8Start; inSegment = true }
                    for offset in 0..<length { output.append(bytes[index + offset]) }
                }
                index += length
            }
            if inSegment { output += utf8End }
        }
        return Data(output)
    }
}
