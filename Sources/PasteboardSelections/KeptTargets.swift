import FoundationEssentials
import PasteboardKit

/// What a clipboard manager keeps of an owner's offer, and what it makes from that on request.
///
/// The text: toolkits offer one text under five
/// or six targets (GTK: `UTF8_STRING`, `COMPOUND_TEXT`, `TEXT`, `STRING`, two `text/plain`), each
/// converted on request; a manager that fetched them all moved the text six times, and GTK takes
/// seconds to make `COMPOUND_TEXT` of a large text. One UTF-8 target is fetched; the others the
/// owner offered are made from it when a reader asks. The image: the best one offered
/// (``ImageFormat/sourceRank``); the other formats are made from it.
public enum KeptTargets {
    /// The UTF-8 targets a kept text is fetched from, best first.
    package static let keptTextSources = ["UTF8_STRING", "text/plain;charset=utf-8"]

    /// The text targets made from the kept UTF-8 text, with how: the same bytes under this reply
    /// type (nil: the target itself), or converted.
    package static let derivedTextTargets: [String: (replyType: String?, conversion: TargetCodec?)] = [
        "UTF8_STRING": (nil, nil),
        "text/plain;charset=utf-8": (nil, nil),
        "text/plain": (nil, nil),
        "TEXT": ("UTF8_STRING", nil),
        "STRING": (nil, .latin1),
        "COMPOUND_TEXT": (nil, .compoundText),
    ]

    /// The text target a clipboard manager fetches of an owner's offer: its first UTF-8 text
    /// target. Nil when it offers none (its text targets are then fetched as they are).
    public static func keptTextTarget(_ targets: [String]) -> String? {
        let normal = targets.map(Self.normalTextTarget)
        for source in keptTextSources {
            if let index = normal.firstIndex(of: source) { return targets[index] }
        }
        return nil
    }

    /// Whether a manager that keeps ``keptTextTarget(_:)`` can leave `target` out: a text
    /// target made from the kept text when asked.
    public static func isDerivableTextTarget(_ target: String) -> Bool {
        derivedTextTargets[normalTextTarget(target)] != nil
    }

    /// A MIME target as the table spells it (`text/plain; charset=UTF-8` is
    /// `text/plain;charset=utf-8`, ``TypeRegistry/normalizedMIME(_:)``); X atoms such as
    /// `UTF8_STRING` as they are.
    package static func normalTextTarget(_ target: String) -> String {
        target.contains("/") ? TypeRegistry.normalizedMIME(target) : target
    }

    /// The image a clipboard manager keeps of an owner's offer, the other image formats being
    /// made from it on request: the best format xpb reads (``ImageFormat/sourceRank``: lossless
    /// first). Nil when no target is such an image.
    public static func keptImageTarget(_ targets: [String]) -> String? {
        targets.compactMap { target in ImageFormat(mimeType: target)?.sourceRank.map { (target, $0) } }.min { $0.1 < $1.1 }?.0
    }

    /// Whether a manager that keeps ``keptImageTarget(_:)`` can leave `target` out: an image
    /// format xpb writes, made from the kept image when asked.
    public static func isConvertibleImageTarget(_ target: String) -> Bool {
        ImageFormat(mimeType: target)?.isWritable ?? false
    }
}
