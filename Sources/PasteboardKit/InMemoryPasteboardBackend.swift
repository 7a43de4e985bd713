import Dispatch
import FoundationEssentials
import Synchronization

/// A backend that keeps pasteboards in this process: for app-local pasteboards, for tests, and
/// wherever no display is at hand.
///
/// Expiry happens at the expiration date: a timer removes the items then (bumping the change
/// count and publishing the change), and every access checks the date first, so expired items are
/// never returned even before the timer fires.
public final class InMemoryPasteboardBackend: PasteboardBackend {
    private struct Board {
        var items: [PasteboardItem] = []
        var options = PasteboardOptions()
        var changeCount = 0
        var isPersistent = false
        /// Bumped on every write, so that a timer set for earlier contents does nothing.
        var generation = 0
    }

    /// The registry used to map types.
    public let registry: TypeRegistry
    /// Where changes are published.
    public let changeCenter: ChangeCenter
    private let now: @Sendable () -> Date
    private let boards: Mutex<[Pasteboard.Name: Board]>

    /// A backend with the general and find pasteboards, empty.
    ///
    /// - Parameters:
    ///   - registry: the type table.
    ///   - changeCenter: where changes are published.
    ///   - now: the clock expiration dates are compared with (tests may pass their own).
    public init(
        registry: TypeRegistry = .standard,
        changeCenter: ChangeCenter = ChangeCenter(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.registry = registry
        self.changeCenter = changeCenter
        self.now = now
        var initial = [Pasteboard.Name: Board]()
        for name in [Pasteboard.Name.general, .find] {
            var board = Board()
            board.isPersistent = true
            initial[name] = board
        }
        self.boards = Mutex(initial)
        changeCenter.attach(self)
    }

    public func exists(_ name: Pasteboard.Name) -> Bool {
        boards.withLock { $0[name] != nil }
    }

    public func create(_ name: Pasteboard.Name) throws {
        boards.withLock { boards in
            if boards[name] == nil { boards[name] = Board() }
        }
    }

    public func remove(_ name: Pasteboard.Name) {
        guard !name.isSystem else { return }
        let removed = boards.withLock { $0.removeValue(forKey: name) }
        guard let removed else { return }
        changeCenter.publish(PasteboardChange(
            name: name, kind: .removed, changeCount: removed.changeCount,
            typesAdded: [], typesRemoved: PasteboardChange.unique(removed.items.flatMap(\.types))))
    }

    public func isPersistent(_ name: Pasteboard.Name) -> Bool {
        boards.withLock { $0[name]?.isPersistent ?? false }
    }

    public func setPersistent(_ isPersistent: Bool, for name: Pasteboard.Name) {
        guard !name.isSystem else { return }
        boards.withLock { $0[name]?.isPersistent = isPersistent }
    }

    public func changeCount(of name: Pasteboard.Name) -> Int {
        expireIfDue(name)
        return boards.withLock { $0[name]?.changeCount ?? 0 }
    }

    public func itemTypes(of name: Pasteboard.Name) throws -> [[PasteboardType]] {
        try items(of: name).map(\.types)
    }

    public func data(of name: Pasteboard.Name, item: Int, type: PasteboardType) throws -> Data? {
        let items = try items(of: name)
        guard items.indices.contains(item) else {
            throw PasteboardError.itemIndexOutOfRange(item, count: items.count)
        }
        return try items[item].data(for: type)
    }

    public func items(of name: Pasteboard.Name) throws -> [PasteboardItem] {
        expireIfDue(name)
        return try boards.withLock { boards in
            guard let board = boards[name] else { throw PasteboardError.pasteboardRemoved(name.rawValue) }
            return board.items
        }
    }

    public func options(of name: Pasteboard.Name) -> PasteboardOptions {
        expireIfDue(name)
        return boards.withLock { $0[name]?.options ?? PasteboardOptions() }
    }

    public func setItems(_ items: [PasteboardItem], options: PasteboardOptions, on name: Pasteboard.Name) throws {
        try write(name, options: options) { $0 = items }
    }

    public func addItems(_ items: [PasteboardItem], to name: Pasteboard.Name) throws {
        guard !items.isEmpty else { return }
        try write(name, options: nil) { $0.append(contentsOf: items) }
    }

    /// Removes the items of every pasteboard whose expiration date has passed.
    public func expireDueItems() {
        for name in boards.withLock({ Array($0.keys) }) { expireIfDue(name) }
    }

    private func write(_ name: Pasteboard.Name, options: PasteboardOptions?, _ change: (inout [PasteboardItem]) -> Void) throws {
        expireIfDue(name)
        let (published, expiry) = try boards.withLock { boards -> (PasteboardChange, (Date, Int)?) in
            guard var board = boards[name] else { throw PasteboardError.pasteboardRemoved(name.rawValue) }
            let before = board.items.flatMap(\.types)
            change(&board.items)
            if let options { board.options = options }
            board.changeCount += 1
            board.generation += 1
            boards[name] = board
            let expiry = board.options.expirationDate.map { ($0, board.generation) }
            return (PasteboardChange(name: name, changeCount: board.changeCount,
                                     typesBefore: before, typesAfter: board.items.flatMap(\.types)), expiry)
        }
        changeCenter.publish(published)
        if let (date, generation) = expiry { scheduleExpiry(of: name, at: date, generation: generation) }
    }

    private func scheduleExpiry(of name: Pasteboard.Name, at date: Date, generation: Int) {
        Background.run("xpb.memory.expiry", after: date.timeIntervalSince(now())) { [weak self] in
            guard let self else { return }
            self.expireIfDue(name, generation: generation)
            // The timer's clock and the wall clock may disagree by a little: try again if the
            // same contents are still there and not yet due.
            let pending = self.boards.withLock { boards -> Date? in
                guard let board = boards[name], board.generation == generation else { return nil }
                return board.options.expirationDate
            }
            if let pending { self.scheduleExpiry(of: name, at: max(pending, self.now().addingTimeInterval(0.001)), generation: generation) }
        }
    }

    /// Clears the pasteboard if its contents have expired (and, when given, are still the contents
    /// of that write), bumping the change count once.
    private func expireIfDue(_ name: Pasteboard.Name, generation: Int? = nil) {
        let change = boards.withLock { boards -> PasteboardChange? in
            guard var board = boards[name], let date = board.options.expirationDate, date <= now() else { return nil }
            if let generation, generation != board.generation { return nil }
            let before = board.items.flatMap(\.types)
            board.items = []
            board.options = PasteboardOptions()
            board.changeCount += 1
            board.generation += 1
            boards[name] = board
            return PasteboardChange(name: name, changeCount: board.changeCount, typesBefore: before, typesAfter: [])
        }
        if let change { changeCenter.publish(change) }
    }
}
