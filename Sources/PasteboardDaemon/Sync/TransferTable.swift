import FoundationEssentials
import PasteboardWire

/// The transfers of one node as a pure value: the fetches it asked for (for a reader on this
/// display, or relayed for another link) and the fetches it serves (from this display, or
/// relayed), with their credit, caps and cancels. Messages and reader actions go in; effects
/// come out (frames to send, what a reader's stream gets, a served transfer to wake or stop, a
/// link to close). No I/O and no locks: ``SyncHub`` holds it under its lock and performs the
/// effects; the property tests drive it with random schedules.
///
/// Invariants (checked by the tests):
/// - the credit of a served transfer is never negative, and never more than its window;
/// - a fetch never delivers more bytes than its cap, nor more than the credit it granted;
/// - the bytes of this display's transfers under way never pass the total cap;
/// - every fetch ends exactly once: in its bytes (`end`), a failure, or a cancel.
struct TransferTable {
    typealias LinkID = Int

    /// Where a fetch's bytes go.
    enum Sink: Equatable {
        /// A reader on this display (its stream is the driver's, under the fetch's id).
        case local
        /// Another link's fetch, relayed: its link and id.
        case relay(link: LinkID, id: UInt64)
    }

    struct Fetch: Equatable {
        let link: LinkID
        let sink: Sink
        let limit: Int
        let what: String
        /// The window granted with the fetch: the peer may send this much beyond the credit since.
        let window: Int
        var received = 0
        /// Credit granted since the fetch (the peer may have sent `window + granted`).
        var granted = 0
        /// Bytes the local reader took, not yet granted back.
        var pendingCredit = 0
        var hasBegun = false
        var lastProgress: Date
    }

    struct ServedKey: Hashable {
        let link: LinkID
        let id: UInt64
    }

    enum Served: Equatable {
        /// From this display: the credit the reading side granted and not yet used.
        case local(credit: Int, window: Int)
        /// Relayed from another link's fetch.
        case relay(link: LinkID, id: UInt64)
    }

    struct Caps: Equatable {
        /// The most one transfer may carry (`--sync-max-transfer`).
        var maxTransfer: Int
        /// The most this display's transfers under way may hold at once (`--sync-max-total`).
        var maxTotal: Int
        /// The credit window this node grants its peers.
        var window: Int
        /// The smallest and largest window a peer may ask for.
        static let windowRange = (64 << 10) ... (64 << 20)
    }

    enum Effect: Equatable {
        case send(SyncMessage, on: LinkID)
        /// The reader's stream of fetch `id`: its type and size, bytes (the driver has them), its end, or why it failed.
        case streamBegin(id: UInt64, type: String, size: Int?)
        case streamAppend(id: UInt64)
        case streamFinish(id: UInt64, total: Int)
        case streamFail(id: UInt64, message: String)
        /// Bytes of a relayed fetch, passed on to the asker's link under its id.
        case relayData(link: LinkID, id: UInt64)
        /// A served transfer got credit, or was given up: its sender wakes.
        case wake(ServedKey)
        case stopServing(ServedKey)
        /// A peer broke the protocol: that link alone is closed.
        case closeLink(LinkID, reason: String)
    }

    let caps: Caps
    private(set) var fetches: [UInt64: Fetch] = [:]
    private(set) var served: [ServedKey: Served] = [:]
    /// Bytes received by this display's transfers under way (the total cap).
    private(set) var inFlight = 0
    private(set) var nextFetch: UInt64 = 1

    init(caps: Caps) {
        self.caps = caps
    }

    /// Whether no fetch is under way, asked or served.
    var isEmpty: Bool { fetches.isEmpty && served.isEmpty }

    // MARK: Fetches this node asks for

    /// A reader on this display asks for a target of another node's copy, from `link`: its id, or
    /// why it is refused at once.
    mutating func openLocal(what: String, size: Int?, link: LinkID, fetch: (UInt64) -> SyncMessage, now: Date) -> Result<(UInt64, [Effect]), TransferRefusal> {
        if let size, size > caps.maxTransfer {
            return .failure(TransferRefusal("\(what) is \(ByteCount.format(size)), over the \(ByteCount.format(caps.maxTransfer)) cap per transfer (--sync-max-transfer)"))
        }
        if let size, inFlight + size > caps.maxTotal {
            return .failure(TransferRefusal("\(what) (\(ByteCount.format(size))) would take the transfers under way past the \(ByteCount.format(caps.maxTotal)) total cap (--sync-max-total)"))
        }
        let id = take()
        fetches[id] = Fetch(link: link, sink: .local, limit: caps.maxTransfer, what: what, window: caps.window, lastProgress: now)
        return .success((id, [.send(fetch(id), on: link)]))
    }

    /// The reader took `count` bytes: once a quarter window is taken, the peer may send as much again.
    mutating func consumed(_ id: UInt64, count: Int, now: Date) -> [Effect] {
        guard var fetch = fetches[id], fetch.sink == .local, count > 0 else { return [] }
        fetch.pendingCredit += count
        fetch.lastProgress = now
        var effects: [Effect] = []
        if fetch.pendingCredit >= fetch.window / 4 {
            effects.append(.send(.credit(id: id, bytes: fetch.pendingCredit), on: fetch.link))
            fetch.granted += fetch.pendingCredit
            fetch.pendingCredit = 0
        }
        fetches[id] = fetch
        return effects
    }

