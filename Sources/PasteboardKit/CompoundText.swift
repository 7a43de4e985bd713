import FoundationEssentials

/// X11 Compound Text (the X Consortium's standard, ISO 2022 based) written from UTF-8: what
/// `COMPOUND_TEXT` readers (Xt, Motif and Xlib's `XmbTextPropertyToTextList`) decode.
///
/// The initial state is ASCII in GL and the right half of ISO 8859-1 in GR, so text within
/// Latin-1 is its Latin-1 bytes. Other characters, and the C1 controls (which Compound Text
/// reserves), go in UTF-8 segments: `ESC % G`, the UTF-8 bytes, `ESC % @`. A malformed UTF-8
/// sequence becomes `?`.
public enum CompoundText {
    static let utf8Start: [UInt8] = [0x1B, 0x25, 0x47]
    static let utf8End: [UInt8] = [0x1B, 0x25, 0x40]

    public static func encode(utf8 data: Data) -> Data {
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
