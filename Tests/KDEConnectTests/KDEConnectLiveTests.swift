import CLinux
import Foundation
import Glibc
@testable import KDEConnect
@testable import KDEConnectLink
import Synchronization
import Testing
import X11TestSupport

/// Two network namespaces joined by a veth pair and nothing else, for one test: KDE Connect
/// broadcasts, and no packet of it may leave the machine. Deleted (with the pair) at the end.
final class PrivateNetwork {
    let names: (String, String)
    let addresses = ("10.61.0.1", "10.61.0.2")

    init() throws {
        let tag = "\(getpid() % 100_000)x\(UInt16.random(in: 0...UInt16.max))"
        names = ("xpbkA\(tag)", "xpbkB\(tag)")
        let steps: [[String]] = [
            ["netns", "add", names.0], ["netns", "add", names.1],
            ["link", "add", "xka", "netns", names.0, "type", "veth", "peer", "name", "xkb", "netns", names.1],
            ["-n", names.0, "addr", "add", "\(addresses.0)/24", "broadcast", "10.61.0.255", "dev", "xka"],
            ["-n", names.1, "addr", "add", "\(addresses.1)/24", "broadcast", "10.61.0.255", "dev", "xkb"],
            ["-n", names.0, "link", "set", "xka", "up"], ["-n", names.1, "link", "set", "xkb", "up"],
            ["-n", names.0, "link", "set", "lo", "up"], ["-n", names.1, "link", "set", "lo", "up"],
            // 255.255.255.255 (where kdeconnectd broadcasts) goes out of the pair.
            ["-n", names.0, "route", "add", "default", "dev", "xka"], ["-n", names.1, "route", "add", "default", "dev", "xkb"],
        ]
        for step in steps {
            let outcome = try Self.ip(step)
            guard outcome.status == 0 else {
                tearDown()
                throw TestFailure("ip \(step.joined(separator: " ")): \(outcome.error)")
            }
        }
    }

    deinit { tearDown() }

    private func tearDown() {
        _ = try? Self.ip(["netns", "del", names.0])
        _ = try? Self.ip(["netns", "del", names.1])
    }

    private static func ip(_ arguments: [String]) throws -> Outcome {
        try Peer(try which("ip"), arguments, display: NoDisplay()).finish(timeout: 20)
    }

    /// Runs `body` on a thread of its own that has entered namespace `name`: the threads it
    /// starts, and every socket they open, are in that namespace.
    static func inside<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { done.signal() }
            let fd = open("/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
            guard fd >= 0, clinux_enter_network_namespace(fd) == 0 else {
                result.withLock { $0 = .failure(TestFailure("cannot enter network namespace \(name): \(String(cString: strerror(errno)))")) }
                return
            }
            close(fd)
            result.withLock { $0 = Result { try body() } }
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }
}

/// A session with no display, for programs that need none (`ip`).
struct NoDisplay: TestSession {
    var environment: [String: String] { ProcessInfo.processInfo.environment }
}

/// Debian's kdeconnectd, headless on a private Xvfb with a private session bus and home, in a
/// network namespace.
final class KDEConnectDaemon {
    let x: Xvfb
    let bus: SessionBus
    let home: URL
    let peer: Peer

    init(in namespace: String) throws {
        x = try Xvfb()
        bus = try SessionBus(on: x)
        home = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-kdeconnect-\(getpid())-\(UUID().uuidString.prefix(8))")
        let runtime = home.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var environment = bus.environment
        environment["HOME"] = home.path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
        environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
        environment["XDG_CACHE_HOME"] = home.appendingPathComponent(".cache").path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment["QT_QPA_PLATFORM"] = "xcb"
        environment["QT_LOGGING_RULES"] = "kdeconnect.*=true"
        peer = try Peer(try which("ip"), ["netns", "exec", namespace, "/usr/lib/x86_64-linux-gnu/libexec/kdeconnectd"], display: x, environment: environment)
    }

    deinit {
        peer.stop()
        try? FileManager.default.removeItem(at: home)
    }

    /// A call to kdeconnectd over its bus (`dbus-send`), its reply's text.
    func call(_ path: String, _ method: String, _ arguments: [String] = []) throws -> String {
        let outcome = try run(try which("dbus-send"), ["--session", "--print-reply", "--dest=org.kde.kdeconnect", path, method] + arguments,
                              display: x, environment: bus.environment)
        guard outcome.status == 0 else { throw TestFailure("dbus-send \(method): \(outcome.error)") }
        return outcome.text
    }

