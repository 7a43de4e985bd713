import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections
import Synchronization

/// The pasteboards of a Wayland session, through the data-control protocol (wlroots'
/// `zwlr_data_control_manager_v1`, or `ext_data_control_manager_v1`): ``Pasteboard/general`` is
/// the seat's selection and ``Pasteboard/find`` its primary selection. Data-control needs no
/// window and no focus. The MIME types a source offers are the targets; their item types and
/// the choice among them are the X backend's (``OfferReader``), and what this process writes is
/// offered as an X owner of the same items would offer it (``HeldSelection``): a script behaves
/// the same on either session. A source is served lazily, one descriptor per receive; the change
/// count moves on every selection event.
public final class WaylandPasteboardBackend: OwningPasteboardBackend, @unchecked Sendable {
    public let registry: TypeRegistry
    public let changeCenter: ChangeCenter
    let connection: WaylandConnection
    let configuration: Configuration
    let state = Mutex(State())

    /// How the backend reads and writes.
    public struct Configuration: Sendable {
        /// The longest a source may keep silent while its bytes are read (and the longest the
        /// compositor may take to answer).
        public var readTimeout: Double = 5
        /// The most bytes one read takes.
        public var maxReadSize = 1 << 30
        /// The longest a reader may leave our bytes unread before its transfer is dropped.
        public var sendTimeout: Double = 30
        /// No reading thread: events are read while this process waits for the compositor. For
        /// a process that reads once and exits (it follows no change and serves nothing), or one
        /// that owns first and then starts the thread (`startThread()`).
        public var runsOnCallersThread = false
        public init() {}
    }

    /// What one of our sources serves: items this process wrote, contents a clipboard manager
    /// kept, or another node's copy whose bytes come when asked.
    enum SourceContents: Sendable {
        case items(HeldSelection)
        case kept(any HeldTargets)
        case remote([RemoteTarget])

        var targets: [String] {
            switch self {
            case let .items(held): return held.targets
            case let .kept(held): return held.targets
            case let .remote(targets): return targets.map(\.target)
            }
        }

        /// The types the source offers. A compositor passes on a receive of an offered type
        /// only, so xpb's item targets of later items are offered (a reader of item 2 asks
        /// them); those of the first item are not: its own types serve it, and an xpb reader
        /// falls back to them. So a copy of one item offers what it offers on X.
        var offered: [String] {
            let own = targets.filter { !Manifest.isFirstItemTarget($0) }
            guard case let .items(held) = self else { return own }
            return own + held.laterItemTargets
        }
    }

    struct State {
        /// What our sources hold, by source id; and the source each selection has from us.
        var held: [UInt32: SourceContents] = [:]
        var ours: [DataControlState.Selection: UInt32] = [:]
        /// What each selection's offer listed at its last change (for the next change's types
        /// before it).
        var offered: [DataControlState.Selection: [[UInt8]]] = [:]
        var servedHandler: (@Sendable (Pasteboard.Name, PasteboardType) -> Void)?
        /// Each paste of what we own, with its reader where this host can follow the pipe
        /// (``WaylandPasteboardBackend/onPasted(_:)``).
        var pastedHook: (@Sendable (Pasteboard.Name, PasteReading) -> Void)?
        /// Which receives are pastes to look up and report.
        var pasteReports = PasteReports()
        /// The readers refused what we serve marked secret (``WaylandPasteboardBackend/refuseSecrets(_:)``).
        var secretRefusal = SecretRefusal(apps: [])
        /// How often a secret's readers are looked up while the rule names an app: past it, a
        /// reader goes unnamed, and is refused.
        var secretLookUps = LookUpBudget.secretReaders
        /// The manager's hook: every selection event, with the new ownership's number.
        var selectionHook: (@Sendable (Pasteboard.Name, UInt?) -> Void)?
        /// Called once when the connection ends, with why.
        var endHook: (@Sendable (String) -> Void)?
        var activeSends = 0
        var hasPrimary = true
        var isClosed = false
    }

    /// Where Wayland's data-control is missing, what to do.
    public static let noDataControl = SessionPlan.noDataControl

