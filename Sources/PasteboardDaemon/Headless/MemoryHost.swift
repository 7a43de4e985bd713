import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// The host of `xpbd --headless`, a host without a display (a server reached over ssh): its
/// pasteboards live in memory (``HeadlessClipboard``); `xpb` on this host reads and writes them on
/// the control socket, and the sync hub shares CLIPBOARD (and PRIMARY with `--sync-primary`)
/// with the desktop daemons that link to it (`xpbd --peer THIS-HOST` there): a copy is announced,
/// its bytes move when someone pastes.
///
/// The copies made on this host go to the history (the state directory's, which every daemon of
/// the user shares), as the desktop daemon's do: `xpb history` lists them and selects one again.
/// Other nodes' copies are not kept here (their bytes would have to cross for it); their own
/// daemons keep them.
///
/// With no link and no client for `--idle-exit`, its daemon exits: nothing lingers on a server
/// for ever.
package final class MemoryHost: ClipboardHost {
    let configuration: DaemonConfiguration
    let logger: Logger
    let clipboard = HeadlessClipboard()
    /// The daemon this host serves, from ``start(_:)`` to ``close()``.
    private let served = Mutex<ClipboardDaemon?>(nil)

    /// The name this node gives itself: that it has no display.
    static let displayName = "headless"

    package init(configuration: DaemonConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    var daemon: ClipboardDaemon? { served.withLock { $0 } }
    package var nodeName: String { Self.displayName }
    package var surface: any SyncSurface { clipboard }
    package var keeps: [String] { ["CLIPBOARD", "PRIMARY", "SECONDARY", "XPB_PASTEBOARD:*"] }
    package var stopsWhenIdle: Bool { true }

    package var defaultSocketPath: String {
        ControlEndpoint.headlessSocketPath(environment: ProcessInfo.processInfo.environment, uid: getuid())
    }

    /// - Throws: when another headless daemon of this user answers on the socket.
    package func start(_ daemon: ClipboardDaemon) throws {
        if let fd = try? LocalSocket.connect(daemon.socketPath) {
            Glibc.close(fd)
            throw ControlFailure("another headless xpbd of this user listens on \(daemon.socketPath)")
        }
        served.withLock { $0 = daemon }
        let hub = daemon.hub
        clipboard.onChange { [weak hub] name, owner, event in hub?.ownerChanged(name, owner: owner, event: event) }
        clipboard.onExpiry { [weak self, logger] in
            // Logged once the history forgot it too: what the log says is done.
            self?.daemon?.expired { logger.info("a copy expired: dropped from the pasteboard and the history") }
        }
        logger.info("headless: holding the pasteboards in memory, history in \(configuration.stateDirectory.path)")
    }

    package func connect(_ daemon: ClipboardDaemon) {}

    package func clearSelection(_ name: Pasteboard.Name) throws {
        clipboard.clearForClient(SelectionNames.selection(for: name))
    }

    package func serveSelected(_ snapshot: Snapshot) throws {
        // Served from memory as the desktop serves it on X; a copy made here again.
        let kept = KeptSelection(advertised: snapshot.advertised, targets: snapshot.targets.map(\.captured))
        clipboard.write(SelectionNames.selection(for: snapshot.selection), contents: kept, size: snapshot.size,
                        origin: "history (\(snapshot.app ?? snapshot.source ?? "?"))", expires: snapshot.expires, isLocalOnly: snapshot.isLocalOnly, writer: nil)
    }

    package func changeCounts() -> [String: Int] { clipboard.changeCounts() }

    package func reload(_ fresh: DaemonConfiguration) {}

    package func stopping() {}

    package func close() {
        served.withLock { $0 = nil }
    }

    // MARK: Requests

    package func answer(_ request: ControlRequest, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        switch request {
        case let .offer(selection):
            guard HeadlessClipboard.isValid(selection) else { return .failure(Self.unknown(selection)) }
            let (entry, count) = clipboard.entry(selection)
            return .success(.reply(.offer(entry.map {
                PasteboardOffer(pasteboard: selection, targets: $0.targets, changeCount: count, origin: $0.origin,
                                ownerPID: $0.writer?.pid, ownerApp: $0.writer?.app, ownerExecutable: $0.writer?.executable,
                                copiedBy: $0.writer?.credit?.name, copiedByPID: $0.writer?.credit?.pid)
            })))
        case let .read(selection, target, limit):
            guard HeadlessClipboard.isValid(selection) else { return .failure(Self.unknown(selection)) }
            return read(selection, target: target, limit: limit, on: &channel)
        case let .write(write):
            guard HeadlessClipboard.isValid(write.pasteboard) else { return .failure(Self.unknown(write.pasteboard)) }
            return self.write(write, from: &channel)
        case let .clearPasteboard(selection):
            guard HeadlessClipboard.isValid(selection) else { return .failure(Self.unknown(selection)) }
            clipboard.clearForClient(selection)
            return .success(.reply(.done("\(selection) cleared")))
        case let .watch(selection):
            if let selection, !HeadlessClipboard.isValid(selection) { return .failure(Self.unknown(selection)) }
            return watch(selection, on: &channel)
        default:
            return .failure(ControlFailure("not a request about the pasteboards"))
        }
    }

    static func unknown(_ selection: String) -> ControlFailure {
        ControlFailure("'\(selection)' is not a pasteboard (CLIPBOARD, PRIMARY, SECONDARY or XPB_PASTEBOARD:<name>)")
    }

    /// The bytes of the client's copy, data frame by data frame, exactly the sizes announced;
    /// then held. Nothing is held of a write that breaks off or claims more than the cap.
    private func write(_ write: PasteboardWrite, from channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        // Who writes: the kernel's account of the connecting process, read before it can exit.
        var writer = Self.writer(of: channel.fd)
        let cap = configuration.maxSnapshotBytes
        guard !write.items.isEmpty, write.items.allSatisfy({ !$0.isEmpty }), write.items.joined().allSatisfy({ $0.size >= 0 }) else {
            return .failure(ControlFailure("a write needs at least one representation per item, with sizes of 0 or more"))
        }
        guard write.size <= cap else {
            return .failure(ControlFailure("the copy is \(ByteCount.format(write.size)), more than the \(ByteCount.format(cap)) a headless xpbd holds (--max-target-size)"))
        }
        let reservation: UInt64
        switch clipboard.reserve(write.pasteboard, size: write.size, budget: configuration.maxBytes) {
        case let .success(granted): reservation = granted
        case let .failure(refused): return .failure(ControlFailure(refused.reason + "; nothing was changed"))
        }
        // Given back once the bytes are held (counted as held then) or the write failed.
        defer { clipboard.release(reservation) }
        let items: [PasteboardItem]
        switch ControlServer.receiveItems(of: write, on: &channel) {
        case let .success(received): items = received
        case let .failure(failure): return .failure(failure)
        }
        let options = PasteboardOptions(localOnly: write.isLocalOnly, expirationDate: write.expires)
        let held = HeldSelection(items: items, options: options)
        // The program that ran xpb, as xpb found it (a claim of the user's own process, as the
        // desktop's owners publish it): the history and `xpb info` name it, not xpb.
        // One printable line of a bounded length, a pid only if it could be one.
        if let maker = write.copiedBy.map({ LogThrottle.printable(String($0.prefix(256))) }), !maker.isEmpty {
            writer?.credit = (maker, write.copiedByPID.flatMap { $0 > 0 ? $0 : nil })
        }
        // Another process chose it: one printable line, as a peer's name is.
        let origin = LogThrottle.printable(write.origin)
        let owner = clipboard.write(write.pasteboard, contents: held, size: write.size, origin: origin.isEmpty ? "xpb" : origin, expires: write.expires,
                                    isLocalOnly: write.isLocalOnly, writer: writer)
        logger.debug("headless: \(write.pasteboard) holds \(items.count) items (\(ByteCount.format(write.size)))")
        record(held, size: write.size, in: write.pasteboard, owner: owner, writer: writer)
        return .success(.reply(.done("\(write.pasteboard) holds \(ByteCount.format(write.size))")))
    }

    /// The process at the other end of a client's connection, nil when the kernel does not say.
    static func writer(of fd: Int32) -> HeadlessClipboard.Writer? {
        var pid: pid_t = 0
        guard clinux_peer_pid(fd, &pid) == 0, pid > 0 else { return nil }
        let (name, path) = LocalProcess.executable(of: Int(pid))
        return HeadlessClipboard.Writer(pid: Int(pid), app: name.map { LogThrottle.printable($0) }, executable: path.map { LogThrottle.printable($0) })
    }

    /// Keeps a copy made on this host in the history, as the desktop daemon keeps a copy it
    /// takes from its owner (the same targets: those a manager fetches of what an X owner of
    /// the items offers), on the storage queue: the client has its answer already. Never a
    /// secret; a copy the content rules refuse is not kept, and if its text matches
    /// `--ignore-match` its announce is withdrawn.
    private func record(_ held: HeldSelection, size: Int, in selection: String, owner: UInt, writer: HeadlessClipboard.Writer?) {
        guard !SecretMarking.isSecret(held.targets), let name = SelectionNames.pasteboard(forSelection: selection), let daemon else { return }
        // Room among the copies waiting to be written, taken before the client has its answer:
        // while the disk is behind, writers wait (holding their --max-size reservation, so that
        // others are refused) instead of copies piling up in memory behind the disk.
        let room = daemon.roomToWrite(size)
        daemon.storage.async { [self] in
            defer { if room { daemon.backlog.leave(size) } }
            guard var snapshot = Snapshot(name, of: held, cap: configuration.maxSnapshotBytes) else { return }
            snapshot.source = "xpb"
            snapshot.pid = writer?.credit.map { $0.pid } ?? writer?.pid
            snapshot.app = writer?.credit?.name ?? writer?.app
            guard daemon.admits(snapshot, from: snapshot.app ?? "xpb", owner: owner) else { return }
            let kept = "\(selection) from \(snapshot.app ?? "xpb") kept in the history (\(ByteCount.format(snapshot.size)))"
            daemon.recordOnStorage(snapshot) { [logger] _ in logger.info("\(kept)") }
        }
    }

    /// Whether a read of `held` by the process at the other end of `fd` is refused by
    /// `--refuse-secret-to`: only data marked secret, and only while the rule names an app.
    private func refusesSecret(_ held: any HeldTargets, toPeerOf fd: Int32) -> Bool {
        guard SecretMarking.isSecret(held.targets), let daemon else { return false }
        let rule = daemon.secretRefusal.withLock { $0 }
        guard !rule.isEmpty else { return false }
        var pid: pid_t = 0
        return rule.refuses(process: clinux_peer_pid(fd, &pid) == 0 && pid > 0 ? Int(pid) : nil)
    }

    /// Streams a target's bytes: from memory for a copy made here, else fetched from the node
    /// that holds it as the client takes them (the peer is granted credit as they go).
    private func read(_ selection: String, target: String, limit: Int, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        let (entry, _) = clipboard.entry(selection)
        guard let entry else { return .failure(ControlFailure("\(selection) is empty")) }
        let limit = max(0, limit)
        let tooLarge = { (size: Int) in ControlFailure("the data is \(size) bytes, more than the \(limit)-byte limit") }
        do {
            switch entry.contents {
            case let .local(held):
                if refusesSecret(held, toPeerOf: channel.fd) {
                    return .failure(ControlFailure("\(selection) holds data marked secret, which xpbd's --refuse-secret-to refuses to this app"))
                }
                guard let (type, data) = try held.bytes(for: target) else { return .success(.reply(.refused("\(target) is not served"))) }
                guard data.count <= limit else { return .failure(tooLarge(data.count)) }
                try channel.send(.reply, ControlReply.transfer(type: type, size: data.count))
                var offset = 0
                while offset < data.count {
                    let end = min(data.count, offset + HeadlessProtocol.chunkSize)
                    try channel.send(Frame(kind: .data, payload: data.subdata(in: data.startIndex + offset ..< data.startIndex + end)))
                    offset = end
                }
                try channel.send(.reply, ControlReply.end(total: data.count))
            case let .remote(targets):
                guard let remote = targets.first(where: { $0.target == target }) else { return .success(.reply(.refused("\(target) is not served"))) }
                guard let stream = remote.open() else { return .success(.reply(.refused("the peer that holds \(selection) cannot be reached"))) }
                defer { stream.cancel() }
                var total = 0
                var begun = false
                while true {
                    let snapshot = stream.snapshot()
                    if let failure = snapshot.failure { return .failure(ControlFailure(failure)) }
                    if !begun, let header = snapshot.header {
                        if let size = header.size, size > limit { return .failure(tooLarge(size)) }
                        try channel.send(.reply, ControlReply.transfer(type: header.type, size: header.size))
                        begun = true
                    }
                    if begun, let chunk = stream.take(upTo: HeadlessProtocol.chunkSize) {
                        total += chunk.count
                        guard total <= limit else { return .failure(tooLarge(total)) }
                        try channel.send(Frame(kind: .data, payload: chunk))
                        continue
                    }
                    if snapshot.isEnded, snapshot.buffered == 0 {
                        if !begun { try channel.send(.reply, ControlReply.transfer(type: target, size: 0)) }
                        try channel.send(.reply, ControlReply.end(total: total))
                        break
                    }
                    // Nothing to pass on: wait for the peer (its silence is bounded by the hub's
                    // fetch timeout, which fails the stream).
                    let moved = DispatchSemaphore(value: 0)
                    stream.observe(after: snapshot.version) { moved.signal() }
                    _ = moved.wait(timeout: .now() + 1)
                }
            }
        } catch {
            logger.debug("headless: a read of \(selection) \(target) ended: \(error)")
            return .success(.answered)
        }
        return .success(.answered)
    }

    /// Sends each change as it comes until the client closes the connection.
    private func watch(_ selection: String?, on channel: inout FrameChannel) -> Result<ControlAnswer, ControlFailure> {
        guard let watcher = Watcher<PasteboardChangeNote>(selection: selection) else { return .failure(ControlFailure("cannot watch: no pipe")) }
        let id = clipboard.watchers.add(watcher)
        defer { clipboard.watchers.drop(id) }
        return watcher.relay(to: &channel, started: "watching", logger: logger) { .changed($0) }
    }
}
