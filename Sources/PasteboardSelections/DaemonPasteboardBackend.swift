import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire
import Synchronization

/// The pasteboards of a host without a display: this user's headless xpbd (`xpbd --headless`),
/// read and written on its control socket. The same types, the same choice of target and the
/// same conversions as on X (``OfferReader``; the daemon serves a copy as an X owner of its items
/// would): a script behaves the same over ssh as at the desktop. The daemon holds what is
/// written after this process exits, so every pasteboard is persistent and nothing is handed
/// off. ``PasteboardKit/Pasteboard/general`` is this backend where there is no display and the
/// daemon answers.
///
/// One connection carries the requests, one at a time. Changes come on a second one, opened with
/// `observesChanges` (the default): the daemon's watch, published in order on ``changeCenter``.
public final class DaemonPasteboardBackend: StreamingPasteboardBackend {
    public let registry: TypeRegistry
    public let changeCenter: ChangeCenter
    /// The daemon's socket.
    public let socketPath: String
    private let credit: CopyCredit?
    private let timeout: Double
    private let client: Mutex<ControlClient?>
    /// The watch connection's descriptor, while it is open.
    private let watcher = Mutex<Int32?>(nil)
    private let state = Mutex(State())

    private struct State {
        var isClosed = false
        /// The change counts last heard (status, an offer, the watch).
        var counts: [String: Int] = [:]
        /// The types each pasteboard had at its last change, for the next change's added and removed.
        var types: [String: [PasteboardType]] = [:]
    }

    /// The socket of this user's headless daemon.
    public static var socketPath: String {
        ControlEndpoint.headlessSocketPath(environment: ControlEndpoint.environment, uid: getuid())
    }

    /// What to do when there is neither a display nor a headless daemon.
    public static let notRunning = "no display and no headless xpbd: set DISPLAY (or pass --display), or start one with 'xpbd --headless &' (a desktop running 'xpbd --peer THIS-HOST' starts one over ssh)"

    /// Whether a headless daemon answers on its socket now.
    public static var isRunning: Bool {
        guard let fd = try? LocalSocket.connect(socketPath) else { return false }
        Glibc.close(fd)
        return true
    }

    /// Connects to the daemon.
    ///
    /// - Parameters:
    ///   - credit: who makes the copies this backend writes (the daemon's history and `xpb info`
    ///     name it); nil: the daemon names this process.
    ///   - timeout: how long the daemon may take to answer one request.
    ///   - observesChanges: whether changes are published on ``changeCenter`` (a second connection).
    /// - Throws: ``PasteboardKit/PasteboardError/unavailable(_:)`` when no headless daemon runs.
    public init(socketPath: String = DaemonPasteboardBackend.socketPath, credit: CopyCredit? = nil, timeout: Double = 10,
                observesChanges: Bool = true, registry: TypeRegistry = .standard, changeCenter: ChangeCenter = ChangeCenter()) throws {
        self.socketPath = socketPath
        self.credit = credit
        self.timeout = timeout
        self.registry = registry
        self.changeCenter = changeCenter
        client = Mutex(try Self.connect(socketPath, timeout: timeout))
        changeCenter.attach(self)
        if observesChanges { try startWatching() }
    }

    /// A backend let go without ``close(handOff:)`` closes its connections (the watch thread
    /// ends with its own).
    deinit {
        close(handOff: false)
    }

    package static func connect(_ path: String, timeout: Double) throws -> ControlClient {
        do {
            return try ControlClient(path: path, display: "headless", timeout: timeout, notRunning: notRunning)
        } catch let error as ControlClientError where error.kind == .notRunning {
            throw PasteboardError.unavailable(notRunning)
        }
    }

