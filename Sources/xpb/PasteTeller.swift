import FoundationEssentials
import Glibc
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// Tells the session's xpbd of each paste of an xpb owner's copy (``ControlRequest/pasted(pasteboard:owner:paste:)``),
/// so that the history entry of the copy it keeps says who read it while xpb served it (xpbd is
/// not asked for those pastes: the owner is). Only where xpbd listens when the owner starts:
/// else readers are not looked up at all.
///
/// The owner names its copy as xpbd can find it: on X by its window; on Wayland, whose
/// data-control names no owner, by its first representation's bytes (``OwnerName``), where
/// that is bytes in memory (a copied file's pages are not read again for it).
enum PasteTeller {
    static func start(on backend: any OwningPasteboardBackend, session: Session, items: [PasteboardItem]) {
        let socket: (path: String, display: String)
        var content: Data?
        switch session.settled() {
        case let .x11(display):
            guard let path = try? ControlClient.socketPath(display: display) else { return }
            socket = path
        case .wayland:
            guard case let .data(bytes)? = items.first?.representations.first?.representation else { return }
            let (path, name) = DaemonAccess.waylandSocket()
            socket = (path, name)
            content = bytes
        case .daemon:
            return
        }
        guard access(socket.path, F_OK) == 0 else { return }
        // Hashed at the first paste, not before the copy is ready (a large copy's digest takes a while).
        let contentName = Mutex<String?>(nil)
        backend.onPasted { [content] name, reading in
            let owner = reading.ownerID ?? content.map { bytes in
                contentName.withLock { known in
                    if known == nil { known = OwnerName.content(bytes) }
                    return known ?? ""
                }
            }
            guard let owner, var client = try? ControlClient(path: socket.path, display: socket.display, timeout: 2, notRunning: "") else { return }
            defer { client.close() }
            let unknown = content == nil ? "the X server did not name the reading process (a client of another host?)"
                : "Wayland's data-control names no reader, and no process of this user holds the pipe"
            let paste = PasteRecord(time: reading.time, app: reading.appName, pid: reading.processID, unknown: unknown)
            _ = try? client.send(.pasted(pasteboard: SelectionNames.selection(for: name), owner: owner, paste: paste))
        }
    }
}
