import Dispatch
import KDEConnect
import Logging

/// Drives ``CopyPacing`` for the devices' copies: its state on one queue, its wakes as that
/// queue's timers. A flood is said once a minute at most.
final class PacedCopies: @unchecked Sendable {
    /// Touched on `queue` only.
    private var pacing: CopyPacing
    private var floodSaid = -Double.infinity
    private let queue = DispatchQueue(label: "kdeconnect.pacing")
    private let logger: Logger
    private let take: @Sendable (CopyPacing.Copy) -> Void

    init(interval: Double, logger: Logger, take: @escaping @Sendable (CopyPacing.Copy) -> Void) {
        pacing = CopyPacing(interval: interval)
        self.logger = logger
        self.take = take
    }

    func arrived(_ copy: CopyPacing.Copy) {
        queue.async { [self] in perform(pacing.arrived(copy, now: Self.now()), device: copy.device) }
    }

    private func perform(_ action: CopyPacing.Action, device: String) {
        switch action {
        case let .take(copy):
            take(copy)
        case let .wake(at: time):
            queue.asyncAfter(deadline: .now() + max(0, time - Self.now())) { [self] in perform(pacing.woke(now: Self.now()), device: device) }
        case .none:
            let now = Self.now()
            guard now - floodSaid >= 60 else { return }
            floodSaid = now
            logger.info("“\(device)” sends copies faster than one each \(Int(pacing.interval * 1000)) ms: only the newest of each is taken")
        }
    }

    /// Seconds on the monotonic clock.
    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}
