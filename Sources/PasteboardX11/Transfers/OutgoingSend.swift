internal import CX11
import PasteboardSelections
import FoundationEssentials

/// Identifies one transfer to a requestor: its window and the property it reads.
struct TransferKey: Hashable {
    let requestor: X11Window
    let property: X11Atom
}

/// One INCR send to one requestor, as Qt's `QXcbClipboardTransaction` is: the reply's type, where
/// its chunks come from, whether the requestor waits for one, and the one timer it holds. It
/// decides what comes next (``next(chunkSize:)``); ``OutgoingSends`` writes it. Memory, files and
/// remote streams go through the same steps.
struct OutgoingSend {
    /// Where the chunks come from.
    enum Supply {
        /// Bytes at hand (memory or a file), a range at a time.
        case source(OutgoingTransfer)
        /// A sync peer's bytes, which may not have come yet.
        case stream(ByteStream)
    }

    /// What is done for a requestor that took the last chunk.
    enum Step {
        /// Write this range of the source.
        case write(TransferSource, Range<Int>)
        /// Write this chunk of the stream.
        case writeChunk(Data)
        /// Write the empty chunk: the transfer is complete.
        case finish
        /// The stream has nothing yet: wait for news past `version`.
        case wait(ByteStream, after: Int)
        /// The stream failed: end without the empty chunk (a requestor must never take a part
        /// for the whole).
        case abort
    }

    let type: X11Atom
    private(set) var supply: Supply
    /// A clipboard manager keeping a copy: its chunks wait while anyone else is being sent one
    /// (``OutgoingSends``), so that its keeping never slows a paste.
    var yields = false
    /// Since when (the X thread's clock) a chunk of this send has waited for the others.
    var waitingSince: UInt64?
    /// When (the X thread's clock) its requestor last took a chunk, or the send began.
    var lastProgress: UInt64 = 0
    /// The serve timer: the requestor must take each chunk in time. It rests while the
    /// requestor waits for a stream (the peer's delay is not the requestor's).
    var timer: TimerHandle?
    /// The requestor deleted the property and waits for the next chunk.
    var awaiting = false
    /// The selection and target it answers (what ``OutgoingSends/answers(_:selection:target:)`` compares).
    var answering: (selection: X11Atom, target: X11Atom)?

    init(type: X11Atom, supply: Supply) {
        self.type = type
        self.supply = supply
    }

    /// The stream, if the chunks come from one.
    var stream: ByteStream? {
        if case let .stream(stream) = supply { return stream }
        return nil
    }

    /// The next step for a requestor that waits for a chunk.
    mutating func next(chunkSize: Int) -> Step {
        switch supply {
        case var .source(transfer):
            guard let range = transfer.nextRange() else { return .finish }
            supply = .source(transfer)
            return range.isEmpty ? .finish : .write(transfer.source, range)
        case let .stream(stream):
            let now = stream.snapshot()
            if now.failure != nil { return .abort }
            if let chunk = stream.take(upTo: chunkSize) { return .writeChunk(chunk) }
            return now.isEnded ? .finish : .wait(stream, after: now.version)
        }
    }

    /// Ends the send's own resources: its stream stops (its timer is ``OutgoingSends``' to cancel).
    func cancelSupply() {
        stream?.cancel()
    }
}

/// The INCR sends under way, by requestor and property: each begins, continues as its requestor
/// takes a chunk, and ends here, whatever its bytes.
///
/// A clipboard manager's send gives way: its next chunk waits while another requestor's send is
/// moving (its requestor took a chunk within ``activeWindow``), up to ``maxYield`` a chunk.
/// Reading at the same time as a paste, through the same X server, the manager halved the
/// paste's speed (`xclip -o` of a 50 MB image took 2.07 × as long while xpbd kept it); waiting,
/// it costs the paste nothing and still moves on. A requestor that stopped reading (stopped, or
/// hostile) holds it back no longer than ``activeWindow``.
final class OutgoingSends {
    /// The longest a yielding send's chunk waits for the others (its reader gives up after its
    /// own read timeout without progress: seconds).
    static let maxYield: UInt64 = 500_000_000
    /// How long after its last chunk a send still counts as moving.
    static let activeWindow: UInt64 = 1_000_000_000

