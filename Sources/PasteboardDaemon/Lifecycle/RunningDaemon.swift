import PasteboardKit

/// What `xpbd`'s command line runs: one daemon, or the bridge of two.
package protocol RunningDaemon: AnyObject, Sendable {
    func start() throws
    /// Blocks until it stops; the failure, nil for a clean stop.
    func run() -> String?
    func stop()
    func reload(_ fresh: DaemonConfiguration)
    /// Whether it stopped because a display's connection ended (after ``run()``).
    var lostItsDisplay: Bool { get }
}

extension ClipboardDaemon: RunningDaemon {}
