/// The release of this tree: one number for xpb, its xclip and xsel stand-ins, xpbd and what
/// `xpb daemon status` reports, set here alone.
public enum Release {
    public static let version = "0.4.0"
    /// The date the man pages carry.
    public static let date = "2026-11-24"
}