    private unowned let session: X11Session
    private let wire: X11Wire
    private let requestors: RequestorWatch
    private var sends: [TransferKey: OutgoingSend] = [:]
    /// Told each send that ends: whether its requestor had every byte.
    var ended: ((TransferKey, _ whole: Bool) -> Void)?

    init(session: X11Session, requestors: RequestorWatch) {
        self.session = session
        wire = session.wire
        self.requestors = requestors
    }

    var count: Int { sends.count }

    /// Ends every send (the session is finishing).
    func removeAll() {
        sends.removeAll()
    }

    /// How ``open(_:_:announcing:watched:)`` went.
    enum OutgoingOpening {
        case opened
        /// Over the caps: nothing was written, and a watch the caller holds is still its own.
        case refused
        /// The INCR marker could not be written: the send was opened and dropped again (its
        /// watch released, its stream cancelled).
        case failed
    }

    /// The one way an INCR send begins, whatever its bytes (memory, a file, a remote stream): a
    /// send the requestor started on the same property ends (it reused the property for a new
    /// request), the caps are checked, the INCR marker announces `announcing` bytes, and the serve
    /// timer runs. `watched`: the caller holds a watch of the requestor for this send already (a
    /// remote request, watched while it waited for its first bytes).
    func open(_ key: TransferKey, _ send: OutgoingSend, announcing: Int, watched: Bool) -> OutgoingOpening {
        drop(key)
        // Sends hold timers and a chunk in the server each: a requestor that starts them
        // without reading gets no more than its share.
        let others = requestors.count(key.requestor) - (watched ? 1 : 0)
        guard others < SelectionServer.maxTransfersPerRequestor, sends.count < SelectionServer.maxTransfers else { return .refused }
        var failed = !watched && !requestors.watch(key.requestor)
        wire.writeLongs(key.requestor, key.property, type: wire.known[.incr], [UInt(min(max(announcing, 0), Int(Int32.max)))],
                        onError: { _ in failed = true })
        sends[key] = send
        sends[key]?.lastProgress = session.configuration.clock()
        armTimer(key)
        guard !failed else {
            drop(key)
            return .failed
        }
        return .opened
    }

    /// Whether the send open on `key` answers this selection and target: a second request for
    /// them into the same property, read while the send is open, is answered by it. The
    /// requestor takes the SelectionNotify we sent for the first as its answer, whoever it is:
    /// the same client asking twice, or a new client whose window got a departed one's id (X
    /// reuses them), its request delivered to us in a later read than the departed one's. Opened
    /// anew, the send would write a second INCR marker into the property the requestor is
    /// reading, and it would take a part for the whole (a loaded run's reader: 6,751,428 bytes
    /// of 7,800,000, ended cleanly).
    func answers(_ key: TransferKey, selection: X11Atom, target: X11Atom) -> Bool {
        guard let answering = sends[key]?.answering else { return false }
        return answering.selection == selection && answering.target == target
    }

    /// The requestor must read (delete the property) within the serve timeout; past it, this
    /// send alone is given up.
    private func armTimer(_ key: TransferKey) {
        session.cancelTimer(sends[key]?.timer)
        sends[key]?.timer = session.after(session.configuration.serveTimeout) { [weak self] in
            self?.drop(key)
        }
    }

    /// The requestor deleted the property: it wants the next chunk.
    func continueSend(_ key: TransferKey) {
        guard sends[key] != nil else { return }
        sends[key]?.awaiting = true
        // Until the chunk is written, the requestor is not the one who keeps the send waiting.
        session.cancelTimer(sends[key]?.timer)
        sends[key]?.timer = nil
        writeNextChunk(key)
    }

    /// Whether another requestor's send than `key`'s is moving (one that does not yield, whose
    /// requestor took a chunk lately).
    private func othersUnderWay(than key: TransferKey, now: UInt64) -> Bool {
        sends.contains { $0.key != key && !$0.value.yields && now &- $0.value.lastProgress < Self.activeWindow }
    }