    /// Asks the daemon on the request connection; `body` may stream on it. A connection a
    /// request broke off on is made again for the next request.
    private func request<T>(_ body: (inout ControlClient) throws -> T) throws -> T {
        try client.withLock { client in
            if client == nil {
                guard !state.withLock({ $0.isClosed }) else { throw PasteboardError.backendFailure("the backend was closed") }
                client = try Self.connect(socketPath, timeout: timeout)
            }
            do {
                return try body(&client!)
            } catch {
                // A request that broke off (a refusal, a limit, a sink that failed) may leave
                // frames of its answer on the way: the next request gets a new connection.
                client?.close()
                client = nil
                if let error = error as? ControlClientError { throw PasteboardError.backendFailure(error.message) }
                throw error
            }
        }
    }

    // MARK: Reading

    /// What a pasteboard offers, nil when it is empty.
    package func offer(of name: Pasteboard.Name) throws -> PasteboardOffer? {
        let offer = try request { client -> PasteboardOffer? in
            guard case let .offer(offer) = try client.send(.offer(pasteboard: SelectionNames.selection(for: name))) else {
                throw ControlClientError("xpbd answered out of turn")
            }
            return offer
        }
        if let offer { state.withLock { $0.counts[offer.pasteboard] = offer.changeCount } }
        return offer
    }

    /// Streams a target's bytes to `bytes`; returns the reply's type, nil when the target is not served.
    private func read(_ selection: String, target: String, limit: Int, bytes: (Data) throws -> Void) throws -> String? {
        try request { client -> String? in
            try client.post(.read(pasteboard: selection, target: target, limit: limit))
            let type: String
            switch try client.nextReply() {
            case .refused: return nil
            case let .transfer(replyType, size):
                if let size, size > limit { throw PasteboardError.backendFailure("the data is \(size) bytes, more than the \(limit)-byte limit") }
                type = replyType
            default: throw ControlClientError("xpbd answered out of turn")
            }
            var total = 0
            while true {
                let frame = try client.nextFrame()
                if frame.kind == .data {
                    total += frame.payload.count
                    guard total <= limit else { throw PasteboardError.backendFailure("the data is more than the \(limit)-byte limit") }
                    try bytes(frame.payload)
                    continue
                }
                guard case let .end(sent) = try ControlCoding.decode(ControlReply.self, from: frame.payload) else {
                    throw ControlClientError("xpbd answered out of turn")
                }
                guard sent == total else { throw ControlClientError("xpbd sent \(total) of \(sent) bytes") }
                return type
            }
        }
    }

    /// The offer as the reader sees it (its manifest read when it lists one); nil when empty.
    private func reader(_ name: Pasteboard.Name) throws -> OfferReader? {
        guard let offer = try offer(of: name) else { return nil }
        var manifest: Data?
        if offer.targets.contains(OfferReader.manifestTarget) {
            var bytes = Data()
            if try read(offer.pasteboard, target: OfferReader.manifestTarget, limit: 1 << 20, bytes: { bytes.append($0) }) != nil { manifest = bytes }
        }
        return OfferReader(targets: offer.targets, manifest: manifest, registry: registry)
    }

    public var isConnected: Bool {
        !state.withLock { $0.isClosed } && (try? changeCounts()) != nil
    }

    public func targets(of name: Pasteboard.Name) throws -> [String] {
        try offer(of: name)?.targets ?? []
    }

    public func itemTypesIfOwned(of name: Pasteboard.Name) throws -> [[PasteboardType]]? {
        try reader(name)?.itemTypes
    }

    public func contentsOwner(of name: Pasteboard.Name) throws -> PasteboardOwner? {
        try offer(of: name).map { offer in
            PasteboardOwner(id: offer.origin, processID: offer.ownerPID, appName: offer.ownerApp, executablePath: offer.ownerExecutable,
                            copiedBy: offer.copiedBy.map { CopyCredit(name: $0, pid: offer.copiedByPID) }, origin: offer.origin)
        }
    }

