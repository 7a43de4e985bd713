import FoundationEssentials
@testable import KDEConnect
import Testing
import X11TestSupport

private let xpbd = DeviceIdentity(deviceId: "0123456789abcdef0123456789abcdef", deviceName: "xpbd", deviceType: .desktop, protocolVersion: 8,
                                  incomingCapabilities: [Packet.clipboardType, Packet.clipboardConnectType],
                                  outgoingCapabilities: [Packet.clipboardType, Packet.clipboardConnectType], tcpPort: 1716)

private func device(_ version: Int, id: String = Recorded.id22, name: String = "kde-box") -> DeviceIdentity {
    DeviceIdentity(deviceId: id, deviceName: name, deviceType: .desktop, protocolVersion: version,
                   incomingCapabilities: [Packet.clipboardType], outgoingCapabilities: [Packet.clipboardType], tcpPort: 1716)
}

private func closes(_ actions: [Handshake.Action], saying words: String) -> Bool {
    guard actions.count == 1, case .close(let why) = actions[0] else { return false }
    return why.contains(words)
}

@Suite("KDE Connect's handshake: identity in clear, TLS with the roles swapped, and in protocol 8 the identity again")
struct HandshakeTests {
    @Test("a dialer sends its identity aimed at the device it heard, then is the TLS server; a protocol 7 device is ready once TLS is")
    func dialer7() {
        var handshake = Handshake(role: .dialer, ours: xpbd, heard: device(7), isPaired: { $0 == Recorded.id22 })
        let start = handshake.connected()
        var sent = xpbd
        sent.tcpPort = nil
        sent.targetDeviceId = Recorded.id22
        sent.targetProtocolVersion = 7
        #expect(start == [.send(.identity(sent)), .startTLS(asServer: true, pinned: true)])
        #expect(handshake.encrypted(commonName: Recorded.id22) == [.ready(device(7), version: 7)])
        #expect(handshake.isReady)
    }

    @Test("a listener reads the device's identity, then is the TLS client; in protocol 8 both say who they are again inside TLS")
    func listener8() {
        var handshake = Handshake(role: .listener, ours: xpbd, isPaired: { _ in false })
        let phone = device(8, id: "740bd4b9b4184ee497d6caf1da8151be", name: "FOSS Phone")
        #expect(handshake.received(.identity(phone)) == [.startTLS(asServer: false, pinned: false)])
        var again = xpbd
        again.tcpPort = nil
        #expect(handshake.encrypted(commonName: phone.deviceId) == [.send(.identity(again))])
        #expect(!handshake.isReady)
        var renamed = phone
        renamed.deviceName = "Renamed Phone"
        #expect(handshake.received(.identity(renamed)) == [.ready(renamed, version: 8)], "the name said inside TLS is the one kept")
    }

    @Test("a device is cut off when it sends anything before its identity, shows another's certificate, or changes its id or version half-way")
    func refusals() {
        var early = Handshake(role: .listener, ours: xpbd, isPaired: { _ in false })
        #expect(closes(early.received(.clipboard("hi")), saying: "sent kdeconnect.clipboard before its identity"))
        #expect(early.received(.identity(device(7))) == [], "a closed handshake takes nothing more")

        var mirror = Handshake(role: .listener, ours: xpbd, isPaired: { _ in false })
        #expect(closes(mirror.received(.identity(device(8, id: xpbd.deviceId))), saying: "our own device id"))

        var misdirected = Handshake(role: .listener, ours: xpbd, isPaired: { _ in false })
        var aimed = device(8)
        aimed.targetDeviceId = "ffffffffffffffffffffffffffffffff"
        #expect(closes(misdirected.received(.identity(aimed)), saying: "meant another device"))

        var impostor = Handshake(role: .dialer, ours: xpbd, heard: device(7), isPaired: { _ in true })
        _ = impostor.connected()
        #expect(closes(impostor.encrypted(commonName: "740bd4b9b4184ee497d6caf1da8151be"), saying: "showed a certificate for"))

        var clearAfter = Handshake(role: .dialer, ours: xpbd, heard: device(8), isPaired: { _ in false })
        _ = clearAfter.connected()
        #expect(closes(clearAfter.received(.pair(true, timestamp: nil)), saying: "before TLS"))

        var switcher = Handshake(role: .dialer, ours: xpbd, heard: device(8), isPaired: { _ in false })
        _ = switcher.connected()
        _ = switcher.encrypted(commonName: Recorded.id22)
        #expect(closes(switcher.received(.identity(device(8, id: "740bd4b9b4184ee497d6caf1da8151be"))), saying: "changed its device id"))

        var downgrader = Handshake(role: .dialer, ours: xpbd, heard: device(8), isPaired: { _ in false })
        _ = downgrader.connected()
        _ = downgrader.encrypted(commonName: Recorded.id22)
        #expect(closes(downgrader.received(.identity(device(7))), saying: "changed its protocol version"))
    }
}

