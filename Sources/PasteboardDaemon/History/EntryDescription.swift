import FoundationEssentials
import PasteboardKit

/// How a history entry is shown to a person, from its targets' names and sizes (and, for an
/// entry no name explains, the first bytes of its largest target): the types a person
/// recognises, the size of the content, a preview, and the lines after the first.
struct EntryDescription: Equatable {
    /// One kept target as listed.
    struct Target {
        let name: String
        let size: Int
    }

    /// MIME names of the content, the most telling first. An entry with text is text: file
    /// lists, then the text's rich forms (HTML, RTF, JSON …), then `text/plain`, then the rest
    /// (a spreadsheet's picture of its cells). An entry without text: file lists, images and
    /// the other types the registry knows, then its rich text forms. Types the registry does not
    /// know (a toolkit's serialisation, `application/x-gtk-text-buffer-rich-text`) come last.
    /// Markers (``TypeRegistry/isPrivate(_:)``) and bare X atoms are left out.
    var types: [String]
    /// The size of the content: the text's bytes for an entry with text (43 B of Mousepad's
    /// text, not the 144 B of GTK's rich-text serialisation of it), else the first type's.
    var size: Int

    /// What kind of type a target is, for the order types are listed in.
    enum Rank {
        case files, richText, plainText, other, unknown
    }

    /// The order of the kinds: an entry with text lists its rich forms and its text before
    /// anything else it carries; one without, its images and the like before rich text.
    static let textOrder: [Rank] = [.files, .richText, .plainText, .other, .unknown]
    static let otherOrder: [Rank] = [.files, .other, .richText, .plainText, .unknown]

    /// Describes `targets`; `head` gives the first bytes of target `index`, asked only when no
    /// name is recognised (an image, or a text, under a vendor's name alone, read by its bytes).
    static func describe(_ targets: [Target], registry: TypeRegistry = .standard, head: (Int) -> Data?) -> EntryDescription {
        var found: [(type: String, size: Int, rank: Rank)] = []
        for target in targets {
            guard !TypeRegistry.isPrivate(target.name), let (type, _) = registry.type(forTarget: target.name) else { continue }
            let isPlain = registry.conforms(type, to: .plainText)
            let name = isPlain ? "text/plain" : mimeName(registry.preferredMIMEType(for: type) ?? type.identifier)
            guard !found.contains(where: { $0.type == name }) else { continue }
            let rank: Rank
            if isPlain || name == "text/plain" {
                rank = .plainText
            } else if registry.descriptor(for: type) == nil {
                rank = .unknown
            } else if registry.conforms(type, to: .url) || name == "text/uri-list" || name == "x-special/gnome-copied-files" {
                rank = .files
            } else if registry.conforms(type, to: .text) {
                rank = .richText
            } else {
                rank = .other
            }
            found.append((name, target.size, rank))
        }
        if !found.isEmpty {
            let text = found.first { $0.rank == .plainText }
            let order = text == nil ? Self.otherOrder : Self.textOrder
            // Stable: the owner's order within a kind.
            let ordered = found.enumerated().sorted {
                (order.firstIndex(of: $0.element.rank) ?? 0, $0.offset) < (order.firstIndex(of: $1.element.rank) ?? 0, $1.offset)
            }.map(\.element)
            return EntryDescription(types: ordered.map(\.type), size: text?.size ?? ordered[0].size)
        }
        // Nothing named is recognised: the largest target's bytes may be (an image under a
        // vendor's name alone).
        guard let largest = targets.indices.filter({ !targets[$0].name.hasPrefix("XPB_") }).max(by: { targets[$0].size < targets[$1].size })
        else { return EntryDescription(types: [], size: 0) }
        if let bytes = head(largest), let sniffed = ContentSniffer.sniff(bytes, totalSize: targets[largest].size) {
            let name = registry.conforms(sniffed, to: .plainText) ? "text/plain" : mimeName(registry.preferredMIMEType(for: sniffed) ?? sniffed.identifier)
            return EntryDescription(types: [name], size: targets[largest].size)
        }
        return EntryDescription(types: [], size: targets[largest].size)
    }

    /// A MIME name without its parameters (`text/plain;charset=utf-8` is `text/plain`).
    static func mimeName(_ name: String) -> String {
        String(name.prefix { $0 != ";" }).trimmingSpaces()
    }

    /// The lines of a text after its first non-empty one: how many (from the count of line
    /// feeds in the whole text, whose first characters are `head`), and those of `head` that
    /// are not empty, joined by " ⏎ " (at most `limit` characters).
    static func moreLines(head: String, lineFeeds: Int, endsWithLineFeed: Bool, limit: Int = 1000) -> (count: Int, rest: String) {
        // Line by line, as far as the rest needs (a listing of 1,000 entries does this 1,000
        // times): the characters counted as they are added, never the whole string again.
        var lines = Lines(remaining: head[...])
        var first = 0
        var found = false
        while let line = lines.next() {
            if !line.trimmingWhitespace().isEmpty {
                found = true
                break
            }
            first += 1
        }
        guard found else { return (0, "") }
        let total = lineFeeds + (endsWithLineFeed ? 0 : 1)
        let count = max(0, total - first - 1)
        var rest = ""
        var characters = 0
        while let line = lines.next() {
            let trimmed = line.trimmingWhitespace()
            guard !trimmed.isEmpty else { continue }
            let separator = rest.isEmpty ? "" : " ⏎ "
            let length = trimmed.count + separator.count
            if characters + length >= limit {
                rest += String((separator + trimmed).prefix(limit - 1 - characters)) + "…"
                break
            }
            rest += separator + trimmed
            characters += length
        }
        return (count, rest)
    }
}

/// The lines of a text one at a time, as `split(separator: "\n", omittingEmptySubsequences:
/// false)` gives them (a CRLF ends a line too, as the count of line feeds has it), found as they
/// are asked for.
private struct Lines: IteratorProtocol {
    var remaining: Substring
    var isDone = false

    mutating func next() -> Substring? {
        guard !isDone else { return nil }
        // By its bytes: a line feed is one, and no grapheme need be found on the way.
        guard let end = remaining.utf8.firstIndex(of: UInt8(ascii: "\n")) else {
            isDone = true
            return remaining
        }
        let line = remaining[..<end]
        remaining = remaining[remaining.index(after: end)...]
        return line
    }
}
