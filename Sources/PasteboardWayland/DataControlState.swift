/// What a data-control client knows of its connection, and what each event from the compositor
/// changes: the objects and their interfaces, the globals, the seat and manager bound, the
/// offers and the MIME types each lists, the selection and primary selection now, their change
/// counts, our sources. A value type: events in, effects out (``handle(_:)``); the connection
/// performs the effects. Every event is checked against what this client made or was given, so a
/// compositor (or anything that speaks for it) cannot make it hold more than it bounds.
package struct DataControlState: Sendable {
    /// One selection's side: the clipboard or the primary selection.
    package enum Selection: Sendable, Equatable, Hashable, CaseIterable {
        case clipboard, primary
    }

    /// What the connection does after an event.
    package enum Effect: Sendable, Equatable {
        /// A sync's callback is done.
        case callbackDone(UInt32)
        /// A selection changed (its count moved): to the offer, or to nothing. `owner` numbers the
        /// ownership (``owner(of:)``); `changeCount` and the offer's `types` are as they were at
        /// this event (the next may have moved the count and destroyed the offer before this
        /// effect is handled: a watcher printed one count twice, the first with no types).
        case selectionChanged(Selection, offer: UInt32?, owner: UInt?, changeCount: Int, types: [[UInt8]]?)
        /// A reader asks our source for a type: write it to the descriptor, then close it.
        case send(source: UInt32, type: [UInt8], fd: Int32)
        /// Our source is no longer the selection: it is destroyed.
        case cancelled(source: UInt32)
        /// An offer no selection holds any more: it is destroyed.
        case destroyOffer(UInt32)
        /// The device will send nothing more (the seat went, or another client took data-control).
        case deviceFinished
        /// A descriptor nobody uses (an event for an object already gone): closed.
        case close(Int32)
    }

    /// A global the registry announced.
    package struct Global: Sendable, Equatable {
        package let name: UInt32
        package let interface: String
        package let version: UInt32
    }

    /// The most types one offer may list, and the longest type: a peer that lists more is cut off
    /// there (an X owner's target list has the same kind of bound).
    package static let maxTypesPerOffer = 512
    /// The most offers that may be alive at once (the compositor makes one per selection change
    /// and we destroy each replaced one; more means a peer floods us).
    package static let maxOffers = 64
    /// The most globals kept (a compositor announces a few dozen).
    package static let maxGlobals = 512
    /// The seat's interface name, as the registry announces it and as it is bound.
    package static let seatInterface = "wl_seat"
    /// The interfaces of the globals kept: the seat and the data-control managers.
    static let boundInterfaces: [[UInt8]] = ([seatInterface] + DataControlFlavour.allCases.map(\.managerInterface)).map { Array($0.utf8) }

    package private(set) var objects: [UInt32: WaylandInterface] = [:]
    /// Objects we destroyed that the compositor may still send events to (it had not read our
    /// destroy yet): their events are decoded by their interface, and their descriptors closed.
    /// A client object leaves at the compositor's delete_id; an offer when its id is made anew.
    private var zombies: [UInt32: WaylandInterface] = [:]
    /// Destroyed offers in the order destroyed: the oldest are forgotten past ``maxZombies``
    /// (a compositor reuses freed ids, so few stay; a peer that never does cannot grow this).
    private var zombieOffers: [UInt32] = []
    package static let maxZombies = 1024
    private var nextID: UInt32 = 2
    package private(set) var globals: [Global] = []
    /// The types each live offer lists, in the order offered.
    package private(set) var offers: [UInt32: [[UInt8]]] = [:]
    /// The offer of each selection now, nil when it is empty.
    package private(set) var current: [Selection: UInt32] = [:]
    /// How many times each selection changed since the device was made (absent: none).
    package private(set) var changeCounts: [Selection: Int] = [:]
    /// The error the compositor sent, which ends the connection.
    package private(set) var fatalError: String?
    package private(set) var device: UInt32?
    package private(set) var seat: UInt32?
    package private(set) var manager: (id: UInt32, flavour: DataControlFlavour, version: UInt32)?
    package private(set) var deviceFinished = false
    /// Each selection's ownership, numbered: a new number on every selection event but our own
    /// (``ourOwner``), nil while it is empty. What sync and the keeper compare, as X window ids
    /// are compared on X (data-control names no client).
    private var owners: [Selection: UInt] = [:]
    private var nextOwner: UInt = 2
    /// The number of our own ownerships.
    package static let ourOwner: UInt = 1
    /// A source of ours set as a selection and not yet seen as its selection event: its types.
    private var expected: [Selection: (source: UInt32, types: [[UInt8]])] = [:]
    /// Our source each selection has now, as the events tell.
    package private(set) var ownSources: [Selection: UInt32] = [:]

    // The display is set here, not by a literal: a literal of pairs made an array of them first
    // (its type's metadata, a fiftieth of a paste's instructions).
    package init() {
        objects[WaylandRequest.displayID] = .display
    }

    /// The interface of a live object, for the decoder's signatures.
    package func interface(of object: UInt32) -> WaylandInterface? { objects[object] }

    /// The arguments of an event, nil for an object or opcode this client does not know.
    package func signature(object: UInt32, opcode: UInt16) -> [WaylandArgumentKind]? {
        (objects[object] ?? zombies[object])?.event(opcode)
    }

    /// A new object of ours (ids are never reused: a long-lived daemon makes a few a copy, and
    /// the client range holds four billion).
    package mutating func make(_ interface: WaylandInterface) -> UInt32 {
        let id = nextID
        nextID += 1
        objects[id] = interface
        return id
    }

    /// Notes the bound seat, manager and device.
    package mutating func bound(seat: UInt32) { self.seat = seat }
    package mutating func bound(manager: UInt32, flavour: DataControlFlavour, version: UInt32) {
        self.manager = (manager, flavour, version)
    }
    package mutating func made(device: UInt32) { self.device = device }

    /// Our object destroyed by a request of ours (its id is not reused, so it is forgotten now).
    package mutating func forget(_ object: UInt32) {
        guard let interface = objects.removeValue(forKey: object) else { return }
        zombies[object] = interface
        if case .offer = interface {
            zombieOffers.append(object)
            if zombieOffers.count > Self.maxZombies { zombies[zombieOffers.removeFirst()] = nil }
        }
        offers[object] = nil
        for (selection, offer) in current where offer == object { current[selection] = nil }
    }

    /// The data-control manager to use: ext where the compositor has it, else wlr's.
    package var dataControlGlobal: (Global, DataControlFlavour)? {
        for flavour in [DataControlFlavour.ext, .wlr] {
            if let global = globals.first(where: { $0.interface == flavour.managerInterface }) { return (global, flavour) }
        }
        return nil
    }

    /// The first seat the compositor announced.
    package var seatGlobal: Global? { globals.first { $0.interface == Self.seatInterface } }

    /// The ownership of a selection now (``ourOwner`` for ours), nil when it is empty.
    package func owner(of selection: Selection) -> UInt? { owners[selection] }

    /// Notes a source of ours about to be set as `selection`: the next selection event whose
    /// offer lists exactly its types is ours (the compositor sends it before it answers the sync
    /// after our request; another client's copy made just before ours lists other types).
    package mutating func expectOwn(_ selection: Selection, source: UInt32, types: [[UInt8]]) {
        var seen = Set<[UInt8]>()
        expected[selection] = (source, types.filter { seen.insert($0).inserted })
    }

    /// The types an offer lists (nil when it is not a live offer).
    package func types(of offer: UInt32) -> [[UInt8]]? { offers[offer] }

    /// Handles one event; returns what the connection must do.
    package mutating func handle(_ message: WaylandMessage) -> [Effect] {
        guard let interface = objects[message.object] else {
            // An event for an object we destroyed: only its descriptors matter (closed).
            if zombies[message.object] == .callback, message.opcode == 0 { zombies[message.object] = nil }
            return closing(message)
        }
        let arguments = message.arguments
        switch (interface, message.opcode) {
        case (.display, 0):
            let text = arguments[2].text ?? ""
            fatalError = "the compositor ended the connection: error \(arguments[1].word ?? 0) on object \(arguments[0].word ?? 0): \(text)"
            return []
        case (.display, 1):
            // delete_id: the compositor let go of an object of ours. Ids are not reused, so
            // there is nothing to free but the name.
            if let id = arguments[0].word, id != WaylandRequest.displayID {
                zombies[id] = nil
                if objects[id] == .callback { objects[id] = nil }
            }
            return []
        case (.registry, 0):
            // Only the globals this client binds are kept (a compositor announces a few dozen;
            // naming each was a tenth of a paste's decoding).
            guard globals.count < Self.maxGlobals, let name = arguments[0].word, let version = arguments[2].word,
                  case let .string(interface?) = arguments[1], Self.boundInterfaces.contains(interface) else { return [] }
            globals.append(Global(name: name, interface: String(decoding: interface, as: UTF8.self), version: version))
            return []
        case (.registry, 1):
            globals.removeAll { $0.name == arguments[0].word }
            return []
        case (.callback, 0):
            objects[message.object] = nil
            return [.callbackDone(message.object)]
        case (.seat, _):
            return []
        case let (.device(flavour), 0):
            // data_offer: a new offer object, its types to follow. It must be in the
            // compositor's range and new.
            guard let id = arguments[0].word, id >= 0xFF00_0000, objects[id] == nil else {
                fatalError = "the compositor made an offer with id \(arguments[0].word ?? 0), which is not free"
                return []
            }
            guard offers.count < Self.maxOffers else {
                fatalError = "the compositor keeps more than \(Self.maxOffers) offers alive"
                return []
            }
            zombies[id] = nil
            objects[id] = .offer(flavour)
            offers[id] = []
            return []
        case (.device, 1), (.device, 3):
            let selection: Selection = message.opcode == 1 ? .clipboard : .primary
            let offer = arguments[0].word.flatMap { $0 == 0 ? nil : $0 }
            if let offer, offers[offer] == nil {
                fatalError = "the compositor named offer \(offer) as the selection, which it never made"
                return []
            }
            let previous = current[selection]
            current[selection] = offer
            changeCounts[selection, default: 0] += 1
            if let offer, let expected = expected[selection], offers[offer] == expected.types {
                owners[selection] = Self.ourOwner
                ownSources[selection] = expected.source
                self.expected[selection] = nil
            } else if offer != nil {
                owners[selection] = nextOwner
                nextOwner += 1
                ownSources[selection] = nil
            } else {
                owners[selection] = nil
                ownSources[selection] = nil
            }
            var effects: [Effect] = [.selectionChanged(selection, offer: offer, owner: owners[selection], changeCount: changeCounts[selection] ?? 0,
                                                       types: offer.flatMap { offers[$0] })]
            if let previous, previous != offer, !current.values.contains(previous) {
                effects.append(.destroyOffer(previous))
            }
            return effects
        case (.device, 2):
            deviceFinished = true
            return [.deviceFinished]
        case (.offer, 0):
            guard let types = offers[message.object], case let .string(bytes?) = arguments[0] else { return [] }
            // A name that is not UTF-8 could only be asked back under another (repaired) name,
            // which its source does not know: left out. (ASCII, every MIME type, is checked
            // without the generic validation, a third of the event's cost.)
            if types.count < Self.maxTypesPerOffer, bytes.count <= 1024, !types.contains(bytes),
               bytes.allSatisfy({ $0 < 0x80 }) || String(validating: bytes, as: UTF8.self) != nil {
                offers[message.object]?.append(bytes)
            }
            return []
        case (.source, 0):
            guard case let .string(type?) = arguments[0], case let .fd(fd) = arguments[1] else { return [] }
            return [.send(source: message.object, type: type, fd: fd)]
        case (.source, 1):
            for (selection, pending) in expected where pending.source == message.object { expected[selection] = nil }
            for (selection, source) in ownSources where source == message.object { ownSources[selection] = nil }
            return [.cancelled(source: message.object)]
        default:
            return closing(message)
        }
    }

    /// The descriptors of an event nobody takes.
    private func closing(_ message: WaylandMessage) -> [Effect] {
        message.arguments.compactMap { argument in
            if case let .fd(fd) = argument { return .close(fd) }
            return nil
        }
    }
}