    public func stream(of name: Pasteboard.Name, item: Int, limit: Int?, likely: PasteboardType?,
                       choosing choose: ([[PasteboardType]]?) throws -> PasteboardType,
                       file: (FileContents) throws -> Void, bytes: (Data) throws -> Void) throws -> Bool {
        let reader = try reader(name)
        let types = reader?.itemTypes
        let type = try choose(types)
        guard let reader, let types else { return false }
        guard types.indices.contains(item) else { throw PasteboardError.itemIndexOutOfRange(item, count: types.count) }
        let selection = SelectionNames.selection(for: name)
        let limit = limit ?? Int.max
        return try reader.read(item: item, type: type, convert: { target, sink in
            try self.read(selection, target: target, limit: limit, bytes: sink)
        }, bytes: bytes)
    }

    public func stream(of name: Pasteboard.Name, target: String, limit: Int?, bytes: (Data) throws -> Void) throws -> Bool? {
        guard try offer(of: name) != nil else { return nil }
        return try read(SelectionNames.selection(for: name), target: target, limit: limit ?? Int.max, bytes: bytes) != nil
    }

    // MARK: PasteboardBackend

    /// Every valid name is a pasteboard the daemon can hold.
    public func exists(_ name: Pasteboard.Name) -> Bool { true }
    public func create(_ name: Pasteboard.Name) throws {}

    /// Empties a named pasteboard (the general and find pasteboards stay as they are).
    public func remove(_ name: Pasteboard.Name) {
        guard name != .general, name != .find else { return }
        try? clear(name)
    }

    /// The daemon holds every pasteboard after this process exits.
    public func isPersistent(_ name: Pasteboard.Name) -> Bool { true }
    /// Nothing to set: every pasteboard the daemon holds is persistent.
    public func setPersistent(_ isPersistent: Bool, for name: Pasteboard.Name) {}

    /// The daemon's change counts by selection (every pasteboard changed since it started).
    private func changeCounts() throws -> [String: Int] {
        let counts = try request { client -> [String: Int] in
            guard case let .status(status) = try client.send(.status) else { throw ControlClientError("xpbd answered out of turn") }
            return status.changeCounts
        }
        state.withLock { $0.counts.merge(counts) { $1 } }
        return counts
    }

    /// The count the daemon gives; the last one heard when it cannot be asked.
    public func changeCount(of name: Pasteboard.Name) -> Int {
        let selection = SelectionNames.selection(for: name)
        if let counts = try? changeCounts() { return counts[selection] ?? 0 }
        return state.withLock { $0.counts[selection] ?? 0 }
    }

    public func itemTypes(of name: Pasteboard.Name) throws -> [[PasteboardType]] {
        try itemTypesIfOwned(of: name) ?? []
    }

    public func data(of name: Pasteboard.Name, item: Int, type: PasteboardType) throws -> Data? {
        try streamedData(of: name, item: item, type: type)
    }

    public func items(of name: Pasteboard.Name) throws -> [PasteboardItem] {
        try streamedItems(of: name)
    }

    /// The options of a copy held by the daemon are its own (it drops an expired copy itself):
    /// what this process cannot read back is reported as the defaults.
    public func options(of name: Pasteboard.Name) -> PasteboardOptions { PasteboardOptions() }

    // MARK: Writing

    /// Hands new contents to the daemon: every representation's bytes (a file's in pieces, never
    /// whole in memory), then its answer.
    public func setItems(_ items: [PasteboardItem], options: PasteboardOptions, on name: Pasteboard.Name) throws {
        try request { client in
            guard case .done = try Self.post(items, options: options, pasteboard: SelectionNames.selection(for: name), credit: credit,
                                             as: { .write($0) }, on: &client) else {
                throw ControlClientError("xpbd answered out of turn")
            }
        }
    }

