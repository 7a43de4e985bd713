/// A link's start, from the TCP connection to a device known by its certificate, as
/// kdeconnect-kde's LAN backend does it (`core/backends/lan/lanlinkprovider.cpp`):
///
/// - The device that heard the other's UDP broadcast dials its TCP port (the *dialer*) and sends
///   its own identity in clear; the one that broadcast (the *listener*) reads it.
/// - TLS follows with the roles swapped: the dialer is the TLS server, the listener the client.
///   Certificates are self-signed; their common name is the device id. A paired device's
///   certificate is pinned: the driver verifies it against the pinned one, and this checks that
///   the name on it is the id the device gave.
/// - In protocol 8 (both devices speak it) each sends its identity again inside TLS, and it must
///   say the same id and version as before.
///
/// A pure value: events in, actions out. The driver owns the socket and OpenSSL.
package struct Handshake: Sendable {
    package enum Role: Equatable, Sendable {
        /// We heard the device's broadcast and connected to it: TLS server.
        case dialer
        /// The device connected to us: TLS client.
        case listener
    }

    package enum Action: Equatable, Sendable {
        /// Send this packet (our identity).
        case send(Packet)
        /// Start TLS, as its server or client; `pinned`: the device is paired, so its
        /// certificate must be the pinned one (otherwise any self-signed one is taken and shown).
        case startTLS(asServer: Bool, pinned: Bool)
        /// The link is up: packets flow, with the device as it is known now.
        case ready(DeviceIdentity, version: Int)
        /// Close the link, and log why.
        case close(String)
    }

    private enum Step: Equatable, Sendable {
        case connecting
        case awaitingClearIdentity
        case awaitingTLS
        case awaitingSecureIdentity
        case ready
        case closed
    }

    package let role: Role
    package let ours: DeviceIdentity
    /// The device as it said it is (from its broadcast for a dialer, its clear identity for a
    /// listener).
    package private(set) var peer: DeviceIdentity?
    private var step: Step
    /// Whether a device is paired (its certificate pinned).
    private let isPaired: @Sendable (String) -> Bool

    /// `heard`: for a dialer, the identity broadcast by the device dialled.
    package init(role: Role, ours: DeviceIdentity, heard: DeviceIdentity? = nil, isPaired: @escaping @Sendable (String) -> Bool) {
        self.role = role
        self.ours = ours
        self.isPaired = isPaired
        peer = role == .dialer ? heard : nil
        step = role == .dialer ? .connecting : .awaitingClearIdentity
    }

    package var isReady: Bool { step == .ready }

    /// The TCP connection is made.
    package mutating func connected() -> [Action] {
        guard role == .dialer, step == .connecting else { return [] }
        guard let peer else { return close("dialled a device whose identity was not heard") }
        var identity = ours
        identity.tcpPort = nil
        identity.targetDeviceId = peer.deviceId
        identity.targetProtocolVersion = peer.protocolVersion
        step = .awaitingTLS
        return [.send(.identity(identity)), .startTLS(asServer: true, pinned: isPaired(peer.deviceId))]
    }

    /// A packet read before the link is ready.
    package mutating func received(_ packet: Packet) -> [Action] {
        switch step {
        case .awaitingClearIdentity:
            guard case .identity(let identity) = packet else { return close("sent \(packet.type) before its identity") }
            guard identity.deviceId != ours.deviceId else { return close("gave our own device id") }
            if let target = identity.targetDeviceId, target != ours.deviceId {
                return close("meant another device (\(target))")
            }
            peer = identity
            step = .awaitingTLS
            return [.startTLS(asServer: false, pinned: isPaired(identity.deviceId))]
        case .awaitingSecureIdentity:
            guard let peer else { return close("no identity") }
            guard case .identity(let identity) = packet else { return close("sent \(packet.type) before its identity inside TLS") }
            guard identity.deviceId == peer.deviceId else {
                return close("changed its device id half-way through the handshake (\(peer.deviceId) → \(identity.deviceId))")
            }
            guard identity.protocolVersion == peer.protocolVersion else {
                return close("changed its protocol version half-way through the handshake (\(peer.protocolVersion) → \(identity.protocolVersion))")
            }
            // The identity said inside TLS is the one kept (its name, its capabilities).
            self.peer = identity
            step = .ready
            return [.ready(identity, version: ours.spokenVersion(with: identity))]
        case .connecting, .awaitingTLS:
            return close("sent \(packet.type) before TLS")
        case .ready, .closed:
            return []
        }
    }

    /// TLS is up; `commonName` is the subject's common name of the certificate the device
    /// showed (already checked against the pinned one by the driver, where it is paired).
    package mutating func encrypted(commonName: String) -> [Action] {
        guard step == .awaitingTLS, let peer else { return [] }
        guard commonName == peer.deviceId else {
            return close("showed a certificate for “\(commonName)”, not for its id \(peer.deviceId)")
        }
        if ours.spokenVersion(with: peer) >= 8 {
            step = .awaitingSecureIdentity
            var identity = ours
            identity.tcpPort = nil
            return [.send(.identity(identity))]
        }
        step = .ready
        return [.ready(peer, version: ours.spokenVersion(with: peer))]
    }

    /// The packets a link takes before it is ready are identities, at most this long each.
    package var lineLimit: Int { Packet.maxIdentityBytes }

    private mutating func close(_ why: String) -> [Action] {
        step = .closed
        let who = peer.map { "“\($0.deviceName)” (\($0.deviceId))" } ?? "a device"
        return [.close("\(who) \(why): link closed")]
    }
}