    /// The reader gave up: the peer stops sending.
    mutating func readerCancelled(_ id: UInt64) -> [Effect] {
        guard let fetch = remove(id), fetch.sink == .local else { return [] }
        return [.send(.cancel(id: id), on: fetch.link)]
    }

    /// `begin` from the link that serves fetch `id`.
    mutating func begin(_ id: UInt64, type: String, size: Int?, from link: LinkID, now: Date) -> [Effect] {
        guard var fetch = fetches[id], fetch.link == link else { return [] }
        if fetch.hasBegun { return fail(id, "\(fetch.what): the peer began the transfer twice") }
        if let size, size < 0 { return fail(id, "\(fetch.what): the peer announced a negative size") }
        if let size, size > fetch.limit {
            return fail(id, "\(fetch.what) is \(ByteCount.format(size)), over the \(ByteCount.format(fetch.limit)) cap per transfer (--sync-max-transfer)")
        }
        fetch.hasBegun = true
        fetch.lastProgress = now
        fetches[id] = fetch
        switch fetch.sink {
        case .local: return [.streamBegin(id: id, type: type, size: size)]
        case let .relay(downstream, downstreamID): return [.send(.begin(id: downstreamID, type: type, size: size), on: downstream)]
        }
    }

    /// `count` bytes of fetch `id` from `link`: passed on within the caps and the credit granted.
    mutating func data(_ id: UInt64, count: Int, from link: LinkID, now: Date) -> [Effect] {
        guard var fetch = fetches[id], fetch.link == link else { return [] }
        guard fetch.hasBegun else { return fail(id, "\(fetch.what): the peer sent data before beginning the transfer") }
        fetch.received += count
        fetch.lastProgress = now
        if fetch.received > fetch.limit {
            return fail(id, "\(fetch.what) is larger than the \(ByteCount.format(fetch.limit)) cap per transfer (--sync-max-transfer)")
        }
        if fetch.received > fetch.window + fetch.granted {
            return fail(id, "\(fetch.what): the peer sent past its credit window")
        }
        if fetch.sink == .local {
            if inFlight + count > caps.maxTotal {
                return fail(id, "\(fetch.what) would take the transfers under way past the \(ByteCount.format(caps.maxTotal)) total cap (--sync-max-total)")
            }
            inFlight += count
        }
        fetches[id] = fetch
        switch fetch.sink {
        case .local: return [.streamAppend(id: id)]
        case let .relay(downstream, downstreamID): return [.relayData(link: downstream, id: downstreamID)]
        }
    }

    /// `end` from the link that serves fetch `id`.
    mutating func end(_ id: UInt64, total: Int, from link: LinkID) -> [Effect] {
        guard let fetch = fetches[id], fetch.link == link else { return [] }
        guard total == fetch.received else {
            return fail(id, "\(fetch.what): the peer ended the transfer at \(total) bytes, but sent \(fetch.received)")
        }
        remove(id)
        switch fetch.sink {
        case .local: return [.streamFinish(id: id, total: total)]
        case let .relay(downstream, downstreamID): return [.send(.end(id: downstreamID, total: total), on: downstream)]
        }
    }

    /// `failed` from the link that serves fetch `id`.
    mutating func failed(_ id: UInt64, message: String, from link: LinkID) -> [Effect] {
        guard let fetch = fetches[id], fetch.link == link else { return [] }
        remove(id)
        switch fetch.sink {
        case .local: return [.streamFail(id: id, message: message)]
        case let .relay(downstream, downstreamID): return [.send(.failed(id: downstreamID, message: message), on: downstream)]
        }
    }

    /// Ends fetch `id` here: the peer is told to stop, the reader (or the relay's asker) learns why.
    mutating func fail(_ id: UInt64, _ message: String) -> [Effect] {
        guard let fetch = remove(id) else { return [] }
        switch fetch.sink {
        case .local: return [.send(.cancel(id: id), on: fetch.link), .streamFail(id: id, message: message)]
        case let .relay(downstream, downstreamID):
            return [.send(.cancel(id: id), on: fetch.link), .send(.failed(id: downstreamID, message: message), on: downstream)]
        }
    }

    /// Local fetches with no progress since `deadline`, among those the driver says are idle (the
    /// reader has taken all it was given): failed.
    mutating func stalled(before deadline: Date, idle: (UInt64) -> Bool, message: (String) -> String) -> [Effect] {
        let ids = fetches.filter { $0.value.sink == .local && $0.value.lastProgress < deadline && idle($0.key) }.map(\.key).sorted()
        return ids.flatMap { id in fail(id, message(fetches[id]!.what)) }
    }

    // MARK: Fetches this node serves