    /// Its own device id (the one it broadcasts).
    func ownId() throws -> String {
        let reply = try call("/modules/kdeconnect", "org.kde.kdeconnect.daemon.selfId")
        guard let id = reply.split(separator: "\"").dropFirst().first else { throw TestFailure("no id in \(reply)") }
        return String(id)
    }

    func isTrusted(_ device: String) throws -> Bool {
        try call("/modules/kdeconnect/devices/\(device)", "org.freedesktop.DBus.Properties.Get",
                 ["string:org.kde.kdeconnect.device", "string:isTrusted"]).contains("boolean true")
    }

    /// Its X clipboard's text now (`xclip -o`), nil when nothing owns it.
    func clipboard() throws -> String? {
        let outcome = try run("xclip", ["-o", "-selection", "clipboard"], display: x, timeout: 10)
        return outcome.status == 0 ? outcome.text : nil
    }
}

/// What the service under test said, in order.
final class ServiceEvents: Sendable {
    private let events = Mutex<[KDEConnectService.Event]>([])
    func append(_ event: KDEConnectService.Event) { events.withLock { $0.append(event) } }
    var all: [KDEConnectService.Event] { events.withLock { $0 } }
    var copies: [String] { all.compactMap { if case .copied(let text, _, _, _) = $0 { text } else { nil } } }
    var lines: String { all.compactMap { if case .told(let line) = $0 { line } else { nil } }.joined(separator: "\n") }
}

/// Our service, started inside `namespace` (its sockets and threads live there), with what it
/// says collected.
func startService(in namespace: String, _ configuration: KDEConnectService.Configuration) throws -> (KDEConnectService, ServiceEvents) {
    let events = ServiceEvents()
    let service = try PrivateNetwork.inside(namespace) {
        let service = try KDEConnectService(configuration: configuration) { events.append($0) }
        try service.start()
        return service
    }
    return (service, events)
}

/// kdeconnectd and our service, linked across a private network.
final class LinkedDevices {
    let network: PrivateNetwork
    let kde: KDEConnectDaemon
    let service: KDEConnectService
    let events: ServiceEvents
    let directory: URL
    let kdeId: String

    init() throws {
        let network = try PrivateNetwork()
        let kde = try KDEConnectDaemon(in: network.names.0)
        self.network = network
        self.kde = kde
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-kdeconnect-ours-\(getpid())-\(UUID().uuidString.prefix(8))")
        // The default destination (255.255.255.255, sent from each of the namespace's addresses).
        let configuration = KDEConnectService.Configuration(name: "xpbd test", directory: directory.path)
        let (service, events) = try startService(in: network.names.1, configuration)
        self.service = service
        self.events = events
        var found: String?
        _ = eventually(timeout: 20) {
            found = try? kde.ownId()
            return found != nil
        }
        guard let found else {
            service.stop()
            throw TestFailure("kdeconnectd answered no selfId on its bus: \(kde.peer.errorSoFar.suffix(2000))")
        }
        kdeId = found
        // Linked: kdeconnectd heard our broadcast, or we its (either dials). It may have
        // broadcast before we listened, and we before it did: we say who we are again now and
        // then until it dials.
        var announced = Date()
        let linked = eventually(timeout: 20) {
            if Date().timeIntervalSince(announced) > 2 {
                service.announce()
                announced = Date()
            }
            return service.devices.first(where: { $0.id == found })?.reachable == true
        }
        guard linked else { throw TestFailure("no link to kdeconnectd: \(events.lines)\n\(kdeLog)") }
        // kdeconnectd's end: its bus names our device once its side of the link is up, which
        // under load came after ours (a loaded run: requestPair found no such object).
        guard eventually(timeout: 20, { (try? kde.call(devicePath, "org.kde.kdeconnect.device.hasPairingRequests")) != nil }) else {
            throw TestFailure("kdeconnectd's bus never named our device: \(events.lines)\n\(kdeLog)")
        }
    }

