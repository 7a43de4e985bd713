import FoundationEssentials
@testable import KDEConnect
import Testing
import X11TestSupport

/// Lines as kdeconnect-kde writes them. 22.12 (protocol 7, Debian's) writes `id` as a string and
/// its device id is a UUID in braces with every other character made `_` (`core/networkpacket.cpp`,
/// `core/kdeconnectconfig.cpp`); protocol 8 writes `id` as a number and a 32-character id.
enum Recorded {
    static let id22 = "_4f8a1c2e_9b3d_4e5f_a6b7_c8d9e0f1a2b3_"
    static let broadcast22 = #"{"body":{"deviceId":"_4f8a1c2e_9b3d_4e5f_a6b7_c8d9e0f1a2b3_","deviceName":"kde-box","deviceType":"desktop","incomingCapabilities":["kdeconnect.clipboard","kdeconnect.clipboard.connect","kdeconnect.ping"],"outgoingCapabilities":["kdeconnect.clipboard","kdeconnect.clipboard.connect","kdeconnect.ping"],"protocolVersion":7,"tcpPort":1716},"id":"1701234567890","type":"kdeconnect.identity"}"#
    /// Captured: the UDP broadcast of Debian's kdeconnectd 22.12.3, run headless in a network
    /// namespace of its own on this machine, as another namespace's socket on port 1716 read it.
    static let captured22 = #"{"body":{"deviceId":"_64bcb68d_184c_4b3e_98a0_b9d91bb69946_","deviceName":"vm","deviceType":"desktop","incomingCapabilities":["kdeconnect.battery","kdeconnect.mpris.request","kdeconnect.share.request","kdeconnect.systemvolume","kdeconnect.sftp","kdeconnect.clipboard","kdeconnect.mousepad.echo","kdeconnect.contacts.response_uids_timestamps","kdeconnect.runcommand.request","kdeconnect.bigscreen.stt","kdeconnect.ping","kdeconnect.contacts.response_vcards","kdeconnect.sms.messages","kdeconnect.photo","kdeconnect.virtualmonitor.request","kdeconnect.presenter","kdeconnect.notification.request","kdeconnect.virtualmonitor","kdeconnect.runcommand","kdeconnect.telephony","kdeconnect.systemvolume.request","kdeconnect.mpris","kdeconnect.findmyphone.request","kdeconnect.mousepad.request","kdeconnect.lock.request","kdeconnect.battery.request","kdeconnect.sms.attachment_file","kdeconnect.lock","kdeconnect.notification","kdeconnect.connectivity_report","kdeconnect.clipboard.connect","kdeconnect.mousepad.keyboardstate"],"outgoingCapabilities":["kdeconnect.battery","kdeconnect.sms.request_conversation","kdeconnect.share.request","kdeconnect.mpris.request","kdeconnect.contacts.request_all_uids_timestamps","kdeconnect.systemvolume","kdeconnect.clipboard","kdeconnect.runcommand.request","kdeconnect.bigscreen.stt","kdeconnect.ping","kdeconnect.notification.action","kdeconnect.virtualmonitor.request","kdeconnect.connectivity_report.request","kdeconnect.photo.request","kdeconnect.share.request.update","kdeconnect.sms.request_attachment","kdeconnect.notification.request","kdeconnect.virtualmonitor","kdeconnect.sms.request_conversations","kdeconnect.notification.reply","kdeconnect.runcommand","kdeconnect.systemvolume.request","kdeconnect.mpris","kdeconnect.findmyphone.request","kdeconnect.mousepad.request","kdeconnect.lock.request","kdeconnect.sftp.request","kdeconnect.battery.request","kdeconnect.contacts.request_vcards_by_uid","kdeconnect.sms.request","kdeconnect.lock","kdeconnect.notification","kdeconnect.mousepad.keyboardstate","kdeconnect.clipboard.connect","kdeconnect.telephony.request_mute"],"protocolVersion":7,"tcpPort":1716},"id":"1796240465739","type":"kdeconnect.identity"}"#
    static let identity8 = #"{"id":1764000000000,"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151be","deviceName":"FOSS Phone","deviceType":"phone","incomingCapabilities":["kdeconnect.clipboard"],"outgoingCapabilities":["kdeconnect.clipboard"],"protocolVersion":8,"targetDeviceId":"_4f8a1c2e_9b3d_4e5f_a6b7_c8d9e0f1a2b3_","targetProtocolVersion":7}}"#
    static let clipboard22 = #"{"body":{"content":"hello, phone"},"id":"1701234567999","type":"kdeconnect.clipboard"}"#
    static let connect22 = #"{"body":{"content":"copied before","timestamp":1701234500000},"id":"1701234568000","type":"kdeconnect.clipboard.connect"}"#
    static let pair22 = #"{"body":{"pair":true},"id":"1701234569000","type":"kdeconnect.pair"}"#
    static let pair8 = #"{"id":1764000000001,"type":"kdeconnect.pair","body":{"pair":true,"timestamp":1764000000}}"#
}

