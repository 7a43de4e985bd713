import FoundationEssentials

/// What the whole text of an item probably is.
public enum DetectionPattern: String, Hashable, Sendable, CaseIterable, Codable {
    /// A single web address (`https://…`, `www.example.org/x`, `example.com`).
    case probableWebURL
    /// A short phrase someone would type into a search engine.
    case probableWebSearch
    /// A number, as a whole (`42`, `-3.5`, `1,234.5`, `6.02e23`).
    case number
}

/// Kinds of values found inside the text of an item.
public enum ValueDetectionPattern: String, Hashable, Sendable, CaseIterable, Codable {
    /// Web links.
    case links
    /// Email addresses.
    case emailAddresses
    /// Phone numbers.
    case phoneNumbers
    /// Numbers.
    case numbers
}

/// The values found in a text, each list in order of appearance.
public struct DetectedValues: Sendable, Equatable, Codable {
    /// Web links.
    public var links: [URL] = []
    /// Email addresses.
    public var emailAddresses: [String] = []
    /// Phone numbers as written.
    public var phoneNumbers: [String] = []
    /// Numbers.
    public var numbers: [Double] = []

    /// No values.
    public init() {}
}

/// Finds patterns and values in text. Only the kinds asked for are looked for, and at most the
/// first ``PatternDetector/scanLimit`` characters of a text are scanned for values.
public enum PatternDetector {
    /// How many characters of a text are scanned for values, at most.
    public static let scanLimit = 1 << 20
    /// How long a text may be and still count as a probable web search.
    public static let searchLengthLimit = 256

    /// The patterns among `patterns` that the whole of `text` matches.
    public static func patterns(in text: String, for patterns: Set<DetectionPattern>) -> Set<DetectionPattern> {
        guard !patterns.isEmpty else { return [] }
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else { return [] }
        var found = Set<DetectionPattern>()
        let isURL = isProbableWebURL(trimmed)
        let isNumber = number(from: trimmed) != nil
        if patterns.contains(.probableWebURL), isURL { found.insert(.probableWebURL) }
        if patterns.contains(.number), isNumber { found.insert(.number) }
        if patterns.contains(.probableWebSearch), !isURL, !isNumber,
           trimmed.count <= searchLengthLimit, !trimmed.contains(where: \.isNewline),
           trimmed.contains(where: \.isLetter) {
            found.insert(.probableWebSearch)
        }
        return found
    }

