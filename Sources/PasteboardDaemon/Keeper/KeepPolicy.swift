import PasteboardSelections
import FoundationEssentials

/// Which targets a clipboard manager keeps, and which contents it must never touch.
package enum KeepPolicy {
    /// Targets about the selection protocol or that name server resources, which cannot be
    /// kept as bytes: never fetched.
    static let skippedTargets: Set<String> = [
        "TARGETS", "MULTIPLE", "TIMESTAMP", "DELETE", "INSERT_SELECTION", "INSERT_PROPERTY", "SAVE_TARGETS",
        "PIXMAP", "BITMAP", "DRAWABLE", "COLORMAP", "LENGTH", "ATOM_PAIR", "INCR", "NULL", "TARGET_SIZES",
        "HOST_NAME", "USER", "CLIENT_WINDOW", "PROCESS", "TASK", "OWNER_OS", "NAME", "CLASS",
    ]

    /// Whether a target is kept: not a protocol or resource target, not toolkit-private
    /// (`x-special/*` but GNOME's copied-files list, `application/vnd.portal.*`, Qt's and
    /// xpb's private `_…`/`XPB_…` names except xpb's manifest and items).
    package static func isKept(_ target: String) -> Bool {
        if skippedTargets.contains(target) { return false }
        if target.hasPrefix("x-special/") { return target == "x-special/gnome-copied-files" }
        if target.hasPrefix("application/vnd.portal.") { return false }
        if target.hasPrefix("XPB_") { return target == "XPB_MANIFEST" || target.hasPrefix(Manifest.itemTargetPrefix) }
        if target.hasPrefix("_") { return false }
        return !target.isEmpty
    }

    /// `targets` with one image kept: of the image formats xpb writes, only the best lossless
    /// one the owner offers (``KeptTargets/keptImageTarget(_:)``) is fetched; the others
    /// are made from it when a reader asks (a Qt image is offered in a dozen encodings of one
    /// picture). Formats xpb does not write (GIF, icons, netpbm) are fetched as they are. Of an
    /// xpb owner, whose manifest says which formats are the image's own (`own`), the best of
    /// those: a copied JPEG is kept as the JPEG, not as the PNG its owner would convert it to.
    package static func withOneImage(_ targets: [String], own: [String] = []) -> [String] {
        let original = own.filter(targets.contains)
        guard let kept = KeptTargets.keptImageTarget(original.isEmpty ? targets : original) else { return targets }
        return targets.filter { $0 == kept || !KeptTargets.isConvertibleImageTarget($0) }
    }

    /// `targets` with one text kept: of an owner's text targets, only its first UTF-8 one
    /// (``KeptTargets/keptTextTarget(_:)``) is fetched; `STRING`, `TEXT`,
    /// `COMPOUND_TEXT` and the other `text/plain` are made from it when a reader asks. GTK offers
    /// one text under six targets, and takes seconds to make `COMPOUND_TEXT` of a large one.
    package static func withOneText(_ targets: [String]) -> [String] {
        guard let kept = KeptTargets.keptTextTarget(targets) else { return targets }
        return targets.filter { $0 == kept || !KeptTargets.isDerivableTextTarget($0) }
    }

    /// The targets to keep, in the owner's order, each once.
    package static func keptTargets(_ targets: [String]) -> [String] {
        var seen: Set<String> = []
        return targets.filter { isKept($0) && seen.insert($0).inserted }
    }

    /// The targets kept of an owner that lists `advertised` and serves xpb's `manifest`: those
    /// kept of its list, then the item targets the manifest names (an xpb owner serves them
    /// without listing them: without them only the first item would be kept or synced).
    package static func keptTargets(_ advertised: [String], manifest: Data?) -> [String] {
        keptTargets(advertised + (manifest.map { Manifest.targets(in: $0) } ?? []))
    }

    /// The targets a manager fetches of an offer: those kept, less the image formats and text
    /// encodings it makes from the one image and the one text it fetches (`manifest`: an xpb
    /// owner's, which names the image's own format).
    package static func fetchedTargets(_ targets: [String], manifest: Data? = nil) -> [String] {
        withOneText(withOneImage(keptTargets(targets), own: manifest.map(Manifest.ownImageTargets) ?? []))
    }
}
