import FoundationEssentials
import PasteboardWire

/// What `xpb devices` (which runs `xpbd-kdeconnect devices`) asks of the running
/// `xpbd-kdeconnect` (the KDE Connect device `xpbd --kdeconnect` runs) on its socket, one
/// request a connection: a ``DeviceRequest`` frame, answered with a
/// ``DeviceAnswer`` reply frame or an error frame (``ControlFailure``).
enum DeviceProtocol {
    /// The socket, beside the daemons' (only this user can reach the directory).
    static func socketPath(environment: [String: String], uid: UInt32) -> String {
        ControlEndpoint.directory(environment: environment, uid: uid) + "/kdeconnect.socket"
    }
}

struct DeviceRequest: Codable, Sendable, Equatable {
    enum Verb: String, Codable, Sendable, CaseIterable {
        case list, pair, accept, unpair
    }

    var verb: Verb
    /// The device's id, for every verb but `list`.
    var id: String?

    init(verb: Verb, id: String? = nil) {
        self.verb = verb
        self.id = id
    }
}

/// A device as `xpb devices --json` lists it.
struct DeviceEntry: Codable, Sendable, Equatable {
    var id: String
    var name: String
    var paired: Bool
    /// A link to it is up now.
    var reachable: Bool
    /// It asked to pair and waits for `xpb devices accept ID`.
    var asks: Bool
    /// This side asked it to pair and waits for its answer.
    var asked: Bool

    init(id: String, name: String, paired: Bool, reachable: Bool, asks: Bool, asked: Bool) {
        self.id = id
        self.name = name
        self.paired = paired
        self.reachable = reachable
        self.asks = asks
        self.asked = asked
    }
}

struct DeviceAnswer: Codable, Sendable, Equatable {
    /// This machine's own id and name as devices see them.
    var ownId: String
    var ownName: String
    var devices: [DeviceEntry]
    /// What a pairing verb did.
    var message: String?

    init(ownId: String, ownName: String, devices: [DeviceEntry], message: String? = nil) {
        self.ownId = ownId
        self.ownName = ownName
        self.devices = devices
        self.message = message
    }
}
