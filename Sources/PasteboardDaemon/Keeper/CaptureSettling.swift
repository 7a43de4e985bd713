import Dispatch
import FoundationEssentials
import Synchronization

/// Wakes whoever waits for the keeper to finish a capture. A bridge's X side waits before it
/// announces an X copy to Wayland, since the Wayland side's taking the Wayland selection for it
/// makes the compositor take the X selection from the app, which then stops serving it: the
/// bytes must be the keeper's by then. What has ended is the host's to say (by ownership epoch,
/// since the X server gives a new client the window ids of one gone).
package final class CaptureSettling: Sendable {
    private let waiters = Mutex<[DispatchSemaphore]>([])

    package init() {}

    /// A capture ended: every waiter looks again.
    package func signal() {
        let woken = waiters.withLock { waiters -> [DispatchSemaphore] in
            defer { waiters.removeAll() }
            return waiters
        }
        woken.forEach { $0.signal() }
    }

    /// Waits until `hasEnded`, while `isCurrent` and at most until `deadline`. Returns whether it
    /// ended.
    package func wait(until deadline: Date, hasEnded: () -> Bool, while isCurrent: () -> Bool) -> Bool {
        while true {
            let semaphore = DispatchSemaphore(value: 0)
            waiters.withLock { $0.append(semaphore) }
            // Looked at after joining the waiters: an end between the two wakes this wait.
            if hasEnded() { return true }
            guard isCurrent(), Date() < deadline else { return false }
            // Woken by every end; isCurrent is looked at again at least every 50 ms.
            _ = semaphore.wait(timeout: .now() + 0.05)
        }
    }
}
