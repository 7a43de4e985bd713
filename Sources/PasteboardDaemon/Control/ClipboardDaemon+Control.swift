import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// Answers to `xpb` on the control socket.
extension ClipboardDaemon {
    // MARK: Control

    /// The answer to one request of a client: the status and the history here, the pasteboards
    /// themselves by the host.
    func answer(_ request: ControlRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        if request.readsHistory { awaitWritesHandedIn() }
        switch request {
        case .status:
            return .success(.reply(.status(status())))
        case .historyPage(let search, 0, ControlRequest.historyPageSize, true) where (search ?? "").isEmpty:
            do {
                return .success(try firstPage())
            } catch {
                return .failure(ControlFailure("\(error)"))
            }
        case .history, .historyPage, .select, .delete, .clear, .clearAll, .pin:
            do {
                let answer = try HistoryRequests.answer(request, history: history)
                return answer.map { $0.map { reply in
                    // A page asked for in the compact form goes in it (``HistoryPageCoding``).
                    guard case .historyPage(_, _, _, true) = request, case let .historyPage(entries, total, partial) = reply else { return .reply(reply) }
                    return .page(HistoryPageCoding.encode(entries: entries, total: total, partial: partial == true))
                } } ?? .failure(ControlFailure("not a history request"))
            } catch {
                return .failure(ControlFailure("\(error)"))
            }
        case .offer, .read, .write, .clearPasteboard, .watch:
            return host.answer(request, on: &channel)
        case let .queue(queueRequest):
            return host.answerQueue(queueRequest, on: &channel)
        case let .pastes(pasteboard, follow):
            return answerPastes(of: pasteboard, follow: follow, on: &channel)
        case let .pasted(pasteboard, owner, paste):
            return notePaste(paste, of: pasteboard, by: owner)
        case .secretRule:
            return .success(.reply(.secretRule(refusedTo: secretRefusal.withLock { $0.apps.sorted() })))
        }
    }

    /// Returns once the copies handed to the history's writes so far are written (or refused):
    /// a client that saw a copy kept (the daemon's log, a watch, its own copy served) and then
    /// asks for the history finds it there. Nothing else waits on the control socket's thread, so
    /// a barrier on the storage queue cannot deadlock; it costs a hop when nothing is pending.
    func awaitWritesHandedIn() {
        dispatchPrecondition(condition: .notOnQueue(storage))
        storage.sync {}
    }

    /// The history's verbs, for every front door (the control socket, both D-Bus interfaces).
    var history: HistoryService {
        HistoryService(store: store, displays: host.displays, serve: { [host] in try host.serveSelected($0) },
                       changed: { [weak self] in self?.historyChanged() })
    }

    /// The history changed outside the record pipeline (a request): its listing and watchers learn it.
    func historyChanged() {
        encodeListingSoon()
    }

    /// A copy of `text` made by a D-Bus caller (Klipper's `setClipboardContents`): served on
    /// CLIPBOARD as a history entry selected again is, and kept in the history.
    func setClipboardText(_ text: String) throws {
        let data = Data(text.utf8)
        guard data.count <= KlipperObject.maxText else {
            throw ControlFailure("the text is \(data.count) bytes, more than the \(KlipperObject.maxText) setClipboardContents takes")
        }
        let captured = ["UTF8_STRING", "text/plain;charset=utf-8"].map { CapturedTarget(target: $0, type: $0, data: data) }
        guard let snapshot = Snapshot(.general, advertised: ["UTF8_STRING", "text/plain;charset=utf-8", "text/plain", "STRING", "TEXT"],
                                      captured: captured, cap: configuration.maxSnapshotBytes) else {
            throw ControlFailure("the text could not be held")
        }
        try serveAndKeep(snapshot, madeOverDBusBy: "setClipboardContents")
    }