    /// Connects to the compositor (`display`: a `WAYLAND_DISPLAY` name or socket path, nil for
    /// the environment's), binds the seat and data-control, and reads the selections it has now.
    ///
    /// - Throws: ``PasteboardKit/PasteboardError/unavailable(_:)`` when there is no compositor or
    ///   it lacks data-control.
    public init(display: String? = nil, configuration: Configuration = Configuration(), registry: TypeRegistry = .standard,
                changeCenter: ChangeCenter = ChangeCenter()) throws {
        self.registry = registry
        self.changeCenter = changeCenter
        self.configuration = configuration
        do {
            connection = try WaylandConnection(display: display)
        } catch {
            throw PasteboardError.unavailable("\(error)")
        }
        connection.events = { [weak self] effects in self?.handle(effects) }
        try connection.start(inline: configuration.runsOnCallersThread)
        do {
            try bind()
        } catch {
            connection.close()
            throw error
        }
        changeCenter.attach(self)
    }

    deinit {
        connection.close()
    }

    /// A backend made with ``Configuration/runsOnCallersThread`` gets a thread of its own that
    /// reads the compositor's events from now on, and serves what it owns between calls: `xpb
    /// copy` sets the selection on its one thread, forks, and its child calls this.
    package func startThread() throws {
        do {
            try connection.startThread()
        } catch {
            throw PasteboardError.backendFailure("cannot start the Wayland thread: \(error)")
        }
    }

    /// In the parent, after a fork whose child took the connection over (``startThread()``):
    /// this process's socket is closed with nothing sent, and the backend may not be used again.
    package func leaveToChild() {
        connection.leaveToChild()
    }

    /// The registry's globals, then the seat, the manager and the device; a round trip after
    /// each step, each step's requests sent with its sync.
    private func bind() throws {
        let timeout = configuration.readTimeout
        var registry: UInt32 = 0
        try connection.roundtrip(timeout: timeout) {
            registry = try connection.writeNewLocked(.registry) { WaylandRequest.getRegistry($0) }
        }
        let (seatGlobal, control) = connection.withState { ($0.seatGlobal, $0.dataControlGlobal) }
        guard let (global, flavour) = control else { throw PasteboardError.unavailable(Self.noDataControl) }
        guard let seatGlobal else { throw PasteboardError.unavailable("the Wayland compositor has no seat: it has no clipboard") }
        let version = min(global.version, flavour.maxVersion)
        state.withLock { $0.hasPrimary = flavour.hasPrimarySelection(version: version) }
        // The ids are made and sent under the writing lock, in order (see sendNew); the device's
        // first events are the selections as they are now.
        try connection.roundtrip(timeout: timeout) {
            let (seat, manager, device) = connection.withState { state -> (UInt32, UInt32, UInt32) in
                let seat = state.make(.seat)
                let manager = state.make(.manager(flavour))
                let device = state.make(.device(flavour))
                state.bound(seat: seat)
                state.bound(manager: manager, flavour: flavour, version: version)
                state.made(device: device)
                return (seat, manager, device)
            }
            try connection.writeLocked(WaylandRequest.bind(registry: registry, name: seatGlobal.name, interface: DataControlState.seatInterface, version: 1, id: seat))
            try connection.writeLocked(WaylandRequest.bind(registry: registry, name: global.name, interface: flavour.managerInterface, version: version, id: manager))
            try connection.writeLocked(WaylandRequest.getDevice(manager: manager, id: device, seat: seat))
        }
        let offered = try connection.withState { state -> [DataControlState.Selection: [[UInt8]]] in
            if let fatal = state.fatalError { throw PasteboardError.unavailable(fatal) }
            var offered: [DataControlState.Selection: [[UInt8]]] = [:]
            for selection in DataControlState.Selection.allCases {
                offered[selection] = state.current[selection].flatMap { state.types(of: $0) }
            }
            return offered
        }
        state.withLock { $0.offered = offered }
    }

    private static func firstItemTypes(_ offered: [[UInt8]]?, registry: TypeRegistry) -> [PasteboardType] {
        guard let offered else { return [] }
        return OfferReader(targets: offered.map { String(decoding: $0, as: UTF8.self) }, manifest: nil, registry: registry).itemTypes.first ?? []
    }

    /// The selection behind a pasteboard; Wayland has the clipboard and the primary selection only.
    func selection(_ name: Pasteboard.Name) throws -> DataControlState.Selection {
        switch name {
        case .general: return .clipboard
        case .find:
            guard state.withLock({ $0.hasPrimary }) else {
                throw PasteboardError.unavailable("the compositor's data-control (version 1) has no primary selection")
            }
            return .primary
        default:
            throw PasteboardError.unavailable("a Wayland session has the clipboard and the primary selection only, not \"\(name.rawValue)\"")
        }
    }

