/// The release of this tree: one number for xpb, its xclip and xsel stand-ins, xpbd and what
/// `xpb daemon status` reports, set here alone.
package enum Release {
    package static let version = "0.4.0"
    /// The date the man pages carry.
    package static let date = "2026-11-24"
}
