import FoundationEssentials

/// Text safe for a terminal: control characters (C0 but tab and, with `keepNewlines`, newline;
/// DEL; C1) become `\x1B`-style escapes. Whatever another client named (window names,
/// targets, executables) goes through it before it reaches a terminal, a log or an environment.
package func printable(_ text: String, keepNewlines: Bool = false) -> String {
    // Most text has nothing to escape: checked on its UTF-8 bytes, it is returned as it is. A C1
    // control is the two bytes C2 80 … C2 9F in UTF-8.
    var clean = true
    var afterC2 = false
    for byte in text.utf8 {
        if byte < 0x20 ? !(byte == 0x09 || (keepNewlines && byte == 0x0A)) : byte == 0x7F || (afterC2 && byte <= 0x9F) {
            clean = false
            break
        }
        afterC2 = byte == 0xC2
    }
    if clean { return text }
    var result = ""
    result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
    for scalar in text.unicodeScalars {
        let value = scalar.value
        if value == 0x09 || (keepNewlines && value == 0x0A) {
            result.unicodeScalars.append(scalar)
        } else if value < 0x20 || value == 0x7F || (0x80...0x9F).contains(value) {
            result += "\\x" + String(value, radix: 16, uppercase: true).leftPadded(to: 2)
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
