import Dispatch
import FoundationEssentials
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The newest copy a host keeps of each selection: what it serves when the copy's owner goes,
/// what a history entry's id is noted on once written, what expires. A value type that a host
/// holds under its own lock, beside what only that host knows (an X display's ownership epochs, a
/// compositor's ownership numbers), so that one lock still orders them all.
package struct KeptCopies: Sendable {
    private var copies: [Pasteboard.Name: Snapshot] = [:]

    package init() {}

    package subscript(name: Pasteboard.Name) -> Snapshot? {
        get { copies[name] }
        set { copies[name] = newValue }
    }

    /// Drops the copy kept of `name`; what it was.
    @discardableResult
    package mutating func drop(_ name: Pasteboard.Name) -> Snapshot? {
        copies.removeValue(forKey: name)
    }

    /// Drops the copy of `name` made at `time` if it is still the one kept (an expiry, a secret
    /// forgotten: a newer copy stays); what was dropped.
    @discardableResult
    package mutating func drop(_ name: Pasteboard.Name, madeAt time: Date) -> Snapshot? {
        guard copies[name]?.time == time else { return nil }
        return copies.removeValue(forKey: name)
    }

    /// The history entry of the copy of `name` made at `time`, if it is still the one kept and was
    /// written.
    package func entry(of name: Pasteboard.Name, madeAt time: Date) -> Int64? {
        copies[name]?.time == time ? copies[name]?.id : nil
    }

    /// The copy of `name` made at `time` was written to the history as entry `id`: noted, if it
    /// is still the one kept.
    package mutating func written(_ id: Int64, _ name: Pasteboard.Name, madeAt time: Date) {
        if copies[name]?.time == time { copies[name]?.id = id }
    }
}

/// What every host that keeps copies does the same way: record a copy, drop it when it expires,
/// restore the newest history entry to a selection nobody holds. A host gives its lock over its
/// ``KeptCopies`` (``withKept(_:)``), its queue, and what only it knows: whether it serves a
/// selection now, and how it stops.
package protocol KeepingHost: ClipboardHost {
    var daemon: ClipboardDaemon? { get }
    var logger: Logger { get }
    /// Where expiries run.
    var events: DispatchQueue { get }
    /// Runs `body` on the kept copies under the host's lock.
    func withKept<T>(_ body: (inout KeptCopies) -> T) -> T
    /// The kept copy of `name` expired while it was the one kept: the host stops serving it
    /// where the host serves it.
    func withdrawExpired(_ name: Pasteboard.Name)
}

extension KeepingHost {
    /// Hands a kept copy to the daemon's record pipeline, and drops it at its expiration date.
    package func record(_ snapshot: Snapshot) {
        scheduleExpiry(snapshot)
        daemon?.record(snapshot, from: self) { [weak self] id in
            self?.withKept { $0.written(id, snapshot.selection, madeAt: snapshot.time) }
        }
    }

    /// A paste of the copy of `name` made at `time`, which this host serves: noted on its history
    /// entry (once the copy is written; not if another copy replaced it meanwhile).
    package func recordPaste(_ record: PasteRecord, of name: Pasteboard.Name, madeAt time: Date) {
        daemon?.pasted(record, of: name) { [weak self] in self?.withKept { $0.entry(of: name, madeAt: time) } }
    }

    /// At a snapshot's expiration date: stop serving it, and forget it everywhere.
    package func scheduleExpiry(_ snapshot: Snapshot) {
        guard let expires = snapshot.expires else { return }
        let delay = min(max(0, expires.timeIntervalSinceNow), 1e9)
        events.asyncAfter(deadline: .now() + delay) { [weak self] in
            guard let self else { return }
            if withKept({ $0.drop(snapshot.selection, madeAt: snapshot.time) }) != nil {
                withdrawExpired(snapshot.selection)
                logger.info("\(SelectionNames.selection(for: snapshot.selection)) contents expired: dropped")
            }
            daemon?.expired()
        }
    }

    /// Serves the newest history entry of `name` where nobody holds it (at start): `isEmpty`
    /// says whether nobody does; `serve` serves the entry unless someone took the selection
    /// meanwhile (whether it served it).
    package func restoreLast(_ name: Pasteboard.Name, isEmpty: () -> Bool, serve: (Snapshot) throws -> Bool) {
        let selection = SelectionNames.selection(for: name)
        guard isEmpty() else { return }
        do {
            guard let snapshot = try daemon?.history.latest(name, madeOn: nodeName), !snapshot.targets.isEmpty, try serve(snapshot) else { return }
            logger.info("restored \(selection) from the history: \(snapshot.preview.isEmpty ? "\(snapshot.targets.count) types" : "“\(snapshot.preview)”")")
        } catch {
            logger.warning("could not restore \(selection) from the history: \(error)")
        }
    }
}
