import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// A node of the sync mesh with no display, no history and no socket of its own, run by a helper
/// process on the link its daemon starts (`xpbd --kdeconnect` runs `xpbd-kdeconnect`, which
/// speaks xpb-sync on its standard input and output): its CLIPBOARD is held in memory
/// (``HeadlessClipboard``), its copies come from elsewhere (a KDE Connect device) and are
/// announced to the daemon like any peer's, and the daemon's copies reach it by the ledger's
/// rules (secrets, local-only and expired copies never do; the newest copy wins; a copy is
/// never sent back to the link it came from).
package final class SyncNode: Sendable {
    /// A copy of the daemon's side: its text (nil when it has none), and when it reached this node.
    package typealias CopyHook = @Sendable (_ text: String?, _ time: Date) -> Void

    private let clipboard = HeadlessClipboard()
    private let hub: SyncHub
    private let logger: Logger
    private let hook = Mutex<CopyHook?>(nil)
    /// Reads the daemon's copies' text, one at a time, off the link's threads.
    private let reads = DispatchQueue(label: "xpbd.node.read")
    /// The most bytes of text read of one copy.
    package let maxTextBytes: Int

    /// - Parameter name: this node's name in the daemon's status and log (`KDE Connect`).
    package init(name: String, maxTextBytes: Int, logger: Logger) {
        var configuration = SyncConfiguration()
        // A device's clock and this helper's are the same machine's: the link needs no slack,
        // and a dead daemon is noticed as soon as its end of the pipe closes.
        configuration.maxTransferBytes = max(maxTextBytes, 1 << 20)
        self.maxTextBytes = maxTextBytes
        self.logger = logger
        hub = SyncHub(configuration: configuration, surface: clipboard, displayName: name, logger: logger)
        clipboard.onChange { [weak self] name, owner, event in
            guard let self else { return }
            self.hub.ownerChanged(name, owner: owner, event: event)
            // Another node's copy taken here: its text goes to whoever listens.
            if name == .general, event == .ours { self.reads.async { self.readCurrent() } }
        }
    }

    /// Sets what hears of the daemon's copies (before ``serve(readFD:writeFD:)``).
    package func onCopy(_ hook: @escaping CopyHook) {
        self.hook.withLock { $0 = hook }
    }

    /// A copy made elsewhere (a device's): held as this node's newest copy and announced.
    /// `origin` names it in the daemon's log and in `xpb info` there.
    package func copy(_ text: String, origin: String) {
        var item = PasteboardItem()
        item.setData(Data(text.utf8), for: .utf8PlainText)
        let held = HeldSelection(items: [item], options: PasteboardOptions())
        clipboard.write("CLIPBOARD", contents: held, size: text.utf8.count, origin: LogThrottle.printable(origin), expires: nil,
                        isLocalOnly: false, writer: nil)
    }

    /// Runs the link on the two descriptors (the daemon's hello read first, ours answered), until
    /// it ends; returns why it ended.
    package func serve(readFD: Int32, writeFD: Int32) -> String {
        hub.start()
        defer { hub.stop() }
        var reader = FrameReader(fd: readFD)
        let theirs: SyncHello
        do {
            guard let frame = try reader.next(timeout: 30) else { return "the daemon closed the link before its hello" }
            guard frame.kind == .hello, let hello = try? ControlCoding.decode(SyncHello.self, from: frame.payload) else {
                return "the daemon's first message is not a sync hello"
            }
            theirs = hello
        } catch {
            return "\(error)"
        }
        let ours = SyncHello(node: hub.node, name: hub.nodeName, sends: theirs.receives, receives: theirs.sends,
                             selections: hub.synced.map(SelectionNames.selection(for:)), keepsHistory: false)
        if let refusal = hub.refusal(of: theirs, ours: ours) {
            try? writeFrame(Frame(kind: .error, payload: (try? ControlCoding.encode(ControlFailure(refusal))) ?? Data()), to: writeFD)
            return refusal
        }
        do {
            try writeFrame(Frame(kind: .hello, payload: try ControlCoding.encode(ours)), to: writeFD)
        } catch {
            return "\(error)"
        }
        let link = hub.register(transport: SyncTransport(readFD: readFD, writeFD: writeFD), reader: reader, label: theirs.name,
                                ours: ours, theirs: theirs)
        logger.info("linked to \(LogThrottle.printable(theirs.name))")
        link.waitUntilFinished()
        return link.closeReason ?? "closed"
    }

    /// Reads the text of the copy CLIPBOARD holds now, if it is another node's, and hands it on.
    private func readCurrent() {
        let (entry, _) = clipboard.entry("CLIPBOARD")
        guard let entry, case let .remote(targets) = entry.contents else { return }
        let now = Date()
        guard let target = RemoteTarget.text(of: targets) else {
            hook.withLock { $0 }?(nil, now)
            return
        }
        switch target.readWhole(limit: maxTextBytes, timeout: 10) {
        case let .success(data):
            guard clipboard.entry("CLIPBOARD").0?.owner == entry.owner, clipboard.currentOwner(of: .general) == clipboard.ourOwner else { return }
            hook.withLock { $0 }?(String(decoding: data, as: UTF8.self), now)
        case let .failure(failure):
            logger.warning("could not read the daemon's copy (\(target.target)): \(failure.message)")
        }
    }
}
