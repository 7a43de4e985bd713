import FoundationEssentials
import PasteboardKit

/// The two ways file managers say that copied files are to be moved, not copied: GNOME's
/// `x-special/gnome-copied-files` begins with `cut` (Nautilus, Nemo, Thunar, PCManFM, Caja), and
/// KDE's `application/x-kde-cutselection` is `1` beside a `text/uri-list` (Dolphin, Qt). An
/// owner offers one; kept contents (a clipboard manager's, after the owner exits) are served in
/// both, so that a cut made in one file manager still pastes as a move in the other.
package enum FileListFlavours {
    package static let gnome = "x-special/gnome-copied-files"
    package static let kde = "application/x-kde-cutselection"
    package static let uriList = "text/uri-list"

    /// `targets` with the other flavour's targets added when one flavour is there; the same
    /// targets otherwise. Targets already there are never replaced.
    package static func completed(_ targets: [CapturedTarget]) -> [CapturedTarget] {
        let byName = Dictionary(targets.map { ($0.target, $0) }, uniquingKeysWith: { first, _ in first })
        var added: [CapturedTarget] = []
        if let list = byName[gnome] {
            let (isCut, urls) = TargetCodec.gnomeCopiedFiles(list.data)
            if byName[uriList] == nil, !urls.isEmpty {
                added.append(CapturedTarget(target: uriList, type: uriList, data: TargetCodec.uriList.encodeList(urls)))
            }
            if byName[kde] == nil, isCut { added.append(CapturedTarget(target: kde, type: kde, data: Data(utf8Of: "1"))) }
        } else if let list = byName[uriList] {
            let urls = TargetCodec.uriListEntries(list.data)
            let isCut = byName[kde]?.data.first == UInt8(ascii: "1")
            // Only file URLs are a file manager's list.
            if !urls.isEmpty, urls.allSatisfy({ $0.hasPrefix("file:") }) {
                added.append(CapturedTarget(target: gnome, type: gnome, data: TargetCodec.gnomeCopiedFiles.encodeList(urls, cut: isCut)))
            }
        }
        return targets + added
    }
}
