import FoundationEssentials

/// Rules on what a copy holds, looked at once its bytes are read: text that matches
/// `--ignore-match` is neither kept (in the history, or served when its owner exits) nor synced
/// (an announce already made is withdrawn); copies smaller than `--min-size` or larger than
/// `--max-copy-size` are not kept.
package struct ContentRules: Sendable {
    /// `--ignore-match`: regular expressions (Swift's `Regex`, no ICU) matched against a copy's text.
    package private(set) var ignoredPatterns: [String] = []
    /// `--min-size`: copies of fewer bytes (a text's UTF-8 bytes, else every target's) are not kept.
    package var minimumSize = 0
    /// `--max-copy-size`: copies of more bytes (counted the same way) are not kept.
    package var maximumSize = Int.max

    package init() {}

    /// Adds a pattern; throws a message for one that does not compile.
    package mutating func ignore(matching pattern: String) throws(ContentRuleError) {
        do {
            _ = try Regex(pattern)
        } catch {
            throw ContentRuleError("'\(pattern)' is not a regular expression: \(error)")
        }
        ignoredPatterns.append(pattern)
    }

    /// Why `snapshot` is not to be kept, or nil; `synced`: whether it may still be synced (a
    /// text `--ignore-match` matches may not; a small copy may).
    func refusal(_ snapshot: Snapshot) -> (reason: String, synced: Bool)? {
        let text = snapshot.text(limit: 1 << 20)
        let size = text.map { $0.utf8.count } ?? snapshot.size
        if let text {
            // (Compiled here, each copy: a Regex is not Sendable, and a copy is rare enough.)
            for pattern in ignoredPatterns {
                guard let expression = try? Regex(pattern), (try? expression.firstMatch(in: text)) != nil else { continue }
                return ("its text matches --ignore-match '\(pattern)'", false)
            }
        }
        if size < minimumSize { return ("\(size) bytes, under --min-size \(minimumSize)", true) }
        if size > maximumSize { return ("\(size) bytes, over --max-copy-size \(maximumSize)", true) }
        return nil
    }
}

/// A `--ignore-match` pattern that does not compile.
package struct ContentRuleError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
