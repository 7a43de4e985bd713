import Dispatch
import FoundationEssentials
import Synchronization

/// The converted bytes one process holds, in all its owned selections: at most ``limits``'s
/// total, each conversion at most its share; a conversion past either is refused (`xpbd` sets
/// them from `--max-target-size` and the snapshot cap). Heavy conversions (images: a decode of
/// up to 256 MiB of pixels each) run one at a time, so that eight formats asked at once cost the
/// memory of one.
package enum ConversionBudget {
    package struct Limits: Sendable {
        package var perConversion: Int
        package var total: Int
        package init(perConversion: Int, total: Int) {
            self.perConversion = perConversion
            self.total = total
        }
    }

    private static let state = Mutex((limits: Limits(perConversion: 256 << 20, total: 512 << 20), held: 0))
    private static let heavy = DispatchSemaphore(value: 1)

    package static var limits: Limits {
        get { state.withLock { $0.limits } }
        set { state.withLock { $0.limits = newValue } }
    }

    /// The bytes held now (for tests and status).
    package static var held: Int { state.withLock { $0.held } }

    package static func reserve(_ count: Int) -> Bool {
        state.withLock { state in
            guard count <= state.limits.perConversion, state.held + count <= state.limits.total else { return false }
            state.held += count
            return true
        }
    }

    package static func release(_ count: Int) {
        guard count > 0 else { return }
        state.withLock { $0.held = max(0, $0.held - count) }
    }

    /// Runs a conversion, a heavy one alone; its output past the per-conversion limit is refused.
    package static func convert(isHeavy: Bool, _ conversion: () throws -> Data) throws -> Data {
        if isHeavy { heavy.wait() }
        defer { if isHeavy { heavy.signal() } }
        let bytes = try conversion()
        guard bytes.count <= limits.perConversion else { throw ConversionRefused() }
        return bytes
    }

    package struct ConversionRefused: Error {}
}

