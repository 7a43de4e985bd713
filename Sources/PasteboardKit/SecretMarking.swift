/// The secret rule, decided once for every host and reader: data is secret when its owner offers
/// any of the markers, whatever their values: KDE's password-manager hint
/// (`x-kde-passwordManagerHint`, which KeePassXC, pass through Klipper, and `xpb copy
/// --sensitive` set), and nspasteboard.org's concealed and transient types (macOS's convention,
/// which clipboard managers there and some Qt apps follow). Secret data is never handed to a
/// clipboard manager, kept, synced, given to a hook or signalled. As cliphist does, the
/// decision is made where a copy comes in, by this one rule.
public enum SecretMarking {
    /// The marker types, as offered (X targets and MIME types alike).
    public static let markers: Set<String> = [
        PasteboardType.passwordManagerHint.identifier, "org.nspasteboard.ConcealedType", "org.nspasteboard.TransientType",
    ]

    /// Whether targets or MIME types offered mark the data secret.
    public static func isSecret(_ offered: some Sequence<String>) -> Bool {
        offered.contains { markers.contains($0) }
    }

    /// Whether types offered mark the data secret.
    public static func isSecret(_ offered: some Sequence<PasteboardType>) -> Bool {
        offered.contains { markers.contains($0.identifier) }
    }

    /// Whether an item is marked secret.
    public static func isSecret(_ item: PasteboardItem) -> Bool {
        isSecret(item.types)
    }
}

/// The apps a copy marked secret (``SecretMarking``) is refused to when they paste it (xpbd's
/// `--refuse-secret-to`), applied where this process serves the secret: a name matches any name
/// the reading process goes by (its executable's, its command's, a script's), or its parent or
/// its job does (the command line it is part of), ignoring case, as the app rules match a copy's
/// maker. While it names any app, a reader that cannot be named
/// (another host's X client, a process hidden from us, or one past the look-ups a flood leaves)
/// is refused too: a secret goes only where it may.
public struct SecretRefusal: Sendable, Equatable {
    /// The apps named, lowercased.
    public let apps: Set<String>

    public init(apps: [String]) {
        // An array, not any sequence, and a loop, not map and filter: every owner makes an empty
        // one at start, and a generic sequence's first use costs a run-time conformance look-up
        // (a scan of every conformance record of the binary, about 100 µs).
        var names = Set<String>()
        for app in apps {
            let name = app.lowercased()
            if !name.isEmpty { names.insert(name) }
        }
        self.apps = names
    }

    /// Whether it names no app (every reader is served).
    public var isEmpty: Bool { apps.isEmpty }

    /// Whether a reader going by `names` is refused; nil names: a reader that could not be named.
    public func refuses(readerNames names: [String]?) -> Bool {
        guard !apps.isEmpty else { return false }
        guard let names, !names.isEmpty else { return true }
        return names.contains { apps.contains($0.lowercased()) }
    }
}
