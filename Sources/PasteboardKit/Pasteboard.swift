import FoundationEssentials
import Synchronization

/// A pasteboard: the general one (the clipboard), the find one (on X11 the primary selection),
/// or a named one, holding items that each carry several representations.
///
/// Reading a type never runs another type's provider, and asking which types there are never
/// moves data. Methods that can fail throw; the convenience properties (`string`, `urls`, …)
/// report failures as nil or empty, as UIPasteboard's do.
public final class Pasteboard: Sendable {
    /// The name of a pasteboard.
    public struct Name: Hashable, Sendable, RawRepresentable, ExpressibleByStringLiteral, CustomStringConvertible {
        /// The name as text.
        public let rawValue: String

        /// Wraps a name; use ``validated(_:)`` for names from outside the program.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Wraps a literal name.
        public init(stringLiteral value: String) { self.rawValue = value }

        /// A checked name: not empty, no control characters, at most 200 bytes.
        public static func validated(_ rawValue: String) throws -> Name {
            let reason: String? =
                if rawValue.isEmpty || rawValue.allSatisfy(\.isWhitespace) { "a pasteboard name cannot be empty" }
                else if rawValue.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                    "a pasteboard name cannot contain control characters"
                } else if rawValue.utf8.count > 200 { "a pasteboard name is limited to 200 bytes" }
                else { nil }
            if let reason { throw PasteboardError.invalidName(rawValue, reason: reason) }
            return Name(rawValue: rawValue)
        }

        /// The general pasteboard's name.
        public static let general: Name = "general"
        /// The find pasteboard's name.
        public static let find: Name = "find"

        /// Whether this names the general or the find pasteboard, which always exist.
        public var isSystem: Bool { self == .general || self == .find }

