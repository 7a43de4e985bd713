import FoundationEssentials
import ImageCodecs
import PasteboardKit

/// What an owner of some items serves, by target name, before any atom exists: the first item's
/// types as ordinary targets through the registry (each type's own targets, the image formats
/// made from its image, the plain-text targets of text types), and one item target per
/// representation of every item, listed by the manifest. One plan for the X owner
/// (``X11Session/makeOwnedSelection(items:options:timestamp:registry:)``) and for a display-less
/// holder of the same items (``HeldSelection``), so both offer the same targets.
struct TargetPlan {
    /// The first item's targets in the order they are advertised (a name may come twice: the
    /// first wins), with the type each serves.
    let firstItemTargets: [(alias: TargetAlias, type: PasteboardType)]
    let manifest: Manifest

    init(items: [PasteboardItem], options: PasteboardOptions, registry: TypeRegistry) {
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
                for alias in registry.targets(for: type) where !X11PasteboardBackend.isReservedTarget(alias.name) {
                    firstItemTargets.append((alias, type))
                }
            }
            for type in first.types {
                let own = Set(registry.targets(for: type).map(\.name))
                for alias in registry.servedTargets(for: type) where !own.contains(alias.name) && !X11PasteboardBackend.isReservedTarget(alias.name) {
                    firstItemTargets.append((alias, type))
                }
            }
        }
        self.firstItemTargets = firstItemTargets
    }

    /// Whether an image's header says it converts: an image xpb reads, within the pixel limit.
    /// Read from the bytes at hand or the start of a file (a JPEG's size may follow 64 KiB of
    /// Exif); a lazy provider's image is taken on trust until a reader asks.
    static func isConvertibleImage(_ representation: Representation) -> Bool {
        let head: Data?
        switch representation {
        case let .data(data): head = data
        case let .file(file): head = try? file.read(offset: 0, length: min(file.size, 256 << 10))
        case .lazy: return true
        }
        guard let head, let size = try? ImageCodec.size(of: head) else { return false }
        return size.width > 0 && size.height > 0 && size.width * size.height <= ImageCodec.defaultMaxPixels
    }
}

/// Items held without a display (a headless daemon's copy), served by target name as an X owner
/// of them would serve them: the same targets (``TargetPlan``), the same conversions, the
/// manifest without a fast path.
package struct HeldSelection: Sendable {
    package let items: [PasteboardItem]
    package let options: PasteboardOptions
    /// The data targets, in the order an X owner advertises them, then `XPB_MANIFEST`.
    package let targets: [String]
    private let served: [String: (source: Source, replyType: String)]
    private let manifest: Data
    private let registry: TypeRegistry

    private enum Source: Sendable {
        case representation(item: Int, type: PasteboardType, codec: TargetCodec)
        case urlList(TargetCodec)
        case manifest
    }

    package init(items: [PasteboardItem], options: PasteboardOptions, registry: TypeRegistry = .standard) {
        self.items = items
        self.options = options
        self.registry = registry
        let plan = TargetPlan(items: items, options: options, registry: registry)
        var served: [String: (source: Source, replyType: String)] = [Manifest.target: (.manifest, Manifest.target)]
        var targets: [String] = []
        for (alias, type) in plan.firstItemTargets where served[alias.name] == nil {
            served[alias.name] = (alias.codec.isURLList ? .urlList(alias.codec) : .representation(item: 0, type: type, codec: alias.codec),
                                  alias.replyType)
            targets.append(alias.name)
        }
        targets.append(Manifest.target)
        for entry in plan.manifest.entries {
            let reply = registry.targets(for: entry.type).first?.replyType ?? entry.target
            served[entry.target] = (.representation(item: entry.item, type: entry.type, codec: .identity), reply)
        }
        self.targets = targets
        self.served = served
        manifest = plan.manifest.encoded()
    }

    /// The size of a target's bytes when it is known without converting (its representation's own).
    package func size(of target: String) -> Int? {
        guard case let .representation(item, type, codec)? = served[target]?.source, codec == .identity else {
            return target == Manifest.target ? manifest.count : nil
        }
        switch items[item].representation(for: type) {
        case let .data(data)?: return data.count
        case let .file(file)?: return file.size
        default: return nil
        }
    }

    /// A target's reply type and bytes, converted as an X owner converts them; nil when the target
    /// is not served (or its conversion fails).
    package func bytes(for target: String) throws -> (type: String, data: Data)? {
        guard let (source, replyType) = served[target] else { return nil }
        switch source {
        case .manifest:
            return (replyType, manifest)
        case let .representation(item, type, codec):
            guard let data = try items[item].data(for: type) else { return nil }
            guard codec != .identity else { return (replyType, data) }
            return (try? codec.encode(data)).map { (replyType, $0) }
        case let .urlList(codec):
            let wanted: PasteboardType = codec == .gnomeCopiedFiles ? .fileURL : .url
            let urls = try items.compactMap { item in
                try item.types.first { registry.conforms($0, to: wanted) }.flatMap { try item.data(for: $0) }
            }.flatMap(TargetCodec.uriListEntries)
            guard !urls.isEmpty else { return nil }
            var isCut = false
            if let first = items.first, first.types.contains(.cutSelection) {
                isCut = try first.data(for: .cutSelection)?.first == UInt8(ascii: "1")
            }
            return (replyType, codec.encodeList(urls, cut: isCut))
        }
    }
}
