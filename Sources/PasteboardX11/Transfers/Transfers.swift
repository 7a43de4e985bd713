import Dispatch
import FoundationEssentials
import PasteboardKit
import Synchronization

/// Where an outgoing transfer's bytes come from: memory, or a file read piece by piece.
enum TransferSource {
    case data(Data)
    case file(FileContents)

    var count: Int {
        switch self {
        case let .data(data): return data.count
        case let .file(file): return file.size
        }
    }

    /// Runs `body` with the bytes `offset ..< offset + length`: the data's own, or the file's read
    /// into `scratch` (which must hold them), so that serving allocates nothing per chunk.
    func withBytes<T>(offset: Int, length: Int, scratch: UnsafeMutableRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> T) throws -> T {
        switch self {
        case let .data(data):
            return data.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + length)])) }
        case let .file(file):
            try file.read(offset: offset, length: length, into: scratch)
            return body(UnsafeRawBufferPointer(rebasing: scratch[0..<length]))
        }
    }
}

/// The owner's side of one INCR transfer: hands out the data in chunks, then one empty chunk.
struct OutgoingTransfer {
    let source: TransferSource
    let chunkSize: Int
    private(set) var offset = 0
    private(set) var isFinished = false

    init(source: TransferSource, chunkSize: Int) {
        precondition(chunkSize > 0, "chunk size must be positive")
        self.source = source
        self.chunkSize = chunkSize
    }

    /// Where the next chunk lies in the source; an empty range ends the transfer, and nil comes
    /// after it.
    mutating func nextRange() -> Range<Int>? {
        guard !isFinished else { return nil }
        let remaining = source.count - offset
        if remaining <= 0 {
            isFinished = true
            return offset..<offset
        }
        let range = offset..<(offset + min(chunkSize, remaining))
        offset = range.upperBound
        return range
    }
}

/// The reader's side of one INCR transfer: collects chunks until the empty one, refusing to grow
/// beyond a limit. The announced size is only a hint: the buffer reserves at most `reserveCap`.
struct IncomingTransfer {
    static let reserveCap = 64 << 20

    let limit: Int
    private(set) var data = Data()
    /// The bytes received so far (collected, or counted while streamed).
    private(set) var received = 0
    private(set) var isComplete = false

    init(announcedSize: Int, limit: Int) {
        self.limit = limit
        data.reserveCapacity(max(0, min(announcedSize, Self.reserveCap, limit)))
    }

    /// The size an INCR property announces: its first value (a lower bound by ICCCM), nil for
    /// an empty property.
    static func announcedSize(_ values: [UInt]) -> Int? {
        values.first.map { Int(truncatingIfNeeded: UInt32(truncatingIfNeeded: $0)) }
    }

    /// The error of an owner that sent more than `limit` bytes.
    static func overLimit(_ limit: Int) -> PasteboardError {
        .backendFailure("the selection owner sent more than the \(limit)-byte limit; raise the limit if this much is expected")
    }

    /// How many more bytes the limit allows.
    var remaining: Int { max(0, limit - received) }

    /// Counts a chunk of `count` bytes that goes elsewhere (streamed); zero completes.
    ///
    /// - Returns: whether the transfer is complete.
    /// - Throws: ``PasteboardError/backendFailure(_:)`` past the limit.
    mutating func count(_ count: Int) throws -> Bool {
        if count == 0 {
            isComplete = true
            return true
        }
        guard count <= remaining else { throw Self.overLimit(limit) }
        received += count
        return false
    }

    /// Adds a chunk straight from a buffer (no intermediate copy); an empty chunk completes.
    ///
    /// - Returns: whether the transfer is complete.
    /// - Throws: ``PasteboardError/backendFailure(_:)`` past the limit.
    mutating func append(bytes chunk: UnsafeRawBufferPointer) throws -> Bool {
        guard try !count(chunk.count) else { return true }
        data.append(contentsOf: chunk)
        return false
    }
}

/// Where a streamed conversion's bytes go: the X thread pushes chunks, the reading thread takes
/// them. The X thread asks the owner for the next chunk only while the backlog is under
/// `highWater`; once the consumer has taken it down, `onDrained` tells the X thread to go on.
final class StreamSink: Sendable {
    static let highWater = 8 << 20

    private struct State {
        /// The reply's type, noted by the X thread before the first chunk.
        var replyType: X11Atom?
        /// The reply's size: exact for a single reply, the owner's announcement for INCR.
        var size: Int?
        var chunks: [Data] = []
        var bytes = 0
        var outcome: Result<Void, any Error>?
        var drained: (@Sendable () -> Void)?
        var cancelled = false
        /// A speculative read's sink holds at most the first reply (or INCR chunk) until its
        /// consumer knows it wants it (``openGate()``).
        var gated: Bool
    }

