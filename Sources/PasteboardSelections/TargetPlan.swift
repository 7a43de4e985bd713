import FoundationEssentials
import PasteboardKit

/// What an owner of some items serves, by target name, before any atom exists: the first item's
/// types as ordinary targets through the registry (each type's own targets, the image formats
/// made from its image, the plain-text targets of text types), and one item target per
/// representation of every item, listed by the manifest. One plan for the X owner
/// (``SelectionServer/makeOwnedSelection(items:options:timestamp:registry:)``) and for a display-less
/// holder of the same items (``HeldSelection``), so both offer the same targets.
package struct TargetPlan {
    /// How a target's bytes are made from the items.
    package enum Source: Sendable {
        /// One representation of one item, converted by the alias's codec.
        case representation(item: Int, type: PasteboardType, codec: TargetCodec)
        /// Every URL item at once, as a list (`text/uri-list`, `x-special/gnome-copied-files`).
        case urlList(TargetCodec)
    }

    /// One target served: its name, its reply's type and its source.
    package struct Entry: Sendable {
        package let name: String
        package let replyType: String
        package let source: Source
    }

    /// The first item's targets, each once, in the order they are advertised.
    package let firstItem: [Entry]
    /// The manifest's item targets, one per representation of every item (served, not advertised).
    package let itemTargets: [Entry]
    package let manifest: Manifest

    package init(items: [PasteboardItem], options: PasteboardOptions, registry: TypeRegistry) {
        manifest = Manifest(items: items, options: options)
        var firstItemTargets: [(alias: TargetAlias, type: PasteboardType)] = []
        if let first = items.first {
            // Each type's own targets first, then the plain-text targets of text types (JSON, HTML
            // …): a plain-text representation of the item, if any, keeps those. An image xpb
            // reads brings the image targets toolkits offer, PNG first, where its first image
            // type is: those the item has, and the others converted on request.
            var images = registry.imageTargets(for: first.types)
            if let source = images.first(where: { $0.alias.codec != .identity })?.type,
               let representation = first.representation(for: source), !Self.isConvertibleImage(representation) {
                // Conversions of bytes that are no image, or too large one, are not offered.
                images = images.filter { $0.alias.codec == .identity }
            }
            for type in first.types {
                if !images.isEmpty, registry.imageFormat(of: type) != nil {
                    firstItemTargets += images
                    images = []
                }
                for alias in registry.targets(for: type) where !SelectionNames.isReservedTarget(alias.name) {
                    firstItemTargets.append((alias, type))
                }
            }
            for type in first.types {
                let own = Set(registry.targets(for: type).map(\.name))
                for alias in registry.servedTargets(for: type) where !own.contains(alias.name) && !SelectionNames.isReservedTarget(alias.name) {
                    firstItemTargets.append((alias, type))
                }
            }
        }
        // A name listed twice is served as first listed.
        var seen = Set<String>()
        firstItem = firstItemTargets.compactMap { alias, type in
            guard seen.insert(alias.name).inserted else { return nil }
            return Entry(name: alias.name, replyType: alias.replyType,
                         source: alias.codec.isURLList ? .urlList(alias.codec) : .representation(item: 0, type: type, codec: alias.codec))
        }
        itemTargets = manifest.entries.map { entry in
            Entry(name: entry.target, replyType: registry.targets(for: entry.type).first?.replyType ?? entry.target,
                  source: .representation(item: entry.item, type: entry.type, codec: .identity))
        }
    }

    /// The URL representation of each item a list target serves: every URL item, or for GNOME's
    /// copied-files list every file URL item.
    package static func urlRepresentations(_ items: [PasteboardItem], _ codec: TargetCodec, registry: TypeRegistry) -> [Representation] {
        let wanted: PasteboardType = codec == .gnomeCopiedFiles ? .fileURL : .url
        return items.compactMap { item in
            item.types.first { registry.conforms($0, to: wanted) }.flatMap { item.representation(for: $0) }
        }
    }

    /// Whether the items are files to move (the first item carries KDE's cut mark, `1`).
    package static func isCut(_ items: [PasteboardItem]) throws -> Bool {
        guard let first = items.first, first.types.contains(.cutSelection) else { return false }
        return try first.data(for: .cutSelection)?.first == UInt8(ascii: "1")
    }

    /// A list target's bytes: every URL the items hold, in the codec's list (nil when none).
    package static func urlList(_ items: [PasteboardItem], _ codec: TargetCodec, registry: TypeRegistry) throws -> Data? {
        let urls = try urlRepresentations(items, codec, registry: registry).flatMap { TargetCodec.uriListEntries(try $0.resolve()) }
        guard !urls.isEmpty else { return nil }
        return codec.encodeList(urls, cut: try isCut(items))
    }

    /// Whether an image's header says it converts: an image xpb reads, within the pixel limit.
    /// Read from the bytes at hand or the start of a file (a JPEG's size may follow 64 KiB of
    /// Exif); a lazy provider's image is taken on trust until a reader asks.
    package static func isConvertibleImage(_ representation: Representation) -> Bool {
        let head: Data?
        switch representation {
        case let .data(data): head = data
        case let .file(file): head = try? file.read(offset: 0, length: min(file.size, 256 << 10))
        case .lazy: return true
        }
        guard let head, let size = try? ImageConversion.size(of: head) else { return false }
        return size.width > 0 && size.height > 0 && size.width * size.height <= ImageConversion.maxPixels
    }
}

