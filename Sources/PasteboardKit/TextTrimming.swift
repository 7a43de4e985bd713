/// Trimming without Foundation's `CharacterSet` (which would link all of Foundation and ICU's
/// data into the binaries). Whitespace is Unicode's White_Space, as `Character.isWhitespace`
/// has it.
extension StringProtocol {
    /// The text without the leading and trailing characters for which `isTrimmed` is true.
    package func trimming(while isTrimmed: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !isTrimmed($0) }), let last = lastIndex(where: { !isTrimmed($0) }) else { return "" }
        return String(self[first...last])
    }

    /// The text without leading and trailing white space and line breaks.
    package func trimmingWhitespace() -> String { trimming(while: \.isWhitespace) }

    /// The text without leading and trailing spaces and tabs (line breaks are kept).
    package func trimmingSpaces() -> String { trimming { $0.isWhitespace && !$0.isNewline } }
}
