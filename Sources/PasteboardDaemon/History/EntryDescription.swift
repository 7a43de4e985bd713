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

    /// MIME names, the most telling first: every type but plain text in the owner's order, then
    /// `text/plain`. Markers (``TypeRegistry/isPrivate(_:)``) and bare X atoms are left out.
    var types: [String]
    /// The bytes of the first type's target.
    var size: Int

    /// Describes `targets`; `head` gives the first bytes of target `index`, asked only when no
    /// name is recognised (an image under a vendor's name alone, read by its magic number).
    static func describe(_ targets: [Target], registry: TypeRegistry = .standard, head: (Int) -> Data?) -> EntryDescription {
        var rich: [(type: String, size: Int)] = []
        var plain: Int?
        for target in targets {
            guard !TypeRegistry.isPrivate(target.name), let (type, _) = registry.type(forTarget: target.name) else { continue }
            if registry.conforms(type, to: .plainText) {
                if plain == nil { plain = target.size }
                continue
            }
            let name = mimeName(registry.preferredMIMEType(for: type) ?? type.identifier)
            if name == "text/plain" {
                if plain == nil { plain = target.size }
            } else if !rich.contains(where: { $0.type == name }) {
                rich.append((name, target.size))
            }
        }
        var types = rich
        if let plain { types.append(("text/plain", plain)) }
        if let first = types.first { return EntryDescription(types: types.map(\.type), size: first.size) }
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
        let lines = head.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.firstIndex(where: { !$0.trimmingWhitespace().isEmpty }) else { return (0, "") }
        let total = lineFeeds + (endsWithLineFeed ? 0 : 1)
        let count = max(0, total - first - 1)
        var rest = ""
        for line in lines.dropFirst(first + 1) {
            let trimmed = line.trimmingWhitespace()
            guard !trimmed.isEmpty else { continue }
            rest += (rest.isEmpty ? "" : " ⏎ ") + trimmed
            if rest.count >= limit {
                rest = String(rest.prefix(limit - 1)) + "…"
                break
            }
        }
        return (count, rest)
    }
}
