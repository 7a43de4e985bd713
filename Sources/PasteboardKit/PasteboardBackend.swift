import FoundationEssentials
import Synchronization

/// Where a pasteboard's contents live: in this process (``InMemoryPasteboardBackend``), on an X
/// server, or anywhere else that can hold items and report changes.
///
/// The model (``Pasteboard``) calls these methods; a backend never needs to know about values,
/// conveniences or pattern detection. Reads of types must never run providers or move data.
public protocol PasteboardBackend: AnyObject, Sendable {
    /// The type registry the backend maps types with.
    var registry: TypeRegistry { get }
    /// Where the backend publishes changes.
    var changeCenter: ChangeCenter { get }

    /// Whether a pasteboard of that name exists (the general and find pasteboards always do).
    func exists(_ name: Pasteboard.Name) -> Bool
    /// Creates an empty pasteboard of that name if there is none.
    func create(_ name: Pasteboard.Name) throws
    /// Removes a named pasteboard and its items, publishing a removal; the general and find
    /// pasteboards cannot be removed and are left as they are.
    func remove(_ name: Pasteboard.Name)
    /// Whether the pasteboard's contents outlive the process that wrote them.
    func isPersistent(_ name: Pasteboard.Name) -> Bool
    /// Marks a named pasteboard persistent or not.
    func setPersistent(_ isPersistent: Bool, for name: Pasteboard.Name)
    /// The pasteboard's change count.
    func changeCount(of name: Pasteboard.Name) -> Int
    /// The types of every item, without moving any data.
    func itemTypes(of name: Pasteboard.Name) throws -> [[PasteboardType]]
    /// The bytes of one representation of one item (nil if that item lacks the type); runs at
    /// most that one provider.
    func data(of name: Pasteboard.Name, item: Int, type: PasteboardType) throws -> Data?
    /// The items, with representations that are fetched or produced only when read.
    func items(of name: Pasteboard.Name) throws -> [PasteboardItem]
    /// The options of the current contents.
    func options(of name: Pasteboard.Name) -> PasteboardOptions
    /// Replaces the whole contents.
    func setItems(_ items: [PasteboardItem], options: PasteboardOptions, on name: Pasteboard.Name) throws
    /// Appends items, keeping the current options.
    func addItems(_ items: [PasteboardItem], to name: Pasteboard.Name) throws
    /// Hands the contents to whatever keeps them after this process (a clipboard manager) and
    /// closes the backend; returns whether anything took them. Backends whose contents cannot
    /// outlive them return false (the default).
    func flushToClipboardManager() throws -> Bool
}

extension PasteboardBackend {
    /// Nothing outlives this backend: nothing to hand off.
    public func flushToClipboardManager() throws -> Bool { false }
}

/// One change of a pasteboard: its contents were replaced, extended or expired, or the pasteboard
/// was removed.
public struct PasteboardChange: Sendable, Equatable {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// The contents changed.
        case contentsChanged
        /// The named pasteboard was removed.
        case removed
    }

    /// The pasteboard that changed.
    public let name: Pasteboard.Name
    /// What happened.
    public let kind: Kind
    /// The change count after the change.
    public let changeCount: Int
    /// Types present after the change that were not before.
    public let typesAdded: [PasteboardType]
    /// Types present before the change that are not after.
    public let typesRemoved: [PasteboardType]
    /// Every type present after the change, item by item in the owner's order (each once):
    /// what ``Pasteboard/types`` and `xpb types` list; empty after a removal.
    public let types: [PasteboardType]

    /// Describes one change; `types` defaults to `typesAdded` (a change from nothing).
    public init(name: Pasteboard.Name, kind: Kind, changeCount: Int, typesAdded: [PasteboardType], typesRemoved: [PasteboardType],
                types: [PasteboardType]? = nil) {
        self.name = name
        self.kind = kind
        self.changeCount = changeCount
        self.typesAdded = typesAdded
        self.typesRemoved = typesRemoved
        self.types = kind == .removed ? [] : types ?? typesAdded
    }

    /// A contents change computed from the types before and after.
    public init(name: Pasteboard.Name, changeCount: Int, typesBefore: [PasteboardType], typesAfter: [PasteboardType]) {
        let before = Set(typesBefore)
        let after = Set(typesAfter)
        self.init(
            name: name, kind: .contentsChanged, changeCount: changeCount,
            typesAdded: Self.unique(typesAfter).filter { !before.contains($0) },
            typesRemoved: Self.unique(typesBefore).filter { !after.contains($0) },
            types: Self.unique(typesAfter))
    }

    static func unique(_ types: [PasteboardType]) -> [PasteboardType] {
        var seen = Set<PasteboardType>()
        return types.filter { seen.insert($0).inserted }
    }
}

