import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// Tells the display's xpbd of each paste of an xpb owner's copy (``ControlRequest/pasted(pasteboard:owner:paste:)``),
/// so that the history entry of the copy it keeps says who read it while xpb served it (xpbd is
/// not asked for those pastes: the owner is). Only on X, whose owners xpbd tells apart by window,
/// and only where xpbd listens when the owner starts: else readers are not looked up at all.
enum PasteTeller {
    static func start(on backend: any OwningPasteboardBackend, session: Session) {
        guard case let .x11(display) = session.settled(), let path = try? ControlClient.socketPath(display: display).path,
              access(path, F_OK) == 0 else { return }
        backend.onPasted { name, reading in
            guard let owner = reading.ownerID, var client = try? ControlClient(display: display, timeout: 2) else { return }
            defer { client.close() }
            let paste = PasteRecord(time: reading.time, app: reading.appName, pid: reading.processID,
                                    unknown: "the X server did not name the reading process (a client of another host?)")
            _ = try? client.send(.pasted(pasteboard: SelectionNames.selection(for: name), owner: owner, paste: paste))
        }
    }
}
