import FoundationEssentials

/// A backend whose pasteboards live outside this process (an X display, or xpbd's memory on a
/// host without one) and that a command line client drives directly: it reads one
/// representation as a stream of bytes, as they come, into a sink (never whole in memory), names
/// the owner, and lists the raw targets. `xpb` drives every host through this one protocol.
public protocol StreamingPasteboardBackend: PasteboardBackend {
    /// Whether the host still answers.
    var isConnected: Bool { get }

    /// The targets the owner lists, as it names them; empty when nobody owns the pasteboard.
    func targets(of name: Pasteboard.Name) throws -> [String]
    /// The types of every item, nil when nobody owns the pasteboard.
    func itemTypesIfOwned(of name: Pasteboard.Name) throws -> [[PasteboardType]]?
    /// Who owns the contents now, nil when nobody does.
    func contentsOwner(of name: Pasteboard.Name) throws -> PasteboardOwner?

    /// Streams one representation of item `item`, of the type `choose` picks from the types of
    /// every item (nil: nobody owns the pasteboard; it may throw to refuse them all). `likely` is
    /// the type most likely chosen, which a host may ask for with the offer. A file the owner
    /// passes whole goes to `file` where the host can, else its bytes to `bytes`.
    ///
    /// - Returns: false when the owner offered the type but did not deliver it.
    func stream(of name: Pasteboard.Name, item: Int, limit: Int?, likely: PasteboardType?,
                choosing choose: ([[PasteboardType]]?) throws -> PasteboardType,
                file: (FileContents) throws -> Void, bytes: (Data) throws -> Void) throws -> Bool
    /// Streams the owner's reply for one raw target, as it is; nil when nobody owns the
    /// pasteboard, false when the owner refuses the target.
    func stream(of name: Pasteboard.Name, target: String, limit: Int?, bytes: (Data) throws -> Void) throws -> Bool?

    /// Empties the pasteboard, whoever holds it.
    func clear(_ name: Pasteboard.Name) throws
    /// Lets go of the host; with `handOff`, contents only this process holds go to a clipboard
    /// manager first. Returns whether one took them.
    @discardableResult
    func close(handOff: Bool) -> Bool
}

extension StreamingPasteboardBackend {
    /// One representation's bytes, read whole through ``stream(of:item:limit:likely:choosing:file:bytes:)``;
    /// nil when the item lacks the type.
    public func streamedData(of name: Pasteboard.Name, item: Int, type: PasteboardType) throws -> Data? {
        var data = Data()
        let found: Bool
        do {
            found = try stream(of: name, item: item, limit: nil, likely: type, choosing: { types in
                guard let types, types.indices.contains(item), types[item].contains(type) else { throw AbsentType() }
                return type
            }, file: { data.append(try $0.read(offset: 0, length: $0.size)) }, bytes: { data.append($0) })
        } catch is AbsentType {
            return nil
        }
        return found ? data : nil
    }

    /// The current items with their bytes read now, then `items`, as new contents (`addItems`
    /// of a backend whose bytes live elsewhere).
    public func addStreamedItems(_ items: [PasteboardItem], to name: Pasteboard.Name) throws {
        let current = try self.items(of: name).map { item -> PasteboardItem in
            var copy = PasteboardItem()
            for type in item.types { copy.setData(try item.data(for: type) ?? Data(), for: type) }
            return copy
        }
        try setItems(current + items, options: options(of: name), on: name)
    }

    /// The items of a pasteboard whose bytes live elsewhere: each representation read when asked.
    public func streamedItems(of name: Pasteboard.Name) throws -> [PasteboardItem] {
        try (itemTypesIfOwned(of: name) ?? []).enumerated().map { index, types in
            var item = PasteboardItem()
            for type in types {
                item.setProvider(for: type) { [self] in
                    guard let data = try? self.streamedData(of: name, item: index, type: type) else {
                        throw PasteboardError.backendFailure("the pasteboard no longer offers \(type)")
                    }
                    return data
                }
            }
            return item
        }
    }
}

/// A type the item does not have: no data, not an error.
private struct AbsentType: Error {}

/// A streaming backend whose copies live in this process until another client takes the
/// selection (an X display, a Wayland compositor): `xpb copy`'s background owner serves through
/// it, counts pastes and waits for the selection to go.
public protocol OwningPasteboardBackend: StreamingPasteboardBackend {
    /// Called after each paste served (a requestor's conversion of a data target), with the
    /// pasteboard and the type; nil stops counting.
    func onServed(_ handler: (@Sendable (Pasteboard.Name, PasteboardType) -> Void)?)
    /// Called once per paste of what this process owns (one reader's reads close together), with
    /// who read it as far as the host can tell (``PasteReading``), at a bounded rate: looking a
    /// reader up costs the host a few round trips, and any client may read as often as it likes.
    /// nil stops it.
    func onPasted(_ handler: (@Sendable (Pasteboard.Name, PasteReading) -> Void)?)
    /// From now on, what this process serves marked secret (``SecretMarking``) is refused to the
    /// readers `rule` refuses (each read of it looks its reader up); an empty rule serves every reader.
    func refuseSecrets(_ rule: SecretRefusal)
    /// Whether this process holds the pasteboard's selection now.
    func isOwner(of name: Pasteboard.Name) -> Bool
    /// How many transfers to readers are under way (they go on after the selection is lost).
    func activeTransferCount() throws -> Int
}

/// One paste of what this process owns: when, and who read it, as its host can tell (on X the
/// reading client's process as the X server names it; on Wayland the process holding the pipe it
/// reads).
public struct PasteReading: Sendable, Equatable {
    public let time: Date
    public let processID: Int?
    /// The reader's executable name.
    public let appName: String?
    /// This process's owner as the host names it (an X window id, as ``PasteboardOwner/id``), nil
    /// where the host names none (Wayland).
    public let ownerID: String?

    public init(time: Date, processID: Int?, appName: String?, ownerID: String?) {
        self.time = time
        self.processID = processID
        self.appName = appName
        self.ownerID = ownerID
    }
}

/// Who owns a pasteboard's contents, as its host can tell: on X the selection owner's window and
/// process; on a host without a display, where the copy was made.
public struct PasteboardOwner: Sendable, Equatable {
    /// How the host names the owner: an X window id, or where a copy held by xpbd came from
    /// (`xpb`, `history (APP)`, a peer).
    public let id: String
    /// The owner window's name, if it has one.
    public let name: String?
    public let processID: Int?
    /// The application: its executable's name, else its window class or name.
    public let appName: String?
    public let executablePath: String?
    /// `WM_CLASS`'s class, on X.
    public let windowClass: String?
    /// Who made the copy where an xpb owner says: the program that ran it.
    public let copiedBy: CopyCredit?
    /// Where a copy xpbd holds was made (`xpb`, `history (APP)`, another node's host, display and
    /// application); nil on X, whose owners are windows.
    public let origin: String?

    public init(id: String, name: String? = nil, processID: Int? = nil, appName: String? = nil, executablePath: String? = nil,
                windowClass: String? = nil, copiedBy: CopyCredit? = nil, origin: String? = nil) {
        self.origin = origin
        self.id = id
        self.name = name
        self.processID = processID
        self.appName = appName
        self.executablePath = executablePath
        self.windowClass = windowClass
        self.copiedBy = copiedBy
    }
}
