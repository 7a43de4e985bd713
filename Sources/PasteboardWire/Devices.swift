import FoundationEssentials

/// What `xpb devices` asks of `xpbd-kdeconnect` (the KDE Connect device `xpbd --kdeconnect`
/// runs) on its socket, one request a connection: a ``DeviceRequest`` frame, answered with a
/// ``DeviceAnswer`` reply frame or an error frame (``ControlFailure``).
package enum DeviceProtocol {
    /// The socket, beside the daemons' (only this user can reach the directory).
    package static func socketPath(environment: [String: String], uid: UInt32) -> String {
        ControlEndpoint.directory(environment: environment, uid: uid) + "/kdeconnect.socket"
    }
}

package struct DeviceRequest: Codable, Sendable, Equatable {
    package enum Verb: String, Codable, Sendable, CaseIterable {
        case list, pair, accept, unpair
    }

    package var verb: Verb
    /// The device's id, for every verb but `list`.
    package var id: String?

    package init(verb: Verb, id: String? = nil) {
        self.verb = verb
        self.id = id
    }
}

/// A device as `xpb devices --json` lists it.
package struct DeviceEntry: Codable, Sendable, Equatable {
    package var id: String
    package var name: String
    package var paired: Bool
    /// A link to it is up now.
    package var reachable: Bool
    /// It asked to pair and waits for `xpb devices accept ID`.
    package var asks: Bool
    /// This side asked it to pair and waits for its answer.
    package var asked: Bool

    package init(id: String, name: String, paired: Bool, reachable: Bool, asks: Bool, asked: Bool) {
        self.id = id
        self.name = name
        self.paired = paired
        self.reachable = reachable
        self.asks = asks
        self.asked = asked
    }
}

package struct DeviceAnswer: Codable, Sendable, Equatable {
    /// This machine's own id and name as devices see them.
    package var ownId: String
    package var ownName: String
    package var devices: [DeviceEntry]
    /// What a pairing verb did.
    package var message: String?

    package init(ownId: String, ownName: String, devices: [DeviceEntry], message: String? = nil) {
        self.ownId = ownId
        self.ownName = ownName
        self.devices = devices
        self.message = message
    }
}
