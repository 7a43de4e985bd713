import FoundationEssentials
import PasteboardKit

/// The manifest that lets xpb-aware readers see every item without moving data: one header line,
/// then one line per representation, tab-separated: item index, type identifier, the target that
/// serves it.
///
///     xpb-manifest<TAB>1<TAB>items=2<TAB>local-only=0<TAB>expires=-
///     0<TAB>public.utf8-plain-text<TAB>XPB_ITEM_0_0
///
/// Type identifiers cannot hold tabs or newlines (they are refused as control characters).
package struct Manifest: Equatable {
    package static let target = "XPB_MANIFEST"
    package static let magic = "xpb-manifest"
    /// The header field naming the owner's fast-path listener (`FastPath`).
    package static let fastPathField = "fast-path2"

    package struct Entry: Equatable {
        package let item: Int
        package let type: PasteboardType
        package let target: String
    }

    package var itemCount: Int
    package var entries: [Entry]
    package var options: PasteboardOptions
    /// The owner's fast-path listener (``FastPath``), if it offers one.
    package var fastPath: String?

    /// The target that serves representation `index` of item `item`.
    package static func itemTarget(item: Int, index: Int) -> String { "\(itemTargetPrefix)\(item)_\(index)" }

    /// What every item target's name begins with: served, never listed in `TARGETS`.
    package static let itemTargetPrefix = "XPB_ITEM_"

    /// Whether `target` is an item target of the first item (whose own targets serve it too).
    package static func isFirstItemTarget(_ target: String) -> Bool {
        target.hasPrefix(itemTargetPrefix + "0_")
    }

    /// The manifest of some items: every representation gets its own item target.
    package init(items: [PasteboardItem], options: PasteboardOptions) {
        itemCount = items.count
        self.options = options
        entries = items.enumerated().flatMap { item, value in
            value.types.enumerated().map { Entry(item: item, type: $1, target: Self.itemTarget(item: item, index: $0)) }
        }
    }

    package init(itemCount: Int, entries: [Entry], options: PasteboardOptions) {
        self.itemCount = itemCount
        self.entries = entries
        self.options = options
    }

    /// The manifest cut down to the representations whose targets `served` holds: an item left
    /// with none is dropped (later items move up), and nil when nothing is left. A manifest must
    /// never name a target its owner does not serve: a reader trusts it and asks for that target.
    package func restricted(to served: Set<String>) -> Manifest? {
        let usable = entries.filter { served.contains($0.target) }
        guard !usable.isEmpty else { return nil }
        // Items keep their order; only the emptied ones leave it.
        let items = Set(usable.map(\.item)).sorted()
        let renumbered = Dictionary(uniqueKeysWithValues: items.enumerated().map { ($1, $0) })
        let kept = usable.map { Entry(item: renumbered[$0.item]!, type: $0.type, target: $0.target) }
        var manifest = Manifest(itemCount: items.count, entries: kept, options: options)
        manifest.fastPath = fastPath
        return manifest
    }

    /// The types of each item.
    package var itemTypes: [[PasteboardType]] {
        var result = Array(repeating: [PasteboardType](), count: itemCount)
        for entry in entries where result.indices.contains(entry.item) { result[entry.item].append(entry.type) }
        return result
    }

    package func encoded() -> Data {
        let expires = options.expirationDate.map { String($0.timeIntervalSince1970) } ?? "-"
        var header = "\(Self.magic)\t1\titems=\(itemCount)\tlocal-only=\(options.isLocalOnly ? 1 : 0)\texpires=\(expires)"
        if let fastPath { header += "\t\(Self.fastPathField)=\(fastPath)" }
        // Appended line by line: joined(separator:) is not specialized here, and its first use
        // costs a run-time conformance look-up (a scan of the binary's records, about 100 µs).
        var text = header + "\n"
        for entry in entries { text += "\(entry.item)\t\(entry.type.identifier)\t\(entry.target)\n" }
        return Data(utf8Of: text)
    }

    /// Parses a manifest; nil for anything malformed (the reader then falls back to `TARGETS`).
    /// Split on the bytes: "\r\n" is one Character, so a field ending in "\r" would otherwise
    /// swallow the line break after it; and a paste decodes one manifest, where splitting its
    /// Unicode scalars cost a tenth of a small paste's instructions.
    package init?(decoding data: Data) {
        let bytes = [UInt8](data)
        // ASCII (every manifest xpb writes) is UTF-8 without the generic validation's cost.
        guard bytes.allSatisfy({ $0 < 0x80 }) || String(validating: bytes, as: UTF8.self) != nil else { return nil }
        func text(_ field: ArraySlice<UInt8>) -> String { String(decoding: field, as: UTF8.self) }
        let lines = bytes.split(separator: 0x0A)
        guard let headerLine = lines.first else { return nil }
        let header = headerLine.split(separator: 0x09)
        guard header.count >= 3, text(header[0]) == Self.magic, text(header[1]) == "1" else { return nil }
        var fields = [String: String]()
        for field in header.dropFirst(2) {
            guard let equals = field.firstIndex(of: 0x3D), equals > field.startIndex, equals + 1 < field.endIndex else { continue }
            fields[text(field[..<equals])] = text(field[(equals + 1)...])
        }
        guard let count = fields["items"].flatMap({ Int($0) }), (0...1_000_000).contains(count) else { return nil }
        var entries = [Entry]()
        for line in lines.dropFirst() {
            let parts = line.split(separator: 0x09, omittingEmptySubsequences: false)
            // A target is an atom name: no control characters.
            guard parts.count == 3, let item = Int(text(parts[0])), (0..<count).contains(item),
                  let type = try? PasteboardType(text(parts[1])), !parts[2].isEmpty,
                  !parts[2].contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
            entries.append(Entry(item: item, type: type, target: text(parts[2])))
        }
        // "-": none (parsed as a number, it cost as much as the rest of the manifest).
        let expires = fields["expires"].flatMap { $0 == "-" ? nil : Double($0) }.flatMap { $0.isFinite ? $0 : nil }
            .map { Date(timeIntervalSince1970: $0) }
        self.init(itemCount: count, entries: entries,
                  options: PasteboardOptions(localOnly: fields["local-only"] == "1", expirationDate: expires))
        fastPath = fields[Self.fastPathField].flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// What a clipboard manager reads of a manifest it keeps.
extension Manifest {
    /// The options an xpb manifest (`XPB_MANIFEST`) carries, and the manifest without its
    /// fast-path field (which names the departed owner's socket); nil for a malformed one.
    package static func kept(_ data: Data) -> (options: PasteboardOptions, manifest: Data)? {
        guard var manifest = Manifest(decoding: data) else { return nil }
        manifest.fastPath = nil
        return (manifest.options, manifest.encoded())
    }

    /// The image targets (MIME names) of the first item's own images, as an xpb manifest names
    /// them: `xpb copy photo.jpg` has `image/jpeg`, whatever other formats its owner converts to.
    package static func ownImageTargets(_ data: Data) -> [String] {
        guard let manifest = Manifest(decoding: data) else { return [] }
        let registry = TypeRegistry.standard
        return manifest.entries.compactMap { entry in
            guard entry.item == 0, registry.imageFormat(of: entry.type) != nil else { return nil }
            return registry.preferredMIMEType(for: entry.type)
        }
    }

    /// The targets an xpb manifest names, in its order; empty for a malformed one.
    package static func targets(in data: Data) -> [String] {
        Manifest(decoding: data)?.entries.map(\.target) ?? []
    }
}