/// Delivers pasteboard changes to `AsyncStream` subscribers and to an optional observer
/// (``init(observer:)``), in the order of their change counts.
///
/// A backend reserves a place in the order when it counts a change (under the lock that counts
/// it) and fills it when it can describe the change, possibly later and on another thread; changes
/// are delivered from the head of the order as their places fill. Delivery runs outside any lock,
/// on the thread that filled the head's place (re-entrant publishing from an observer is queued,
/// not nested), so observers may read and write pasteboards.
public final class ChangeCenter: Sendable {
    private struct Subscriber {
        let name: Pasteboard.Name?
        let yield: @Sendable (PasteboardChange) -> Void
        let finish: @Sendable () -> Void
    }

    /// What waits in the order: a change, or the end of every stream.
    private enum Entry {
        case change(PasteboardChange)
        case finish
        /// A reserved place whose change is not delivered after all.
        case withdrawn
    }

    /// Everything under one lock: subscribers, whether the streams have ended, the order of
    /// deliveries, and the pasteboard handles that the observer is given.
    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 0
        var isFinished = false
        /// Places in the order, by sequence number; nil while reserved and not yet filled.
        var pending: [UInt64: Entry?] = [:]
        var nextReserved: UInt64 = 0
        var nextDelivered: UInt64 = 0
        var isDelivering = false
        weak var backend: (any PasteboardBackend)?
        var handles: [Pasteboard.Name: WeakPasteboard] = [:]
    }

    private struct WeakPasteboard {
        weak var pasteboard: Pasteboard?
    }

    /// A place in the order of deliveries, reserved when a change is counted.
    package struct Slot: Sendable {
        fileprivate let sequence: UInt64
    }

    private let state = Mutex(State())
    private let observer: Observer?

    /// Called with each change, in delivery order, on the thread that delivers it, with the
    /// ``Pasteboard`` handle that changed (the one a program holds; nil before a backend is
    /// attached). It must return quickly: the next change waits for it.
    public typealias Observer = @Sendable (PasteboardChange, Pasteboard?) -> Void

    /// A center whose changes reach the streams of ``stream(for:)`` and, when given, `observer`.
    public init(observer: Observer? = nil) {
        self.observer = observer
    }

    /// Whether delivering a change runs code of the program's (the observer): a backend then
    /// publishes from a queue of its own, never from a thread that must not wait. Without one,
    /// a delivery only hands the change to the streams and queues, and may be made anywhere.
    package var hasObserver: Bool { observer != nil }

    /// Whether a change published now reaches anyone: an observer, or a stream or queue open. A
    /// backend may skip describing a change nobody hears.
    package var hasListeners: Bool { observer != nil || state.withLock { !$0.subscribers.isEmpty } }

    /// The changes of one pasteboard (or of all, for nil) from now on, each delivered in order.
    public func stream(for name: Pasteboard.Name?) -> AsyncStream<PasteboardChange> {
        let (stream, continuation) = AsyncStream<PasteboardChange>.makeStream(bufferingPolicy: .bufferingNewest(Self.buffered))
        guard let id = subscribe(Subscriber(name: name, yield: { continuation.yield($0) }, finish: { continuation.finish() })) else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        return stream
    }

    /// The changes of one pasteboard (or of all, for nil) from now on, for a thread that waits
    /// for them (``ChangeQueue/next()``) rather than async code: a long-lived process that
    /// follows changes this way starts none of the concurrency runtime's threads, whose pool
    /// libdispatch watches with a timer that wakes the process once a second for good.
    package func queue(for name: Pasteboard.Name?) -> ChangeQueue {
        let queue = ChangeQueue(capacity: Self.buffered)
        if let id = subscribe(Subscriber(name: name, yield: { queue.append($0) }, finish: { queue.finish() })) {
            queue.onClose = { [weak self] in self?.unsubscribe(id) }
        } else {
            queue.finish()
        }
        return queue
    }

    /// How many undelivered changes a subscriber holds at most (the newest).
    static let buffered = 1024

    private func subscribe(_ subscriber: Subscriber) -> UInt64? {
        state.withLock { state -> UInt64? in
            guard !state.isFinished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = subscriber
            return state.nextID
        }
    }

    private func unsubscribe(_ id: UInt64) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }

    /// Tells the center which backend's pasteboards it reports on, so that the observer
    /// is given the ``Pasteboard`` that changed. Backends call it once, at the end of `init`.
    package func attach(_ backend: any PasteboardBackend) {
        state.withLock { $0.backend = backend }
    }

    /// The one live handle of a pasteboard of the attached backend, made when none is alive, so
    /// that `Pasteboard.general === Pasteboard.general` and the observer's handle is the one
    /// a program holds.
    package func handle(for name: Pasteboard.Name, backend: any PasteboardBackend) -> Pasteboard {
        state.withLock { state in
            if let live = state.handles[name]?.pasteboard, live.backend === backend { return live }
            let made = Pasteboard(name: name, backend: backend)
            if state.backend === backend || state.backend == nil {
                if state.handles.count > 64 { state.handles = state.handles.filter { $0.value.pasteboard != nil } }
                state.handles[name] = WeakPasteboard(pasteboard: made)
            }
            return made
        }
    }

    /// Makes a handle made by `Pasteboard(name:create:)` the one the observer is given, unless
    /// another handle of that pasteboard is alive.
    package func adopt(_ pasteboard: Pasteboard) {
        state.withLock { state in
            guard state.backend === pasteboard.backend, state.handles[pasteboard.name]?.pasteboard == nil else { return }
            state.handles[pasteboard.name] = WeakPasteboard(pasteboard: pasteboard)
        }
    }

    /// Reserves the next place in the order of deliveries: call it under the lock that counts
    /// the change, then ``publish(_:in:)`` once the change is described.
    package func reserve() -> Slot {
        state.withLock { state in
            defer { state.nextReserved += 1 }
            state.pending[state.nextReserved] = .some(nil)
            return Slot(sequence: state.nextReserved)
        }
    }

    /// Delivers a change in its reserved place: at once if every earlier place is delivered,
    /// else as soon as they are.
    package func publish(_ change: PasteboardChange, in slot: Slot) {
        fill(slot, with: .change(change))
    }

    /// Gives a reserved place up: its change is never delivered, and the changes after it are
    /// no longer held back by it.
    package func withdraw(_ slot: Slot) {
        fill(slot, with: .withdrawn)
    }

    /// Delivers a change after every change already reserved.
    package func publish(_ change: PasteboardChange) {
        publish(change, in: reserve())
    }

    /// Ends every stream, now and later, after the changes already reserved are delivered: for a
    /// backend whose source of changes is gone (an X connection that was lost or closed).
    package func finish() {
        // No place waits and nobody delivers: the streams end now, with no place of their own
        // in the order (a one-shot paste's close: no subscriber, and the order's first use was
        // 2 % of its instructions).
        let ended = state.withLock { state -> [Subscriber]? in
            guard state.pending.isEmpty, !state.isDelivering else { return nil }
            state.isFinished = true
            guard !state.subscribers.isEmpty else { return [] }
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        guard let ended else { return fill(reserve(), with: .finish) }
        for subscriber in ended { subscriber.finish() }
    }

    private func fill(_ slot: Slot, with entry: Entry) {
        let shouldDeliver = state.withLock { state -> Bool in
            state.pending[slot.sequence] = .some(entry)
            guard !state.isDelivering else { return false }
            state.isDelivering = true
            return true
        }
        if shouldDeliver { deliverReady() }
    }

    /// Delivers from the head of the order while its places are filled. Only one thread delivers
    /// at a time; a thread that fills a place meanwhile leaves the delivery to it.
    private func deliverReady() {
        while true {
            let next = state.withLock { state -> (Entry, [Subscriber], (any PasteboardBackend)?)? in
                guard case let .some(.some(entry)) = state.pending[state.nextDelivered] else {
                    state.isDelivering = false
                    return nil
                }
                state.pending.removeValue(forKey: state.nextDelivered)
                state.nextDelivered += 1
                switch entry {
                case .finish:
                    state.isFinished = true
                    defer { state.subscribers.removeAll() }
                    return (entry, Array(state.subscribers.values), nil)
                case let .change(change):
                    let targets = state.subscribers.values.filter { $0.name == nil || $0.name == change.name }
                    return (entry, targets, state.backend)
                case .withdrawn:
                    return (entry, [], nil)
                }
            }
            guard let (entry, targets, backend) = next else { return }
            switch entry {
            case .finish:
                for subscriber in targets { subscriber.finish() }
            case let .change(change):
                for subscriber in targets { subscriber.yield(change) }
                post(change, backend: backend)
            case .withdrawn:
                break
            }
        }
    }

    private func post(_ change: PasteboardChange, backend: (any PasteboardBackend)?) {
        guard let observer else { return }
        observer(change, backend.map { handle(for: change.name, backend: $0) })
    }
}

