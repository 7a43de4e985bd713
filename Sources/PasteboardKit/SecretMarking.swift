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