        /// The name as text.
        public var description: String { rawValue }
    }


    /// This pasteboard's name.
    public let name: Name
    /// Where the contents live.
    public let backend: any PasteboardBackend

    /// The registry this pasteboard maps types with.
    public var registry: TypeRegistry { backend.registry }

    /// A handle on a pasteboard of the given backend; the pasteboard must exist.
    init(name: Name, backend: any PasteboardBackend) {
        self.name = name
        self.backend = backend
    }

    /// The general pasteboard (the clipboard) of the default backend: on X11, the `CLIPBOARD`
    /// selection of `$DISPLAY` (see ``PasteboardSystem``).
    ///
    /// What a program writes stays available to other programs only while the program runs
    /// (X11 has no clipboard storage of its own): before exiting, call
    /// ``flushToClipboardManager()`` to hand the contents to a clipboard manager such as `xpbd`.
    /// Each access returns the same handle while one is alive, so `general` can be compared
    /// with `===` to the handle a change observer is given.
    public static var general: Pasteboard { general(of: PasteboardSystem.backend) }

    /// The find pasteboard (on X11, the primary selection) of the default backend.
    public static var find: Pasteboard { find(of: PasteboardSystem.backend) }

    /// The general pasteboard of a given backend.
    public static func general(of backend: any PasteboardBackend) -> Pasteboard {
        backend.changeCenter.handle(for: .general, backend: backend)
    }

    /// The find pasteboard of a given backend.
    public static func find(of backend: any PasteboardBackend) -> Pasteboard {
        backend.changeCenter.handle(for: .find, backend: backend)
    }

    /// The pasteboard of that name, created when `create` is true and it does not exist; nil
    /// when it does not exist and `create` is false, or when it cannot be created.
    public init?(name: Name, create: Bool, backend: any PasteboardBackend = PasteboardSystem.backend) {
        guard (try? Name.validated(name.rawValue)) != nil else { return nil }
        if !backend.exists(name) {
            guard create, (try? backend.create(name)) != nil else { return nil }
        }
        self.name = name
        self.backend = backend
        backend.changeCenter.adopt(self)
    }

    /// A new, empty pasteboard under a name that no other pasteboard has had: `unique.` and a
    /// random UUID.
    ///
    /// - Throws: what the backend throws when it cannot create a pasteboard.
    public static func withUniqueName(backend: any PasteboardBackend = PasteboardSystem.backend) throws -> Pasteboard {
        var name: Name
        repeat {
            name = Name(rawValue: "unique." + UUID().uuidString.lowercased())
        } while backend.exists(name)
        try backend.create(name)
        return backend.changeCenter.handle(for: name, backend: backend)
    }

    /// Removes a named pasteboard and its contents, reporting a change of kind `.removed`; the general
    /// and find pasteboards cannot be removed. Writing through a handle of a removed pasteboard
    /// throws ``PasteboardError/pasteboardRemoved(_:)`` until it is created again.
    public static func remove(withName name: Name, backend: any PasteboardBackend = PasteboardSystem.backend) {
        backend.remove(name)
    }

    /// Whether the contents outlive the program that wrote them. In memory: always for the general
    /// and find pasteboards, for named ones when set. On X11: only while a clipboard manager
    /// (the owner of `CLIPBOARD_MANAGER`, such as `xpbd`) runs to keep them, and only for the
    /// general pasteboard; setting it has no effect there.
    public var isPersistent: Bool {
        get { backend.isPersistent(name) }
        set { backend.setPersistent(newValue, for: name) }
    }

    /// Hands the default backend's contents to a clipboard manager (on X11: the owner of
    /// `CLIPBOARD_MANAGER`, such as `xpbd`, through `SAVE_TARGETS`) and closes the backend: call it
    /// once, before the program exits, so that what it copied stays pasteable. Secret contents
    /// (`x-kde-passwordManagerHint`) are never handed off.
    ///
    /// - Returns: whether a clipboard manager took the contents (false when none runs, or there
    ///   was nothing to hand off).
    /// - Throws: ``PasteboardError/unavailable(_:)`` when there is no backend.
    @discardableResult
    public static func flushToClipboardManager() throws -> Bool {
        try PasteboardSystem.backend.flushToClipboardManager()
    }

    /// Increases by one with every change of contents: a write, an append, an expiry, or (on X11)
    /// another client taking the selection.
    public var changeCount: Int { backend.changeCount(of: name) }

    /// This pasteboard's changes from now on.
    public var changes: AsyncStream<PasteboardChange> { backend.changeCenter.stream(for: name) }

    /// The same changes for a thread that waits for them, with no async code (``ChangeQueue``).
    package var changeQueue: ChangeQueue { backend.changeCenter.queue(for: name) }

    // MARK: Items

    /// The types of every item, without moving data.
    public func itemTypes() throws -> [[PasteboardType]] {
        try backend.itemTypes(of: name)
    }

    /// The number of items; 0 when the contents cannot be read (``readNumberOfItems()`` says why).
    public var numberOfItems: Int { (try? readNumberOfItems()) ?? 0 }

    /// The number of items.
    public func readNumberOfItems() throws -> Int { try itemTypes().count }

    /// The items, whose representations are read only when asked for; empty when the contents
    /// cannot be read (``readItems()`` says why). Setting replaces the contents with no options;
    /// a failed write changes nothing (``setItems(_:options:)-(PasteboardItem)`` says why).
    public var items: [PasteboardItem] {
        get { (try? readItems()) ?? [] }
        set { try? setItems(newValue) }
    }

    /// The items, whose representations are read only when asked for.
    public func readItems() throws -> [PasteboardItem] { try backend.items(of: name) }

    /// Replaces the whole contents with `items`.
    public func setItems(_ items: [PasteboardItem], options: PasteboardOptions = PasteboardOptions()) throws {
        try backend.setItems(items, options: options, on: name)
    }

    /// Replaces the whole contents with items given as dictionaries of property-list values.
    ///
    /// - Throws: ``PasteboardError/notAPropertyList(typeName:path:)`` before anything is written
    ///   if any value is not a property list.
    public func setItems(_ items: [[PasteboardType: Any]], options: PasteboardOptions = PasteboardOptions()) throws {
        try setItems(items.map(PasteboardItem.init), options: options)
    }

    /// Replaces the whole contents with items whose representations are produced only when read.
    public func setItemProviders(_ providers: [ItemProvider], localOnly: Bool = false, expirationDate: Date? = nil) throws {
        try setItems(providers.map(\.item), options: PasteboardOptions(localOnly: localOnly, expirationDate: expirationDate))
    }

    /// Appends items after the current ones, keeping the current options.
    public func addItems(_ items: [PasteboardItem]) throws {
        try backend.addItems(items, to: name)
    }

    /// Appends items given as dictionaries of property-list values.
    public func addItems(_ items: [[PasteboardType: Any]]) throws {
        try addItems(items.map(PasteboardItem.init))
    }

    /// Removes every item.
    public func removeAllItems() throws {
        try setItems([PasteboardItem]())
    }

    /// The options of the current contents.
    public var options: PasteboardOptions { backend.options(of: name) }

    // MARK: Types

    /// The types of the first item, without moving data; empty when there is none or the read
    /// failed (``readTypes()`` says why).
    public var types: [PasteboardType] { (try? readTypes()) ?? [] }

    /// The types of the first item (empty when there is none), without moving data.
    public func readTypes() throws -> [PasteboardType] { try itemTypes().first ?? [] }

    /// The types of the items in `itemSet` (every item for nil), in item order.
    public func types(forItemSet itemSet: [Int]?) throws -> [[PasteboardType]] {
        let all = try itemTypes()
        return try indices(itemSet, count: all.count).map { all[$0] }
    }

    /// Whether any item has a type that is, or conforms to, one of `types`; false when the read
    /// failed (``readContains(pasteboardTypes:inItemSet:)`` says why).
    public func contains(pasteboardTypes types: [PasteboardType]) -> Bool {
        contains(pasteboardTypes: types, inItemSet: nil)
    }

    /// Whether any item of `itemSet` (every item for nil) has a type that is, or conforms to, one
    /// of `types`; false when the read failed.
    public func contains(pasteboardTypes types: [PasteboardType], inItemSet itemSet: [Int]?) -> Bool {
        (try? readContains(pasteboardTypes: types, inItemSet: itemSet)) ?? false
    }

    /// Whether any item of `itemSet` (every item for nil) has a type that is, or conforms to, one
    /// of `types`. Moves no data.
    public func readContains(pasteboardTypes types: [PasteboardType], inItemSet itemSet: [Int]? = nil) throws -> Bool {
        let all = try itemTypes()
        return try indices(itemSet, count: all.count).contains { conforms(all[$0], toAnyOf: types) }
    }

    /// Whether any of an item's types is, or conforms to, one of `wanted`.
    private func conforms(_ itemTypes: [PasteboardType], toAnyOf wanted: [PasteboardType]) -> Bool {
        itemTypes.contains { type in wanted.contains { registry.conforms(type, to: $0) } }
    }

    /// The items that have a type that is, or conforms to, one of `types`; empty when the read
    /// failed (``readItemSet(withPasteboardTypes:)`` says why).
    public func itemSet(withPasteboardTypes types: [PasteboardType]) -> [Int] {
        (try? readItemSet(withPasteboardTypes: types)) ?? []
    }

    /// The items that have a type that is, or conforms to, one of `types`. Moves no data.
    public func readItemSet(withPasteboardTypes types: [PasteboardType]) throws -> [Int] {
        let all = try itemTypes()
        return all.indices.filter { conforms(all[$0], toAnyOf: types) }
    }

    /// Whether any item holds plain text; false when the read failed (``readHasStrings()``).
    public var hasStrings: Bool { contains(pasteboardTypes: [.plainText]) }
    /// Whether any item holds a URL; false when the read failed (``readHasURLs()``).
    public var hasURLs: Bool { contains(pasteboardTypes: [.url]) }
    /// Whether any item holds an image; false when the read failed (``readHasImages()``).
    public var hasImages: Bool { contains(pasteboardTypes: [.image]) }
    /// Whether any item holds a color; false when the read failed (``readHasColors()``).
    public var hasColors: Bool { contains(pasteboardTypes: [.color]) }

    /// Whether any item holds plain text.
    public func readHasStrings() throws -> Bool { try readContains(pasteboardTypes: [.plainText]) }
    /// Whether any item holds a URL.
    public func readHasURLs() throws -> Bool { try readContains(pasteboardTypes: [.url]) }
    /// Whether any item holds an image.
    public func readHasImages() throws -> Bool { try readContains(pasteboardTypes: [.image]) }
    /// Whether any item holds a color.
    public func readHasColors() throws -> Bool { try readContains(pasteboardTypes: [.color]) }

    // MARK: Data and values

    /// The type of `item` (among `types`) that serves a request for `type`: the type itself, or
    /// else the first type that conforms to it.
    func matchingType(_ type: PasteboardType, in types: [PasteboardType]) -> PasteboardType? {
        types.contains(type) ? type : types.first { registry.conforms($0, to: type) }
    }

    /// The bytes of `type` from the first item that has it (or a type conforming to it); runs
    /// at most that one provider.
    public func data(forPasteboardType type: PasteboardType) throws -> Data? {
        let all = try itemTypes()
        for (index, types) in all.enumerated() {
            if let match = matchingType(type, in: types) { return try backend.data(of: name, item: index, type: match) }
        }
        return nil
    }

    /// The bytes of `type` from each item of `itemSet` (every item for nil) that has it.
    public func data(forPasteboardType type: PasteboardType, inItemSet itemSet: [Int]?) throws -> [Data] {
        let all = try itemTypes()
        return try indices(itemSet, count: all.count).compactMap { index in
            guard let match = matchingType(type, in: all[index]) else { return nil }
            return try backend.data(of: name, item: index, type: match)
        }
    }

    /// Replaces the contents with one item holding `data` under `type`.
    public func setData(_ data: Data, forPasteboardType type: PasteboardType) throws {
        var item = PasteboardItem()
        item.setData(data, for: type)
        try setItems([item])
    }

    /// The value of `type` from the first item that has it: text types read as `.string`, URL
    /// types as `.url`, property lists as their value, anything else as `.data`.
    public func value(forPasteboardType type: PasteboardType) throws -> PropertyListValue? {
        let all = try itemTypes()
        for (index, types) in all.enumerated() {
            guard let match = matchingType(type, in: types) else { continue }
            return try backend.data(of: name, item: index, type: match).map { ValueCoding.decode($0, as: match, registry: registry) }
        }
        return nil
    }

    /// The values of `type` from each item of `itemSet` (every item for nil) that has it.
    public func values(forPasteboardType type: PasteboardType, inItemSet itemSet: [Int]?) throws -> [PropertyListValue] {
        let all = try itemTypes()
        return try indices(itemSet, count: all.count).compactMap { index in
            guard let match = matchingType(type, in: all[index]),
                  let data = try backend.data(of: name, item: index, type: match) else { return nil }
            return ValueCoding.decode(data, as: match, registry: registry)
        }
    }

    /// Replaces the contents with one item holding `value` under `type`.
    ///
    /// - Throws: ``PasteboardError/notAPropertyList(typeName:path:)`` if `value` is not a property
    ///   list; the contents are then left as they were.
    public func setValue(_ value: Any, forPasteboardType type: PasteboardType) throws {
        var item = PasteboardItem()
        try item.setValue(value, for: type)
        try setItems([item])
    }

    /// The item indices of `itemSet` in item order, each once (as an index set has them), all
    /// of them for nil; throws for an index out of range.
    func indices(_ itemSet: [Int]?, count: Int) throws -> [Int] {
        guard let itemSet else { return Array(0..<count) }
        if let bad = itemSet.first(where: { $0 < 0 || $0 >= count }) {
            throw PasteboardError.itemIndexOutOfRange(bad, count: count)
        }
        return Set(itemSet).sorted()
    }
}