@Suite("KDE Connect pairing: asked, answered, lapsed; never accepted by itself")
struct PairingTests {
    let now = Date(timeIntervalSince1970: 1_764_000_000)

    @Test("we ask, the device accepts: paired, its certificate pinned")
    func weAsk() throws {
        var pairing = Pairing(name: "kde-box", paired: false)
        let asked = try pairing.request(now: now)
        #expect(asked.first == .send(.pair(true, timestamp: 1_764_000_000)))
        #expect(pairing.deadline == now.addingTimeInterval(30))
        #expect(throws: Pairing.Refusal.self) { try pairing.request(now: now) }
        #expect(pairing.received(pair: true, timestamp: nil, version: 7, now: now).first == .trust)
        #expect(pairing.isPaired && pairing.deadline == nil)
        #expect(throws: Pairing.Refusal(description: "“kde-box” is paired already")) { try pairing.request(now: now) }
    }

    @Test("the device asks: it waits for the person, however often it asks (a repeat does not extend it), and lapses after 30 s unanswered")
    func deviceAsks() throws {
        var pairing = Pairing(name: "kde-box", paired: false)
        for second in 0..<5 {
            let actions = pairing.received(pair: true, timestamp: nil, version: 7, now: now.addingTimeInterval(Double(second)))
            #expect(!actions.contains(.trust) && !actions.contains { if case .send = $0 { true } else { false } },
                    "a request is never answered by itself")
        }
        #expect(!pairing.isPaired)
        #expect(pairing.tick(now: now.addingTimeInterval(29.9)) == [])
        let lapsed = pairing.tick(now: now.addingTimeInterval(30))
        #expect(lapsed.first == .send(.pair(false, timestamp: nil)))
        #expect(pairing.state == .unpaired)
        #expect(throws: Pairing.Refusal.self) { try pairing.accept() }
    }

    @Test("the person accepts the device's request, or asks while it asks (which accepts it)")
    func accepted() throws {
        var pairing = Pairing(name: "kde-box", paired: false)
        _ = pairing.received(pair: true, timestamp: nil, version: 7, now: now)
        #expect(try pairing.accept() == [.send(.pair(true, timestamp: nil)), .trust, .tell("paired with “kde-box”")])
        var crossing = Pairing(name: "kde-box", paired: false)
        _ = crossing.received(pair: true, timestamp: nil, version: 7, now: now)
        #expect(try crossing.request(now: now).contains(.trust))
        #expect(crossing.isPaired)
    }

    @Test("unpairing from either side forgets the certificate; a paired device that asks again is unpaired, and its request waits like any other")
    func unpairing() throws {
        var ours = Pairing(name: "kde-box", paired: true)
        #expect(ours.unpair().prefix(2) == [.send(.pair(false, timestamp: nil)), .forget])
        #expect(ours.unpair() == [], "unpairing twice sends nothing")
        var theirs = Pairing(name: "kde-box", paired: true)
        #expect(theirs.received(pair: false, timestamp: nil, version: 7, now: now).first == .forget)
        #expect(!theirs.isPaired)
        var again = Pairing(name: "kde-box", paired: true)
        let actions = again.received(pair: true, timestamp: nil, version: 7, now: now)
        #expect(actions.first == .forget && !actions.contains { if case .send = $0 { true } else { false } },
                "no answer: two devices answering each other's requests would never stop")
        #expect(again.state == .requestedByPeer(until: now.addingTimeInterval(30)))
        var refused = Pairing(name: "kde-box", paired: false)
        _ = try refused.request(now: now)
        #expect(refused.received(pair: false, timestamp: nil, version: 7, now: now) == [.tell("“kde-box” refused to pair")])
        #expect(refused.state == .unpaired)
    }

    @Test("in protocol 8 a request must carry a time within half an hour of ours; in 7 none is sent")
    func requestTime() {
        for (timestamp, waits) in [(Int64?.none, false), (1_764_000_000 - 1801, false), (1_764_000_000 + 1801, false), (1_764_000_000 - 1800, true), (1_764_000_000, true)] {
            var pairing = Pairing(name: "phone", paired: false)
            let actions = pairing.received(pair: true, timestamp: timestamp, version: 8, now: now)
            #expect((pairing.deadline != nil) == waits, "\(String(describing: timestamp))")
            #expect(actions.contains(.send(.pair(false, timestamp: nil))) == !waits)
        }
        var old = Pairing(name: "kde-box", paired: false)
        _ = old.received(pair: true, timestamp: nil, version: 7, now: now)
        #expect(old.deadline != nil)
    }

    @Test("whatever a device sends, in any order, only the person's accept or our own request ever pins its certificate")
    func neverByItself() throws {
        var generator = SeededRandom(seed: 1716)
        for _ in 0..<200 {
            var pairing = Pairing(name: "x", paired: false)
            var time = now
            for _ in 0..<50 {
                time = time.addingTimeInterval(Double.random(in: 0...20, using: &generator))
                let actions = Bool.random(using: &generator)
                    ? pairing.received(pair: Bool.random(using: &generator), timestamp: Int64(time.timeIntervalSince1970), version: Int.random(in: 7...8, using: &generator), now: time)
                    : pairing.tick(now: time)
                #expect(!actions.contains(.trust))
                #expect(!pairing.isPaired)
            }
        }
    }
}