    /// Another node asks, on `link`, for bytes this display serves: nil when `id` is already under way there.
    mutating func serveLocal(_ id: UInt64, on link: LinkID, window: Int) -> ServedKey? {
        let key = ServedKey(link: link, id: id)
        guard served[key] == nil else { return nil }
        served[key] = .local(credit: Self.clampWindow(window), window: Self.clampWindow(window))
        return key
    }

    /// Another node asks, on `link`, for bytes that `upstream` holds: the fetch to send upstream.
    mutating func serveRelay(_ id: UInt64, on link: LinkID, upstream: LinkID, window: Int, limit: Int, what: String,
                             fetch: (UInt64) -> SyncMessage, now: Date) -> [Effect]? {
        let key = ServedKey(link: link, id: id)
        guard served[key] == nil else { return nil }
        let upstreamID = take()
        fetches[upstreamID] = Fetch(link: upstream, sink: .relay(link: link, id: id), limit: min(limit, caps.maxTransfer), what: what,
                                    window: Self.clampWindow(window), lastProgress: now)
        served[key] = .relay(link: upstream, id: upstreamID)
        return [.send(fetch(upstreamID), on: upstream)]
    }

    static func clampWindow(_ window: Int) -> Int {
        min(max(Caps.windowRange.lowerBound, window), Caps.windowRange.upperBound)
    }

    /// Credit from the reading side of a served transfer. A grant past the window it asked for
    /// (or not positive) breaks the protocol: the link is closed.
    mutating func credit(_ id: UInt64, bytes: Int, from link: LinkID) -> [Effect] {
        let key = ServedKey(link: link, id: id)
        switch served[key] {
        case nil:
            return []
        case let .local(credit, window)?:
            guard bytes > 0, bytes <= window - credit else {
                return [.closeLink(link, reason: "the peer granted \(bytes) bytes of credit, past the \(ByteCount.format(window)) window")]
            }
            served[key] = .local(credit: credit + bytes, window: window)
            return [.wake(key)]
        case let .relay(upstream, upstreamID)?:
            guard var fetch = fetches[upstreamID] else { return [] }
            // The asker grants back what it took of what it was sent: never more.
            guard bytes > 0, bytes <= fetch.received + fetch.window - fetch.granted else {
                return [.closeLink(link, reason: "the peer granted \(bytes) bytes of credit, more than it was sent")]
            }
            fetch.granted += bytes
            fetches[upstreamID] = fetch
            return [.send(.credit(id: upstreamID, bytes: bytes), on: upstream)]
        }
    }

    /// The sender of a served local transfer takes `bytes` of credit: true if it had them.
    mutating func takeCredit(_ key: ServedKey, bytes: Int) -> Bool? {
        guard case let .local(credit, window)? = served[key] else { return nil }
        guard bytes >= 0, credit >= bytes else { return false }
        served[key] = .local(credit: credit - bytes, window: window)
        return true
    }

    /// The reading side gave a served transfer up.
    mutating func cancel(_ id: UInt64, from link: LinkID) -> [Effect] {
        let key = ServedKey(link: link, id: id)
        switch served.removeValue(forKey: key) {
        case nil: return []
        case .local?: return [.stopServing(key)]
        case let .relay(upstream, upstreamID)?:
            fetches.removeValue(forKey: upstreamID)
            return [.send(.cancel(id: upstreamID), on: upstream)]
        }
    }

    /// A served local transfer ended (its sender returned).
    mutating func servedEnded(_ key: ServedKey) {
        if case .local? = served[key] { served.removeValue(forKey: key) }
    }

    // MARK: Links

    /// A link closed: its fetches fail (a reader learns `message`), what it was served stops,
    /// relays through it end on the other side.
    mutating func linkDown(_ link: LinkID, message: String) -> [Effect] {
        var effects: [Effect] = []
        for id in fetches.filter({ $0.value.link == link }).map(\.key).sorted() {
            let fetch = remove(id)!
            switch fetch.sink {
            case .local: effects.append(.streamFail(id: id, message: message))
            case let .relay(downstream, downstreamID):
                effects.append(.send(.failed(id: downstreamID, message: "the link that holds the data closed"), on: downstream))
            }
        }
        for key in served.keys.filter({ $0.link == link }).sorted(by: { $0.id < $1.id }) {
            switch served.removeValue(forKey: key)! {
            case .local: effects.append(.stopServing(key))
            case let .relay(upstream, upstreamID):
                fetches.removeValue(forKey: upstreamID)
                effects.append(.send(.cancel(id: upstreamID), on: upstream))
            }
        }
        return effects
    }

    // MARK: Helpers

    private mutating func take() -> UInt64 {
        defer { nextFetch += 1 }
        return nextFetch
    }

    @discardableResult
    private mutating func remove(_ id: UInt64) -> Fetch? {
        guard let fetch = fetches.removeValue(forKey: id) else { return nil }
        if fetch.sink == .local { inFlight -= fetch.received }
        if case let .relay(downstream, downstreamID) = fetch.sink { served.removeValue(forKey: ServedKey(link: downstream, id: downstreamID)) }
        return fetch
    }
}

struct TransferRefusal: Error, Equatable {
    let message: String
    init(_ message: String) { self.message = message }
}