    /// A yielding send's chunk waits while others are under way, up to ``maxYield``: true when it
    /// waits (it is written when the others end, or when its time is up).
    private func waitsForOthers(_ key: TransferKey) -> Bool {
        let now = session.configuration.clock()
        guard let send = sends[key], send.yields, othersUnderWay(than: key, now: now) else {
            sends[key]?.waitingSince = nil
            return false
        }
        let since = send.waitingSince ?? now
        guard now - since < Self.maxYield else {
            sends[key]?.waitingSince = nil
            return false
        }
        if send.waitingSince == nil {
            sends[key]?.waitingSince = since
            session.after(Double(Self.maxYield) / 1e9) { [weak self] in self?.writeNextChunk(key) }
        }
        return true
    }

    /// A send to another requestor ended: the sends that waited for others look again (each
    /// writes its chunk unless others still move).
    private func resumeWaiting() {
        for (key, send) in sends where send.waitingSince != nil { writeNextChunk(key) }
    }

    /// Writes what the send says comes next, if its requestor waits for a chunk (and, for a
    /// clipboard manager's, nobody else's send is under way).
    func writeNextChunk(_ key: TransferKey) {
        guard sends[key]?.awaiting == true, !waitsForOthers(key), var send = sends[key] else { return }
        let step = send.next(chunkSize: wire.chunkSize)
        sends[key] = send
        var failed = false
        // An error the server reports later ends the send then.
        let onError: (XErrorRecord) -> Void = { [weak self] _ in
            failed = true
            self?.drop(key)
        }
        switch step {
        case let .write(source, range):
            do {
                try wire.writeBytes(key.requestor, key.property, type: send.type, from: source, range: range, onError: onError)
            } catch {
                // The file went away or shrank: the send ends; the requestor's read times out.
                return drop(key)
            }
        case let .writeChunk(chunk):
            chunk.withUnsafeBytes { wire.writeBytes(key.requestor, key.property, type: send.type, $0, onError: onError) }
        case .finish:
            wire.writeBytes(key.requestor, key.property, type: send.type, UnsafeRawBufferPointer(start: nil, count: 0), onError: { _ in })
            return drop(key, whole: true)
        case let .wait(stream, version):
            let enqueue = session.enqueue
            stream.observe(after: version) {
                _ = enqueue? { session in session.owner.sends.writeNextChunk(key) }
            }
            return
        case .abort:
            return drop(key)
        }
        guard !failed else { return drop(key) }
        sends[key]?.awaiting = false
        sends[key]?.lastProgress = session.configuration.clock()
        armTimer(key)
    }

    /// Ends a send: its timer, its stream, its watch of the requestor. Sends that waited for it
    /// go on.
    /// `whole`: its requestor had every byte.
    func drop(_ key: TransferKey, whole: Bool = false) {
        guard let send = sends.removeValue(forKey: key) else { return }
        session.cancelTimer(send.timer)
        send.cancelSupply()
        requestors.release(key.requestor)
        ended?(key, whole)
        if !send.yields { resumeWaiting() }
    }

    /// Whether a send to `key` is under way.
    func isOpen(_ key: TransferKey) -> Bool { sends[key] != nil }

    /// The requestor windows of the sends under way.
    var requestorWindows: [X11Window] { Array(Set(sends.keys.map(\.requestor))) }

    /// The sends under way, a line each (for a test's failure message): the requestor, whether
    /// the server still has its window and whose it is (its client's pid, by X-Resource), whether
    /// we watch it, and where the send stands. A few round trips a send.
    func describe() -> [String] {
        let now = session.configuration.clock()
        return sends.map { key, send in
            "requestor 0x\(String(key.requestor.rawValue, radix: 16)) property \(key.property.rawValue): "
                + "window \(wire.windowExists(key.requestor) ? "exists, its client's pid \(cx11_client_pid(wire.display, key.requestor.rawValue))" : "gone"), watched \(requestors.count(key.requestor)) times, "
                + "\(send.awaiting ? "its requestor waits for a chunk" : "a chunk waits for its requestor"), "
                + "\((now &- send.lastProgress) / 1_000_000) ms since it last moved, timer \(send.timer == nil ? "none" : "armed")"
        }
    }

    /// The requestor's window is gone: its sends end (its watch is dropped whole by the caller).
    func drop(of requestor: X11Window) {
        let keys = sends.keys.filter { $0.requestor == requestor }
        for key in keys {
            guard let send = sends.removeValue(forKey: key) else { continue }
            session.cancelTimer(send.timer)
            send.cancelSupply()
            ended?(key, false)
        }
        if !keys.isEmpty { resumeWaiting() }
    }
}
