import FoundationEssentials
import PasteboardKit
import Synchronization

extension ClipboardDaemon {
    /// Waits, on a thread of its own, for the keyring that holds the history's key to unlock
    /// (xpbd started while it was locked: ``openHistory(_:logger:)`` kept the history in memory),
    /// then opens the history on disk off every lock, and, on `storage`, writes into it the
    /// copies kept in memory meanwhile and takes it as the history: from then on copies are
    /// written to disk, and the stop writes the history as usual. A stop, a keyring that goes
    /// away or a key that does not open the history ends the wait; the copies stay in memory.
    func awaitKeyring() {
        do {
            try DetachedThread.start(name: "xpbd.keyring") { [self] in
                guard let seals = HistoryKeyring.waitForUnlock(keyFile: configuration.historyKeyFile, logger: logger,
                                                              stopping: { [self] in isStopping }) else { return }
                let caps = store.withLock { ($0.maxEntries, $0.maxBytes) }
                let opened: Mutex<HistoryStore?>
                do {
                    opened = Mutex(try HistoryStore(directory: configuration.stateDirectory, maxEntries: caps.0, maxBytes: caps.1,
                                                    seals: seals, logger: logger))
                } catch {
                    logger.error("the keyring is unlocked, but the history in \(configuration.stateDirectory.path) does not open (\(error)): this run keeps its history in memory until xpbd stops")
                    return
                }
                storage.async { [self] in
                    guard !isStopping else { return }
                    do {
                        let (moved, path) = try store.withLock { history in
                            guard let disk = opened.withLock({ $0.take() }) else { return (0, history.databasePath) }
                            return (try history.adopt(disk), history.databasePath)
                        }
                        logger.notice("the keyring is unlocked: the history in \(path) is open; copies kept in memory meanwhile, now written to it: \(moved)")
                    } catch {
                        logger.error("the keyring is unlocked, but the copies kept in memory could not be written to the history (\(error)): they stay in memory until xpbd stops")
                        return
                    }
                    encodeListingSoon()
                    beginHistoryUpkeep()
                }
            }
        } catch {
            logger.warning("no thread to wait for the keyring (\(error)): this run keeps its history in memory until xpbd stops")
        }
    }
}