    static func name(of selection: DataControlState.Selection) -> Pasteboard.Name {
        selection == .clipboard ? .general : .find
    }

    // MARK: Events

    private func handle(_ effects: [DataControlState.Effect]) {
        for effect in effects {
            switch effect {
            case let .send(source, type, fd): serve(source: source, type: type, fd: fd)
            case let .cancelled(source):
                state.withLock { state in
                    state.held[source] = nil
                    for (selection, id) in state.ours where id == source { state.ours[selection] = nil }
                }
                connection.destroy(source)
            case let .selectionChanged(selection, _, owner, changeCount, offered):
                publish(selection, changeCount: changeCount, offered: offered)
                let hook = state.withLock { $0.selectionHook }
                hook?(Self.name(of: selection), owner)
            case .deviceFinished:
                if let reason = connection.endReason {
                    changeCenter.finish()
                    let hook = state.withLock { state in
                        defer { state.endHook = nil }
                        return state.endHook
                    }
                    hook?(reason)
                } else if connection.withState({ $0.deviceFinished }) {
                    changeCenter.finish()
                }
            default: break
            }
        }
    }

    /// Publishes a selection's change as its event told it: its count and its offer's types then.
    /// The types are worked out only while someone listens (a one-shot paste has nobody: working
    /// them out at its two first selection events was a tenth of its instructions).
    private func publish(_ selection: DataControlState.Selection, changeCount: Int, offered: [[UInt8]]?) {
        let before = state.withLock { state -> [[UInt8]]? in
            defer { state.offered[selection] = offered }
            return state.offered[selection]
        }
        guard changeCenter.hasListeners else { return }
        changeCenter.publish(PasteboardChange(name: Self.name(of: selection), changeCount: changeCount,
                                              typesBefore: Self.firstItemTypes(before, registry: registry),
                                              typesAfter: Self.firstItemTypes(offered, registry: registry)))
    }