@Suite("the clipboard across a KDE Connect link")
struct ClipboardRuleTests {
    @Test("a copy goes as its text; a secret, a copy without text, one from the device itself or one too long does not")
    func sending() {
        // Room for a packet of five bytes of text, as the longest packet carries it.
        let room = Packet.clipboardConnect("hello", timestamp: 5).encoded(id: .max).count
        var rule = ClipboardRule(device: Recorded.id22, maxBytes: room)
        #expect(rule.copied(.init(text: "hello", time: 1)) == .clipboard("hello"))
        #expect(rule.copied(.init(text: "hunter2", time: 2, isSecret: true)) == nil)
        #expect(rule.copied(.init(text: nil, time: 3)) == nil)
        #expect(rule.copied(.init(text: "from it", time: 4, device: Recorded.id22)) == nil)
        #expect(rule.copied(.init(text: "from another", time: 5, device: "740bd4b9b4184ee497d6caf1da8151be")) == nil, "a packet longer than the room")
        #expect(rule.copied(.init(text: "other", time: 5, device: "740bd4b9b4184ee497d6caf1da8151be")) == .clipboard("other"))
        #expect(rule.copied(.init(text: "\u{1}\u{2}", time: 5)) == nil, "two bytes of text, twelve escaped: past the room")
    }

    @Test("a link that comes up sends the newest copy with its time, unless it is a secret")
    func connecting() {
        var rule = ClipboardRule(device: Recorded.id22, maxBytes: 1 << 20)
        #expect(rule.connected(current: .init(text: "kept", time: 1_764_000_000_000)) == .clipboardConnect("kept", timestamp: 1_764_000_000_000))
        var secret = ClipboardRule(device: Recorded.id22, maxBytes: 1 << 20)
        #expect(secret.connected(current: .init(text: "hunter2", time: 1_764_000_000_000, isSecret: true)) == nil)
        #expect(secret.newest == 1_764_000_000_000, "its time still counts: an older copy of the device's does not replace it")
        #expect(secret.received(.clipboardConnect("old", timestamp: 1_763_999_999_999), now: 1_764_000_000_100) == .ignore("its copy is older than the newest here"))
    }

    @Test("the device's copies are taken; its connect copy only when newer, never at time 0, a future time counted as now; echoes and empties are not")
    func receiving() {
        var rule = ClipboardRule(device: Recorded.id22, maxBytes: 1 << 20)
        _ = rule.copied(.init(text: "ours", time: 1_000))
        #expect(rule.received(.clipboard("ours"), now: 1_500) == .ignore("the text last exchanged with it (an echo)"))
        #expect(rule.received(.clipboardConnect("x", timestamp: 0), now: 2_000) == .ignore("its copy's time is unknown (0)"))
        #expect(rule.received(.clipboardConnect("older", timestamp: 999), now: 2_000) == .ignore("its copy is older than the newest here"))
        #expect(rule.received(.clipboardConnect("newer", timestamp: 1_001), now: 2_000) == .take("newer", time: 1_001))
        #expect(rule.received(.clipboard(""), now: 2_100) == .ignore("its clipboard is empty"))
        #expect(rule.received(.clipboardConnect("ahead", timestamp: 9_999_999), now: 3_000) == .take("ahead", time: 3_000))
        #expect(rule.newest == 3_000)
        #expect(rule.received(.clipboard("typed on the phone"), now: 4_000) == .take("typed on the phone", time: 4_000))
        // What came from the device is not sent back; the device's copy again, after ours, is a copy.
        #expect(rule.copied(.init(text: "typed on the phone", time: 4_000, device: Recorded.id22)) == nil)
        _ = rule.copied(.init(text: "ours again", time: 5_000))
        #expect(rule.received(.clipboard("typed on the phone"), now: 6_000) == .take("typed on the phone", time: 6_000))
    }

    @Test("after a secret is copied here, the device's copy of the text it had before is a copy again, not an echo")
    func secretBetween() {
        var rule = ClipboardRule(device: Recorded.id22, maxBytes: 1 << 20)
        #expect(rule.received(.clipboard("shared"), now: 1_000) == .take("shared", time: 1_000))
        #expect(rule.copied(.init(text: "hunter2", time: 2_000, isSecret: true)) == nil)
        #expect(rule.received(.clipboard("shared"), now: 3_000) == .take("shared", time: 3_000))
    }
}