    private let state: Mutex<State>
    private let signal = DispatchSemaphore(value: 0)
    /// The backlog past which the X thread stops asking the owner for chunks.
    let highWater: Int
    /// Inline: a turn of the loop the consumer runs instead of sleeping (``X11Connection/pump``).
    private let pump: (@Sendable () -> Void)?

    /// - Parameters:
    ///   - gated: the X thread asks for no chunk past the first until ``openGate()``: a read asked
    ///     for on speculation costs the owner at most one chunk when it is not wanted.
    ///   - pump: with a loop run by the consumer's thread, its turn.
    init(highWater: Int = StreamSink.highWater, gated: Bool = false, pump: (@Sendable () -> Void)? = nil) {
        self.highWater = highWater
        self.pump = pump
        state = Mutex(State(gated: gated))
    }

    /// Consumer: the speculative read is wanted after all; the X thread goes on asking for chunks.
    func openGate() {
        let drained = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.gated else { return nil }
            state.gated = false
            guard state.bytes < highWater else { return nil }
            var drained: (@Sendable () -> Void)?
            swap(&drained, &state.drained)
            return drained
        }
        drained?()
    }

    /// X thread: the reply's type (before its first chunk is pushed).
    func noteType(_ type: X11Atom) {
        state.withLock { if $0.replyType == nil { $0.replyType = type } }
    }

    /// The reply's type, once the first chunk (or the end) came.
    var replyType: X11Atom? { state.withLock { $0.replyType } }

    /// X thread: the size the reply announced (INCR) or has.
    func noteSize(_ size: Int?) {
        state.withLock { if $0.size == nil { $0.size = size } }
    }

    var size: Int? { state.withLock { $0.size } }

    /// X thread: a chunk arrived.
    func push(_ chunk: Data) {
        guard !chunk.isEmpty else { return }
        let taken = state.withLock { state -> Bool in
            // A consumer that gave up holds nothing more.
            guard !state.cancelled else { return false }
            state.chunks.append(chunk)
            state.bytes += chunk.count
            return true
        }
        if taken { signal.signal() }
    }

    /// X thread: whether the backlog leaves room for another chunk (false once the consumer gave
    /// up, and while the gate is closed).
    var wantsMore: Bool { state.withLock { !$0.cancelled && !$0.gated && $0.bytes < highWater } }

    /// X thread: whether the consumer gave up (the rest of the transfer is drained and dropped).
    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// X thread: `action` runs (on the consumer's thread) once the backlog is taken and the gate
    /// open, or the consumer gave up.
    func onDrained(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.cancelled || (state.bytes == 0 && !state.gated) { return true }
            state.drained = action
            return false
        }
        if now { action() }
    }

    /// X thread: the transfer ended.
    func finish(_ outcome: Result<Void, any Error>) {
        state.withLock { if $0.outcome == nil { $0.outcome = outcome } }
        signal.signal()
    }

    /// Consumer: the next chunk, nil at the end; throws the transfer's error.
    func next() throws -> Data? {
        while true {
            let (chunk, drained, outcome) = state.withLock { state -> (Data?, (@Sendable () -> Void)?, Result<Void, any Error>?) in
                if !state.chunks.isEmpty {
                    let chunk = state.chunks.removeFirst()
                    state.bytes -= chunk.count
                    var drained: (@Sendable () -> Void)?
                    if state.bytes == 0 && !state.gated { swap(&drained, &state.drained) }
                    return (chunk, drained, nil)
                }
                return (nil, nil, state.outcome)
            }
            drained?()
            if let chunk { return chunk }
            if let outcome {
                try outcome.get()
                return nil
            }
            if let pump { pump() } else { signal.wait() }
        }
    }

    /// Consumer: passes every chunk to `bytes` until the end; on an error (the transfer's, or
    /// one `bytes` throws) stops taking chunks and rethrows it.
    func drain(into bytes: (Data) throws -> Void) throws {
        do {
            while let chunk = try next() { try bytes(chunk) }
        } catch {
            cancel()
            throw error
        }
    }

    /// Consumer: stops taking chunks. The X thread reads the rest of the transfer and drops it:
    /// an owner left waiting mid-INCR would serve nobody else (xclip 0.13).
    func cancel() {
        let drained = state.withLock { state -> (@Sendable () -> Void)? in
            state.cancelled = true
            state.chunks.removeAll()
            state.bytes = 0
            var drained: (@Sendable () -> Void)?
            swap(&drained, &state.drained)
            return drained
        }
        drained?()
    }
}