    /// Posts items as the request `request` makes of their ``PasteboardWrite`` (a write, a paste
    /// queue's new items), then every representation's bytes (a file's in pieces, never whole
    /// in memory); returns the daemon's answer.
    package static func post(_ items: [PasteboardItem], options: PasteboardOptions, pasteboard: String, credit: CopyCredit?,
                             as request: (PasteboardWrite) -> ControlRequest, on client: inout ControlClient) throws -> ControlReply {
        var representations: [[(type: PasteboardType, value: Representation, size: Int)]] = []
        for item in items {
            representations.append(try item.types.compactMap { type in
                guard let value = item.representation(for: type) else { return nil }
                switch value {
                case let .file(file): return (type, value, file.size)
                default:
                    let data = try value.resolve()
                    return (type, .data(data), data.count)
                }
            })
        }
        let write = PasteboardWrite(pasteboard: pasteboard,
                                    items: representations.map { $0.map { PasteboardWrite.Representation(type: $0.type.identifier, size: $0.size) } },
                                    isLocalOnly: options.isLocalOnly, expires: options.expirationDate, origin: "xpb",
                                    copiedBy: credit?.name, copiedByPID: credit?.pid)
        try client.post(request(write))
        for (type, value, size) in representations.joined() {
            var offset = 0
            while offset < size {
                let length = min(HeadlessProtocol.chunkSize, size - offset)
                let piece: Data
                switch value {
                case let .file(file): piece = try file.read(offset: offset, length: length)
                default:
                    let data = try value.resolve()
                    piece = data.subdata(in: data.startIndex + offset ..< data.startIndex + offset + length)
                }
                guard piece.count == length else { throw PasteboardError.backendFailure("the \(type.identifier) data changed while it was copied") }
                do {
                    try client.sendData(piece)
                } catch {
                    // The daemon refused the write from its announcement (a cap) and closed:
                    // its answer says why, where the broken pipe would not.
                    _ = try client.nextReply()
                    throw error
                }
                offset += length
            }
        }
        return try client.nextReply()
    }

    /// The current items (their bytes read now), then `items`, as new contents.
    public func addItems(_ items: [PasteboardItem], to name: Pasteboard.Name) throws {
        try addStreamedItems(items, to: name)
    }

    public func clear(_ name: Pasteboard.Name) throws {
        try request { client in
            guard case .done = try client.send(.clearPasteboard(pasteboard: SelectionNames.selection(for: name))) else {
                throw ControlClientError("xpbd answered out of turn")
            }
        }
    }

    /// Closes both connections; nothing to hand off (the daemon holds the contents).
    @discardableResult
    public func close(handOff: Bool = true) -> Bool {
        state.withLock { $0.isClosed = true }
        client.withLock { client in
            client?.close()
            client = nil
        }
        // The watch thread ends when its connection is shut down under it.
        watcher.withLock { fd in
            if let fd { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        return false
    }

    // MARK: Changes

    /// Opens the watch connection and publishes each change it hears, in order, until the
    /// daemon goes or the backend is closed (then the change streams end).
    private func startWatching() throws {
        var connection = try Self.connect(socketPath, timeout: timeout)
        try connection.post(.watch(pasteboard: nil))
        guard case .done = try connection.nextReply() else { throw PasteboardError.backendFailure("xpbd did not start the watch") }
        connection.waitIndefinitely()
        watcher.withLock { $0 = connection.descriptor }
        let box = UncheckedBox(connection)
        try DetachedThread.start(name: "xpb.watch") { [weak self] in
            var connection = box.value
            defer {
                self?.watcher.withLock { $0 = nil }
                connection.close()
                self?.changeCenter.finish()
            }
            while let reply = try? connection.nextReply(), case let .changed(note) = reply {
                guard let self else { return }
                self.publish(note)
            }
        }
    }

    private func publish(_ note: PasteboardChangeNote) {
        guard let name = SelectionNames.pasteboard(forSelection: note.pasteboard) else { return }
        let types = OfferReader(targets: note.targets, manifest: nil, registry: registry).itemTypes.first ?? []
        let before = state.withLock { state -> [PasteboardType] in
            state.counts[note.pasteboard] = note.changeCount
            defer { state.types[note.pasteboard] = types }
            return state.types[note.pasteboard] ?? []
        }
        changeCenter.publish(PasteboardChange(name: name, changeCount: note.changeCount, typesBefore: before, typesAfter: types))
    }
}

/// A value handed to the one thread that uses it from then on.
private struct UncheckedBox<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}
