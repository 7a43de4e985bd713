import FoundationEssentials
import Synchronization

/// Bytes that arrive from elsewhere (a sync peer) while the X thread serves them to a
/// requestor. The producer (any thread) calls ``begin(type:size:)``, ``append(_:)``, then
/// ``finish()`` or ``fail(_:)``; the X thread takes chunks as the requestor reads them and is
/// told, through a one-shot observer, when there is something new. It never blocks on it.
///
/// The producer bounds what is buffered (a sync link grants credit only for bytes taken), so
/// the stream itself does not.
package final class ByteStream: Sendable {
    package struct Header: Sendable, Equatable {
        package let type: String
        /// The size the source expects, when it knows one (exact for data at hand, an INCR
        /// owner's announcement otherwise).
        package let size: Int?
    }

    /// What the consumer sees at one moment.
    package struct Snapshot: Sendable {
        package let header: Header?
        package let buffered: Int
        package let isEnded: Bool
        package let failure: String?
        /// Moves with every producer event: pass it to ``observe(after:_:)``.
        package let version: Int
    }

    private struct State {
        var header: Header?
        var chunks: [Data] = []
        var buffered = 0
        var isEnded = false
        var failure: String?
        var isCancelled = false
        var version = 0
        var observer: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    /// Called (on the consumer's thread) with the bytes taken: the producer grants more.
    private let consumed: @Sendable (Int) -> Void
    /// Called once when the consumer gives up.
    private let cancelled: @Sendable () -> Void
    /// A hint for the INCR property before the size is known (the announced size).
    package let sizeHint: Int?

    package init(sizeHint: Int? = nil, consumed: @escaping @Sendable (Int) -> Void = { _ in }, cancelled: @escaping @Sendable () -> Void = {}) {
        self.sizeHint = sizeHint
        self.consumed = consumed
        self.cancelled = cancelled
    }

    // MARK: Producer

    package func begin(type: String, size: Int?) {
        update { if $0.header == nil { $0.header = Header(type: type, size: size) } }
    }

    package func append(_ data: Data) {
        guard !data.isEmpty else { return }
        update { state in
            guard !state.isEnded, state.failure == nil, !state.isCancelled else { return }
            state.chunks.append(data)
            state.buffered += data.count
        }
    }

    package func finish() {
        update { $0.isEnded = true }
    }

    package func fail(_ message: String) {
        update { state in
            guard !state.isEnded, state.failure == nil else { return }
            state.failure = message
            state.chunks.removeAll()
            state.buffered = 0
        }
    }

    private func update(_ change: (inout State) -> Void) {
        let observer = state.withLock { state -> (@Sendable () -> Void)? in
            change(&state)
            state.version += 1
            defer { state.observer = nil }
            return state.observer
        }
        observer?()
    }

    // MARK: Consumer

    package func snapshot() -> Snapshot {
        state.withLock { Snapshot(header: $0.header, buffered: $0.buffered, isEnded: $0.isEnded, failure: $0.failure, version: $0.version) }
    }

    /// Calls `action` once, as soon as something changed after `version` (at once if it has).
    package func observe(after version: Int, _ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.version != version || state.isCancelled { return true }
            state.observer = action
            return false
        }
        if now { action() }
    }

    /// Up to `limit` buffered bytes (nil when none are buffered).
    package func take(upTo limit: Int) -> Data? {
        let chunk = state.withLock { state -> Data? in
            guard !state.chunks.isEmpty else { return nil }
            var chunk = state.chunks.removeFirst()
            if chunk.count > limit {
                state.chunks.insert(chunk.suffix(from: chunk.startIndex + limit), at: 0)
                chunk = chunk.prefix(limit)
            }
            state.buffered -= chunk.count
            return chunk
        }
        if let chunk { consumed(chunk.count) }
        return chunk
    }

    /// The consumer gives up (the requestor went away or stopped reading).
    package func cancel() {
        let first = state.withLock { state -> Bool in
            guard !state.isCancelled else { return false }
            state.isCancelled = true
            state.chunks.removeAll()
            state.buffered = 0
            state.observer = nil
            return !state.isEnded && state.failure == nil
        }
        if first { cancelled() }
    }
}

/// A target served from elsewhere: its bytes are asked for when a requestor converts it.
package struct RemoteTarget: Sendable {
    package let target: String
    /// The announced size, if any (the INCR property's hint).
    package let size: Int?
    /// Starts a transfer of the target (nil: it cannot be had, refuse at once). Called on the X
    /// thread: it must not block.
    package let open: @Sendable () -> ByteStream?

    package init(target: String, size: Int?, open: @escaping @Sendable () -> ByteStream?) {
        self.target = target
        self.size = size
        self.open = open
    }
}