    /// Writes a type's bytes to a reader's descriptor, then closes it: small bytes of ours at
    /// once (``servedAtOnce(_:target:to:)``), anything else on a worker. A reader that closed its
    /// end costs a write an EPIPE, never the process (``BrokenPipe/guarding(_:)``).
    private func serve(source: UInt32, type: [UInt8], fd: Int32) {
        let target = String(decoding: type, as: UTF8.self)
        let (held, handler, selection, needsNoReader) = state.withLock { state in
            (state.held[source], state.servedHandler, state.ours.first { $0.value == source }?.key,
             state.pastedHook == nil && state.secretRefusal.isEmpty)
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let timeout = configuration.sendTimeout
        let counted: @Sendable (Bool) -> Void = { [registry] delivered in
            // After the close, as below.
            if delivered, let handler, let selection, target != Manifest.target {
                handler(Self.name(of: selection), registry.type(forTarget: target)?.type ?? (try? PasteboardType(target)) ?? .data)
            }
        }
        switch needsNoReader ? Self.servedAtOnce(held, target: target, to: fd) : .notHere {
        case .notHere:
            break
        case let .done(delivered):
            Glibc.close(fd)
            if handler != nil { Background.run("xpb.wayland.served") { counted(delivered) } }
            return
        case let .rest(rest):
            state.withLock { $0.activeSends += 1 }
            Background.run("xpb.wayland.send") { [self] in
                defer { state.withLock { $0.activeSends -= 1 } }
                let delivered = BrokenPipe.guarding { Self.writeAll(rest, to: fd, timeout: timeout) }
                Glibc.close(fd)
                counted(delivered)
            }
            return
        }
        state.withLock { $0.activeSends += 1 }
        Background.run("xpb.wayland.send") { [self] in
            defer { state.withLock { $0.activeSends -= 1 } }
            // A secret the rule refuses to this reader: its pipe closes empty.
            if target != Manifest.target, refusesSecret(held, through: fd) {
                Glibc.close(fd)
                return
            }
            // A paste queue's receive takes its turn, by its reader's process: one reader's
            // receives within a paste (Chromium makes two; xpb reads the manifest first) are one
            // paste.
            var contents = held
            var turn: (queue: any TurnTakingTargets, receipt: Int)?
            if case let .kept(kept as any TurnTakingTargets)? = held {
                let taken = kept.receive(target, by: LocalProcess.readerOfPipe(fd, passedBy: connection.peerPID))
                contents = .kept(taken.contents)
                turn = (kept, taken.receipt)
            }
            // Who reads kept contents, found before the bytes go: a one-shot reader exits after.
            let reader = turn == nil && target != Manifest.target ? pasteReader(of: held, on: selection, through: fd) : nil
            let delivered = BrokenPipe.guarding { Self.write(contents, target: target, to: fd, timeout: timeout) }
            // The reader has every byte and its end before the paste is counted: a --paste-once
            // owner that gave the selection up first made wl-paste see the selection emptied
            // while it still waited for the end, and say "No selection".
            Glibc.close(fd)
            counted(delivered)
            turn.map { $0.queue.received($0.receipt, delivered: delivered) }
            if delivered, let reader, let selection { reader.hook(Self.name(of: selection), reader.reading) }
        }
    }

    /// Whether a receive of `held` through `fd` is refused by the secret rule: only what we
    /// serve marked secret, only while the rule names an app, and the reader (the process holding
    /// the pipe's other end) is looked up only then, within ``State/secretLookUps``; a reader
    /// that cannot be named is refused.
    private func refusesSecret(_ held: SourceContents?, through fd: Int32) -> Bool {
        guard case let .items(items)? = held, !state.withLock({ $0.secretRefusal.isEmpty }), SecretMarking.isSecret(items.targets) else { return false }
        let now = DispatchTime.now().uptimeNanoseconds
        let (rule, mayLookUp) = state.withLock { state in (state.secretRefusal, state.secretLookUps.take(now: now)) }
        return rule.refuses(process: mayLookUp ? LocalProcess.readerOfPipe(fd, passedBy: connection.peerPID) : nil)
    }

    /// The reader of a receive of what we own (not another node's bytes we pass on) when it begins
    /// a paste to report (``PasteReports``: bounded in rate, one reader's receives close together
    /// are one paste): the process holding the pipe's other end, where this host can tell.
    private func pasteReader(of held: SourceContents?, on selection: DataControlState.Selection?, through fd: Int32)
        -> (hook: @Sendable (Pasteboard.Name, PasteReading) -> Void, reading: PasteReading)? {
        switch held {
        case .kept?, .items?: break
        case .remote?, nil: return nil
        }
        guard let selection else { return nil }
        let now = DispatchTime.now().uptimeNanoseconds
        guard let hook = state.withLock({ $0.pastedHook != nil && $0.pasteReports.mayLookUp(now: now) ? $0.pastedHook : nil }) else { return nil }
        let pid = LocalProcess.readerOfPipe(fd, passedBy: connection.peerPID)
        let key = selection == .clipboard ? UInt(1) : 2
        let reader = pid.map { PasteReports.Reader(selection: key, processID: $0) } ?? PasteReports.Reader(selection: key, client: 0)
        guard state.withLock({ $0.pasteReports.isNewPaste(reader, now: now) }) else { return nil }
        return (hook, PasteReading(time: Date(), processID: pid, appName: pid.flatMap { LocalProcess.executable(of: $0).name }, ownerID: nil))
    }

    /// The most bytes written at once on the connection's thread: a pipe takes them whole
    /// (POSIX's atomic write to a pipe), so the write never waits and never stops part-way.
    static let atOnce = 4096

    /// What ``servedAtOnce(_:target:to:)`` did.
    enum AtOnce {
        /// Not such bytes, or the descriptor took none yet: a worker serves the receive.
        case notHere
        /// Written whole (true), or the reader went (false).
        case done(Bool)
        /// A descriptor that is not a pipe took part of them: a worker writes the rest.
        case rest(Data)
    }

    /// Writes bytes of ours held in memory (no conversion, no file, no lazy provider) of at most
    /// ``atOnce`` bytes, where no reader needs naming: on the connection's thread, with no worker
    /// to start. A paste of an xpb copy waited for a thread's start on the owner's first receive
    /// (two, for the manifest and the type asked with it).
    static func servedAtOnce(_ held: SourceContents?, target asked: String, to fd: Int32) -> AtOnce {
        guard case let .items(items)? = held else { return .notHere }
        let target = servedTarget(asked, offering: items.targets)
        guard let size = items.size(of: target), size <= atOnce, items.file(for: target) == nil,
              let data = (try? items.bytes(for: target))?.data, data.count <= atOnce else { return .notHere }
        let written = BrokenPipe.guarding { data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
        if written == data.count { return .done(true) }
        if written < 0 { return errno == EAGAIN || errno == EINTR ? .notHere : .done(false) }
        return .rest(data.dropFirst(written))
    }

    /// Writes a source's bytes of `target` to a reader's descriptor; false when there are none,
    /// or the reader went or stalled.
    private static func write(_ held: SourceContents?, target asked: String, to fd: Int32, timeout: Double) -> Bool {
        let target = held.map { servedTarget(asked, offering: $0.targets) } ?? asked
        switch held {
        case let .items(items)?:
            // A copied file goes from the page cache to the reader's pipe, never through here.
            if let file = items.file(for: target) { return file.isUnchanged && send(file, to: fd, timeout: timeout) }
            guard let data = (try? items.bytes(for: target))?.data else { return false }
            return writeAll(data, to: fd, timeout: timeout)
        case let .kept(kept)?:
            guard let data = (try? kept.bytes(for: target))?.data else { return false }
            return writeAll(data, to: fd, timeout: timeout)
        case let .remote(targets)?:
            guard let remote = targets.first(where: { $0.target == target }), let stream = remote.open() else { return false }
            return pump(stream, to: fd, timeout: timeout)
        case nil:
            return false
        }
    }

    /// The target whose bytes answer a request for `target` on Wayland: X's `STRING` (Latin-1) and
    /// `TEXT` (the owner's choice) are the source's UTF-8 text there, as wl-copy serves every
    /// text name; any other target is itself.
    static func servedTarget(_ target: String, offering targets: [String]) -> String {
        guard target == "STRING" || target == "TEXT" else { return target }
        return ["UTF8_STRING", "text/plain;charset=utf-8"].first(where: targets.contains) ?? target
    }

    /// Sends a file's bytes with sendfile (the kernel copies them); false when the reader went,
    /// stalled, or the file was cut short.
    private static func send(_ file: FileContents, to fd: Int32, timeout: Double) -> Bool {
        file.withDescriptor { source in
            var offset = off_t(0)
            while Int(offset) < file.size {
                let sent = sendfile(fd, source, &offset, min(file.size - Int(offset), 1 << 30))
                if sent > 0 { continue }
                if sent == 0 { return false }
                if errno == EINTR { continue }
                guard errno == EAGAIN else { return false }
                var pollFD = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                guard poll(&pollFD, 1, Int32(timeout * 1000)) > 0, pollFD.revents & Int16(POLLOUT) != 0 else { return false }
            }
            return true
        }
    }

    /// Writes a stream's bytes as they come; false when it failed or the reader went.
    private static func pump(_ stream: ByteStream, to fd: Int32, timeout: Double) -> Bool {
        defer { stream.cancel() }
        let wake = DispatchSemaphore(value: 0)
        while true {
            let now = stream.snapshot()
            if now.failure != nil { return false }
            if let chunk = stream.take(upTo: 1 << 20) {
                guard writeAll(chunk, to: fd, timeout: timeout) else { return false }
                continue
            }
            if now.isEnded { return true }
            stream.observe(after: now.version) { wake.signal() }
            guard wake.wait(timeout: .now() + timeout) == .success else { return false }
        }
    }

    /// Writes all of `data`, waiting at most `timeout` for the reader each time it stalls; false
    /// when the reader went or stalled.
    private static func writeAll(_ data: Data, to fd: Int32, timeout: Double) -> Bool {
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written > 0 {
                    offset += written
                    continue
                }
                if written < 0, errno == EINTR { continue }
                guard written < 0, errno == EAGAIN else { return false }
                var pollFD = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                guard poll(&pollFD, 1, Int32(timeout * 1000)) > 0, pollFD.revents & Int16(POLLOUT) != 0 else { return false }
            }
            return true
        }
    }

