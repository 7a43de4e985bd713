import FoundationEssentials
import PasteboardKit

/// What a clipboard manager serves of contents it took from another owner, by target name,
/// before any atom exists: the targets it kept, as they came (the manifest cut down to them, a
/// file list in both file managers' flavours), and the targets the owner offered that it did not
/// keep, made from the ones it did (other image formats from the kept image, other text encodings
/// from the kept UTF-8 text). One plan for the X owner of kept contents
/// (``SelectionServer/makeCapturedSelection(advertised:targets:timestamp:credit:)``) and for a display-less
/// holder of them (``KeptSelection``), so both offer the same targets.
package struct CapturedPlan {
    /// How a target's bytes are made.
    package enum Source: Sendable {
        /// Kept bytes, served as they came.
        case kept(Data)
        /// Made from kept bytes on the first request.
        case conversion(Data, TargetCodec)
    }

    /// One target served: its name, its reply's type and its source.
    package struct Entry: Sendable {
        package let name: String
        package let replyType: String
        package let source: Source
    }

    /// The owner's targets, then those kept that it did not list, in order: `TARGETS`' order.
    package let advertised: [String]
    /// Every target served, each name once (the first made of it).
    package let entries: [Entry]
    /// The reply types the entries may name (for interning atoms up front).
    package let names: [String]

    package init(advertised: [String], targets: [CapturedTarget]) {
        // A file list in one file manager's flavour is served in the other's too: a cut stays a cut.
        let targets = FileListFlavours.completed(Self.withServableManifest(targets))
        var advertised = advertised + targets.map(\.target).filter { !advertised.contains($0) }
        var entries: [Entry] = []
        var seen: Set<String> = []
        func add(_ entry: Entry) {
            if seen.insert(entry.name).inserted { entries.append(entry) }
        }
        for target in targets {
            add(Entry(name: target.target, replyType: target.type, source: .kept(target.data)))
        }
        // A kept image is offered in every format an xpb owner offers, as well as those its owner
        // listed: each made from the kept image on the first request.
        if let source = Self.keptImageSource(targets) {
            advertised = Self.listing(ImageFormat.offeredTargets.map(\.name), after: { ImageFormat(mimeType: $0) != nil }, in: advertised)
            for name in advertised {
                guard let format = ImageFormat(mimeType: name), format.isWritable else { continue }
                add(Entry(name: name, replyType: name, source: .conversion(source.data, .image(format))))
            }
        }
        // Text targets the owner offered and were not kept: made from the UTF-8 text that was.
        if let source = Self.keptTextSource(targets) {
            for name in advertised {
                guard let derived = KeptTargets.derivedTextTargets[KeptTargets.normalTextTarget(name)] else { continue }
                let replyType = derived.replyType ?? name
                add(Entry(name: name, replyType: replyType,
                          source: derived.conversion.map { .conversion(source.data, $0) } ?? .kept(source.data)))
            }
        } else if let html = Self.keptHTMLWithText(targets) {
            // Kept HTML and no text: its text, as an xpb owner of HTML serves it.
            advertised = Self.listing(Self.textTargetsOfHTML.map(\.name), after: { $0 == html.target }, in: advertised)
            for (name, replyType, conversion) in Self.textTargetsOfHTML {
                add(Entry(name: name, replyType: replyType, source: .conversion(html.data, conversion)))
            }
        }
        self.advertised = advertised
        self.entries = entries
        names = advertised + entries.flatMap { [$0.name, $0.replyType] }
    }

    /// The text targets served from kept HTML: its text in UTF-8 under each plain-text name, and
    /// in Latin-1 as `STRING`.
    package static let textTargetsOfHTML: [(name: String, replyType: String, conversion: TargetCodec)] = [
        ("UTF8_STRING", "UTF8_STRING", .textFromHTML), ("text/plain;charset=utf-8", "text/plain;charset=utf-8", .textFromHTML),
        ("TEXT", "UTF8_STRING", .textFromHTML), ("STRING", "STRING", .latin1FromHTML), ("text/plain", "text/plain", .textFromHTML),
    ]

    /// `advertised` with those of `names` it lacks listed after its last name matching `anchor`
    /// (at its end when none does).
    package static func listing(_ names: [String], after anchor: (String) -> Bool, in advertised: [String]) -> [String] {
        let missing = names.filter { !advertised.contains($0) }
        guard !missing.isEmpty else { return advertised }
        var listed = advertised
        let index = listed.lastIndex(where: anchor).map { $0 + 1 } ?? listed.endIndex
        listed.insert(contentsOf: missing, at: index)
        return listed
    }

    /// The kept HTML (`text/html`) text targets are made from when no text was kept: nil when
    /// there is none, or when it is markup without text (a browser's `<img>` beside a copied
    /// image), checked only for HTML small enough to look at now (larger HTML is taken to have text;
    /// a reader asking for it then gets a refusal, as an xpb owner's reader does).
    package static func keptHTMLWithText(_ targets: [CapturedTarget]) -> CapturedTarget? {
        guard let html = targets.first(where: { TypeRegistry.normalizedMIME($0.target).hasPrefix("text/html") }) else { return nil }
        if html.data.count <= 64 << 10, HTMLText.plainText(html.data).isEmpty { return nil }
        return html
    }

    /// The kept image other image formats are made from: the first captured target in the best
    /// format (``KeptTargets/keptImageTarget(_:)``) whose bytes are that image.
    package static func keptImageSource(_ targets: [CapturedTarget]) -> CapturedTarget? {
        let images = targets.filter { ImageFormat(mimeType: $0.target) != nil && ImageConversion.format(of: $0.data) != nil }
        guard let best = KeptTargets.keptImageTarget(images.map(\.target)) else { return nil }
        return images.first { $0.target == best }
    }

    /// The kept text other text targets are made from: the captured target
    /// ``KeptTargets/keptTextTarget(_:)`` names, if its bytes are UTF-8.
    package static func keptTextSource(_ targets: [CapturedTarget]) -> CapturedTarget? {
        guard let best = KeptTargets.keptTextTarget(targets.map(\.target)),
              let source = targets.first(where: { $0.target == best }),
              String(validating: source.data, as: UTF8.self) != nil else { return nil }
        return source
    }

    /// `targets` with their manifest cut down to the targets among them, or without it.
    package static func withServableManifest(_ targets: [CapturedTarget]) -> [CapturedTarget] {
        guard let index = targets.firstIndex(where: { $0.target == Manifest.target }) else { return targets }
        let captured = targets[index]
        // The first of a target is the one served.
        var rest = targets.filter { $0.target != Manifest.target }
        guard let manifest = Manifest(decoding: captured.data)?.restricted(to: Set(rest.map(\.target))) else { return rest }
        rest.insert(CapturedTarget(target: Manifest.target, type: captured.type, data: manifest.encoded()), at: index)
        return rest
    }
}