/// Builds an item whose representations are produced only when read.
public struct ItemProvider: Sendable {
    /// The item the registrations make.
    public private(set) var item = PasteboardItem()

    /// A provider with no representations yet.
    public init() {}

    /// A provider with one lazily produced representation.
    public init(type: PasteboardType, provider: @escaping RepresentationProvider) {
        register(type, provider: provider)
    }

    /// Adds a representation produced by `provider` when `type` is first read.
    public mutating func register(_ type: PasteboardType, provider: @escaping RepresentationProvider) {
        item.setProvider(for: type, provider)
    }

    /// Adds a representation produced from a property-list value when `type` is first read.
    public mutating func registerValue(_ type: PasteboardType, provider: @escaping @Sendable () throws -> PropertyListValue) {
        item.setProvider(for: type) { try ValueCoding.encode(provider(), as: type) }
    }
}

/// Supplies the default backend of a platform module (X11, Wayland, the headless daemon's)
/// without the program having to install it: ``PasteboardSystem`` looks the providers up by name
/// in the running process, and asks the one for the host its ``SessionPlan`` chose. The provider
/// must be a class (the runtime finds classes by name).
public protocol DefaultBackendProvider: AnyObject {
    /// Whether it makes backends on `host`.
    static func serves(_ host: SessionHost) -> Bool

