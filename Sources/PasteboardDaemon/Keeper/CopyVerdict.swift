import FoundationEssentials
import PasteboardKit

/// The one verdict on what may be done with a copy, whatever host it came from: the keeper (what
/// may be kept) and sync (what may leave the machine) both decide from it, so the secret,
/// local-only and expiry rules live here alone.
package enum CopyVerdict: Equatable, Sendable {
    /// May be kept, and may leave the machine.
    case shareable
    /// Kept on this machine (its history too), never synced (`xpb copy --local-only`).
    case localOnly
    /// Marked secret by its owner (a password manager's hint, nspasteboard.org's markers):
    /// served by its owner only, never fetched, kept or synced.
    case secret
    /// Its expiration date has passed: neither kept nor synced.
    case expired
    /// Made by an application the rules ignore (`--ignore-app`): neither kept nor synced.
    case ignored
    /// TARGETS (or the manifest) could not be read; why.
    case unreadable(String)

    /// Why it stays on this machine, or nil when it may be shared.
    package var notSharedReason: String? {
        switch self {
        case .shareable: return nil
        case .localOnly: return "local-only"
        case .secret: return "marked secret"
        case .expired: return "expired"
        case .ignored: return "from an ignored app"
        case let .unreadable(why): return "unreadable (\(why))"
        }
    }

    /// The one rule: secret first, then expired, then local-only.
    package static func of(advertised: [String], expires: Date?, isLocalOnly: Bool, now: Date = Date()) -> CopyVerdict {
        if SecretMarking.isSecret(advertised) { return .secret }
        if let expires, expires <= now { return .expired }
        return isLocalOnly ? .localOnly : .shareable
    }
}
