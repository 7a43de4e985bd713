import X11TestSupport
import Foundation
import PasteboardKit
import PasteboardWire
import Testing
@testable import PasteboardDaemon

@Suite("sync protocol and link settings")
struct SyncWireTests {
    @Test("stamps order by clock, then by origin node: the same winner on every node")
    func stampOrder() {
        let a = SyncStamp(clock: 10, node: "a")
        let b = SyncStamp(clock: 10, node: "b")
        let later = SyncStamp(clock: 11, node: "a")
        #expect(a < b && b < later && a < later)
        #expect([later, b, a].sorted() == [a, b, later])
        #expect(!(a < a))
    }

    @Test("the fuzz target's peer input: hostile numbers, frames past the window, garbage and cut frames never trap")
    func hostilePeerInput() throws {
        let stamp = SyncStamp(clock: 2_000_000_000_000, node: "peer")
        func sync(_ message: SyncMessage) throws -> Data { Frame(kind: .sync, payload: try ControlCoding.encode(message)).encoded }
        func data(_ id: UInt64, _ count: Int) -> Data {
            Frame(kind: .data, payload: Data(count: count).withUnsafeBytes { SyncData.encode(id: id, $0) }).encoded
        }
        var inputs: [Data] = [Data(), Data([0, 0, 0]), Data([0xFF, 0xFF, 0xFF, 0xFF, 16]), Frame(kind: .sync, payload: Data("{".utf8)).encoded]
        for number in [Int.max, Int.min, 0, -5, 1 << 62] {
            inputs.append(try sync(.credit(id: 1, bytes: number)))
            inputs.append(try sync(.fetch(id: 9, selection: "CLIPBOARD", stamp: stamp, target: "UTF8_STRING", window: number, limit: number)))
            inputs.append(try sync(.begin(id: 1, type: "UTF8_STRING", size: number)) + data(1, 4096) + (try sync(.end(id: 1, total: number))))
        }
        // Data past the window of our fetch (256 KiB), and for ids nobody asked for.
        inputs.append(try sync(.begin(id: 1, type: "t", size: nil)) + (0 ..< 80).map { _ in data(1, 8 << 10) }.reduce(Data(), +))
        inputs.append(data(UInt64.max, 10) + data(0, 0) + Frame(kind: .data, payload: Data([1, 2])).encoded)
        inputs.append(try sync(.announce(SyncAnnounce(selection: "CLIPBOARD", stamp: SyncStamp(clock: .max, node: ""), origin: "",
                                                     targets: (0 ..< 300).map { SyncTarget(target: "t\($0)", size: -1) }))))
        inputs.append(try sync(.withdraw(selection: "PRIMARY", stamp: SyncStamp(clock: 0, node: "peer"))) + (try sync(.cancel(id: .max))))
        for input in inputs {
            UntrustedPeerInput.exercise(input)
            // Cut anywhere: a frame's tail never arrives.
            UntrustedPeerInput.exercise(input.prefix(input.count / 2))
        }
    }

    @Test("every message survives JSON both ways; data frames carry their transfer id")
    func messages() throws {
        let stamp = SyncStamp(clock: 1_795_000_000_000, node: "9f3c")
        let messages: [SyncMessage] = [
            .announce(SyncAnnounce(selection: "CLIPBOARD", stamp: stamp, origin: "host :0 (xclip)",
                                   targets: [SyncTarget(target: "UTF8_STRING"), SyncTarget(target: "image/png", size: 12)],
                                   expires: Date(timeIntervalSince1970: 1_800_000_000))),
            .withdraw(selection: "PRIMARY", stamp: stamp),
            .fetch(id: 7, selection: "CLIPBOARD", stamp: stamp, target: "text/html", window: 4 << 20, limit: 256 << 20),
            .begin(id: 7, type: "UTF8_STRING", size: nil), .begin(id: 8, type: "image/png", size: 3),
            .end(id: 7, total: 42), .failed(id: 7, message: "no"), .credit(id: 7, bytes: 1 << 20), .cancel(id: 7),
            .ping(seq: 3), .pong(seq: 3),
        ]
        for message in messages {
            let decoded = try ControlCoding.decode(SyncMessage.self, from: try ControlCoding.encode(message))
            #expect(decoded == message)
        }
        let bytes = Data((0..<300).map { UInt8($0 & 0xFF) })
        let payload = bytes.withUnsafeBytes { SyncData.encode(id: 0x0102_0304_0506_0708, $0) }
        let decoded = try #require(SyncData.decode(payload))
        #expect(decoded.id == 0x0102_0304_0506_0708 && decoded.bytes == bytes)
        #expect(SyncData.decode(Data([1, 2, 3])) == nil)
        // Sync and data frames pass the decoder like any kind it knows.
        var decoder = FrameDecoder()
        decoder.append(Frame(kind: .data, payload: payload).encoded + Frame(kind: .sync, payload: Data("{}".utf8)).encoded)
        #expect(try decoder.next()?.kind == .data)
        #expect(try decoder.next()?.kind == .sync)
    }

