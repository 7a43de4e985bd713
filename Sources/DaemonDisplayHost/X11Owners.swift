import PasteboardDaemon
import PasteboardX11

/// The core's host-free owners, as an X display has them.
extension Snapshot {
    /// The owner's window (``Snapshot/owner``).
    var ownerWindow: X11Window {
        get { X11Window(rawValue: owner) }
        set { owner = newValue.rawValue }
    }

    /// The window the contents were taken from (``Snapshot/capturedFrom``).
    var capturedFromWindow: X11Window {
        get { X11Window(rawValue: capturedFrom) }
        set { capturedFrom = newValue.rawValue }
    }
}

extension CopyOwner {
    /// What the app rules match of an X owner: its process, and the names its window goes by.
    init(_ owner: SelectionOwnerInfo) {
        self.init(processID: owner.processID, executableName: owner.executableName,
                  otherNames: [owner.windowInstance, owner.windowClass, owner.copiedBy?.name].compactMap { $0 }, title: owner.name)
    }
}
