/// Who a KDE Connect device says it is (its `kdeconnect.identity` packet), checked as
/// kdeconnect-kde checks it (`core/deviceinfo.h`, `core/backends/lan/lanlinkprovider.cpp`): an id
/// of 32 to 38 letters, digits, `_` or `-` (which is also its certificate's common name), a name
/// cleaned of the characters KDE Connect forbids and cut to 32, a protocol version xpbd speaks,
/// and a TCP port in KDE Connect's range where one is given.
package struct DeviceIdentity: Equatable, Sendable {
    package var deviceId: String
    package var deviceName: String
    package var deviceType: DeviceType
    package var protocolVersion: Int
    package var incomingCapabilities: [String]
    package var outgoingCapabilities: [String]
    /// Where the device listens (in its UDP broadcast).
    package var tcpPort: Int?
    /// Protocol 8: the device a dialer meant to reach, and the version it heard it speaks.
    package var targetDeviceId: String?
    package var targetProtocolVersion: Int?

    /// The protocol versions xpbd speaks; it says the newest.
    package static let versions = [7, 8]
    /// KDE Connect's TCP ports: the first free one is listened on; UDP discovery is on the first.
    package static let tcpPorts = 1716...1764
    /// The longest name shown (kdeconnect-kde's `MAX_DEVICE_NAME_LENGTH`).
    package static let maxNameLength = 32
    /// The most capabilities kept of one device: more say nothing more to xpbd.
    package static let maxCapabilities = 256

    package enum DeviceType: String, Equatable, Sendable {
        case desktop, laptop, phone, tablet, tv
    }

    package init(deviceId: String, deviceName: String, deviceType: DeviceType, protocolVersion: Int,
                 incomingCapabilities: [String], outgoingCapabilities: [String], tcpPort: Int? = nil,
                 targetDeviceId: String? = nil, targetProtocolVersion: Int? = nil) {
        self.deviceId = deviceId
        self.deviceName = deviceName
        self.deviceType = deviceType
        self.protocolVersion = protocolVersion
        self.incomingCapabilities = incomingCapabilities
        self.outgoingCapabilities = outgoingCapabilities
        self.tcpPort = tcpPort
        self.targetDeviceId = targetDeviceId
        self.targetProtocolVersion = targetProtocolVersion
    }

    /// Whether `id` is a device id KDE Connect accepts.
    package static func isValid(deviceId id: String) -> Bool {
        let bytes = id.utf8
        return (32...38).contains(bytes.count) && bytes.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F || byte == 0x2D
        }
    }

    /// A name as KDE Connect shows it: without `"',;:.!?()[]<>`, control characters and line
    /// ends, and cut to 32 characters.
    package static func cleaned(name: String) -> String {
        let forbidden: Set<Character> = ["\"", "'", ",", ";", ":", ".", "!", "?", "(", ")", "[", "]", "<", ">"]
        let kept = name.filter { character in
            !forbidden.contains(character) && !character.unicodeScalars.contains { $0.properties.generalCategory == .control }
        }
        return String(kept.prefix(maxNameLength))
    }

    /// The version two devices speak on a link: the older of theirs.
    package func spokenVersion(with other: DeviceIdentity) -> Int { min(protocolVersion, other.protocolVersion) }
}

/// The identity packet's body as JSON has it; every field optional, so that what is missing is
/// named.
struct IdentityBody: Codable {
    var deviceId: String?
    var deviceName: String?
    var deviceType: String?
    var protocolVersion: Int?
    var incomingCapabilities: [String]?
    var outgoingCapabilities: [String]?
    var tcpPort: Int?
    var targetDeviceId: String?
    var targetProtocolVersion: Int?

    init(_ identity: DeviceIdentity) {
        deviceId = identity.deviceId
        deviceName = identity.deviceName
        deviceType = identity.deviceType.rawValue
        protocolVersion = identity.protocolVersion
        incomingCapabilities = identity.incomingCapabilities
        outgoingCapabilities = identity.outgoingCapabilities
        tcpPort = identity.tcpPort
        targetDeviceId = identity.targetDeviceId
        targetProtocolVersion = identity.targetProtocolVersion
    }

    func identity() throws(PacketError) -> DeviceIdentity {
        let type = Packet.identityType
        guard let deviceId else { throw .badField(type: type, field: "deviceId") }
        guard DeviceIdentity.isValid(deviceId: deviceId) else { throw .badDeviceId }
        guard let name = deviceName else { throw .badField(type: type, field: "deviceName") }
        let cleaned = DeviceIdentity.cleaned(name: name)
        guard !cleaned.isEmpty else { throw .badDeviceName }
        guard let protocolVersion else { throw .badField(type: type, field: "protocolVersion") }
        guard DeviceIdentity.versions.contains(protocolVersion) else { throw .unsupportedVersion(protocolVersion) }
        if let tcpPort, !DeviceIdentity.tcpPorts.contains(tcpPort) { throw .portOutOfRange(tcpPort) }
        if let targetDeviceId, !DeviceIdentity.isValid(deviceId: targetDeviceId) { throw .badDeviceId }
        return DeviceIdentity(
            deviceId: deviceId, deviceName: cleaned,
            // An unknown kind of device is shown as a desktop, as kdeconnect-kde does.
            deviceType: deviceType.flatMap(DeviceIdentity.DeviceType.init(rawValue:)) ?? .desktop,
            protocolVersion: protocolVersion,
            incomingCapabilities: Array((incomingCapabilities ?? []).prefix(DeviceIdentity.maxCapabilities)),
            outgoingCapabilities: Array((outgoingCapabilities ?? []).prefix(DeviceIdentity.maxCapabilities)),
            tcpPort: tcpPort, targetDeviceId: targetDeviceId, targetProtocolVersion: targetProtocolVersion)
    }
}