private func decode(_ line: String) throws(PacketError) -> Packet {
    try Packet.decode(Array(line.utf8))
}

@Suite("KDE Connect packets: what devices send, read and checked")
struct PacketTests {
    @Test("22.12's broadcast (id a string, a braced UUID as device id) reads as its identity")
    func broadcast22() throws {
        guard case .identity(let identity) = try decode(Recorded.broadcast22) else {
            Issue.record("not an identity")
            return
        }
        #expect(identity.deviceId == Recorded.id22)
        #expect(identity.deviceName == "kde-box")
        #expect(identity.deviceType == .desktop)
        #expect(identity.protocolVersion == 7)
        #expect(identity.tcpPort == 1716)
        #expect(identity.incomingCapabilities.contains(Packet.clipboardConnectType))
    }

    @Test("the broadcast a real kdeconnectd 22.12.3 sent reads as protocol 7, with the clipboard in both directions and its port")
    func captured22() throws {
        guard case .identity(let identity) = try decode(Recorded.captured22) else {
            Issue.record("not an identity")
            return
        }
        #expect(identity.deviceId == "_64bcb68d_184c_4b3e_98a0_b9d91bb69946_")
        #expect(identity.protocolVersion == 7 && identity.tcpPort == 1716 && identity.deviceType == .desktop)
        for type in [Packet.clipboardType, Packet.clipboardConnectType] {
            #expect(identity.incomingCapabilities.contains(type) && identity.outgoingCapabilities.contains(type))
        }
        #expect(Recorded.captured22.utf8.count < Packet.maxIdentityBytes)
    }

    @Test("protocol 8's identity (id a number, the target fields) reads too")
    func identity8() throws {
        guard case .identity(let identity) = try decode(Recorded.identity8) else {
            Issue.record("not an identity")
            return
        }
        #expect(identity.deviceType == .phone)
        #expect(identity.deviceName == "FOSS Phone")
        #expect(identity.protocolVersion == 8)
        #expect(identity.targetDeviceId == Recorded.id22)
        #expect(identity.targetProtocolVersion == 7)
        #expect(identity.tcpPort == nil)
    }

