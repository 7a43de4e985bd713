import Dispatch
import FoundationEssentials
import PasteboardKit
import PasteboardSelections

/// xpbd on the session bus: Klipper's interface and its own (``KlipperObject``, ``PasteboardObject``).
extension ClipboardDaemon {
    /// Connects to the session bus (where there is one) and offers both interfaces, each under
    /// its name where that name is free.
    func startDBus() {
        let klipper = configuration.offersKlipper ? KlipperObject(daemon: self, logger: logger) : nil
        let pasteboard = PasteboardObject(daemon: self, logger: logger)
        dbusObjects.withLock { $0 = (klipper, pasteboard) }
        dbus.withLock { $0 = connectDBus(retrying: false) }
    }

    /// A connection offering the interfaces made at the start, told to ``dbusLost()`` if the bus goes.
    private func connectDBus(retrying: Bool) -> DBusService? {
        let (klipper, pasteboard) = dbusObjects.withLock { $0 }
        let objects: [any DBusObject] = (pasteboard.map { [$0] } ?? []) + (klipper.map { [$0] } ?? [])
        return DBusService.start(objects, logger: logger, retrying: retrying, lost: { [weak self] in self?.dbusLost() })
    }

    /// The session bus went away (it restarted, or dropped xpbd): xpbd connects again, after
    /// 1 s, then 2, 4 … 30 s between tries, until it is back or xpbd stops.
    private func dbusLost() {
        dbus.withLock { $0 = nil }
        logger.notice("D-Bus: connecting to the session bus again")
        reconnectDBus(after: 1)
    }

    private func reconnectDBus(after delay: Double) {
        Background.run("xpbd.dbus.reconnect", after: delay) { [weak self] in
            guard let self, !isStopping else { return }
            guard let service = connectDBus(retrying: true) else {
                reconnectDBus(after: min(delay * 2, 30))
                return
            }
            let stale = dbus.withLock { current -> DBusService? in
                // Stopped meanwhile: the new connection goes too.
                if isStopping { return service }
                current = service
                return nil
            }
            stale?.stop()
            if stale == nil { logger.notice("D-Bus: connected to the session bus again") }
        }
    }

    /// The history changed: Klipper's `clipboardHistoryUpdated`.
    func historyUpdatedSignal() {
        guard let service = dbus.withLock({ $0 }), let klipper = dbusObjects.withLock({ $0.klipper }) else { return }
        service.signal(klipper, "clipboardHistoryUpdated")
    }

    /// A copy was kept: `Changed(pasteboard, app, types)` of xpbd's interface.
    func announceCopy(_ snapshot: Snapshot) {
        guard let service = dbus.withLock({ $0 }), let pasteboard = dbusObjects.withLock({ $0.pasteboard }) else { return }
        let types = PasteboardObject.typedContents(snapshot).map { DBusValue.string($0.type) }
        service.signal(pasteboard, "Changed", [.string(SelectionNames.selection(for: snapshot.selection)), .string(snapshot.app ?? snapshot.source ?? ""),
                                               .array("s", types)])
    }
}