/// Changes a thread waits for (``ChangeCenter/queue(for:)``): each in order, the newest
/// ``ChangeCenter/buffered`` kept while nobody takes them. Closed (its subscription ended) when
/// it is released or ``close()`` is called.
package final class ChangeQueue: @unchecked Sendable {
    private let condition = Condition()
    // Guarded by `condition`.
    private var changes: [PasteboardChange] = []
    private var head = 0
    private var isFinished = false
    private let capacity: Int
    /// Ends the subscription (set once, before the queue is handed out).
    fileprivate var onClose: (@Sendable () -> Void)?

    fileprivate init(capacity: Int) {
        self.capacity = capacity
    }

    deinit { onClose?() }

    /// The next change, once there is one; nil once the changes have ended (the backend's source
    /// of changes is gone) and every change before was taken.
    package func next() -> PasteboardChange? {
        condition.lock()
        defer { condition.unlock() }
        while head == changes.count, !isFinished { condition.wait() }
        guard head < changes.count else { return nil }
        defer {
            head += 1
            if head == changes.count {
                changes.removeAll(keepingCapacity: true)
                head = 0
            }
        }
        return changes[head]
    }

    /// Stops taking changes: ``next()`` gives the ones it holds, then nil.
    package func close() {
        onClose?()
        finish()
    }

    fileprivate func append(_ change: PasteboardChange) {
        condition.lock()
        if !isFinished {
            // The oldest untaken change gives way; what was given way is let go in batches.
            if changes.count - head >= capacity { head += 1 }
            if head >= capacity {
                changes.removeFirst(head)
                head = 0
            }
            changes.append(change)
        }
        condition.broadcast()
        condition.unlock()
    }

    fileprivate func finish() {
        condition.lock()
        isFinished = true
        condition.broadcast()
        condition.unlock()
    }
}