    @Test("the clipboard and pair packets of both versions read as what they say; other plugins' are other")
    func clipboardAndPair() throws {
        #expect(try decode(Recorded.clipboard22) == .clipboard("hello, phone"))
        #expect(try decode(Recorded.connect22) == .clipboardConnect("copied before", timestamp: 1_701_234_500_000))
        #expect(try decode(Recorded.pair22) == .pair(true, timestamp: nil))
        #expect(try decode(Recorded.pair8) == .pair(true, timestamp: 1_764_000_000))
        #expect(try decode(#"{"id":1,"type":"kdeconnect.ping","body":{}}"#) == .other(type: "kdeconnect.ping"))
        #expect(try decode(#"{"type":"kdeconnect.clipboard.connect","body":{"content":"x"}}"#) == .clipboardConnect("x", timestamp: 0),
                "a connect packet without a time has an unknown (0) one")
    }

    @Test("every packet xpbd writes is one line that reads back as itself, and names its type and a numeric id")
    func roundTrip() throws {
        let identity = DeviceIdentity(deviceId: "740bd4b9b4184ee497d6caf1da8151be", deviceName: "xpbd on box", deviceType: .laptop,
                                      protocolVersion: 8, incomingCapabilities: [Packet.clipboardType], outgoingCapabilities: [],
                                      tcpPort: 1739, targetDeviceId: Recorded.id22, targetProtocolVersion: 7)
        let packets: [Packet] = [
            .identity(identity), .pair(true, timestamp: 1_764_000_000), .pair(false, timestamp: nil),
            .clipboard("line one\nline \"two\" / ünïcödé \u{1F600}"), .clipboardConnect("", timestamp: 0),
            .clipboardConnect("x", timestamp: 1_764_000_000_123),
        ]
        for packet in packets {
            let line = packet.encoded(id: 1_764_000_000_999)
            #expect(line.last == 0x0A)
            #expect(line.dropLast().firstIndex(of: 0x0A) == nil, "one line: \(packet)")
            #expect(try Packet.decode(line.dropLast()) == packet)
            let text = String(decoding: line, as: UTF8.self)
            #expect(text.contains(#""id":1764000000999"#) && text.contains(#""type":"\#(packet.type)""#))
        }
    }

    @Test("what is not a packet, or not a well-formed one, is refused with what was wrong")
    func refused() {
        let cases: [(String, PacketError)] = [
            ("not json", .notJSON),
            ("[1,2,3]", .notJSON),
            (#"{"body":{}}"#, .badType),
            (#"{"type":"x.identity","body":{}}"#, .badType),
            (#"{"type":7,"body":{}}"#, .notJSON),
            (#"{"type":"kdeconnect.identity"}"#, .badField(type: "kdeconnect.identity", field: "body")),
            (#"{"type":"kdeconnect.identity","body":{"deviceName":"x","protocolVersion":7}}"#, .badField(type: "kdeconnect.identity", field: "deviceId")),
            (#"{"type":"kdeconnect.identity","body":{"deviceId":"short","deviceName":"x","protocolVersion":7}}"#, .badDeviceId),
            (#"{"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151b/","deviceName":"x","protocolVersion":7}}"#, .badDeviceId),
            (#"{"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151be","deviceName":"?!.","protocolVersion":7}}"#, .badDeviceName),
            (#"{"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151be","deviceName":"x","protocolVersion":6}}"#, .unsupportedVersion(6)),
            (#"{"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151be","deviceName":"x","protocolVersion":9}}"#, .unsupportedVersion(9)),
            (#"{"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151be","deviceName":"x"}}"#, .badField(type: "kdeconnect.identity", field: "protocolVersion")),
            (#"{"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151be","deviceName":"x","protocolVersion":"7"}}"#, .badField(type: "kdeconnect.identity", field: "protocolVersion")),
            (#"{"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151be","deviceName":"x","protocolVersion":7,"tcpPort":22}}"#, .portOutOfRange(22)),
            (#"{"type":"kdeconnect.pair","body":{"pair":"yes"}}"#, .badField(type: "kdeconnect.pair", field: "pair")),
            (#"{"type":"kdeconnect.pair","body":{}}"#, .badField(type: "kdeconnect.pair", field: "pair")),
            (#"{"type":"kdeconnect.clipboard","body":{"content":12}}"#, .badField(type: "kdeconnect.clipboard", field: "content")),
            (#"{"type":"kdeconnect.clipboard","body":{}}"#, .badField(type: "kdeconnect.clipboard", field: "content")),
            (#"{"type":"kdeconnect.clipboard.connect","body":{"content":"x","timestamp":1e400}}"#, .badField(type: "kdeconnect.clipboard.connect", field: "body")),
        ]
        for (line, error) in cases {
            #expect(throws: error, "\(line)") { try decode(line) }
        }
        // Invalid UTF-8 inside a string, and a line nested deeper than any packet is.
        #expect(throws: PacketError.notJSON) { try Packet.decode(Array(#"{"type":"kdeconnect.clipboard","body":{"content":""#.utf8) + [0xFF, 0xFE] + Array(#""}}"#.utf8)) }
        #expect(throws: (any Error).self) { try Packet.decode(Array(repeating: UInt8(ascii: "["), count: 100_000)) }
    }

    @Test("a device's name is shown as KDE Connect shows it: forbidden characters and control characters out, 32 characters at most")
    func names() throws {
        #expect(DeviceIdentity.cleaned(name: "Ann's phone (work).") == "Anns phone work")
        #expect(DeviceIdentity.cleaned(name: "a\u{1B}[31mred\n\u{7}") == "a31mred")
        #expect(DeviceIdentity.cleaned(name: String(repeating: "é", count: 40)).count == 32)
        let line = #"{"type":"kdeconnect.identity","body":{"deviceId":"740bd4b9b4184ee497d6caf1da8151be","deviceName":"<b>Eve</b>\u0000","deviceType":"toaster","protocolVersion":7}}"#
        guard case .identity(let identity) = try decode(line) else {
            Issue.record("not an identity")
            return
        }
        #expect(identity.deviceName == "bEve/b")
        #expect(identity.deviceType == .desktop, "an unknown kind of device is shown as a desktop")
    }

    @Test("device ids: 32 to 38 letters, digits, _ or -")
    func deviceIds() {
        #expect(DeviceIdentity.isValid(deviceId: Recorded.id22))
        #expect(DeviceIdentity.isValid(deviceId: String(repeating: "a", count: 32)))
        #expect(DeviceIdentity.isValid(deviceId: String(repeating: "-", count: 38)))
        #expect(!DeviceIdentity.isValid(deviceId: String(repeating: "a", count: 31)))
        #expect(!DeviceIdentity.isValid(deviceId: String(repeating: "a", count: 39)))
        #expect(!DeviceIdentity.isValid(deviceId: String(repeating: "é", count: 32)))
        #expect(!DeviceIdentity.isValid(deviceId: String(repeating: "a", count: 31) + "/"))
    }
}

@Suite("KDE Connect lines: a link's bytes cut into packets, within a limit")
struct LineFramerTests {
    @Test("lines come out whole however the bytes are cut, \\r\\n ends too, and the framer keeps no more than the line it reads")
    func anyCut() throws {
        var generator = SeededRandom(seed: 61)
        let lines = (0..<200).map { index in String(repeating: "x", count: Int.random(in: 0...300, using: &generator)) + "\(index)" }
        let stream = Array(lines.enumerated().map { $0.offset % 7 == 0 ? $0.element + "\r\n" : $0.element + "\n" }.joined().utf8)
        for _ in 0..<20 {
            var framer = LineFramer(limit: 400)
            var out: [String] = []
            var at = 0
            while at < stream.count {
                let count = min(Int.random(in: 1...700, using: &generator), stream.count - at)
                framer.append(stream[at..<at + count])
                at += count
                while let line = try framer.next() { out.append(String(decoding: line, as: UTF8.self)) }
                #expect(framer.pending <= 401)
            }
            #expect(out == lines)
        }
    }

    @Test("a line with no end is refused as soon as it passes the limit, not held")
    func noEnd() {
        var framer = LineFramer(limit: Packet.maxIdentityBytes)
        framer.append(Array(repeating: UInt8(ascii: "{"), count: Packet.maxIdentityBytes))
        #expect((try? framer.next()) == .some(nil), "up to the limit it waits")
        framer.append([UInt8(ascii: "{"), UInt8(ascii: "{")])
        #expect(throws: PacketError.lineTooLong(limit: 8192)) { try framer.next() }
        var long = LineFramer(limit: 10)
        long.append(Array("0123456789A\nok\n".utf8))
        #expect(throws: PacketError.lineTooLong(limit: 10)) { try long.next() }
        #expect(PacketError.lineTooLong(limit: 8192).description == "a packet longer than 8 KiB")
    }
}
