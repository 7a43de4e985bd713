import FoundationEssentials

/// A configuration file of command-line options (ripgrep's and yt-dlp's convention): one or more
/// options per line, written as on the command line (words split at white space; '…' and "…"
/// quote, a backslash escapes the next character); `#` at the start of a word begins a comment
/// to the end of the line. Read through the program's own option table, so that `--help`, the
/// man page and the file cannot disagree.
package struct ConfigFile: Sendable {
    /// The file's path, as errors name it.
    package let path: String
    /// The words of each line that has any, with its line number (1 is the first).
    package let lines: [(number: Int, words: [String])]

    /// Reads and splits `path`; nil when it does not exist. Throws for an unreadable file or a
    /// line whose quotes do not close.
    package static func load(_ path: String) throws(UsageError) -> ConfigFile? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else { throw UsageError("\(path): cannot be read") }
        guard let text = String(data: data, encoding: .utf8) else { throw UsageError("\(path): is not UTF-8 text") }
        var lines: [(Int, [String])] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let words: [String]
            do {
                words = try split(String(line))
            } catch {
                throw UsageError("\(path):\(index + 1): \(error.message)")
            }
            if !words.isEmpty { lines.append((index + 1, words)) }
        }
        return ConfigFile(path: path, lines: lines)
    }

    /// Every line's words, in order: the arguments the file gives.
    package var arguments: [String] { lines.flatMap(\.words) }

    /// Checks each line alone against `spec` (so that an error names its line), then refuses what
    /// a file cannot say: positional words and the options in `refused` (`--help`, `--version` …).
    package func validate(_ spec: CommandSpec, refusing refused: [OptionSpec]) throws(UsageError) {
        for (number, words) in lines {
            let parsed: ParsedArguments
            do {
                parsed = try ParsedArguments(words, spec: spec)
            } catch {
                throw UsageError("\(path):\(number): \(error.message)")
            }
            if parsed.helpRequested { throw UsageError("\(path):\(number): --help has no place in a configuration file") }
            if let word = parsed.positionals.first { throw UsageError("\(path):\(number): '\(word)' is not an option") }
            for option in refused where parsed.flag(option) || parsed.value(option) != nil {
                throw UsageError("\(path):\(number): --\(option.long) has no place in a configuration file")
            }
        }
    }

    /// The words of one line, as a shell splits them (quotes and backslashes; no expansion).
    static func split(_ line: String) throws(UsageError) -> [String] {
        var words: [String] = []
        var word = ""
        var inWord = false
        var quote: Character?
        var escaped = false
        for character in line {
            if escaped {
                word.append(character)
                escaped = false
                continue
            }
            if let open = quote {
                if character == open {
                    quote = nil
                } else if character == "\\", open == "\"" {
                    escaped = true
                } else {
                    word.append(character)
                }
                continue
            }
            switch character {
            case "\\":
                escaped = true
                inWord = true
            case "'", "\"":
                quote = character
                inWord = true
            case "#" where !inWord:
                return words
            case _ where character.isWhitespace:
                if inWord { words.append(word) }
                word = ""
                inWord = false
            default:
                word.append(character)
                inWord = true
            }
        }
        if quote != nil { throw UsageError("a quote (\(quote!)) is not closed") }
        if escaped { throw UsageError("a backslash ends the line") }
        if inWord { words.append(word) }
        return words
    }
}
