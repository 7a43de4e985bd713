import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire
import PasteboardX11

/// xpb on a host without a display: the pasteboards of this user's headless daemon
/// (`xpbd --headless`), read and written on its control socket. The same types, the same choice
/// of target and the same conversions as on X (``OfferReader``, the daemon's ``HeldSelection``):
/// a script behaves the same over ssh as at the desktop.
struct HeadlessPasteboards {
    private var client: DaemonClient

    /// Whether xpb runs without a display: no `--display` and no `$DISPLAY`.
    static func isHeadless(display: String?) -> Bool {
        guard display == nil else { return false }
        return (ProcessInfo.processInfo.environment["DISPLAY"] ?? "").isEmpty
    }

    /// The socket of this user's headless daemon.
    static var socketPath: String {
        ControlEndpoint.headlessSocketPath(environment: ProcessInfo.processInfo.environment, uid: getuid())
    }

    /// What to do when there is neither a display nor a headless daemon.
    static let notRunning = "no display and no headless xpbd: set DISPLAY (or pass --display), or start one with 'xpbd --headless &' (a desktop running 'xpbd --peer THIS-HOST' starts one over ssh)"

    /// Whether a headless daemon answers on its socket now.
    static var isRunning: Bool {
        guard let fd = try? LocalSocket.connect(socketPath) else { return false }
        Glibc.close(fd)
        return true
    }

    /// Connects to the headless daemon; a ``Failure`` (status 5, no display) when none runs.
    init(timeout: Double = 10) throws {
        client = try Self.connect(timeout: timeout)
    }

    /// A control connection to the headless daemon; a ``Failure`` (status 5, no display) when none runs.
    static func connect(timeout: Double = 10) throws -> DaemonClient {
        do {
            return try DaemonClient(path: socketPath, display: "headless", timeout: timeout, notRunning: notRunning)
        } catch let failure as Failure where failure.message == notRunning {
            throw Failure(notRunning, .noDisplay)
        }
    }

    /// The daemon to ask about the history: the display's xpbd, or without a display this host's
    /// headless one.
    static func daemonClient(display: String?) throws -> DaemonClient {
        isHeadless(display: display) ? try connect() : try DaemonClient(display: display)
    }

    func close() { client.close() }

    // MARK: Reading

    /// What a pasteboard offers, nil when it is empty.
    mutating func offer(_ selection: String) throws -> PasteboardOffer? {
        guard case let .offer(offer) = try client.send(.offer(pasteboard: selection)) else { throw Failure("xpbd answered out of turn") }
        return offer
    }

    /// A pasteboard's change count, also when it is empty (every pasteboard changed since the
    /// daemon started is in its status).
    mutating func changeCount(_ selection: String) throws -> Int {
        guard case let .status(status) = try client.send(.status) else { throw Failure("xpbd answered out of turn") }
        return status.changeCounts[selection] ?? 0
    }

    /// Streams a target's bytes to `bytes`; returns the reply's type, nil when the target is not served.
    mutating func read(_ selection: String, target: String, limit: Int, bytes: (Data) throws -> Void) throws -> String? {
        try client.post(.read(pasteboard: selection, target: target, limit: limit))
        let type: String
        switch try client.nextReply() {
        case .refused: return nil
        case let .transfer(replyType, size):
            if let size, size > limit { throw Failure("the data is \(size) bytes, more than the \(limit)-byte limit") }
            type = replyType
        default: throw Failure("xpbd answered out of turn")
        }
        var total = 0
        while true {
            let frame = try client.nextFrame()
            if frame.kind == .data {
                total += frame.payload.count
                guard total <= limit else { throw Failure("the data is more than the \(limit)-byte limit") }
                try bytes(frame.payload)
                continue
            }
            guard case let .end(sent) = try ControlCoding.decode(ControlReply.self, from: frame.payload) else {
                throw Failure("xpbd answered out of turn")
            }
            guard sent == total else { throw Failure("xpbd sent \(total) of \(sent) bytes") }
            return type
        }
    }

    /// The offer as the reader sees it (its manifest read when it lists one); nil when empty.
    mutating func reader(_ selection: String) throws -> OfferReader? {
        guard let offer = try offer(selection) else { return nil }
        return try reader(of: offer)
    }

    /// The reader of an offer already asked for (its manifest read when it lists one).
    mutating func reader(of offer: PasteboardOffer) throws -> OfferReader {
        let selection = offer.pasteboard
        var manifest: Data?
        if offer.targets.contains(OfferReader.manifestTarget) {
            var bytes = Data()
            if try read(selection, target: OfferReader.manifestTarget, limit: 1 << 20, bytes: { bytes.append($0) }) != nil { manifest = bytes }
        }
        return OfferReader(targets: offer.targets, manifest: manifest)
    }

    /// The types of every item, nil when the pasteboard is empty.
    mutating func itemTypes(_ selection: String) throws -> [[PasteboardType]]? {
        try reader(selection)?.itemTypes
    }

    /// Streams one representation of an item chosen by `choose` from the types of every item
    /// (nil: empty), as ``X11PasteboardBackend/stream(of:item:limit:likely:choosing:file:bytes:)`` does.
    mutating func stream(_ selection: String, item: Int, limit: Int, choosing choose: ([[PasteboardType]]?) throws -> PasteboardType,
                         bytes: (Data) throws -> Void) throws -> Bool {
        let reader = try reader(selection)
        let types = reader?.itemTypes
        let type = try choose(types)
        guard let reader, let types, types.indices.contains(item) else { return false }
        var this = self
        defer { self = this }
        return try reader.read(item: item, type: type, convert: { target, sink in
            try this.read(selection, target: target, limit: limit, bytes: sink)
        }, bytes: bytes)
    }

    // MARK: Writing

    /// Hands new contents to the daemon: every representation's bytes, then its answer.
    mutating func write(_ selection: String, items: [PasteboardItem], options: PasteboardOptions, credit: CopyCredit? = nil) throws {
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
        let write = PasteboardWrite(pasteboard: selection, items: representations.map { $0.map { PasteboardWrite.Representation(type: $0.type.identifier, size: $0.size) } },
                                    isLocalOnly: options.isLocalOnly, expires: options.expirationDate, origin: "xpb",
                                    copiedBy: credit?.name, copiedByPID: credit?.pid)
        try client.post(.write(write))
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
                guard piece.count == length else { throw Failure("the \(type.identifier) data changed while it was copied") }
                do {
                    try client.sendData(piece)
                } catch {
                    // The daemon refused the write from its announcement (a cap) and closed: its
                    // answer says why, where the broken pipe would not.
                    _ = try client.nextReply()
                    throw error
                }
                offset += length
            }
        }
        guard case .done = try client.nextReply() else { throw Failure("xpbd answered out of turn") }
    }

    mutating func clear(_ selection: String) throws {
        guard case .done = try client.send(.clearPasteboard(pasteboard: selection)) else { throw Failure("xpbd answered out of turn") }
    }

    /// Calls `each` with every change from now on until it returns false or the daemon goes.
    mutating func watch(_ selection: String?, each: (PasteboardChangeNote) throws -> Bool) throws {
        try client.post(.watch(pasteboard: selection))
        guard case .done = try client.nextReply() else { throw Failure("xpbd answered out of turn") }
        client.waitIndefinitely()
        while true {
            let reply: ControlReply
            do {
                reply = try client.nextReply()
            } catch {
                throw Failure("the headless xpbd stopped: \((error as? Failure)?.message ?? "\(error)")")
            }
            guard case let .changed(change) = reply else { throw Failure("xpbd answered out of turn") }
            guard try each(change) else { return }
        }
    }
}
