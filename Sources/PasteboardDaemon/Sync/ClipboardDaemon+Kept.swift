import Dispatch
import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire

extension ClipboardDaemon {
    /// Keeps in the history a copy taken for a node that keeps no history of its own (a KDE
    /// Connect device's, through `xpbd-kdeconnect`): its text is read (within the snapshot cap)
    /// and recorded as `app`'s, through the content rules and the record's entrance like every copy
    /// (`--on-copy`, the history). Off the hub's queue: the bytes come over the link.
    func keep(_ name: Pasteboard.Name, app: String, targets: [RemoteTarget]) {
        guard let target = RemoteTarget.text(of: targets) else {
            logger.debug("\(SelectionNames.selection(for: name)) from \(app) has no text: not kept")
            return
        }
        logger.debug("sync: reading \(SelectionNames.selection(for: name)) \(target.target) from \(app) to keep it")
        DispatchQueue.global(qos: .utility).async { [self] in
            switch target.readWhole(limit: configuration.maxSnapshotBytes, timeout: 10) {
            case let .success(data):
                var item = PasteboardItem()
                item.setData(data, for: .utf8PlainText)
                guard var snapshot = Snapshot(name, of: HeldSelection(items: [item], options: PasteboardOptions()), cap: configuration.maxSnapshotBytes) else { return }
                snapshot.source = "sync"
                snapshot.app = app
                // The content rules, as for every copy (the copy is shared already: its node's).
                if let refusal = contentRules.withLock({ $0 }).refusal(snapshot) {
                    logger.info("\(SelectionNames.selection(for: name)) from \(app) not kept: \(refusal.reason)")
                    return
                }
                let kept = "\(SelectionNames.selection(for: name)) from \(app) kept in the history (\(ByteCount.format(snapshot.size)))"
                record(snapshot) { [logger] _ in logger.info("\(kept)") }
            case let .failure(failure):
                logger.warning("\(SelectionNames.selection(for: name)) from \(app) not kept: \(failure.message)")
            }
        }
    }
}