    /// A backend on `host` (one it ``serves(_:)``).
    ///
    /// - Throws: why the host cannot be used (for X11: the server cannot be reached; for Wayland:
    ///   no compositor, or one without data-control: ``SessionPlan/isUnserved(_:)``); the message
    ///   is what reads and writes then report.
    static func makeBackend(on host: SessionHost) throws -> any PasteboardBackend
}

/// The backend that ``Pasteboard/general``, ``Pasteboard/find`` and named pasteboards use by
/// default, chosen once per process.
///
/// - Explicitly: call ``bootstrap(_:)`` once, before the first use of a default pasteboard, as
///   swift-log's `LoggingSystem.bootstrap` is called: `PasteboardSystem.bootstrap(try
///   X11PasteboardBackend(display: ":1"))`, or an ``InMemoryPasteboardBackend`` for an app-local
///   clipboard.
/// - Otherwise, at first use, the host is chosen as `xpb` and `xpbd` choose it (``SessionPlan``:
///   `XPB_BACKEND`, else the Wayland compositor of `WAYLAND_DISPLAY`, with XWayland's display
///   after it, else `DISPLAY`'s, else the headless xpbd), and a platform module linked into the
///   process makes the backend (``providerTypeNames``): a program that links `PasteboardWayland`
///   gets the Wayland clipboard on a Wayland session; one that links only `PasteboardX11` gets
///   XWayland's there, and the X clipboard on an X session, with no set-up.
/// - When neither gives a backend (no platform module linked for the host, no display), the
///   default backend is unavailable: every read and write throws
///   ``PasteboardError/unavailable(_:)`` saying why. Nothing falls back to an in-memory
///   pasteboard unless the program bootstraps one.
public enum PasteboardSystem {
    /// The names of the provider classes looked for, in order.
    public static let providerTypeNames = [
        "PasteboardWayland.WaylandDefaultBackendProvider", "PasteboardX11.X11DefaultBackendProvider",
        "PasteboardSelections.DaemonDefaultBackendProvider",
    ]