    deinit {
        service.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    var ours: KDEConnectService.Device? { service.devices.first(where: { $0.id == kdeId }) }
    var devicePath: String { "/modules/kdeconnect/devices/\(service.deviceId)" }
    var pinnedFile: String { directory.appendingPathComponent("paired/\(kdeId).der").path }
    var kdeLog: String { kde.peer.errorSoFar.split(separator: "\n").filter { !$0.contains("Not loading plugin") }.suffix(40).joined(separator: "\n") }

    /// Whether kdeconnectd holds a request to pair from us, or from anyone, not yet answered.
    func kdeHasRequest() -> Bool {
        (try? kde.call(devicePath, "org.kde.kdeconnect.device.hasPairingRequests").contains("boolean true")) == true
    }
}

@Suite("KDE Connect against the real kdeconnectd 22.12, in a private network", .serialized)
struct KDEConnectLiveTests {
    @Test("discovered and linked, paired by our request and its acceptance on its D-Bus, the clipboard both ways through its X display, a secret not sent, unpaired from our side")
    func pairAndCopy() throws {
        let linked = try LinkedDevices()
        let (kde, service, events) = (linked.kde, linked.service, linked.events)
        #expect(linked.ours?.paired == false)

        // We ask; once kdeconnectd holds the request, it accepts on its bus: both sides paired,
        // its certificate pinned here.
        try service.pair(linked.kdeId)
        #expect(eventually(timeout: 10) { linked.kdeHasRequest() }, "\(events.lines)\n\(linked.kdeLog)")
        _ = try kde.call(linked.devicePath, "org.kde.kdeconnect.device.acceptPairing")
        #expect(eventually(timeout: 10) { linked.ours?.paired == true }, "\(events.lines)\n\(linked.kdeLog)")
        #expect(try kde.isTrusted(service.deviceId))
        #expect(FileManager.default.fileExists(atPath: linked.pinnedFile))

        // Its copy reaches us.
        _ = try xclipCopy("copied on the kde side", display: kde.x)
        #expect(eventually(timeout: 10) { events.copies.contains("copied on the kde side") }, "\(events.lines)")

        // Ours reaches its X clipboard.
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        service.copied(.init(text: "copied by xpbd", time: now))
        #expect(eventually(timeout: 10) { (try? kde.clipboard()) == "copied by xpbd" }, "\(events.lines)")

        // A secret never does. We unpair right after it, on the same link: kdeconnectd takes
        // packets in order, so once it is unpaired it has taken everything sent before.
        service.copied(.init(text: "hunter2", time: now + 1, isSecret: true))
        try service.unpair(linked.kdeId)
        #expect(eventually(timeout: 10) { (try? kde.isTrusted(service.deviceId)) == false }, "\(events.lines)\n\(linked.kdeLog)")
        #expect(try kde.clipboard() == "copied by xpbd")
        #expect(!FileManager.default.fileExists(atPath: linked.pinnedFile))
        #expect(linked.ours?.paired == false)
    }

    @Test("kdeconnectd asks to pair: the request waits for the person (never accepted by itself), is accepted with accept; it unpairs, and we forget its certificate")
    func theyAsk() throws {
        let linked = try LinkedDevices()
        let (kde, service, events) = (linked.kde, linked.service, linked.events)
        _ = try kde.call(linked.devicePath, "org.kde.kdeconnect.device.requestPair")
        #expect(eventually(timeout: 10) { events.lines.contains("asks to pair") }, "\(events.lines)\n\(linked.kdeLog)")
        #expect(linked.ours?.paired == false)
        #expect(try !kde.isTrusted(service.deviceId))
        try service.accept(linked.kdeId)
        #expect(eventually(timeout: 10) { (try? kde.isTrusted(service.deviceId)) == true }, "\(events.lines)\n\(linked.kdeLog)")
        #expect(linked.ours?.paired == true)
        #expect(FileManager.default.fileExists(atPath: linked.pinnedFile))

        // It unpairs: we forget its certificate, and a request accepted before is not accepted again.
        _ = try kde.call(linked.devicePath, "org.kde.kdeconnect.device.unpair")
        #expect(eventually(timeout: 10) { linked.ours?.paired == false }, "\(events.lines)")
        #expect(!FileManager.default.fileExists(atPath: linked.pinnedFile))
        #expect(throws: Pairing.Refusal.self) { try service.accept(linked.kdeId) }
    }
}

/// 127.0.0.1:`port`, as the socket calls take it.
private func loopback(_ port: UInt16, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(port.bigEndian)
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

/// A hostile client of the service's TCP port, inside the service's namespace: sends `bytes`,
/// then reads until the service closes the link; whether it closed within `seconds`.
private func closedAfterSending(_ bytes: [UInt8], to port: UInt16, in namespace: String, within seconds: Int = 10) throws -> Bool {
    try PrivateNetwork.inside(namespace) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        guard loopback(port, { connect(fd, $0, $1) }) == 0 else { throw TestFailure("cannot connect to the service: \(String(cString: strerror(errno)))") }
        var limit = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { break }  // the service closed it mid-way: what is looked at below
            offset += sent
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 || (count < 0 && errno == ECONNRESET) { return true }
            if count < 0 { return false }
        }
    }
}

