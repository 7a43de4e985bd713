import FoundationEssentials
import PasteboardSelections

/// xpbd on the session bus: Klipper's interface and its own (``KlipperObject``, ``PasteboardObject``).
extension ClipboardDaemon {
    /// Connects to the session bus (where there is one) and offers both interfaces, each under
    /// its name where that name is free.
    func startDBus() {
        let klipper = configuration.offersKlipper ? KlipperObject(daemon: self, logger: logger) : nil
        let pasteboard = PasteboardObject(daemon: self, logger: logger)
        dbusObjects.withLock { $0 = (klipper, pasteboard) }
        let objects: [any DBusObject] = [pasteboard] + (klipper.map { [$0] } ?? [])
        dbus.withLock { $0 = DBusService.start(objects, logger: logger) }
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
