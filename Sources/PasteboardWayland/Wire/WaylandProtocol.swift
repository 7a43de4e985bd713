/// The interfaces this client speaks, with the events each may receive (their argument kinds,
/// from the protocol specifications: wayland.xml for the core, wlr-data-control-unstable-v1.xml
/// and ext-data-control-v1.xml for data-control) and the opcodes of the requests it sends.
package enum WaylandInterface: Sendable, Equatable, Hashable {
    case display, registry, callback, seat
    case manager(DataControlFlavour)
    case device(DataControlFlavour)
    case source(DataControlFlavour)
    case offer(DataControlFlavour)

    /// The events' arguments, by opcode; nil for an opcode the interface does not have.
    package func event(_ opcode: UInt16) -> [WaylandArgumentKind]? {
        let events: [[WaylandArgumentKind]]
        switch self {
        case .display: events = Self.displayEvents
        case .registry: events = Self.registryEvents
        case .callback: events = Self.callbackEvents
        case .seat: events = Self.seatEvents
        case .manager: events = [] // it has no events
        case .device: events = Self.deviceEvents
        case .source: events = Self.sourceEvents
        case .offer: events = Self.offerEvents
        }
        return events.indices.contains(Int(opcode)) ? events[Int(opcode)] : nil
    }

    // The tables, made once (built at each event, they were a twentieth of a paste's work).
    // error(object_id, code, message), delete_id(id)
    private static let displayEvents: [[WaylandArgumentKind]] = [[.object, .uint, .string], [.uint]]
    // global(name, interface, version), global_remove(name)
    private static let registryEvents: [[WaylandArgumentKind]] = [[.uint, .string, .uint], [.uint]]
    // done(callback_data)
    private static let callbackEvents: [[WaylandArgumentKind]] = [[.uint]]
    // capabilities(capabilities), name(name)
    private static let seatEvents: [[WaylandArgumentKind]] = [[.uint], [.string]]
    // data_offer(id), selection(id?), finished, primary_selection(id?)
    private static let deviceEvents: [[WaylandArgumentKind]] = [[.newID], [.optionalObject], [], [.optionalObject]]
    // send(mime_type, fd), cancelled
    private static let sourceEvents: [[WaylandArgumentKind]] = [[.string, .fd], []]
    // offer(mime_type)
    private static let offerEvents: [[WaylandArgumentKind]] = [[.string]]
}

/// The two names of the data-control protocol: wlroots' unstable one (sway, Hyprland, KWin,
/// niri, Weston does not have it) and the staged `ext` one that replaces it, message for message.
package enum DataControlFlavour: Sendable, Equatable, Hashable, CaseIterable {
    case wlr, ext

    /// The global's interface name.
    package var managerInterface: String {
        switch self {
        case .wlr: return "zwlr_data_control_manager_v1"
        case .ext: return "ext_data_control_manager_v1"
        }
    }

    /// The version this client binds at most: 2 has the primary selection (wlr); ext starts with it.
    package var maxVersion: UInt32 {
        switch self {
        case .wlr: return 2
        case .ext: return 1
        }
    }

    /// Whether a manager of this version carries the primary selection.
    package func hasPrimarySelection(version: UInt32) -> Bool {
        self == .ext || version >= 2
    }
}

/// The requests, by interface: each builds its message. New objects' ids are the caller's.
package enum WaylandRequest {
    /// The display is object 1 in every connection.
    package static let displayID: UInt32 = 1

    package static func sync(callback: UInt32) -> WaylandMessage {
        WaylandMessage(object: displayID, opcode: 0, arguments: [.newID(callback)])
    }

    package static func getRegistry(_ registry: UInt32) -> WaylandMessage {
        WaylandMessage(object: displayID, opcode: 1, arguments: [.newID(registry)])
    }

    /// wl_registry.bind: a new_id without a fixed interface carries the interface and version.
    package static func bind(registry: UInt32, name: UInt32, interface: String, version: UInt32, id: UInt32) -> WaylandMessage {
        WaylandMessage(object: registry, opcode: 0, arguments: [.uint(name), .string(Array(interface.utf8)), .uint(version), .newID(id)])
    }

    /// manager.create_data_source(id)
    package static func createSource(manager: UInt32, id: UInt32) -> WaylandMessage {
        WaylandMessage(object: manager, opcode: 0, arguments: [.newID(id)])
    }

    /// manager.get_data_device(id, seat)
    package static func getDevice(manager: UInt32, id: UInt32, seat: UInt32) -> WaylandMessage {
        WaylandMessage(object: manager, opcode: 1, arguments: [.newID(id), .object(seat)])
    }

    /// device.set_selection(source?) and device.set_primary_selection(source?)
    package static func setSelection(device: UInt32, source: UInt32?, primary: Bool) -> WaylandMessage {
        WaylandMessage(object: device, opcode: primary ? 2 : 0, arguments: [.object(source ?? 0)])
    }

    /// source.offer(mime_type)
    package static func offer(source: UInt32, type: [UInt8]) -> WaylandMessage {
        WaylandMessage(object: source, opcode: 0, arguments: [.string(type)])
    }

    /// offer.receive(mime_type, fd)
    package static func receive(offer: UInt32, type: [UInt8], fd: Int32) -> WaylandMessage {
        WaylandMessage(object: offer, opcode: 0, arguments: [.string(type), .fd(fd)])
    }

    /// The destructor of each data-control object (source and offer: 1; device: 1; manager: 2).
    package static func destroy(_ object: UInt32, _ interface: WaylandInterface) -> WaylandMessage {
        switch interface {
        case .manager: return WaylandMessage(object: object, opcode: 2)
        default: return WaylandMessage(object: object, opcode: 1)
        }
    }
}