    /// A copy a D-Bus caller made (Klipper's `setClipboardContents`, xpbd's `SetContents`):
    /// served as a history entry selected again is, and kept in the history, credited to the call.
    /// A copy marked secret (``SecretMarking``, by any of its types) is served only: the record's
    /// entrance refuses it, whoever made the copy.
    func serveAndKeep(_ snapshot: Snapshot, madeOverDBusBy method: String) throws {
        var snapshot = snapshot
        snapshot.source = "D-Bus"
        snapshot.app = "D-Bus (\(method))"
        try host.serveSelected(snapshot)
        // A copy marked secret is served, and goes no further (``record(_:written:)``).
        record(snapshot)
    }

    /// Encodes the full listing again a moment after the history was written (a copy kept, the
    /// oldest entry evicted), on the storage queue: the first `xpb history` after a copy finds it
    /// ready instead of waiting for the daemon's half of the work (11 of 22 ms for 1000
    /// entries). A burst of copies encodes it once, after the last.
    func encodeListingSoon() {
        historyUpdatedSignal()
        let write = listingWrites.withLock { count -> Int in
            count += 1
            return count
        }
        storage.asyncAfter(deadline: .now() + configuration.listingDelay) { [self] in
            guard listingWrites.withLock({ $0 }) == write else { return }
            let started = DispatchTime.now()
            do {
                _ = try firstPage()
                logger.debug("history listing encoded ahead in \((DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1_000_000) ms")
            } catch {
                logger.debug("history listing not encoded ahead: \(error)")
            }
        }
    }

    /// The history as `xpb history` lists it (its first page, the newest
    /// ``ControlRequest/historyPageSize`` entries), encoded once (``HistoryPageCoding``) and kept
    /// while the history is unchanged: menus and scripts list it again and again.
    private func firstPage() throws -> ControlAnswer {
        enum Listed {
            case encoded(Data)
            case listed(History.ListingVersion?, HistoryListing)
        }
        let listed = try store.withLock { store -> Listed in
            if let version = store.listingVersion(), let cached = listing.withLock({ $0 }), cached.version == version {
                return .encoded(cached.payload)
            }
            let entries = try store.listing(offset: 0, limit: ControlRequest.historyPageSize)
            // The version after listing: a listing that wrote (a recovered database) counts its own writes.
            return .listed(store.listingVersion(), entries)
        }
        switch listed {
        case let .encoded(payload):
            return .page(payload)
        case .listed(let version, var entries):
            // Thumbnails still to make are made after the history's lock is released.
            let payload = HistoryPageCoding.encode(entries: entries.finished(), total: entries.total, partial: entries.partial)
            listing.withLock { $0 = version.map { (version: $0, payload: payload) } }
            return .page(payload)
        }
    }

    func status() -> DaemonStatus {
        let (totals, database, maxEntries, maxBytes, seal) = store.withLock { ($0.totals(), $0.databasePath, $0.maxEntries, $0.maxBytes, $0.disk.database.seal) }
        let peers = hub.peerStatuses()
        return DaemonStatus(
            pid: Int(getpid()), version: Self.version, display: host.displays.joined(separator: " and "), keeps: host.keeps, entryCount: totals.count,
            bytes: totals.bytes, maxEntries: maxEntries, maxBytes: maxBytes, stateDirectory: configuration.stateDirectory.path,
            database: database, socket: socketPath, startedAt: startedAt, changeCounts: host.changeCounts(),
            peers: peers, syncValues: peers.isEmpty ? nil : hub.valueStatuses(), sealedWith: seal?.source.description)
    }
}

extension ControlRequest {
    /// Whether the answer reads the history (its entries, their count): such a request first
    /// waits for the copies handed to the history's writes before it (``ClipboardDaemon/awaitWritesHandedIn()``).
    var readsHistory: Bool {
        switch self {
        case .status, .history, .historyPage, .select, .delete, .clear, .clearAll, .pin, .queue(.history), .pastes(_, false):
            return true
        case .offer, .read, .write, .clearPasteboard, .watch, .queue, .pastes, .pasted, .secretRule:
            return false
        }
    }
}
