import Dispatch
import FoundationEssentials
import Synchronization

/// The converted bytes held in all the owned selections that share a budget: at most
/// ``limits``'s total, each conversion at most its share; a conversion past either is refused.
/// A process has one, ``process`` (`xpbd` sets its limits from `--max-target-size` and the
/// snapshot cap); a test makes its own, which no other test's selections count against. Heavy
/// conversions (images: a decode of up to 256 MiB of pixels each) run one at a time in the whole
/// process, so that eight formats asked at once cost the memory of one.
package final class ConversionBudget: Sendable {
    package struct Limits: Sendable {
        package var perConversion: Int
        package var total: Int
        package init(perConversion: Int, total: Int) {
            self.perConversion = perConversion
            self.total = total
        }
    }

    /// The process's budget, which every owned selection counts against unless given another.
    package static let process = ConversionBudget()

    private let state: Mutex<(limits: Limits, held: Int)>
    private static let heavy = DispatchSemaphore(value: 1)

    package init(limits: Limits = Limits(perConversion: 256 << 20, total: 512 << 20)) {
        state = Mutex((limits: limits, held: 0))
    }

    package var limits: Limits {
        get { state.withLock { $0.limits } }
        set { state.withLock { $0.limits = newValue } }
    }

    /// The bytes held now (for tests and status).
    package var held: Int { state.withLock { $0.held } }

    package func reserve(_ count: Int) -> Bool {
        state.withLock { state in
            guard count <= state.limits.perConversion, state.held + count <= state.limits.total else { return false }
            state.held += count
            return true
        }
    }

    package func release(_ count: Int) {
        guard count > 0 else { return }
        state.withLock { $0.held = max(0, $0.held - count) }
    }

    /// Runs a conversion, a heavy one alone; its output past the per-conversion limit is refused.
    package func convert(isHeavy: Bool, _ conversion: () throws -> Data) throws -> Data {
        if isHeavy { Self.heavy.wait() }
        defer { if isHeavy { Self.heavy.signal() } }
        let bytes = try conversion()
        guard bytes.count <= limits.perConversion else { throw ConversionRefused() }
        return bytes
    }

    package struct ConversionRefused: Error {}
}

