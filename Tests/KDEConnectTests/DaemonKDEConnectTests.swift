import Foundation
import Glibc
@testable import KDEConnect
@testable import KDEConnectLink
import Testing
import X11TestSupport

/// `xpbd --kdeconnect` as a user runs it: the built xpbd (which runs the built xpbd-kdeconnect
/// beside it) on a private Xvfb, in one namespace of a private network, the real kdeconnectd
/// 22.12 on its own Xvfb in the other; pairing with the built `xpb devices`.
@Suite("xpbd --kdeconnect against the real kdeconnectd 22.12, in a private network", .serialized)
struct DaemonKDEConnectTests {
    /// `xpb devices` with the daemon's home, its outcome.
    static func devices(_ arguments: [String], home: DaemonHome, x: any TestSession) throws -> Outcome {
        try run(try builtProduct("xpb"), ["devices"] + arguments, display: x, environment: home.environment, timeout: 20)
    }

    /// `xpb devices --json`'s answer, nil when it fails.
    static func listing(home: DaemonHome, x: any TestSession) -> [String: Any]? {
        guard let outcome = try? devices(["--json"], home: home, x: x), outcome.status == 0 else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(outcome.text.utf8))) as? [String: Any]
    }

    /// The device with `id` as `xpb devices --json` lists it.
    static func device(_ id: String, home: DaemonHome, x: any TestSession) -> [String: Any]? {
        (listing(home: home, x: x)?["devices"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    /// kdeconnectd's own device id, once its bus answers.
    static func ownId(of kde: KDEConnectDaemon) throws -> String {
        var found: String?
        guard eventually(timeout: 20, {
            found = try? kde.ownId()
            return found != nil
        }), let found else { throw TestFailure("kdeconnectd answered no selfId: \(kde.peer.errorSoFar.suffix(2000))") }
        return found
    }

    /// The entries of `xpb history --json` whose preview holds `text`.
    static func kept(_ text: String, home: DaemonHome, session: any TestSession) throws -> [[String: Any]] {
        let history = try run(try builtProduct("xpb"), ["history", "--json"], display: session, environment: home.environment, timeout: 20)
        let entries = ((try? JSONSerialization.jsonObject(with: Data(history.text.utf8))) as? [[String: Any]]) ?? []
        return entries.filter { ($0["preview"] as? String ?? "").contains(text) }
    }

    /// A display's CLIPBOARD text now (`xclip -o`), nil when nothing owns it.
    func clipboard(of x: Xvfb) -> String? {
        guard let outcome = try? run("xclip", ["-o", "-selection", "clipboard"], display: x, timeout: 10), outcome.status == 0 else { return nil }
        return outcome.text
    }

    @Test("xpb devices pairs with kdeconnectd; a copy on either display reaches the other through xpbd, with its app named; a secret stays; the helper restarted; D-Bus lists and unpairs")
    func pairAndCopy() throws {
        let network = try PrivateNetwork()
        let kde = try KDEConnectDaemon(in: network.names.0)
        let kdeId = try Self.ownId(of: kde)

        // Off by default: without --kdeconnect nothing listens for xpb devices.
        let x = try Xvfb()
        let home = try DaemonHome()
        let off = try Self.devices([], home: home, x: x)
        #expect(off.status == 1 && off.error.contains("KDE Connect is off"), "\(off.error)")

        // kdeconnectd runs already: our broadcast at the start reaches it, and it dials.
        // Turned on in the configuration file, as a user leaves it on.
        try home.writeConfig("--kdeconnect --kdeconnect-name 'xpbd test'\n")
        // A session bus, where the device's D-Bus interface answers too.
        let bus = try SessionBus(on: x)
        let daemon = try DaemonProcess(x, home: home, launcher: [try which("ip"), "netns", "exec", network.names.1], environment: bus.environment)
        // Stopped at the end on purpose; here only if the test ends early (a second stop would
        // wait for output that ended already).
        var stopped = false
        defer { if !stopped { _ = try? daemon.stop() } }
        try daemon.waitForLog("sync with KDE Connect: connected")
        try daemon.waitForLog("org.xpb.KDEConnect1 /org/xpb/KDEConnect1 answers")
        #expect(eventually(timeout: 20) { Self.device(kdeId, home: home, x: x)?["reachable"] as? Bool == true }, "\(daemon.log.suffix(3000))")
        let onBus = { (method: String, arguments: [String]) throws -> Outcome in
            try run(try which("dbus-send"), ["--session", "--print-reply", "--dest=org.xpb.KDEConnect1", "/org/xpb/KDEConnect1",
                                             "org.xpb.KDEConnect1.\(method)"] + arguments, display: x, environment: bus.environment)
        }
        #expect(Self.device(kdeId, home: home, x: x)?["paired"] as? Bool == false)
        let key = home.configDirectory.appendingPathComponent("xpb/kdeconnect/privateKey.pem").path
        #expect(((try? FileManager.default.attributesOfItem(atPath: key))?[.posixPermissions] as? Int) == 0o600)

        // An unpaired device's copy does not cross.
        _ = try xclipCopy("before pairing", display: kde.x)
        let listed = try Self.devices([], home: home, x: x)
        #expect(listed.status == 0 && listed.text.contains(kdeId) && listed.text.contains("not paired"), "\(listed.text)")

        // We ask with xpb devices pair; kdeconnectd accepts on its bus.
        let ownId = try #require(Self.listing(home: home, x: x)?["ownId"] as? String)
        let asked = try Self.devices(["pair", kdeId], home: home, x: x)
        #expect(asked.status == 0 && asked.text.contains("asked"), "\(asked.text) \(asked.error)")
        let devicePath = "/modules/kdeconnect/devices/\(ownId)"
        #expect(eventually(timeout: 10) { (try? kde.call(devicePath, "org.kde.kdeconnect.device.hasPairingRequests").contains("boolean true")) == true })
        _ = try kde.call(devicePath, "org.kde.kdeconnect.device.acceptPairing")
        #expect(eventually(timeout: 10) { Self.device(kdeId, home: home, x: x)?["paired"] as? Bool == true }, "\(daemon.log.suffix(3000))")
        #expect(try kde.isTrusted(ownId))
        // D-Bus lists it paired and reachable: id, name, paired, reachable, asks, asked.
        let listedOnBus = try onBus("Devices", [])
        #expect(listedOnBus.status == 0 && listedOnBus.text.contains("\"\(kdeId)\"")
                && listedOnBus.text.components(separatedBy: "boolean true").count - 1 == 2, "\(listedOnBus.text) \(listedOnBus.error)")
        #expect(FileManager.default.fileExists(atPath: home.configDirectory.appendingPathComponent("xpb/kdeconnect/paired/\(kdeId).der").path))
        #expect(clipboard(of: x) != "before pairing")

        // Its copy reaches our display, named as the device's.
        _ = try xclipCopy("copied on the kde side", display: kde.x)
        #expect(eventually(timeout: 10) { clipboard(of: x) == "copied on the kde side" }, "\(daemon.log.suffix(3000))")
        try daemon.waitForLog("kept in the history")
        let kept = try Self.kept("copied on the kde side", home: home, session: x)
        #expect(kept.count == 1 && (kept.first?["app"] as? String)?.hasPrefix("KDE Connect: ") == true, "\(kept)")

        // Ours reaches its display.
        _ = try xclipCopy("copied on the xpbd side", display: x)
        #expect(eventually(timeout: 10) { (try? kde.clipboard()) == "copied on the xpbd side" }, "\(daemon.log.suffix(3000))")

        // A secret is not shared: xpbd decides it, and kdeconnectd keeps what it had.
        let secret = try run(try builtProduct("xpb"), ["copy", "--sensitive"], display: x, input: Data("hunter2".utf8),
                             environment: home.environment, timeout: 10)
        #expect(secret.status == 0, "\(secret.error)")
        try daemon.waitForLog("CLIPBOARD is marked secret: not shared")
        _ = try Self.devices([], home: home, x: x)
        #expect(try kde.clipboard() == "copied on the xpbd side")

        // The helper dies: xpbd starts it again, it links to kdeconnectd again, still paired,
        // and copies cross again.
        let status = try run(try builtProduct("xpb"), ["daemon", "status", "--json"], display: x, environment: home.environment, timeout: 20)
        let peers = (((try? JSONSerialization.jsonObject(with: Data(status.text.utf8))) as? [String: Any])?["status"] as? [String: Any])?["peers"] as? [[String: Any]]
        let helper = try #require(peers?.first { $0["name"] as? String == "KDE Connect" }?["transportPID"] as? Int, "\(status.text)")
        kill(pid_t(helper), SIGKILL)
        try daemon.waitForLog("sync with KDE Connect: connected", count: 2, timeout: 20)
        #expect(eventually(timeout: 20) { Self.device(kdeId, home: home, x: x)?["reachable"] as? Bool == true }, "\(daemon.log.suffix(3000))")
        #expect(Self.device(kdeId, home: home, x: x)?["paired"] as? Bool == true)
        _ = try xclipCopy("after the helper's restart", display: kde.x)
        #expect(eventually(timeout: 10) { clipboard(of: x) == "after the helper's restart" }, "\(daemon.log.suffix(3000))")

        // Unpaired over D-Bus: kdeconnectd is told, and its certificate is forgotten.
        let unpaired = try onBus("Unpair", ["string:\(kdeId)"])
        #expect(unpaired.status == 0 && unpaired.text.contains("unpaired"), "\(unpaired.text) \(unpaired.error)")
        #expect(eventually(timeout: 10) { (try? kde.isTrusted(ownId)) == false })
        #expect(!FileManager.default.fileExists(atPath: home.configDirectory.appendingPathComponent("xpb/kdeconnect/paired/\(kdeId).der").path))
        let wrong = try Self.devices(["accept", kdeId], home: home, x: x)
        #expect(wrong.status == 1 && wrong.error.contains("has not asked"), "\(wrong.error)")

        // xpbd stops: its helper with it, the socket of xpb devices gone.
        let socket = home.runtimeDirectory.appendingPathComponent("xpb/kdeconnect.socket").path
        #expect(FileManager.default.fileExists(atPath: socket))
        stopped = true
        #expect(try daemon.stop().status == 0)
        #expect(!FileManager.default.fileExists(atPath: socket), "\(daemon.log.suffix(3000))")
        let after = try Self.devices([], home: home, x: x)
        #expect(after.status == 1 && after.error.contains("KDE Connect is off"), "\(after.error)")
    }

    @Test("on a Wayland session (headless sway): a phone's copy reaches the Wayland clipboard, the history once, and an ssh peer's display; that display's copy reaches the phone")
    func waylandAndPeers() throws {
        let network = try PrivateNetwork()
        let kde = try KDEConnectDaemon(in: network.names.0)
        let kdeId = try Self.ownId(of: kde)

        // Another display's xpbd, the ssh peer (no KDE Connect of its own), and the Wayland
        // session's xpbd, linked to it, a KDE Connect device.
        let home = try DaemonHome()
        let y = try Xvfb()
        let peer = try DaemonProcess(y, home: home, arguments: ["--no-config"])
        defer { _ = try? peer.stop() }
        let sway = try Compositor()
        try home.writeConfig("--kdeconnect --kdeconnect-name 'xpbd wayland'\n")
        // Reached over a real ssh, to an sshd on the Wayland side's loopback (in its namespace).
        let sshd = try LoopbackSSHD(display: y, namespace: network.names.1)
        let daemon = try DaemonProcess(sway, home: home, arguments: [
            "--peer", "\(LoopbackSSHD.host),display=\(y.display)", "--ssh", sshd.sshCommand,
            "--remote-xpb", "XDG_RUNTIME_DIR=\(home.runtimeDirectory.path) \(try builtProduct("xpb"))",
        ], launcher: [try which("ip"), "netns", "exec", network.names.1])
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("sync with KDE Connect: connected")
        try daemon.waitForLog("sync with ssh \(LoopbackSSHD.host) (display \(y.display)): connected", timeout: 20)
        #expect(eventually(timeout: 20) { Self.device(kdeId, home: home, x: sway)?["reachable"] as? Bool == true }, "\(daemon.log.suffix(3000))")

        // Paired from the phone's side this time: it asks, the person accepts here.
        let ownId = try #require(Self.listing(home: home, x: sway)?["ownId"] as? String)
        _ = try kde.call("/modules/kdeconnect/devices/\(ownId)", "org.kde.kdeconnect.device.requestPair")
        #expect(eventually(timeout: 10) { Self.device(kdeId, home: home, x: sway)?["asks"] as? Bool == true }, "\(daemon.log.suffix(3000))")
        #expect(Self.device(kdeId, home: home, x: sway)?["paired"] as? Bool == false)
        let accepted = try Self.devices(["accept", kdeId], home: home, x: sway)
        #expect(accepted.status == 0, "\(accepted.error)")
        #expect(eventually(timeout: 10) { (try? kde.isTrusted(ownId)) == true }, "\(daemon.log.suffix(3000))")

        // The phone's copy: the Wayland clipboard, the ssh peer's display, one history entry.
        _ = try xclipCopy("from the phone to wayland", display: kde.x)
        #expect(eventually(timeout: 10) { (try? run("wl-paste", ["-n"], display: sway, timeout: 10))?.text == "from the phone to wayland" },
                "\(daemon.log.suffix(3000))")
        #expect(eventually(timeout: 10) { clipboard(of: y) == "from the phone to wayland" }, "\(peer.log.suffix(3000))")
        try daemon.waitForLog("kept in the history")
        let kept = try Self.kept("from the phone to wayland", home: home, session: sway)
        #expect(kept.count == 1 && (kept.first?["app"] as? String)?.hasPrefix("KDE Connect: ") == true, "\(kept)")

        // The ssh peer's copy reaches the phone through the Wayland session's xpbd.
        _ = try xclipCopy("from the peer display", display: y)
        #expect(eventually(timeout: 10) { (try? kde.clipboard()) == "from the peer display" }, "\(daemon.log.suffix(3000))")
    }

    @Test("a paired device that floods copies: xpbd takes the newest of each 50 ms, not each, says so, answers all along, and ends with the last copy")
    func flood() throws {
        let network = try PrivateNetwork()
        // The flooding device: our own KDE Connect implementation, in the other namespace.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-kdeconnect-flood-\(getpid())-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (device, events) = try startService(in: network.names.0, KDEConnectService.Configuration(name: "flooder", directory: directory.path))
        defer { device.stop() }

        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--kdeconnect"], launcher: [try which("ip"), "netns", "exec", network.names.1])
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("sync with KDE Connect: connected")
        var ours: KDEConnectService.Device?
        #expect(eventually(timeout: 20) {
            ours = device.devices.first { $0.reachable }
            return ours != nil
        }, "\(events.lines)\n\(daemon.log.suffix(3000))")
        let xpbdId = try #require(ours?.id)
        try device.pair(xpbdId)
        #expect(eventually(timeout: 10) { Self.device(device.deviceId, home: home, x: x)?["asks"] as? Bool == true }, "\(daemon.log.suffix(3000))")
        #expect(try Self.devices(["accept", device.deviceId], home: home, x: x).status == 0)
        #expect(eventually(timeout: 10) { device.devices.first { $0.id == xpbdId }?.paired == true }, "\(events.lines)")

        // 2,000 copies as fast as the link takes them.
        let start = Int64(Date().timeIntervalSince1970 * 1000)
        for index in 0..<2000 { device.copied(.init(text: "flood \(index)", time: start + Int64(index))) }
        #expect(eventually(timeout: 30) { clipboard(of: x) == "flood 1999" }, "\(daemon.log.suffix(3000))")
        try daemon.waitForLog("sends copies faster than one each 50 ms")
        let status = try run(try builtProduct("xpb"), ["daemon", "status"], display: x, environment: home.environment, timeout: 20)
        #expect(status.status == 0, "\(status.error)")
        let taken = daemon.log.components(separatedBy: "sync: CLIPBOARD is now the copy from").count - 1
        #expect(taken >= 2 && taken < 1000, "\(taken) copies taken of 2,000")
    }

    @Test("xpbd-kdeconnect run by anything but xpbd (no sync hello on its standard input) stops with why, before a key is made or a packet sent")
    func notByHand() throws {
        // In a private network all the same: were it to go on, its broadcast must not leave.
        let network = try PrivateNetwork()
        let home = try DaemonHome()
        let helper = try builtProduct("xpbd-kdeconnect")
        let outcome = try run(try which("ip"), ["netns", "exec", network.names.0, helper], display: NoDisplay(),
                              input: Data("{\"hello\": 1}\n".utf8), environment: home.environment, timeout: 20)
        #expect(outcome.status == 2 && outcome.error.contains("run by 'xpbd --kdeconnect'"), "\(outcome.status) \(outcome.error)")
        #expect(!FileManager.default.fileExists(atPath: home.configDirectory.appendingPathComponent("xpb/kdeconnect").path))
    }
}