@Suite("a KDE Connect device that sends anything: a clear log line, a closed link, and the service keeps working")
struct KDEConnectHostileTests {
    @Test("a line with no end, a line that is not a packet, a packet before the identity, a device that sends nothing, garbage instead of TLS, a flood of connections, empty and oversized datagrams")
    func hostile() throws {
        let network = try PrivateNetwork()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-kdeconnect-hostile-\(getpid())-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = KDEConnectService.Configuration(name: "xpbd test", directory: directory.path)
        settings.broadcastAddresses = []
        settings.handshakeSeconds = 1
        let configuration = settings
        let (service, events) = try startService(in: network.names.1, configuration)
        defer { service.stop() }
        let port = service.tcpPort
        let namespace = network.names.1
        let identity = Packet.identity(DeviceIdentity(deviceId: "740bd4b9b4184ee497d6caf1da8151be", deviceName: "Mallory", deviceType: .phone, protocolVersion: 7,
                                                      incomingCapabilities: [], outgoingCapabilities: [])).encoded(id: 1)

        #expect(try closedAfterSending(Array(repeating: UInt8(ascii: "{"), count: 100_000), to: port, in: namespace))
        #expect(eventually(timeout: 5) { events.lines.contains("a packet longer than 8 KiB") }, "\(events.lines)")
        #expect(try closedAfterSending(Array("{\"type\": nope}\n".utf8), to: port, in: namespace))
        #expect(eventually(timeout: 5) { events.lines.contains("not one JSON object") }, "\(events.lines)")
        #expect(try closedAfterSending(Packet.clipboard("hi").encoded(id: 1), to: port, in: namespace))
        #expect(eventually(timeout: 5) { events.lines.contains("sent kdeconnect.clipboard before its identity") }, "\(events.lines)")
        #expect(try closedAfterSending([], to: port, in: namespace, within: 5), "a device that sends nothing is let go after the handshake's second")
        #expect(eventually(timeout: 5) { events.lines.contains("sent no identity in time") }, "\(events.lines)")
        // One byte of an identity every 0.3 s: each read comes within the second, the whole never.
        let trickled = try PrivateNetwork.inside(namespace) { () -> Double? in
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            guard loopback(port, { connect(fd, $0, $1) }) == 0 else { throw TestFailure("cannot connect: \(String(cString: strerror(errno)))") }
            let start = Date()
            var byte = UInt8(ascii: "{")
            var scratch: UInt8 = 0
            for _ in 0..<30 {
                if recv(fd, &scratch, 1, Int32(MSG_DONTWAIT)) == 0 { return Date().timeIntervalSince(start) }
                _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL))
                usleep(300_000)
            }
            return nil
        }
        #expect(trickled.map { $0 < 4 } == true, "a device that trickles its identity is let go at the handshake's deadline (1 s here): \(String(describing: trickled))")
        #expect(try closedAfterSending(identity + Array(repeating: 0x16, count: 3000), to: port, in: namespace))
        #expect(eventually(timeout: 5) { events.lines.contains("TLS with “Mallory” failed") }, "\(events.lines)")

        // A flood of connections that send nothing: more than the cap are closed at once, and
        // once they are gone the port takes links again.
        let flood = try PrivateNetwork.inside(namespace) { () -> [Int32] in
            (0..<(configuration.maxLinks + 8)).map { _ in
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                _ = loopback(port) { connect(fd, $0, $1) }
                return fd
            }
        }
        flood.forEach { close($0) }
        // Datagrams that are not identities, and one too large, on the discovery port.
        try PrivateNetwork.inside(namespace) {
            let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            defer { close(udp) }
            for datagram in [[], Array("garbage".utf8), Array(repeating: UInt8(ascii: "x"), count: 60_000), Packet.pair(true, timestamp: nil).encoded(id: 1)] {
                _ = loopback(configuration.udpPort) { Int32(sendto(udp, datagram, datagram.count, 0, $0, $1)) }
            }
        }
        // Discovery still works after them: a device that says it listens on 1764 is dialled there.
        let dialled = try PrivateNetwork.inside(namespace) { () -> Bool in
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(listener) }
            var on: Int32 = 1
            setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            guard loopback(1764, { bind(listener, $0, $1) }) == 0, listen(listener, 4) == 0 else {
                throw TestFailure("cannot listen on 1764: \(String(cString: strerror(errno)))")
            }
            var device = DeviceIdentity(deviceId: "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f", deviceName: "Phone", deviceType: .phone, protocolVersion: 7,
                                        incomingCapabilities: [], outgoingCapabilities: [])
            device.tcpPort = 1764
            let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            defer { close(udp) }
            let broadcast = Packet.identity(device).encoded(id: 1)
            _ = loopback(configuration.udpPort) { Int32(sendto(udp, broadcast, broadcast.count, 0, $0, $1)) }
            var ready = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            return poll(&ready, 1, 10_000) == 1
        }
        #expect(dialled, "the service dials a device it hears, after an empty, a garbage and an oversized datagram: \(events.lines)")
        #expect(eventually(timeout: 10) { (try? closedAfterSending(Array("not a packet\n".utf8), to: port, in: namespace)) == true },
                "after the flood the port still takes (and judges) links")
        #expect(service.devices.isEmpty, "none of them is a device")
    }
}

