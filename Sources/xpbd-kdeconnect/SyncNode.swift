import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardDaemon
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
struct SyncNode: Sendable {
    /// A copy of the daemon's side: its text (nil when it has none, or when the daemon's side was
    /// cleared), and when it reached this node.
    typealias CopyHook = @Sendable (_ text: String?, _ time: Date) -> Void

    /// Who hears of the daemon's copies.
    private final class Listener: Sendable {
        let hook = Mutex<CopyHook?>(nil)
    }

    private let clipboard = HeadlessClipboard()
    private let hub: SyncHub
    private let logger: Logger
    private let listener = Listener()
    /// The most bytes of text read of one copy.
    let maxTextBytes: Int

    /// - Parameter name: this node's name in the daemon's status and log (`KDE Connect`).
    init(name: String, maxTextBytes: Int, logger: Logger) {
        var configuration = SyncConfiguration()
        // What is read of a copy is capped here; a transfer may move that much.
        configuration.maxTransferBytes = max(maxTextBytes, 1 << 20)
        self.maxTextBytes = maxTextBytes
        self.logger = logger
        let hub = SyncHub(configuration: configuration, surface: clipboard, displayName: name, logger: logger)
        self.hub = hub
        // The daemon's copies' text is read one at a time, off the link's threads.
        let reads = DispatchQueue(label: "xpbd.node.read")
        clipboard.onChange { [weak hub, weak clipboard, listener] name, owner, event in
            hub?.ownerChanged(name, owner: owner, event: event)
            // Another node's copy taken here: its text goes to whoever listens.
            guard name == .general, event == .ours, let clipboard else { return }
            reads.async { Self.readCurrent(of: clipboard, limit: maxTextBytes, to: listener, logger: logger) }
        }
    }

    /// Sets what hears of the daemon's copies (before ``serve(readFD:writeFD:)``).
    func onCopy(_ hook: @escaping CopyHook) {
        listener.hook.withLock { $0 = hook }
    }

    /// A copy made elsewhere (a device's): held as this node's newest copy and announced.
    /// `origin` names it in the daemon's log and in `xpb info` there.
    func copy(_ text: String, origin: String) {
        var item = PasteboardItem()
        item.setData(Data(text.utf8), for: .utf8PlainText)
        let held = HeldSelection(items: [item], options: PasteboardOptions())
        clipboard.write("CLIPBOARD", contents: held, size: text.utf8.count, origin: LogThrottle.printable(origin, limit: 256), expires: nil,
                        isLocalOnly: false, writer: nil)
    }

    /// The daemon's end of the link, once both hellos are said.
    struct Accepted {
        fileprivate var reader: FrameReader
        fileprivate let writeFD: Int32
        fileprivate let ours: SyncHello
        fileprivate let theirs: SyncHello
    }

    /// Reads the daemon's hello on `readFD` (within 30 s) and answers with ours on `writeFD`; why
    /// not, when the other end is no xpbd (a person who ran this by hand): nothing else is done
    /// then, on the network least of all.
    func accept(readFD: Int32, writeFD: Int32) -> Result<Accepted, SyncHub.Failure> {
        var reader = FrameReader(fd: readFD)
        let theirs: SyncHello
        do {
            guard let frame = try reader.next(timeout: 30) else { return .failure(SyncHub.Failure("the daemon closed the link before its hello")) }
            guard frame.kind == .hello, let hello = try? ControlCoding.decode(SyncHello.self, from: frame.payload) else {
                return .failure(SyncHub.Failure("the first message on standard input is not xpbd's sync hello"))
            }
            theirs = hello
        } catch {
            return .failure(SyncHub.Failure("no sync hello on standard input: \(error)"))
        }
        let ours = SyncHello(node: hub.node, name: hub.nodeName, sends: theirs.receives, receives: theirs.sends,
                             selections: hub.synced.map(SelectionNames.selection(for:)), keepsHistory: false)
        if let refusal = hub.refusal(of: theirs, ours: ours) {
            try? writeFrame(Frame(kind: .error, payload: (try? ControlCoding.encode(ControlFailure(refusal))) ?? Data()), to: writeFD)
            return .failure(SyncHub.Failure(refusal))
        }
        do {
            try writeFrame(Frame(kind: .hello, payload: try ControlCoding.encode(ours)), to: writeFD)
        } catch {
            return .failure(SyncHub.Failure("\(error)"))
        }
        return .success(Accepted(reader: reader, writeFD: writeFD, ours: ours, theirs: theirs))
    }

    /// Runs the accepted link until it ends; returns why it ended.
    func run(_ accepted: Accepted) -> String {
        hub.start()
        defer { hub.stop() }
        let link = hub.register(transport: SyncTransport(readFD: accepted.reader.fd, writeFD: accepted.writeFD), reader: accepted.reader,
                                label: accepted.theirs.name, ours: accepted.ours, theirs: accepted.theirs)
        logger.info("linked to \(LogThrottle.printable(accepted.theirs.name))")
        link.waitUntilFinished()
        return link.closeReason ?? "closed"
    }

    /// Reads the text of the copy CLIPBOARD holds now, if it is another node's, and hands it on.
    private static func readCurrent(of clipboard: HeadlessClipboard, limit: Int, to listener: Listener, logger: Logger) {
        let (entry, count) = clipboard.entry("CLIPBOARD")
        let now = Date()
        // Cleared or withdrawn on the daemon's side (a secret copied there withdraws the copy
        // before it): nothing is the newest to send, not even the copy before.
        guard let entry else {
            listener.hook.withLock { $0 }?(nil, now)
            return
        }
        guard case let .remote(targets) = entry.contents else { return }
        guard let target = RemoteTarget.text(of: targets) else {
            listener.hook.withLock { $0 }?(nil, now)
            return
        }
        switch target.readWhole(limit: limit, timeout: 10) {
        case let .success(data):
            // Still that copy (every other node's copy has the same owner here: the change count
            // tells them apart); a newer one is read in its turn.
            guard clipboard.entry("CLIPBOARD").1 == count else { return }
            listener.hook.withLock { $0 }?(String(decoding: data, as: UTF8.self), now)
        case let .failure(failure):
            logger.warning("could not read the daemon's copy (\(target.target)): \(failure.message)")
        }
    }
}

