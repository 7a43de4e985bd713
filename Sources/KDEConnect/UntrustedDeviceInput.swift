import FoundationEssentials

/// What a KDE Connect device sends, run through everything that reads it: the line framer at the
/// identity limit and then at a link's, the packet decoder, the handshake of either role, pairing
/// and the clipboard rule. The fuzz target's entry (`xpb-fuzz`); each call must return, within
/// bounded memory, whatever the bytes.
package enum UntrustedDeviceInput {
    package static func exercise(_ data: Data) {
        let ours = DeviceIdentity(deviceId: String(repeating: "a", count: 32), deviceName: "fuzz", deviceType: .desktop,
                                  protocolVersion: 8, incomingCapabilities: [Packet.clipboardType], outgoingCapabilities: [Packet.clipboardType])
        var heard = ours
        heard.deviceId = String(repeating: "b", count: 32)
        var dialer = Handshake(role: .dialer, ours: ours, heard: heard, isPaired: { _ in true })
        var listener = Handshake(role: .listener, ours: ours, isPaired: { _ in false })
        _ = dialer.connected()
        var pairing = Pairing(name: "fuzz", paired: false)
        var rule = ClipboardRule(device: heard.deviceId, maxBytes: 1 << 20)
        var framer = LineFramer(limit: Packet.maxIdentityBytes)
        framer.append(data)
        var lines = 0
        while lines < 10_000 {
            let line: ArraySlice<UInt8>?
            do {
                line = try framer.next()
            } catch {
                break
            }
            guard let line else { break }
            lines += 1
            precondition(line.count <= framer.limit, "a line past the framer's limit")
            guard let packet = try? Packet.decode(line) else { continue }
            _ = Packet.decode(roundTrip: packet)
            if !dialer.isReady {
                _ = dialer.encrypted(commonName: heard.deviceId)
                _ = dialer.received(packet)
            }
            if !listener.isReady {
                _ = listener.received(packet)
                _ = listener.encrypted(commonName: listener.peer?.deviceId ?? "")
            }
            framer.limit = 1 << 20
            switch packet {
            case .pair(let wants, let timestamp):
                _ = pairing.received(pair: wants, timestamp: timestamp, version: 8, now: Date(timeIntervalSince1970: 2_000_000_000))
                _ = pairing.tick(now: Date(timeIntervalSince1970: 2_000_000_040))
            case .clipboard, .clipboardConnect:
                _ = rule.received(packet, now: 2_000_000_000_000)
            case .identity, .other:
                break
            }
        }
        precondition(framer.pending <= framer.limit + 1, "the framer holds more than a line")
    }
}

extension Packet {
    /// What a packet decodes to once written again: itself (checked by the fuzz target).
    static func decode(roundTrip packet: Packet) -> Packet? {
        let line = packet.encoded(id: 1)
        let decoded = try? decode(line.dropLast())
        if case .other = packet {} else {
            precondition(decoded == packet, "a packet did not read back as it was written")
        }
        return decoded
    }
}