/// Items held without a display (a headless daemon's copy), served by target name as an X owner
/// of them would serve them: the same targets (``TargetPlan``), the same conversions, the
/// manifest without a fast path.
package struct HeldSelection: HeldTargets {
    package let items: [PasteboardItem]
    package let options: PasteboardOptions
    /// The data targets, in the order an X owner advertises them, then `XPB_MANIFEST`.
    package let targets: [String]
    /// The item targets of the items after the first (what a Wayland source must offer for a
    /// reader to ask them).
    package let laterItemTargets: [String]
    /// Every target served but the manifest, by name.
    private let served: [String: TargetPlan.Entry]
    private let encodedManifest: Data
    private let registry: TypeRegistry

    package init(items: [PasteboardItem], options: PasteboardOptions, registry: TypeRegistry = .standard) {
        self.items = items
        self.options = options
        self.registry = registry
        let plan = TargetPlan(items: items, options: options, registry: registry)
        targets = plan.firstItem.map(\.name) + [Manifest.target]
        laterItemTargets = plan.manifest.entries.filter { $0.item > 0 }.map(\.target)
        served = Dictionary((plan.firstItem + plan.itemTargets).map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        encodedManifest = plan.manifest.encoded()
    }

    /// The manifest of the items (it has no fast path: there is no X owner to reach).
    package var manifest: Data? { encodedManifest }

    /// The size of a target's bytes when it is known without converting (its representation's own).
    package func size(of target: String) -> Int? {
        if target == Manifest.target { return encodedManifest.count }
        guard case let .representation(item, type, codec)? = served[target]?.source, codec == .identity else { return nil }
        switch items[item].representation(for: type) {
        case let .data(data)?: return data.count
        case let .file(file)?: return file.size
        default: return nil
        }
    }

    /// The file whose bytes a target serves as they are (a copied file's own type), nil for
    /// any other target: a writer streams it without reading it into memory.
    package func file(for target: String) -> FileContents? {
        guard case let .representation(item, type, codec)? = served[target]?.source, codec == .identity,
              case let .file(file)? = items[item].representation(for: type) else { return nil }
        return file
    }

    /// A target's reply type and bytes, converted as an X owner converts them; nil when the target
    /// is not served (or its conversion fails).
    package func bytes(for target: String) throws -> (type: String, data: Data)? {
        if target == Manifest.target { return (target, encodedManifest) }
        guard let entry = served[target] else { return nil }
        switch entry.source {
        case let .representation(item, type, codec):
            guard let data = try items[item].data(for: type) else { return nil }
            guard codec != .identity else { return (entry.replyType, data) }
            return (try? codec.encode(data)).map { (entry.replyType, $0) }
        case let .urlList(codec):
            return try TargetPlan.urlList(items, codec, registry: registry).map { (entry.replyType, $0) }
        }
    }
}
