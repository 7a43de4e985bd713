import FoundationEssentials
import PasteboardKit

/// The reader's rules for an offer of targets, whatever carries the bytes: an X owner's
/// conversions, or a display-less daemon's (``OfferReader``).
package enum OfferReading {
    /// The targets to try for a type, best first: the advertised aliases in the registry's order
    /// (UTF-8 before Latin-1), then any other advertised target the registry maps to the type.
    /// Only advertised targets: xclip answers any target it is asked for with its data during
    /// INCR, so an unadvertised UTF8_STRING would bring Latin-1 bytes.
    ///
    /// A type has a few targets: each is looked for in the offer by a scan, and only the offered
    /// names that are none of them are looked up in the registry (a name among them maps to
    /// itself or to an earlier row's type). Hashing the offer into a set and looking every name
    /// up was most of a small paste's choice.
    package static func candidateAliases(for type: PasteboardType, offered: [String], registry: TypeRegistry) -> [TargetAlias] {
        let candidates = registry.targets(for: type).filter { offered.contains($0.name) }
        var others: [TargetAlias] = []
        for name in offered where !candidates.contains(where: { $0.name == name }) {
            if let found = registry.type(forTarget: name), found.type == type, !candidates.contains(found.alias) { others.append(found.alias) }
        }
        return candidates + others
    }

    /// The types of each item of an offer: the manifest's, else one item of the types behind
    /// the targets (protocol targets left out).
    package static func itemTypes(targets: [String], manifest: Manifest?, registry: TypeRegistry) -> [[PasteboardType]] {
        if let manifest { return manifest.itemTypes }
        var seen = Set<PasteboardType>()
        let types = targets.filter { !SelectionNames.protocolTargetNames.contains($0) }
            .compactMap { registry.type(forTarget: $0)?.type }
            .filter { seen.insert($0).inserted }
        return types.isEmpty ? [] : [types]
    }

    /// How to decode a reply: by the requested alias, except for targets whose encoding the
    /// owner chooses (`TEXT`, whose reply type differs from its name): those by the reply's type
    /// (`TEXT` answered as `STRING` is Latin-1). Reply types of other targets are not trusted:
    /// xsel answers UTF8_STRING with UTF-8 bytes typed STRING.
    package static func codec(for type: PasteboardType, requested: TargetAlias, replyType: String, registry: TypeRegistry) -> TargetCodec {
        if requested.replyType != requested.name, replyType != requested.name,
           let reply = registry.type(forTarget: replyType), reply.type == type {
            return reply.alias.codec
        }
        return requested.codec
    }
}

/// Reads an offer of targets whose bytes come from elsewhere than an X owner (a headless
/// daemon's pasteboard): the same item types and the same choice of target as an X read
/// (the manifest's item target first, then the best advertised alias; Latin-1 and other
/// encodings decoded whole).
package struct OfferReader: Sendable {
    package let targets: [String]
    private let manifest: Manifest?
    private let registry: TypeRegistry

    /// The target whose bytes are the manifest, when the offer lists it.
    package static let manifestTarget = Manifest.target

    /// An offer of `targets`, with the manifest's bytes when it lists one (read by the caller).
    package init(targets: [String], manifest: Data?, registry: TypeRegistry = .standard) {
        self.targets = targets
        self.manifest = manifest.flatMap { Manifest(decoding: $0) }
        self.registry = registry
    }

    /// The types of each item: the manifest's, else one item of the types behind the targets.
    package var itemTypes: [[PasteboardType]] {
        OfferReading.itemTypes(targets: targets, manifest: manifest, registry: registry)
    }

    /// The target a read of `type` in the first item asks for first when the offer has no
    /// manifest entry for it (the best advertised alias): what a reader may ask for early.
    package static func firstTarget(for type: PasteboardType, offered: [String], registry: TypeRegistry = .standard) -> String? {
        OfferReading.candidateAliases(for: type, offered: offered, registry: registry).first?.name
    }

    /// Streams one representation. `convert` streams a target's bytes to its closure and returns
    /// the reply's type, nil when the target is refused (before any byte).
    /// - Returns: false when no target serves the type.
    package func read(item: Int, type: PasteboardType,
                      convert: (String, @escaping (Data) throws -> Void) throws -> String?, bytes: (Data) throws -> Void) throws -> Bool {
        try withoutActuallyEscaping(bytes) { bytes in try read(item: item, type: type, convert: convert, escapingBytes: bytes) }
    }

    private func read(item: Int, type: PasteboardType, convert: (String, @escaping (Data) throws -> Void) throws -> String?,
                      escapingBytes bytes: @escaping (Data) throws -> Void) throws -> Bool {
        if let entry = manifest?.entries.first(where: { $0.item == item && $0.type == type }) {
            if try convert(entry.target, bytes) != nil { return true }
        }
        guard item == 0 else { return false }
        for alias in OfferReading.candidateAliases(for: type, offered: targets, registry: registry) {
            if alias.codec == .identity, alias.replyType == alias.name {
                if try convert(alias.name, bytes) != nil { return true }
                continue
            }
            // Decoded as a whole, then passed on.
            let whole = Collected()
            guard let replyType = try convert(alias.name, { whole.data.append($0) }) else { continue }
            try bytes(OfferReading.codec(for: type, requested: alias, replyType: replyType, registry: registry).decode(whole.data))
            return true
        }
        return false
    }
}

/// Bytes collected by an escaping closure on the caller's thread.
private final class Collected {
    package var data = Data()
}