    private static let current = Mutex<(any PasteboardBackend)?>(nil)

    /// Installs the default backend. Call it once, before the first use of ``Pasteboard/general``,
    /// ``Pasteboard/find`` or a named pasteboard of the default backend.
    ///
    /// - Precondition: no default backend was installed or discovered before.
    public static func bootstrap(_ backend: any PasteboardBackend) {
        current.withLock { current in
            precondition(current == nil, "PasteboardSystem.bootstrap was called after the default backend was chosen; call it once, before the first use of a default pasteboard")
            current = backend
        }
    }

    /// Replaces the default backend whatever was chosen before: for tests only.
    package static func bootstrapInternal(_ backend: (any PasteboardBackend)?) {
        current.withLock { $0 = backend }
    }

    /// The default backend: the bootstrapped one, else the discovered one, else one that is
    /// unavailable and says why.
    public static var backend: any PasteboardBackend {
        current.withLock { current in
            if let backend = current { return backend }
            let backend = discoverBackend()
            current = backend
            return backend
        }
    }

    /// The platform providers linked into this process, in ``providerTypeNames``' order.
    public static var linkedProviders: [any DefaultBackendProvider.Type] {
        providerTypeNames.compactMap { _typeByName($0) as? any DefaultBackendProvider.Type }
    }

    private static func discoverBackend() -> any PasteboardBackend {
        discover(providers: linkedProviders, environment: SessionPlan.processEnvironment)
    }

    /// The backend that the first of `providers` serving the plan's hosts makes, in the plan's
    /// order, for `environment`.
    package static func discover(providers: [any DefaultBackendProvider.Type], environment: (String) -> String?) -> any PasteboardBackend {
        let plan: SessionPlan
        do {
            plan = try SessionPlan(environment: environment)
        } catch {
            return UnavailablePasteboardBackend(reason: "no pasteboard backend: \(error)")
        }
        // A host this process links no module for is passed over, as a compositor without
        // data-control is: the next host of the plan serves.
        let linked = plan.hosts.filter { host in providers.contains { $0.serves(host) } }
        guard !linked.isEmpty else {
            let module = plan.first == .wayland ? "PasteboardWayland" : "PasteboardX11"
            return UnavailablePasteboardBackend(reason: "no pasteboard backend for \(plan.first): link \(module), or call PasteboardSystem.bootstrap(_:) with a backend")
        }
        do {
            return try SessionPlan(hosts: linked).connect { host in
                try providers.first { $0.serves(host) }!.makeBackend(on: host)
            }.1
        } catch {
            return UnavailablePasteboardBackend(reason: "no pasteboard backend: \(error)")
        }
    }
}