@Suite("two of our KDE Connect devices: protocol 8 end to end")
struct KDEConnectVersion8Tests {
    @Test("they find each other, say who they are again inside TLS, pair (with 8's request time) and carry copies both ways; neither echoes the other's copy back; an impostor with the paired one's id is refused at TLS")
    func twoDevices() throws {
        let network = try PrivateNetwork()
        var made: [(KDEConnectService, ServiceEvents, URL)] = []
        for (index, namespace) in [network.names.0, network.names.1].enumerated() {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-kdeconnect-8-\(index)-\(getpid())-\(UUID().uuidString.prefix(8))")
            let configuration = KDEConnectService.Configuration(name: "xpbd \(index)", directory: directory.path)
            let (service, events) = try startService(in: namespace, configuration)
            made.append((service, events, directory))
        }
        defer {
            for (service, _, directory) in made {
                service.stop()
                try? FileManager.default.removeItem(at: directory)
            }
        }
        let (a, aEvents, _) = made[0]
        let (b, bEvents, _) = made[1]
        // The first heard the second's broadcast when it started, and dials it.
        #expect(eventually(timeout: 10) { a.devices.first?.reachable == true && b.devices.first?.reachable == true }, "\(aEvents.lines)\n\(bEvents.lines)")
        #expect(aEvents.lines.contains("protocol 8") && bEvents.lines.contains("protocol 8"))

        try a.pair(b.deviceId)
        #expect(eventually(timeout: 10) { bEvents.lines.contains("asks to pair") }, "\(bEvents.lines)")
        #expect(a.devices.first?.paired == false && b.devices.first?.paired == false, "a request waits for the person")
        try b.accept(a.deviceId)
        #expect(eventually(timeout: 10) { a.devices.first?.paired == true && b.devices.first?.paired == true }, "\(aEvents.lines)\n\(bEvents.lines)")

        let now = Int64(Date().timeIntervalSince1970 * 1000)
        a.copied(.init(text: "from a", time: now))
        #expect(eventually(timeout: 10) { bEvents.copies == ["from a"] }, "\(bEvents.lines)")
        // b makes what it took a copy of its own (as xpbd would), marked as the device's: not sent back.
        b.copied(.init(text: "from a", time: now, device: a.deviceId))
        b.copied(.init(text: "from b", time: now + 5))
        #expect(eventually(timeout: 10) { aEvents.copies == ["from b"] }, "\(aEvents.lines)")
        #expect(bEvents.copies == ["from a"])

        // An impostor: b's id, a certificate of its own, beside b (the discovery port shared, a
        // TCP port of its own). It hears a's broadcast and dials a, which refuses it at TLS: b's
        // certificate is pinned. b's link stays.
        let impostorDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-kdeconnect-impostor-\(getpid())-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: impostorDirectory) }
        try FileManager.default.createDirectory(at: impostorDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let forged = try DeviceCertificate.make(deviceId: b.deviceId)
        try forged.pem(key: false).write(to: impostorDirectory.appendingPathComponent(DeviceCertificate.certificateFile), atomically: true, encoding: .utf8)
        try forged.pem(key: true).write(to: impostorDirectory.appendingPathComponent(DeviceCertificate.keyFile), atomically: true, encoding: .utf8)
        let (impostor, _) = try startService(in: network.names.1, KDEConnectService.Configuration(name: "xpbd 1", directory: impostorDirectory.path))
        defer { impostor.stop() }
        #expect(impostor.deviceId == b.deviceId)
        a.announce()
        #expect(eventually(timeout: 10) { aEvents.lines.contains("showed another certificate than the one pinned") }, "\(aEvents.lines)")
        #expect(a.devices.first?.reachable == true && a.devices.first?.paired == true)
        a.copied(.init(text: "still to b", time: now + 10))
        #expect(eventually(timeout: 10) { bEvents.copies.last == "still to b" }, "\(bEvents.lines)")
    }
}
