import Foundation
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

    /// Describes one change.
    public init(name: Pasteboard.Name, kind: Kind, changeCount: Int, typesAdded: [PasteboardType], typesRemoved: [PasteboardType]) {
        self.name = name
        self.kind = kind
        self.changeCount = changeCount
        self.typesAdded = typesAdded
        self.typesRemoved = typesRemoved
    }

    /// A contents change computed from the types before and after.
    public init(name: Pasteboard.Name, changeCount: Int, typesBefore: [PasteboardType], typesAfter: [PasteboardType]) {
        let before = Set(typesBefore)
        let after = Set(typesAfter)
        self.init(
            name: name, kind: .contentsChanged, changeCount: changeCount,
            typesAdded: Self.unique(typesAfter).filter { !before.contains($0) },
            typesRemoved: Self.unique(typesBefore).filter { !after.contains($0) })
    }

    static func unique(_ types: [PasteboardType]) -> [PasteboardType] {
        var seen = Set<PasteboardType>()
        return types.filter { seen.insert($0).inserted }
    }
}

/// Delivers pasteboard changes to `AsyncStream` subscribers and as Foundation notifications
/// (``Pasteboard/changedNotification``, ``Pasteboard/removedNotification``).
public final class ChangeCenter: Sendable {
    private struct Subscriber {
        let name: Pasteboard.Name?
        let continuation: AsyncStream<PasteboardChange>.Continuation
    }

    private let subscribers = Mutex<[UInt64: Subscriber]>([:])
    private let isFinished = Mutex(false)
    private let nextID = Atomic<UInt64>(0)
    private let notificationCenter: NotificationCenter?

    /// A center that also posts to `notificationCenter` (pass nil for streams only).
    public init(notificationCenter: NotificationCenter? = .default) {
        self.notificationCenter = notificationCenter
    }

    /// The changes of one pasteboard (or of all, for nil) from now on, each delivered in order.
    public func stream(for name: Pasteboard.Name?) -> AsyncStream<PasteboardChange> {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream<PasteboardChange>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        let finished = isFinished.withLock { $0 }
        if finished {
            continuation.finish()
        } else {
            subscribers.withLock { $0[id] = Subscriber(name: name, continuation: continuation) }
        }
        return stream
    }

    /// Ends every stream, now and later: for a backend whose source of changes is gone (an X
    /// connection that was lost).
    public func finish() {
        isFinished.withLock { $0 = true }
        let all = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return subscribers.values.map(\.continuation)
        }
        for continuation in all { continuation.finish() }
    }

    /// Delivers a change to the streams watching that pasteboard and posts its notification.
    /// Call it outside any lock: notification observers run synchronously.
    public func publish(_ change: PasteboardChange) {
        let targets = subscribers.withLock { subscribers in
            subscribers.values.filter { $0.name == nil || $0.name == change.name }.map(\.continuation)
        }
        for continuation in targets { continuation.yield(change) }
        guard let notificationCenter else { return }
        let name = change.kind == .removed ? Pasteboard.removedNotification : Pasteboard.changedNotification
        notificationCenter.post(name: name, object: nil, userInfo: [
            Pasteboard.nameUserInfoKey: change.name.rawValue,
            Pasteboard.changeCountUserInfoKey: change.changeCount,
            Pasteboard.typesAddedUserInfoKey: change.typesAdded.map(\.identifier),
            Pasteboard.typesRemovedUserInfoKey: change.typesRemoved.map(\.identifier),
        ])
    }
}
