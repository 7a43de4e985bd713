import Dispatch
import FoundationEssentials
import Logging
import Synchronization

/// xpbd as its command line runs it: a daemon (or a bridge) that, when its display's connection
/// ends, is made again on a fresh connection, as ``ReconnectPolicy`` says. The lost daemon has
/// stopped as on any stop (its history written, the copies it held for a take-back written); the
/// new one starts as xpbd starts, so the clipboard, now empty, gets its last copy back from the
/// history. What lived only in memory goes: a paste queue, a sync link's transfers under way.
package final class ReconnectingDaemon: RunningDaemon {
    private let make: @Sendable (DaemonConfiguration) throws -> any RunningDaemon
    private let logger: Logger
    /// The daemon running now, and whether xpbd was asked to stop.
    private let state: Mutex<(current: any RunningDaemon, stopping: Bool)>
    /// The configuration a new daemon is made from (SIGHUP replaces it).
    private let configuration: Mutex<DaemonConfiguration>
    /// Wakes a wait between tries when xpbd is asked to stop.
    private let wake = DispatchSemaphore(value: 0)

    /// `make` makes a daemon from a configuration (a display's connection included); the first
    /// is made at once (its errors are thrown).
    package init(configuration: DaemonConfiguration, logger: Logger,
                 make: @escaping @Sendable (DaemonConfiguration) throws -> any RunningDaemon) throws {
        self.make = make
        self.logger = logger
        self.configuration = Mutex(configuration)
        state = Mutex((try make(configuration), false))
    }

    package func start() throws {
        try state.withLock { $0.current }.start()
    }

    package func run() -> String? {
        var policy = ReconnectPolicy()
        var daemon = state.withLock { $0.current }
        var started = ContinuousClock.now
        while true {
            let failure = daemon.run()
            guard failure != nil, daemon.lostItsDisplay, !state.withLock({ $0.stopping }) else { return failure }
            let lostAt = ContinuousClock.now
            var decision = policy.lost(after: Self.seconds(lostAt - started))
            while true {
                guard case let .retry(delay) = decision else {
                    logger.error("the display did not come back within \(Int(ReconnectPolicy.giveUpAfter)) s: exiting")
                    return failure
                }
                if wake.wait(timeout: .now() + delay) == .success { return nil }
                let fresh: any RunningDaemon
                do {
                    fresh = try make(configuration.withLock { $0 })
                } catch {
                    logger.debug("not connected yet: \(error)")
                    decision = policy.failed()
                    continue
                }
                // Asked to stop meanwhile: the new daemon is never started.
                guard state.withLock({ state -> Bool in
                    guard !state.stopping else { return false }
                    state.current = fresh
                    return true
                }) else { return nil }
                do {
                    try fresh.start()
                } catch {
                    logger.critical("\(error)")
                    return "\(error)"
                }
                logger.notice("connected again, \((Self.seconds(ContinuousClock.now - lostAt) * 10).rounded() / 10) s after the connection was lost")
                daemon = fresh
                started = ContinuousClock.now
                break
            }
        }
    }

    package func stop() {
        let current = state.withLock { state in
            state.stopping = true
            return state.current
        }
        wake.signal()
        current.stop()
    }

    package func reload(_ fresh: DaemonConfiguration) {
        configuration.withLock { $0 = fresh }
        state.withLock { $0.current }.reload(fresh)
    }

    package var lostItsDisplay: Bool { state.withLock { $0.current }.lostItsDisplay }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