/// What a display-less holder serves by target name: the items of a copy made on its host
/// (``HeldSelection``), or contents kept in a history (``KeptSelection``).
package protocol HeldTargets: Sendable {
    /// The data targets, in the order an X owner advertises them.
    var targets: [String] { get }
    /// xpb's manifest (without a fast path), if the contents have one.
    var manifest: Data? { get }
    /// The size of a target's bytes when it is known without converting.
    func size(of target: String) -> Int?
    /// A target's reply type and bytes, converted as an X owner converts them; nil when the
    /// target is not served (or its conversion fails).
    func bytes(for target: String) throws -> (type: String, data: Data)?
}

/// Held contents served in turns (a paste queue): each receive of a reader takes its turn
/// first and is served what the turn names (``PasteTurns``).
package protocol TurnTakingTargets: HeldTargets {
    /// `reader` (its process, nil when it is not known) begins to receive `target`: what to serve
    /// it, and a number for ``received(_:delivered:)``.
    func receive(_ target: String, by reader: Int?) -> (contents: any HeldTargets, receipt: Int)
    /// That receive ended; `delivered`: the reader has every byte, and the end.
    func received(_ receipt: Int, delivered: Bool)
}

/// Contents a clipboard manager kept (a history entry), held without a display and served by
/// target name as xpbd serves them on X when their owner is gone (``CapturedPlan``).
package struct KeptSelection: HeldTargets {
    package let targets: [String]
    private let served: [String: CapturedPlan.Entry]

    package init(advertised: [String], targets kept: [CapturedTarget]) {
        let plan = CapturedPlan(advertised: advertised, targets: kept)
        let served = Dictionary(plan.entries.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.served = served
        // Only what is served: never `TARGETS` and the like, which a history does not keep.
        targets = plan.advertised.filter { served[$0] != nil }
    }

    package var manifest: Data? {
        guard case let .kept(data)? = served[Manifest.target]?.source else { return nil }
        return data
    }

    package func size(of target: String) -> Int? {
        guard case let .kept(data)? = served[target]?.source else { return nil }
        return data.count
    }

    package func bytes(for target: String) throws -> (type: String, data: Data)? {
        guard let entry = served[target] else { return nil }
        switch entry.source {
        case let .kept(data): return (entry.replyType, data)
        case let .conversion(source, conversion): return (try? conversion.encode(source)).map { (entry.replyType, $0) }
        }
    }
}
