import PasteboardKit

/// The names every host of pasteboards shares: the X selection that holds each pasteboard (also
/// the name a headless daemon and the sync protocol use), and the target names that belong to
/// the selection protocol rather than to data.
public enum SelectionNames {
    /// Where a clipboard manager's published counts hold `name`'s (CLIPBOARD, then PRIMARY); nil
    /// for a named pasteboard, which has none.
    package static func sharedCountIndex(of name: Pasteboard.Name) -> Int? {
        [Pasteboard.Name.general, .find].firstIndex(of: name)
    }

    /// The X selection that holds a pasteboard: `CLIPBOARD`, `PRIMARY`, `SECONDARY`, or
    /// `XPB_PASTEBOARD:<name>`.
    public static func selection(for name: Pasteboard.Name) -> String {
        switch name {
        case .general: return "CLIPBOARD"
        case .find: return "PRIMARY"
        case .secondary: return "SECONDARY"
        default: return "XPB_PASTEBOARD:" + name.rawValue
        }
    }

    /// The pasteboard a selection holds (the inverse of ``selection(for:)``); nil for a
    /// selection that is no pasteboard, or a name a pasteboard cannot have.
    public static func pasteboard(forSelection selection: String) -> Pasteboard.Name? {
        switch selection {
        case "CLIPBOARD": return .general
        case "PRIMARY": return .find
        case "SECONDARY": return .secondary
        default:
            let prefix = "XPB_PASTEBOARD:"
            guard selection.hasPrefix(prefix) else { return nil }
            return try? Pasteboard.Name.validated(String(selection.dropFirst(prefix.count)))
        }
    }

    /// Targets about the protocol rather than data (and `NULL`): never shown as types, never
    /// handed to a clipboard manager.
    package static let protocolTargetNames: Set<String> = [
        "TARGETS", "MULTIPLE", "TIMESTAMP", "SAVE_TARGETS", "DELETE", "INSERT_SELECTION", "INSERT_PROPERTY", "LENGTH", "ATOM_PAIR",
        "INCR", Manifest.target, "NULL",
    ]

    /// The core protocol's type atoms, which no data target may be called.
    package static let basicTypeNames: Set<String> = ["ATOM", "INTEGER", "CARDINAL", "WINDOW", "PIXMAP", "DRAWABLE", "BITMAP",
                                                      "COLORMAP", "CURSOR", "FONT", "VISUALID", "SPAN", "PIXEL", "NULL"]

    /// Whether an X target name belongs to the selection protocol (`TARGETS`, `INCR`, `MULTIPLE`,
    /// xpb's own `XPB_…` targets …) or names a basic X type (`ATOM`, `INTEGER`): a type of that
    /// name is never advertised as a target (a reader would take its data for the protocol's),
    /// only through the manifest.
    public static func isReservedTarget(_ name: String) -> Bool {
        protocolTargetNames.contains(name) || basicTypeNames.contains(name) || name.hasPrefix("XPB_")
    }
}

extension Pasteboard.Name {
    /// X11's third selection, `SECONDARY` (xsel -s, xclip -selection secondary); UIPasteboard
    /// has no counterpart.
    public static let secondary = Pasteboard.Name(rawValue: "org.x.secondary")
}
