import Dispatch
import PasteboardKit

extension ClipboardDaemon {
    /// Begins the history's upkeep once the daemon answers, so that a history of any size opens
    /// at once (a million entries: 40 s of describing and indexing, and 1.7 s of checking, when
    /// all was done at the open):
    /// - the whole file is checked on a connection of its own, off the history's lock; damage
    ///   found moves it aside, as a query that meets damage does;
    /// - what the history lacks (descriptions, the search index) is made, and entries beyond the
    ///   caps deleted, in turns (``HistoryUpkeep/maintain()``) on `storage`, where copies wait
    ///   for one turn at most.
    ///
    /// The two sides of a bridge share one history: the first to start checks it.
    func beginHistoryUpkeep() {
        let (path, seal, generation, inMemory) = store.withLock { ($0.disk.database.path, $0.disk.database.seal, $0.disk.database.generation, $0.disk.database.isInMemory) }
        if !inMemory, store.beginCheck() {
            Background.run("xpbd.history.check", qos: .utility) { [self] in
                guard let damage = HistorySchema.damage(at: path, seal: seal), !isStopping else { return }
                storage.async { [self] in
                    store.withLock { $0.disk.database.replaceDamaged(damage, generation: generation) }
                    encodeListingSoon()
                }
            }
        }
        upkeepTurn()
    }

    /// Runs one turn of the upkeep on `storage`, and queues the next while work is left: a copy
    /// queued meanwhile is written between two turns.
    func upkeepTurn() {
        storage.async { [self] in
            guard !isStopping, store.withLock({ $0.disk.upkeep.maintain() }) else { return }
            upkeepTurn()
        }
    }
}