    // MARK: Reading

    /// The current offer of a pasteboard and its types, nil when it is empty.
    private func offer(_ name: Pasteboard.Name) throws -> (id: UInt32, types: [String])? {
        let selection = try selection(name)
        if let reason = connection.endReason { throw PasteboardError.backendFailure(reason) }
        return connection.withState { state in
            guard let id = state.current[selection], let types = state.types(of: id) else { return nil }
            return (id, types.map { String(decoding: $0, as: UTF8.self) })
        }
    }

    /// Streams an offer's bytes of one type to `bytes`: a pipe whose write end goes to the source
    /// through the compositor, read to its end. False when the offer does not list the type.
    func receive(_ offer: (id: UInt32, types: [String]), type: String, limit: Int, bytes: (Data) throws -> Void) throws -> Bool {
        guard offer.types.contains(type) else { return false }
        return try drain(try request(offer, type: type), limit: limit, bytes: bytes)
    }

    /// A receive sent whose pipe is not read yet: its read end, which the reader closes.
    struct PendingReceive {
        let type: String
        let fd: Int32
    }

    /// Sends a receive of one type of an offer: the write end of a new pipe goes to the source
    /// through the compositor; the read end is returned, for ``drain(_:limit:bytes:)``.
    private func request(_ offer: (id: UInt32, types: [String]), type: String) throws -> PendingReceive {
        var ends: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&ends) == 0 else { throw PasteboardError.backendFailure("cannot create a pipe: \(Errno.current)") }
        // A megabyte at a time (the default pipe holds 64 KiB): a large copy moves with a
        // sixteenth of the wake-ups. Where the limit is lower, the default stays.
        _ = clinux_set_pipe_size(ends[1], 1 << 20)
        let sent: Bool
        do {
            sent = try connection.send(WaylandRequest.receive(offer: offer.id, type: Array(type.utf8), fd: ends[1]), ifLive: offer.id)
        } catch {
            Glibc.close(ends[0])
            Glibc.close(ends[1])
            throw PasteboardError.backendFailure("\(error)")
        }
        Glibc.close(ends[1])
        guard sent else {
            Glibc.close(ends[0])
            throw PasteboardError.backendFailure("the selection changed while \(type) was read: try again")
        }
        return PendingReceive(type: type, fd: ends[0])
    }

    /// Reads a receive's pipe to its end (and closes it), its bytes to `bytes`.
    private func drain(_ pending: PendingReceive, limit: Int, bytes: (Data) throws -> Void) throws -> Bool {
        defer { Glibc.close(pending.fd) }
        let type = pending.type
        // Not zeroed (a zeroed megabyte was half of a small paste's instructions): only what a
        // read fills is ever looked at. A large read's buffer becomes its Data as it is (no copy:
        // 100 MB from wl-copy's cat spent a fifth of its time copying every megabyte again), and
        // the next read gets a new one; malloc hands back the same memory once the reader has
        // dropped the chunk. A small read is copied and the buffer kept.
        var buffer = UnsafeMutableRawPointer(malloc(Self.receiveChunk)!)
        defer { free(buffer) }
        var total = 0
        let wait = Int32(min(configuration.readTimeout * 1000, Double(Int32.max)))
        while true {
            var pollFD = pollfd(fd: pending.fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pollFD, 1, wait)
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else {
                throw PasteboardError.timedOut(operation: "reading \(type) (the source sent nothing more after \(total) bytes)", seconds: configuration.readTimeout)
            }
            let count = Glibc.read(pending.fd, buffer, Self.receiveChunk)
            if count < 0, errno == EINTR || errno == EAGAIN { continue }
            guard count >= 0 else { throw PasteboardError.backendFailure("reading \(type) failed: \(Errno.current)") }
            if count == 0 { return true }
            total += count
            guard total <= limit else { throw PasteboardError.backendFailure("the data is more than the \(limit)-byte limit") }
            if count < Self.receiveChunk / 4 {
                try bytes(Data(bytes: buffer, count: count))
            } else {
                let chunk = Data(bytesNoCopy: buffer, count: count, deallocator: .free)
                buffer = UnsafeMutableRawPointer(malloc(Self.receiveChunk)!)
                try bytes(chunk)
            }
        }
    }

    /// The most bytes one read of a receive's pipe takes: the pipe's size (``request(_:type:)``).
    static let receiveChunk = 1 << 20

    /// The reader of an offer: its targets and its manifest, when it lists one. With `early`, a
    /// target likely read next is asked for right after the manifest, both in flight at once
    /// (the source answers the second while the manifest is read): a paste of an xpb copy waits
    /// for one answer, not two in turn. Its pending receive is returned; the caller reads it or
    /// closes it.
    private func reader(_ name: Pasteboard.Name, early: (([String]) -> String?)? = nil)
        throws -> (reader: OfferReader, offer: (id: UInt32, types: [String]), early: PendingReceive?)? {
        guard let offer = try offer(name) else { return nil }
        var manifest: Data?
        var pending: PendingReceive?
        if offer.types.contains(OfferReader.manifestTarget), let asked = try? request(offer, type: OfferReader.manifestTarget) {
            if let target = early?(offer.types), offer.types.contains(target) { pending = try? request(offer, type: target) }
            var bytes = Data()
            if (try? drain(asked, limit: 1 << 20, bytes: { bytes.append($0) })) == true { manifest = bytes }
        }
        return (OfferReader(targets: offer.types, manifest: manifest, registry: registry), offer, pending)
    }

    public var isConnected: Bool { connection.endReason == nil }

    public func targets(of name: Pasteboard.Name) throws -> [String] {
        try offer(name)?.types ?? []
    }

    public func itemTypesIfOwned(of name: Pasteboard.Name) throws -> [[PasteboardType]]? {
        try reader(name)?.reader.itemTypes
    }

    /// Data-control does not say which client made a selection: the owner is named only when it
    /// is this process.
    public func contentsOwner(of name: Pasteboard.Name) throws -> PasteboardOwner? {
        guard try offer(name) != nil else { return nil }
        if isOwner(of: name) {
            return PasteboardOwner(id: "this process", processID: Int(getpid()), appName: "xpb")
        }
        return PasteboardOwner(id: "unknown (Wayland does not name the client that copied)")
    }

    public func stream(of name: Pasteboard.Name, item: Int, limit: Int?, likely: PasteboardType?,
                       choosing choose: ([[PasteboardType]]?) throws -> PasteboardType,
                       file: (FileContents) throws -> Void, bytes: (Data) throws -> Void) throws -> Bool {
        let registry = self.registry
        let found = try reader(name, early: { offered in
            likely.flatMap { item == 0 ? OfferReader.firstTarget(for: $0, offered: offered, registry: registry) : nil }
        })
        var early = found?.early
        defer { if let early { Glibc.close(early.fd) } }
        let types = found?.reader.itemTypes
        let type = try choose(types)
        guard let found, let types else { return false }
        guard types.indices.contains(item) else { throw PasteboardError.itemIndexOutOfRange(item, count: types.count) }
        let limit = limit ?? configuration.maxReadSize
        let offer = found.offer
        return try found.reader.read(item: item, type: type, convert: { target, sink in
            if let pending = early, pending.type == target {
                early = nil
                return try self.drain(pending, limit: limit, bytes: sink) ? target : nil
            }
            return try self.receive(offer, type: target, limit: limit, bytes: sink) ? target : nil
        }, bytes: bytes)
    }

    public func stream(of name: Pasteboard.Name, target: String, limit: Int?, bytes: (Data) throws -> Void) throws -> Bool? {
        guard let offer = try offer(name) else { return nil }
        return try receive(offer, type: target, limit: limit ?? configuration.maxReadSize, bytes: bytes)
    }

    // MARK: PasteboardBackend

    public func exists(_ name: Pasteboard.Name) -> Bool { name == .general || name == .find }

    public func create(_ name: Pasteboard.Name) throws {
        _ = try selection(name)
    }

    public func remove(_ name: Pasteboard.Name) {}
    /// A Wayland selection lasts while its source's client does (or a clipboard manager keeps it).
    public func isPersistent(_ name: Pasteboard.Name) -> Bool { false }
    public func setPersistent(_ isPersistent: Bool, for name: Pasteboard.Name) {}

    public func changeCount(of name: Pasteboard.Name) -> Int {
        guard let selection = try? selection(name) else { return 0 }
        return connection.withState { $0.changeCounts[selection] ?? 0 }
    }

    public func itemTypes(of name: Pasteboard.Name) throws -> [[PasteboardType]] {
        try itemTypesIfOwned(of: name) ?? []
    }

    public func data(of name: Pasteboard.Name, item: Int, type: PasteboardType) throws -> Data? {
        try streamedData(of: name, item: item, type: type)
    }

    public func items(of name: Pasteboard.Name) throws -> [PasteboardItem] {
        if let selection = try? selection(name),
           case let .items(held)? = state.withLock({ state in state.ours[selection].flatMap { state.held[$0] } }) {
            return held.items
        }
        return try streamedItems(of: name)
    }

    public func options(of name: Pasteboard.Name) -> PasteboardOptions {
        guard let selection = try? selection(name) else { return PasteboardOptions() }
        guard case let .items(held)? = state.withLock({ state in state.ours[selection].flatMap { state.held[$0] } }) else { return PasteboardOptions() }
        return held.options
    }

    // MARK: Writing

    /// Makes a source of the items (every target an X owner of them would offer, as MIME types)
    /// and sets it as the selection; the compositor has it when this returns.
    public func setItems(_ items: [PasteboardItem], options: PasteboardOptions, on name: Pasteboard.Name) throws {
        _ = try own(.items(HeldSelection(items: items, options: options, registry: registry)), on: name, if: nil)
    }

    /// Sets a source of `contents` as the selection if `precondition` (asked with the selection's
    /// owner number just before) allows it; the compositor has it when this returns. The source,
    /// its types and the selection go out with the round trip's sync, in one message.
    func own(_ contents: SourceContents, on name: Pasteboard.Name, if precondition: ((UInt?) -> Bool)?) throws -> Bool {
        let selection = try selection(name)
        do {
            var owned = false
            try connection.roundtrip(timeout: configuration.readTimeout) {
                let made = connection.withState { state -> (source: UInt32, device: UInt32, manager: UInt32)? in
                    if let precondition, !precondition(state.owner(of: selection)) { return nil }
                    let source = state.make(.source(state.manager?.flavour ?? .wlr))
                    state.expectOwn(selection, source: source, types: contents.offered.map { Array($0.utf8) })
                    return (source, state.device ?? 0, state.manager?.id ?? 0)
                }
                guard let made else { return }
                state.withLock { state in
                    state.held[made.source] = contents
                    state.ours[selection] = made.source
                }
                try connection.writeLocked(WaylandRequest.createSource(manager: made.manager, id: made.source))
                for target in contents.offered {
                    try connection.writeLocked(WaylandRequest.offer(source: made.source, type: Array(target.utf8)))
                }
                try connection.writeLocked(WaylandRequest.setSelection(device: made.device, source: made.source, primary: selection == .primary))
                owned = true
            }
            return owned
        } catch {
            throw PasteboardError.backendFailure("\(error)")
        }
    }

    public func addItems(_ items: [PasteboardItem], to name: Pasteboard.Name) throws {
        try addStreamedItems(items, to: name)
    }

    /// Empties the selection, whoever holds it (data-control may set no source).
    ///
    /// A selection this process holds is given up by destroying its source: the compositor
    /// empties the selection only if that source is still it. A `set_selection(null)` would also
    /// empty a newer copy that another client made meanwhile (an owner giving up after
    /// `--paste-once` emptied the next copy, when the two crossed).
    public func clear(_ name: Pasteboard.Name) throws {
        let selection = try selection(name)
        let device = connection.withState { $0.device ?? 0 }
        do {
            // The source's destroy (or the empty selection) goes out with the round trip's sync,
            // in one message.
            try connection.roundtrip(timeout: configuration.readTimeout) {
                if let source = state.withLock({ state -> UInt32? in
                    guard let source = state.ours.removeValue(forKey: selection) else { return nil }
                    state.held[source] = nil
                    return source
                }) {
                    connection.destroyLocked(source)
                } else {
                    try connection.writeLocked(WaylandRequest.setSelection(device: device, source: nil, primary: selection == .primary))
                }
            }
        } catch {
            throw PasteboardError.backendFailure("\(error)")
        }
    }

    /// Lets go of the compositor. Nothing is handed off: a clipboard manager on Wayland takes a
    /// copy when the selection is set, not when its source goes.
    @discardableResult
    public func close(handOff: Bool = false) -> Bool {
        let first = state.withLock { state in
            defer { state.isClosed = true }
            return !state.isClosed
        }
        if first { connection.close() }
        return false
    }

    // MARK: Owning

    public func onPasted(_ handler: (@Sendable (Pasteboard.Name, PasteReading) -> Void)?) {
        state.withLock { $0.pastedHook = handler }
    }

    public func onServed(_ handler: (@Sendable (Pasteboard.Name, PasteboardType) -> Void)?) {
        state.withLock { $0.servedHandler = handler }
    }

    public func refuseSecrets(_ rule: SecretRefusal) {
        state.withLock { $0.secretRefusal = rule }
    }

    public func isOwner(of name: Pasteboard.Name) -> Bool {
        guard let selection = try? selection(name) else { return false }
        return state.withLock { $0.ours[selection] != nil }
    }

    public func activeTransferCount() throws -> Int {
        state.withLock { $0.activeSends }
    }
}