    /// The values of the kinds in `patterns` found in `text`.
    public static func values(in text: String, for patterns: Set<ValueDetectionPattern>) -> DetectedValues {
        var values = DetectedValues()
        guard !patterns.isEmpty else { return values }
        let scanned = text.count > scanLimit ? String(text.prefix(scanLimit)) : text
        if patterns.contains(.emailAddresses) {
            values.emailAddresses = matches(of: #"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"#, in: scanned)
        }
        if patterns.contains(.links) {
            let candidates = matches(of: #"(?:(?:https?|ftp)://|www\.)[^\s<>"'`]+"#, in: scanned)
            values.links = candidates.compactMap { candidate in
                let trimmed = trimTrailingPunctuation(candidate)
                return URL(string: trimmed.hasPrefix("www.") ? "https://" + trimmed : trimmed)
            }
        }
        if patterns.contains(.phoneNumbers) {
            values.phoneNumbers = matches(of: #"\+?\(?\d[\d\s().\-]{5,20}\d"#, in: scanned, notAfter: ".")
                .map { $0.trimmingSpaces() }
                .filter(isPhoneNumber)
        }
        if patterns.contains(.numbers) {
            values.numbers = matches(of: #"[-+]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?"#, in: scanned, notAfter: ".,")
                .compactMap(number(from:))
        }
        return values
    }

    /// Whether a single token is a web address.
    static func isProbableWebURL(_ text: String) -> Bool {
        guard !text.contains(where: \.isWhitespace), !text.contains("@") || text.contains("://") else { return false }
        if let url = URL(string: text), let scheme = url.scheme?.lowercased() {
            return ["http", "https"].contains(scheme) && (url.host?.isEmpty == false)
        }
        return text.wholeMatch(of: hostLike) != nil
    }

    static var hostLike: Regex<Substring> { #/(?i)(?:www\.)?[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?)*\.[a-z]{2,24}(?::\d{1,5})?(?:[/?#]\S*)?/# }

    /// A number written as a whole: optional sign, digits with optional `,` thousands groups, an
    /// optional fraction and exponent.
    static func number(from text: String) -> Double? {
        guard text.wholeMatch(of: numberShape) != nil else { return nil }
        return Double(text.replacing(",", with: ""))
    }

    static var numberShape: Regex<Substring> { #/[-+]?(?:\d+|\d{1,3}(?:,\d{3})+)(?:\.\d+)?(?:[eE][-+]?\d+)?/# }

    /// A phone number has 7 to 15 digits and is written with a leading `+` or separators.
    static func isPhoneNumber(_ candidate: String) -> Bool {
        let digits = candidate.filter(\.isASCIIDigit).count
        guard (7...15).contains(digits) else { return false }
        return candidate.hasPrefix("+") || candidate.contains(where: { " -.()".contains($0) })
    }

    /// The matches of `pattern` in `text`. With `notAfter`, a match counts only as a whole token:
    /// not glued to a letter or digit on either side, nor preceded by one of `notAfter`'s characters
    /// (Swift's regular expressions have no look-behind).
    static func matches(of pattern: String, in text: String, notAfter: String? = nil) -> [String] {
        guard let regex = try? Regex(pattern) else { return [] }
        return text.matches(of: regex).compactMap { match in
            if let notAfter {
                if match.range.lowerBound > text.startIndex {
                    let before = text[text.index(before: match.range.lowerBound)]
                    if before.isLetter || before.isNumber || before == "_" || notAfter.contains(before) { return nil }
                }
                if match.range.upperBound < text.endIndex {
                    let after = text[match.range.upperBound]
                    if after.isLetter || after.isNumber || after == "_" { return nil }
                }
            }
            return String(text[match.range])
        }
    }

    static func trimTrailingPunctuation(_ text: String) -> String {
        var result = Substring(text)
        while let last = result.last, ".,;:!?)]}'\"".contains(last) { result = result.dropLast() }
        return String(result)
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

extension Pasteboard {
    /// The text detection looks at in one item: its URL if it has one, else its plain text; nil
    /// when it has neither, in which case nothing is read.
    func detectionText(item index: Int, types: [PasteboardType]) throws -> String? {
        guard let best = registry.bestType(among: types, accepting: [.url, .utf8PlainText, .plainText]),
              let data = try backend.data(of: name, item: index, type: best) else { return nil }
        return registry.conforms(best, to: .url) ? String(decoding: data, as: UTF8.self) : ValueCoding.decodeText(data, as: best)
    }

    /// The patterns among `patterns` that the first item's text matches; reads nothing when
    /// `patterns` is empty or the first item has no text or URL.
    public func detectPatterns(for patterns: Set<DetectionPattern>) throws -> Set<DetectionPattern> {
        try detectPatterns(for: patterns, inItemSet: [0]).first ?? []
    }

    /// The patterns each item of `itemSet` (every item for nil) matches, in item order.
    public func detectPatterns(for patterns: Set<DetectionPattern>, inItemSet itemSet: [Int]?) throws -> [Set<DetectionPattern>] {
        try detect(inItemSet: itemSet, skip: patterns.isEmpty, empty: []) { PatternDetector.patterns(in: $0, for: patterns) }
    }

    /// The values of the kinds in `patterns` in the first item's text.
    public func detectValues(for patterns: Set<ValueDetectionPattern>) throws -> DetectedValues {
        try detectValues(for: patterns, inItemSet: [0]).first ?? DetectedValues()
    }

    /// The values found in each item of `itemSet` (every item for nil), in item order.
    public func detectValues(for patterns: Set<ValueDetectionPattern>, inItemSet itemSet: [Int]?) throws -> [DetectedValues] {
        try detect(inItemSet: itemSet, skip: patterns.isEmpty, empty: DetectedValues()) { PatternDetector.values(in: $0, for: patterns) }
    }

    private func detect<T>(inItemSet itemSet: [Int]?, skip: Bool, empty: T, _ detector: (String) -> T) throws -> [T] {
        let all = try itemTypes()
        // The first item of an empty pasteboard: nothing to detect.
        if itemSet == [0], all.isEmpty { return [] }
        return try indices(itemSet, count: all.count).map { index in
            guard !skip, let text = try detectionText(item: index, types: all[index]) else { return empty }
            return detector(text)
        }
    }
}
