import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import KDEConnect
import PasteboardKit
import Synchronization

/// This machine as a KDE Connect device, for its clipboard: discovery (UDP on port 1716: its
/// identity broadcast, others' heard and dialled), a TCP port of KDE Connect's range for devices
/// that dial it, a link per device (``DeviceLink``), pairing (``Pairing``; paired devices'
/// certificates pinned under `paired/` of its directory) and the clipboard both ways
/// (``ClipboardRule``). Copies from a device are handed to `onEvent`; copies made here are given
/// to ``copied(_:)``.
package final class KDEConnectService: @unchecked Sendable {
    package struct Configuration: Sendable {
        /// The name devices show for this one.
        package var name: String
        package var deviceType: DeviceIdentity.DeviceType = .desktop
        /// Where the certificate, the key and the paired devices' certificates live.
        package var directory: String
        package var udpPort: UInt16 = 1716
        package var tcpPorts: ClosedRange<UInt16> = 1716...1764
        /// Where the identity is sent, from each local address: the limited broadcast, and
        /// devices named by address (for a network that drops broadcasts).
        package var broadcastAddresses: [String] = ["255.255.255.255"]
        /// The longest packet taken from a paired device.
        package var maxPacketBytes = 4 << 20
        /// The most links at once (a flood of connections gets no more).
        package var maxLinks = 32
        /// How long a new link may take over each step of its handshake (a device that connects
        /// and sends nothing is let go then).
        package var handshakeSeconds = 10

        package init(name: String, directory: String) {
            self.name = name
            self.directory = directory
        }
    }

    package enum Event: Equatable, Sendable {
        /// A copy made on a device: its text, its time (ms since 1970), the device's id and name.
        case copied(String, time: Int64, device: String, name: String)
        /// A line for the log and the person (pairing, links, refusals).
        case told(String)
    }

    /// A device as `xpb devices` lists it.
    package struct Device: Equatable, Sendable {
        package var id: String
        package var name: String
        package var paired: Bool
        package var reachable: Bool
        /// It asked to pair and waits for `accept` (or `unpair`, which refuses).
        package var asks = false
        /// This side asked it to pair and waits for its answer.
        package var asked = false
    }

    private struct State {
        /// Links whose handshake is done, by device id.
        var links: [String: DeviceLink] = [:]
        /// Links of any stage (for the cap).
        var linkCount = 0
        var names: [String: String] = [:]
        var pairings: [String: Pairing] = [:]
        var pinned: [String: [UInt8]] = [:]
        var rules: [String: ClipboardRule] = [:]
        var current: ClipboardRule.Copy?
        var dialing: Set<String> = []
        var stopped = false
        /// When a link's end last made this device announce itself.
        var lastHeal = Date.distantPast
    }

    package let configuration: Configuration
    private let certificate: DeviceCertificate
    private let onEvent: @Sendable (Event) -> Void
    private let state = Mutex(State())
    private let sockets = Mutex<(udp: Int32, tcp: Int32)>((-1, -1))
    /// The TCP port devices dial (0 until started).
    package private(set) var tcpPort: UInt16 = 0

    package init(configuration: Configuration, onEvent: @escaping @Sendable (Event) -> Void) throws(TLSFailure) {
        self.configuration = configuration
        self.onEvent = onEvent
        certificate = try DeviceCertificate.loadOrMake(in: configuration.directory)
        let pinned = Self.loadPinned(in: configuration.directory + "/paired")
        state.withLock { $0.pinned = pinned }
    }

    /// This device's id (its certificate's common name).
    package var deviceId: String { certificate.deviceId }

    package var identity: DeviceIdentity {
        DeviceIdentity(deviceId: certificate.deviceId, deviceName: DeviceIdentity.cleaned(name: configuration.name), deviceType: configuration.deviceType,
                       protocolVersion: DeviceIdentity.versions.last!, incomingCapabilities: [Packet.clipboardType, Packet.clipboardConnectType],
                       outgoingCapabilities: [Packet.clipboardType, Packet.clipboardConnectType], tcpPort: Int(tcpPort))
    }

    // MARK: - Starting and stopping

    /// Binds the UDP port and a TCP port, starts their threads and announces this device.
    package func start() throws(TLSFailure) {
        let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard udp >= 0 else { throw TLSFailure("cannot make a UDP socket: \(Errno.current)") }
        var on: Int32 = 1
        setsockopt(udp, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(udp, SOL_SOCKET, SO_BROADCAST, &on, socklen_t(MemoryLayout<Int32>.size))
        guard Self.bind(udp, port: configuration.udpPort) else {
            let error = Errno.current
            Glibc.close(udp)
            throw TLSFailure("cannot listen for KDE Connect devices on UDP port \(configuration.udpPort): \(error)")
        }
        let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard tcp >= 0 else {
            Glibc.close(udp)
            throw TLSFailure("cannot make a TCP socket: \(Errno.current)")
        }
        setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard let port = configuration.tcpPorts.first(where: { Self.bind(tcp, port: $0) }), listen(tcp, 16) == 0 else {
            Glibc.close(udp)
            Glibc.close(tcp)
            throw TLSFailure("no free TCP port in \(configuration.tcpPorts.lowerBound)–\(configuration.tcpPorts.upperBound) for KDE Connect")
        }
        tcpPort = port
        sockets.withLock { $0 = (udp, tcp) }
        do {
            try DetachedThread.start(name: "kdeconnect.udp") { [self] in hear(udp) }
            try DetachedThread.start(name: "kdeconnect.tcp") { [self] in acceptLinks(tcp) }
            try DetachedThread.start(name: "kdeconnect.hello") { [self] in announceWhenAsked() }
        } catch {
            stop()
            throw TLSFailure("cannot start a thread: \(error)")
        }
        announce()
    }

    /// Broadcasts this device's identity: every device that hears it dials this one. Done by
    /// the service's own announcing thread, whoever asks: its sockets are made in the network
    /// namespace the service started in (a caller's thread may be in another, whose network is
    /// not the service's to broadcast on).
    package func announce() {
        announcing.withLock { $0.asked = true }
        announced.signal()
    }

    /// Whether an announcement is asked for, and whether the service stopped.
    private let announcing = Mutex<(asked: Bool, stopped: Bool)>((false, false))
    private let announced = DispatchSemaphore(value: 0)

    /// The announcing thread: waits to be asked, then sends.
    private func announceWhenAsked() {
        while true {
            announced.wait()
            let (asked, stopped) = announcing.withLock { state -> (Bool, Bool) in
                defer { state.asked = false }
                return (state.asked, state.stopped)
            }
            if stopped { return }
            if asked { sendIdentity() }
        }
    }

    /// As kdeconnect-kde does: from every IPv4 address of every interface that is up (each send
    /// bound to that address, so that the limited broadcast leaves by its interface), to each of
    /// the configured addresses.
    private func sendIdentity() {
        guard sockets.withLock({ $0.udp }) >= 0 else { return }
        let line = Packet.identity(identity).encoded(id: Self.now())
        let targets = configuration.broadcastAddresses.map { Self.address($0, port: configuration.udpPort) }
        for source in Self.localAddresses() {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { continue }
            defer { Glibc.close(fd) }
            var on: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, socklen_t(MemoryLayout<Int32>.size))
            var bound = source
            let isBound = withUnsafePointer(to: &bound) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard isBound else { continue }
            for var target in targets {
                _ = withUnsafePointer(to: &target) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, line, line.count, Int32(MSG_NOSIGNAL), $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
        }
    }

    /// The IPv4 addresses of the interfaces that are up and running, but loopback (port 0).
    private static func localAddresses() -> [sockaddr_in] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var addresses: [sockaddr_in] = []
        var entry = list
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            let flags = Int32(current.pointee.ifa_flags)
            guard flags & Int32(IFF_UP) != 0, flags & Int32(IFF_RUNNING) != 0, flags & Int32(IFF_LOOPBACK) == 0,
                  let address = current.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var ipv4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
            ipv4.sin_port = 0
            addresses.append(ipv4)
        }
        return addresses
    }

    /// Closes the ports and every link.
    package func stop() {
        let (udp, tcp) = sockets.withLock { sockets -> (Int32, Int32) in
            defer { sockets = (-1, -1) }
            return sockets
        }
        let links = state.withLock { state -> [DeviceLink] in
            state.stopped = true
            return Array(state.links.values)
        }
        announcing.withLock { $0.stopped = true }
        announced.signal()
        for fd in [udp, tcp] where fd >= 0 {
            shutdown(fd, Int32(SHUT_RDWR))
            Glibc.close(fd)
        }
        links.forEach { $0.close("xpbd stopped") }
    }

    // MARK: - What the person does

    package var devices: [Device] {
        state.withLock { state in
            Set(state.names.keys).union(state.pinned.keys).sorted().map { id in
                Device(id: id, name: state.names[id] ?? id, paired: state.pinned[id] != nil, reachable: state.links[id] != nil,
                       asks: state.pairings[id]?.isAskedByPeer == true, asked: state.pairings[id]?.isRequested == true)
            }
        }
    }

    /// Asks a device to pair (it must be reachable).
    package func pair(_ id: String) throws(Pairing.Refusal) {
        try pairingVerb(id) { pairing throws(Pairing.Refusal) in try pairing.request(now: Date()) }
    }

    /// Accepts a device's request to pair.
    package func accept(_ id: String) throws(Pairing.Refusal) {
        try pairingVerb(id) { pairing throws(Pairing.Refusal) in try pairing.accept() }
    }

    /// Unpairs a device (or refuses its request); a device not reachable is forgotten here, and
    /// learns it when it next connects.
    package func unpair(_ id: String) throws(Pairing.Refusal) {
        let reachable = state.withLock { $0.links[id] != nil }
        if reachable {
            try pairingVerb(id) { pairing throws(Pairing.Refusal) in pairing.unpair() }
        } else {
            guard state.withLock({ $0.pinned[id] != nil }) else { throw Pairing.Refusal(description: "no device \(id) is paired") }
            forget(id)
            onEvent(.told("unpaired \(id) (not reachable now: it is told when it connects)"))
        }
    }

    private func pairingVerb(_ id: String, _ verb: (inout Pairing) throws(Pairing.Refusal) -> [Pairing.Action]) throws(Pairing.Refusal) {
        let (link, actions) = try state.withLock { state throws(Pairing.Refusal) -> (DeviceLink, [Pairing.Action]) in
            guard let link = state.links[id], var pairing = state.pairings[id] else {
                throw Pairing.Refusal(description: "no device \(id) is reachable now")
            }
            let actions = try verb(&pairing)
            state.pairings[id] = pairing
            return (link, actions)
        }
        perform(actions, for: id, on: link)
    }

    // MARK: - The clipboard

    /// A copy made on this machine: sent to every paired device the rule lets it go to.
    package func copied(_ copy: ClipboardRule.Copy) {
        let sends = state.withLock { state -> [(DeviceLink, Packet)] in
            state.current = copy
            var sends: [(DeviceLink, Packet)] = []
            for (id, link) in state.links where state.pairings[id]?.isPaired == true {
                if let packet = state.rules[id]?.copied(copy) { sends.append((link, packet)) }
            }
            return sends
        }
        for (link, packet) in sends { link.send(packet) }
    }

    // MARK: - Links

    func pinned(_ id: String) -> [UInt8]? { state.withLock { $0.pinned[id] } }

    /// A link finished its handshake; returns why it is refused, if it is. A device's newest link
    /// replaces the one it had, as kdeconnect-kde replaces its own (`LanLinkProvider::addLink`
    /// resets the device's link to the newest socket): both ends then write to the same one.
    func linkReady(_ link: DeviceLink, identity: DeviceIdentity) -> String? {
        let id = identity.deviceId
        var replaced: DeviceLink?
        let shown = link.certificate.withLock { $0 }
        var refusal: String?
        let connect = state.withLock { state -> Packet?? in
            guard !state.stopped else {
                refusal = "xpbd stopped"
                return .none
            }
            replaced = state.links[id]
            // A device's new link must show the certificate its link up showed: otherwise anyone
            // who says its id could take over an unpaired device's link (kdeconnect-kde checks the same).
            if let replaced, replaced.certificate.withLock({ $0 }) != shown {
                refusal = "a second link claiming to be “\(identity.deviceName)” (\(id)) showed another certificate than its link up: refused"
                return .none
            }
            state.links[id] = link
            state.names[id] = identity.deviceName
            var pairing = state.pairings[id] ?? Pairing(name: identity.deviceName, paired: state.pinned[id] != nil)
            pairing.name = identity.deviceName
            if pairing.isPaired != (state.pinned[id] != nil) { pairing = Pairing(name: identity.deviceName, paired: state.pinned[id] != nil) }
            state.pairings[id] = pairing
            var rule = ClipboardRule(device: id, maxBytes: configuration.maxPacketBytes)
            // A request to pair sent on the link this one replaces may have been lost with it:
            // it is sent again here (a device takes a repeated request as the same one).
            let packet = pairing.isPaired ? rule.connected(current: state.current)
                : pairing.isRequested ? Packet.pair(true, timestamp: Int64(Date().timeIntervalSince1970)) : nil
            state.rules[id] = rule
            return .some(packet)
        }
        guard case .some(let packet) = connect else { return refusal ?? "refused" }
        replaced?.close("replaced by a newer link to “\(identity.deviceName)”")
        onEvent(.told("linked to “\(identity.deviceName)” (\(id)), protocol \(identity.protocolVersion), \(pinned(id) == nil ? "not paired" : "paired")"))
        if let packet { link.send(packet) }
        return nil
    }

    func linkEnded(_ link: DeviceLink, why: String) {
        let (name, heal) = state.withLock { state -> (String?, Bool) in
            state.linkCount -= 1
            guard let device = link.device.withLock({ $0 }), state.links[device.deviceId] === link else { return (nil, false) }
            state.links[device.deviceId] = nil
            // Two links made at once can leave each end keeping the one the other closed: a
            // device's only link that ends is followed by this device's identity, once a second
            // at most, so that the device dials again if it is still there.
            let now = Date()
            let heal = !state.stopped && now.timeIntervalSince(state.lastHeal) >= 1
            if heal { state.lastHeal = now }
            return (device.deviceName, heal)
        }
        onEvent(.told(name.map { "link to “\($0)” ended: \(why)" } ?? why))
        if heal { announce() }
    }

    /// A packet from a linked device; returns why the link must close, if it must.
    func received(_ packet: Packet, on link: DeviceLink, from identity: DeviceIdentity) -> String? {
        let id = identity.deviceId
        switch packet {
        case .pair(let wants, let timestamp):
            let actions = state.withLock { state -> [Pairing.Action] in
                guard var pairing = state.pairings[id] else { return [] }
                let actions = pairing.received(pair: wants, timestamp: timestamp, version: ours(with: identity), now: Date())
                state.pairings[id] = pairing
                return actions
            }
            perform(actions, for: id, on: link)
            return nil
        case .clipboard, .clipboardConnect:
            let incoming = state.withLock { state -> ClipboardRule.Incoming? in
                guard state.pairings[id]?.isPaired == true else { return nil }
                return state.rules[id]?.received(packet, now: Self.now())
            }
            guard let incoming else { return "“\(identity.deviceName)” sent \(packet.type) without being paired" }
            if case .take(let text, let time) = incoming {
                onEvent(.copied(text, time: time, device: id, name: identity.deviceName))
            }
            return nil
        case .identity:
            return "“\(identity.deviceName)” sent its identity again on a link that is up"
        case .other:
            // Another plugin's packet (a ping): not xpbd's to act on.
            return nil
        }
    }

    /// The protocol version spoken with a device.
    private func ours(with device: DeviceIdentity) -> Int { min(DeviceIdentity.versions.last!, device.protocolVersion) }

    /// Lapses pairing requests whose time is up.
    func tick() {
        let lapsed = state.withLock { state -> [(String, DeviceLink?, [Pairing.Action])] in
            let now = Date()
            var lapsed: [(String, DeviceLink?, [Pairing.Action])] = []
            for (id, var pairing) in state.pairings where pairing.deadline.map({ $0 <= now }) == true {
                let actions = pairing.tick(now: now)
                state.pairings[id] = pairing
                lapsed.append((id, state.links[id], actions))
            }
            return lapsed
        }
        for (id, link, actions) in lapsed { perform(actions, for: id, on: link) }
    }

    /// How long a link's thread may wait before ``tick()`` has work (a second at most).
    func millisecondsToNextTick() -> Int32 {
        let next = state.withLock { $0.pairings.values.compactMap(\.deadline).min() }
        guard let next else { return 1000 }
        return Int32(max(0, min(1000, next.timeIntervalSinceNow * 1000)))
    }

    private func perform(_ actions: [Pairing.Action], for id: String, on link: DeviceLink?) {
        for action in actions {
            switch action {
            case .send(let packet):
                link?.send(packet)
            case .trust:
                guard let link else { continue }
                pin(id, certificate: link.certificate.withLock { $0 })
            case .forget:
                forget(id)
            case .tell(let line):
                onEvent(.told(line))
            }
        }
    }

    private func pin(_ id: String, certificate der: [UInt8]) {
        let directory = configuration.directory + "/paired"
        _ = mkdir(directory, 0o700)
        do {
            try DeviceCertificate.writeWhole(der, to: directory + "/" + id + ".der")
        } catch {
            onEvent(.told("could not pin the certificate of \(id): \(error)"))
        }
        state.withLock { $0.pinned[id] = der }
    }

    private func forget(_ id: String) {
        unlink(configuration.directory + "/paired/" + id + ".der")
        state.withLock { state in
            state.pinned[id] = nil
            if let name = state.pairings[id]?.name, state.pairings[id]?.isPaired == true {
                state.pairings[id] = Pairing(name: name, paired: false)
            }
        }
    }

    private static func loadPinned(in directory: String) -> [String: [UInt8]] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [:] }
        var pinned: [String: [UInt8]] = [:]
        for name in names where name.hasSuffix(".der") {
            let id = String(name.dropLast(4))
            guard DeviceIdentity.isValid(deviceId: id), let data = FileManager.default.contents(atPath: directory + "/" + name), !data.isEmpty else { continue }
            pinned[id] = Array(data)
        }
        return pinned
    }

    // MARK: - Threads

    /// Reads broadcasts; dials each device heard that has no link.
    private func hear(_ udp: Int32) {
        var buffer = [UInt8](repeating: 0, count: Packet.maxIdentityBytes + 1)
        while true {
            var from = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let count = withUnsafeMutablePointer(to: &from) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(udp, &buffer, buffer.count, 0, $0, &length) }
            }
            if state.withLock({ $0.stopped }) { return }
            if count < 0 {
                // Closed by stop (EBADF); anything else is one datagram's trouble.
                if errno == EBADF || errno == EINVAL { return }
                continue
            }
            // An empty datagram, or one too large for an identity: not a device.
            guard count > 0, count <= Packet.maxIdentityBytes else { continue }
            var line = buffer[..<count]
            if line.last == 0x0A { line = line.dropLast() }
            guard case .identity(let heard) = try? Packet.decode(line), heard.deviceId != deviceId, let port = heard.tcpPort else { continue }
            let dial = state.withLock { state -> Bool in
                guard state.links[heard.deviceId] == nil, !state.dialing.contains(heard.deviceId), state.linkCount < configuration.maxLinks else { return false }
                state.dialing.insert(heard.deviceId)
                state.linkCount += 1
                return true
            }
            guard dial else { continue }
            var aimed = from
            aimed.sin_port = in_port_t(UInt16(port).bigEndian)
            let target = aimed
            do {
                try DetachedThread.start(name: "kdeconnect.link") { [self] in
                    defer { state.withLock { _ = $0.dialing.remove(heard.deviceId) } }
                    guard let fd = Self.connect(to: target) else {
                        state.withLock { $0.linkCount -= 1 }
                        onEvent(.told("could not reach “\(heard.deviceName)” at its TCP port \(port): \(Errno.current)"))
                        return
                    }
                    run(fd, role: .dialer, heard: heard)
                }
            } catch {
                state.withLock { state in
                    state.linkCount -= 1
                    state.dialing.remove(heard.deviceId)
                }
            }
        }
    }

    /// Takes the devices that dial this one.
    private func acceptLinks(_ tcp: Int32) {
        while true {
            let fd = clinux_accept_cloexec(tcp)
            if fd < 0 {
                if state.withLock({ $0.stopped }) || errno == EBADF || errno == EINVAL { return }
                // Out of descriptors or memory, or a connection gone before it was taken: the
                // port stays open; a moment's pause lets descriptors come back.
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM { usleep(100_000) }
                continue
            }
            let admitted = state.withLock { state -> Bool in
                guard !state.stopped, state.linkCount < configuration.maxLinks else { return false }
                state.linkCount += 1
                return true
            }
            guard admitted else {
                Glibc.close(fd)
                continue
            }
            do {
                try DetachedThread.start(name: "kdeconnect.link") { [self] in run(fd, role: .listener, heard: nil) }
            } catch {
                state.withLock { $0.linkCount -= 1 }
                Glibc.close(fd)
            }
        }
    }

    private func run(_ fd: Int32, role: Handshake.Role, heard: DeviceIdentity?) {
        let link: DeviceLink
        do {
            link = try DeviceLink(fd: fd, role: role, service: self)
        } catch {
            state.withLock { $0.linkCount -= 1 }
            onEvent(.told("\(error)"))
            return
        }
        var ours = identity
        ours.tcpPort = nil
        link.run(ours: ours, heard: heard, certificate: certificate)
    }

    private static func bind(_ fd: Int32, port: UInt16) -> Bool {
        var address = address("0.0.0.0", port: port)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    private static func connect(to target: sockaddr_in) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var target = target
        let connected = withUnsafePointer(to: &target) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            let error = errno
            Glibc.close(fd)
            errno = error
            return nil
        }
        return fd
    }

    private static func address(_ text: String, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(port.bigEndian)
        _ = inet_pton(AF_INET, text, &address.sin_addr)
        return address
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