    @Test("a link speaks the lower of the two sides' versions; an older peer than this side speaks, or another protocol, is refused with a message that says so")
    func versions() throws {
        let ours = SyncHello(node: "a", name: "here :0", sends: true, receives: true, selections: ["CLIPBOARD"])
        let same = SyncHello(node: "b", name: "there :0", sends: true, receives: true, selections: ["CLIPBOARD"])
        #expect(ours.mismatch(with: same) == nil && ours.agreedVersion(with: same) == SyncHello.version)
        let newer = SyncHello(node: "b", name: "there", sends: true, receives: true, selections: [], version: SyncHello.version + 3)
        #expect(ours.mismatch(with: newer) == nil && ours.agreedVersion(with: newer) == SyncHello.version)
        let older = SyncHello(node: "b", name: "there", sends: true, receives: true, selections: [], version: 1)
        #expect(ours.mismatch(with: older)?.contains("up to version 1, this side versions 2 to") == true, "\(ours.mismatch(with: older) ?? "")")
        let other = SyncHello(node: "b", name: "there", sends: true, receives: true, selections: [], protocol: "xpb-control")
        #expect(ours.mismatch(with: other)?.contains("'xpb-control'") == true)
        // A newer peer's hello with fields this version does not know is read all the same.
        let hello = Data(#"{"protocol":"xpb-sync","version":9,"node":"n","name":"future","sends":true,"receives":false,"selections":["CLIPBOARD"],"compression":["zstd"]}"#.utf8)
        let decoded = try ControlCoding.decode(SyncHello.self, from: hello)
        #expect(decoded.version == 9 && decoded.name == "future" && ours.agreedVersion(with: decoded) == SyncHello.version)
    }

    @Test("the wire form: the kind and each field by name, no positional keys; a newer peer's kinds and fields are told apart, not errors")
    func explicitEncoding() throws {
        let stamp = SyncStamp(clock: 5, node: "n")
        let fetch = try ControlCoding.encode(SyncMessage.fetch(id: 7, selection: "CLIPBOARD", stamp: stamp, target: "UTF8_STRING", window: 64, limit: 128))
        #expect(String(decoding: fetch, as: UTF8.self)
            == #"{"id":7,"kind":"fetch","limit":128,"selection":"CLIPBOARD","stamp":{"clock":5,"node":"n"},"target":"UTF8_STRING","window":64}"#)
        let announce = try ControlCoding.encode(SyncMessage.announce(SyncAnnounce(selection: "CLIPBOARD", stamp: stamp, origin: "o", targets: [SyncTarget(target: "UTF8_STRING", size: 2)])))
        #expect(String(decoding: announce, as: UTF8.self)
            == #"{"kind":"announce","origin":"o","selection":"CLIPBOARD","stamp":{"clock":5,"node":"n"},"targets":[{"size":2,"target":"UTF8_STRING"}]}"#)
        #expect(!String(decoding: announce, as: UTF8.self).contains("_0"))

        let future = Data(#"{"kind":"presence","user":"away"}"#.utf8)
        #expect(try SyncIncoming.decode(future) == .unknown(kind: "presence"))
        let extended = Data(#"{"kind":"ping","seq":4,"priority":1,"trace":"x"}"#.utf8)
        #expect(try SyncIncoming.decode(extended) == .message(.ping(seq: 4), unknownFields: ["priority", "trace"]))
        #expect(try SyncIncoming.decode(Data(#"{"kind":"pong","seq":4}"#.utf8)) == .message(.pong(seq: 4), unknownFields: []))
        // Malformed: not an object, no kind, a known kind without a field it needs, a field of the wrong type, the old form.
        for bad in ["[]", #"{"seq":4}"#, #"{"kind":"ping"}"#, #"{"kind":"ping","seq":"four"}"#, #"{"ping":{"seq":4}}"#, "{"] {
            #expect(throws: (any Error).self, "\(bad)") { try SyncIncoming.decode(Data(bad.utf8)) }
        }
    }

    @Test("link specs: displays, peers with a remote display, one-way and CLIPBOARD-only links; bad ones named")
    func specs() throws {
        let display = try SyncLinkSpec.parse(":2", ssh: false)
        #expect(display.endpoint == .display(":2") && display.sends && display.receives && !display.clipboardOnly)
        let peer = try SyncLinkSpec.parse("me@box,display=:0,send-only,clipboard-only", ssh: true)
        #expect(peer.endpoint == .ssh(host: "me@box", display: ":0"))
        #expect(peer.sends && !peer.receives && peer.clipboardOnly && peer.direction == "send-only")
        #expect(try SyncLinkSpec.parse("box,receive-only", ssh: true).direction == "receive-only")
        for bad in ["", "-oProxyCommand=x", "box,send-only,receive-only", "box,sideways", "box,display=:0;rm", "two words"] {
            #expect(throws: SyncSpecError.self) { try SyncLinkSpec.parse(bad, ssh: true) }
        }
        #expect(throws: SyncSpecError.self) { try SyncLinkSpec.parse(":1,display=:2", ssh: false) }
        var configuration = SyncConfiguration()
        #expect(configuration.selections(for: peer) == [.general])
        configuration.syncsPrimary = true
        #expect(configuration.selections(for: display) == [.general, .find])
        #expect(configuration.selections(for: peer) == [.general])
    }
}

@Suite("log throttle")
struct LogThrottleTests {
    @Test("a burst, then one a minute, each telling how many were left out; names made printable")
    func throttle() {
        var throttle = LogThrottle(burst: 3, interval: 60)
        let first = (0 ..< 10).map { _ in throttle.admit(now: 100).log }
        #expect(first == [true, true, true] + Array(repeating: false, count: 7))
        #expect(throttle.admit(now: 159).log == false)
        let later = throttle.admit(now: 161)
        #expect(later.log && later.suppressed == 8)
        #expect(throttle.admit(now: 162) == (true, 0))
        #expect(LogThrottle.printable("evil\u{1B}]0;x\u{7}\u{9B}name") == "evil?]0;x??name")
        #expect(LogThrottle.printable(String(repeating: "a", count: 300)).count == 201)
    }
}

@Suite("control coding's dates")
struct ControlDateTests {
    private struct Stamped: Codable, Equatable { var time: Date }

    @Test("the hand parser reads what the encoder writes, the same as FoundationEssentials' ISO 8601 parser, for 20,000 seeded times")
    func handParserAgreesWithTheEncoderAndTheLibrary() throws {
        var generator = SeededRandom(seed: 26)
        for _ in 0..<20_000 {
            // Whole seconds from 1900 to 2200: what the daemon stamps.
            let seconds = Double(Int.random(in: -2_208_988_800...7_258_118_400, using: &generator))
            let time = Date(timeIntervalSince1970: seconds)
            let encoded = try ControlCoding.encode(Stamped(time: time))
            #expect(try ControlCoding.decode(Stamped.self, from: encoded) == Stamped(time: time))
            let text = Date.ISO8601FormatStyle().format(time)
            #expect(InternetTime.parse(text) == time, "\(text)")
            #expect(try Date.ISO8601FormatStyle().parse(text) == time)
        }
    }

    @Test("a form the hand parser does not take goes to the library's parser; an invalid date is refused")
    func otherFormsAndInvalidDates() throws {
        for invalid in ["2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-04-31T00:00:00Z", "2026-11-24T24:00:00Z",
                        "2026-11-24T14:60:00Z", "2026-11-24 14:40:44Z", "2026-11-24T14:40:44", "2026-1a-24T14:40:44Z"] {
            #expect(InternetTime.parse(invalid) == nil, "\(invalid)")
        }
        #expect(InternetTime.parse("2024-02-29T12:00:00Z") == Date(timeIntervalSince1970: 1_709_208_000))
        // Fractional seconds and offsets: not written by the encoder, read through the fallback.
        let fractional = Data(#"{"time":"2026-11-24T14:40:44.500Z"}"#.utf8)
        #expect(try ControlCoding.decode(Stamped.self, from: fractional).time.timeIntervalSince1970 == 1_795_531_244.5)
        #expect(throws: DecodingError.self) { try ControlCoding.decode(Stamped.self, from: Data(#"{"time":"yesterday"}"#.utf8)) }
    }
}

@Suite("a headless write's claims")
struct PasteboardWriteTests {
    @Test("sizes that add up past Int.max saturate instead of trapping; ordinary sizes add up")
    func sizeSaturates() {
        let huge = PasteboardWrite(pasteboard: "CLIPBOARD", items: [[.init(type: "public.data", size: .max), .init(type: "public.html", size: 1)]],
                                   isLocalOnly: false, expires: nil, origin: "xpb")
        #expect(huge.size == .max)
        let plain = PasteboardWrite(pasteboard: "CLIPBOARD", items: [[.init(type: "public.data", size: 3)], [.init(type: "public.html", size: 4)]],
                                    isLocalOnly: false, expires: nil, origin: "xpb")
        #expect(plain.size == 7)
    }
}
