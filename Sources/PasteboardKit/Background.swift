import Dispatch

/// Work off the caller's thread, in the background, as `DispatchQueue.global().async` runs it,
/// without waking the process once a second for as long as it lives.
///
/// libdispatch on Linux watches the threads of its global (non-overcommit) queues with a timer of
/// one second, started the first time one of them runs work and never stopped
/// (`_dispatch_workq_init_once` in swift-corelibs-libdispatch's `src/event/workqueue.c`): a daemon
/// that ran one block there woke ten times in ten seconds of idleness, forever. A serial queue's
/// work runs on the overcommit pool, which is not watched. Each call here gets a serial queue of
/// its own, so calls run side by side as on a global queue, each on a thread of that pool.
package enum Background {
    /// Runs `work` now, on a thread of its own queue (`label` names it in a debugger).
    package static func run(_ label: String, qos: DispatchQoS = .default, _ work: @escaping @Sendable () -> Void) {
        DispatchQueue(label: label, qos: qos).async(execute: work)
    }

    /// Runs `work` after `seconds` (clamped to what a deadline can carry), as ``run(_:qos:_:)``.
    package static func run(_ label: String, after seconds: Double, _ work: @escaping @Sendable () -> Void) {
        DispatchQueue(label: label).asyncAfter(deadline: .now() + min(max(0, seconds), 1e9), execute: work)
    }
}
