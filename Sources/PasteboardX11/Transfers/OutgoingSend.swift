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
/// decides what comes next (``next(chunkSize:)``); the session writes it. Memory, files and
/// remote streams go through the same steps.
struct OutgoingSend {
    /// Where the chunks come from.
    enum Supply {
        /// Bytes at hand (memory or a file), a range at a time.
        case source(OutgoingTransfer)
        /// A sync peer's bytes, which may not have come yet.
        case stream(ByteStream)
    }

    /// What the session does for a requestor that took the last chunk.
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
    /// The serve timer: the requestor must take each chunk in time. It rests while the
    /// requestor waits for a stream (the peer's delay is not the requestor's).
    var timer: TimerHandle?
    /// The requestor deleted the property and waits for the next chunk.
    var awaiting = false

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

    /// Ends the send's own resources: its stream stops (its timer is the session's to cancel).
    func cancelSupply() {
        stream?.cancel()
    }
}

/// The INCR sends under way, by requestor and property.
struct OutgoingSends {
    private var sends: [TransferKey: OutgoingSend] = [:]

    var count: Int { sends.count }

    subscript(key: TransferKey) -> OutgoingSend? {
        get { sends[key] }
        set { sends[key] = newValue }
    }

    mutating func remove(_ key: TransferKey) -> OutgoingSend? {
        sends.removeValue(forKey: key)
    }

    /// Removes the sends to `requestor` (its window is gone), and returns them.
    mutating func removeAll(of requestor: X11Window) -> [OutgoingSend] {
        let keys = sends.keys.filter { $0.requestor == requestor }
        return keys.compactMap { sends.removeValue(forKey: $0) }
    }

    mutating func removeAll() {
        sends.removeAll()
    }
}

extension X11Session {
    /// How ``openOutgoing(_:_:announcing:watched:)`` went.
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
    func openOutgoing(_ key: TransferKey, _ send: OutgoingSend, announcing: Int, watched: Bool) -> OutgoingOpening {
        dropOutgoing(key)
        // Sends hold timers and a chunk in the server each: a requestor that starts them
        // without reading gets no more than its share.
        let others = watchedRequestors[key.requestor, default: 0] - (watched ? 1 : 0)
        guard others < Self.maxTransfersPerRequestor, outgoing.count < Self.maxTransfers else { return .refused }
        var failed = !watched && !watchRequestor(key.requestor)
        writeLongs(key.requestor, key.property, type: known[.incr], [UInt(min(max(announcing, 0), Int(Int32.max)))],
                   onError: { _ in failed = true })
        outgoing[key] = send
        armOutgoingTimer(key)
        guard !failed else {
            dropOutgoing(key)
            return .failed
        }
        return .opened
    }

    /// The requestor must read (delete the property) within the serve timeout; past it, this
    /// send alone is given up.
    private func armOutgoingTimer(_ key: TransferKey) {
        cancelTimer(outgoing[key]?.timer)
        outgoing[key]?.timer = after(configuration.serveTimeout) { [weak self] in
            self?.dropOutgoing(key)
        }
    }

    /// The requestor deleted the property: it wants the next chunk.
    func continueOutgoing(_ key: TransferKey) {
        guard outgoing[key] != nil else { return }
        outgoing[key]?.awaiting = true
        // Until the chunk is written, the requestor is not the one who keeps the send waiting.
        cancelTimer(outgoing[key]?.timer)
        outgoing[key]?.timer = nil
        writeNextChunk(key)
    }

    /// Writes what the send says comes next, if its requestor waits for a chunk.
    private func writeNextChunk(_ key: TransferKey) {
        guard var send = outgoing[key], send.awaiting else { return }
        let step = send.next(chunkSize: chunkSize)
        outgoing[key] = send
        var failed = false
        // An error the server reports later ends the send then.
        let onError: (XErrorRecord) -> Void = { [weak self] _ in
            failed = true
            self?.dropOutgoing(key)
        }
        switch step {
        case let .write(source, range):
            do {
                try writeBytes(key.requestor, key.property, type: send.type, from: source, range: range, onError: onError)
            } catch {
                // The file went away or shrank: the send ends; the requestor's read times out.
                return dropOutgoing(key)
            }
        case let .writeChunk(chunk):
            chunk.withUnsafeBytes { writeBytes(key.requestor, key.property, type: send.type, $0, onError: onError) }
        case .finish:
            writeBytes(key.requestor, key.property, type: send.type, UnsafeRawBufferPointer(start: nil, count: 0), onError: { _ in })
            return dropOutgoing(key)
        case let .wait(stream, version):
            let enqueue = self.enqueue
            stream.observe(after: version) {
                _ = enqueue? { session in session.writeNextChunk(key) }
            }
            return
        case .abort:
            return dropOutgoing(key)
        }
        guard !failed else { return dropOutgoing(key) }
        outgoing[key]?.awaiting = false
        armOutgoingTimer(key)
    }

    /// Ends a send: its timer, its stream, its watch of the requestor.
    func dropOutgoing(_ key: TransferKey) {
        guard let send = outgoing.remove(key) else { return }
        cancelTimer(send.timer)
        send.cancelSupply()
        releaseRequestor(key.requestor)
    }

    /// The requestor's window is gone: its sends end (its watch is dropped whole by the caller).
    func dropOutgoing(of requestor: X11Window) {
        for send in outgoing.removeAll(of: requestor) {
            cancelTimer(send.timer)
            send.cancelSupply()
        }
    }
}
