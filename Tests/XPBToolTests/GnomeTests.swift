import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// GNOME's compositor, as its users have it: a headless mutter with its XWayland, both
/// `WAYLAND_DISPLAY` and `DISPLAY` set, and no data-control protocol. Mutter carries XWayland's
/// selections to its Wayland clients itself, so xpb and xpbd go through XWayland with no flag.
@Suite("GNOME: xpb and xpbd on a headless mutter, through its XWayland with no flag")
struct GnomeTests {
    @Test("xpb copies and pastes with no flag: an xclip reads its copy and it reads xclip's; naming Wayland is the clear error")
    func copyAndPaste() throws {
        let mutter = try Compositor(.mutter)
        #expect(mutter.environment["WAYLAND_DISPLAY"] != nil && mutter.environment["DISPLAY"] != nil)
        let copy = try xpb(["copy"], mutter, input: Data("from xpb on GNOME".utf8))
        #expect(copy.status == 0, "\(copy.error)")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: mutter).text == "from xpb on GNOME")
        let pasted = try xpb(["paste"], mutter)
        #expect(pasted.status == 0 && pasted.text == "from xpb on GNOME", "\(pasted.error)")

        let peer = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: mutter, input: Data("from xclip".utf8))
        defer { peer.signal(SIGKILL) }
        #expect(eventually(timeout: 10) { (try? xpb(["paste"], mutter).text) == "from xclip" })
        let types = try xpb(["types"], mutter)
        #expect(types.status == 0 && types.text.contains("text"), "\(types.error)\(types.text)")

        // Past one INCR chunk, both ways, through mutter's XWayland.
        let big = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) })
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-gnome-big-\(getpid())-\(UUID().uuidString.prefix(8))")
        try big.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try xpb(["copy", "-t", "application/octet-stream=\(file.path)"], mutter).status == 0)
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "application/octet-stream"], display: mutter).output == big)
        let bigPeer = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "application/octet-stream", "-quiet", file.path], display: mutter)
        defer { bigPeer.signal(SIGKILL) }
        #expect(eventually(timeout: 10) { (try? xpb(["paste", "-t", "application/octet-stream"], mutter).output) == big })

        // Named, the compositor is what the user asked for: the error says how XWayland serves.
        let named = try xpb(["paste", "--backend", "wayland"], mutter)
        #expect(named.status == 5)
        #expect(named.error.contains("data-control") && named.error.contains("XWayland"), "\(named.error)")
        let byEnvironment = try xpb(["paste"], mutter, environment: ["XPB_BACKEND": "wayland"])
        #expect(byEnvironment.status == 5, "\(byEnvironment.error)")
    }

    @Test("the wl-copy and wl-paste stand-ins work on GNOME, where wl-clipboard's own need a focused window: through XWayland")
    func standIns() throws {
        let mutter = try Compositor(.mutter)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-gnome-standins-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for name in ["wl-copy", "wl-paste"] {
            try FileManager.default.createSymbolicLink(atPath: directory.appendingPathComponent(name).path, withDestinationPath: try xpbPath())
        }
        let copy = try run(directory.appendingPathComponent("wl-copy").path, ["from the stand-in"], display: mutter)
        #expect(copy.status == 0, "\(copy.error)")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: mutter).text == "from the stand-in")
        let paste = try run(directory.appendingPathComponent("wl-paste").path, ["-n"], display: mutter)
        #expect(paste.status == 0 && paste.text == "from the stand-in", "\(paste.error)")
    }

    @Test("xpbd keeps XWayland's clipboard with no flag, says why once at debug level; history, queue and status find it")
    func daemon() throws {
        let mutter = try Compositor(.mutter)
        let home = try DaemonHome()
        let daemon = try DaemonProcess(mutter, home: home)
        defer { _ = try? daemon.stop() }
        #expect(daemon.log.components(separatedBy: "offers no data-control: keeping XWayland's display").count == 2, "\(daemon.log)")
        #expect(daemon.log.contains("clipboard manager of display \(mutter.xDisplay!)"), "\(daemon.log)")

        let source = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: mutter, input: Data("kept on GNOME".utf8))
        try daemon.waitForLog("kept CLIPBOARD from window")
        source.signal(SIGKILL)
        _ = try? source.finish(timeout: 5)
        #expect(eventually(timeout: 10) { (try? xpb(["paste"], mutter, home).text) == "kept on GNOME" }, "\(daemon.log)")
        #expect(eventually(timeout: 10) { (try? history(mutter, home))?.first?["preview"] as? String == "kept on GNOME" }, "\(daemon.log)")
        let status = try xpb(["daemon", "status"], mutter, home)
        #expect(status.status == 0 && status.text.contains("display:      \(mutter.xDisplay!)"), "\(status.error)\(status.text)")
        let queue = try xpb(["queue", "add", "-"], mutter, home, input: Data("queued on GNOME".utf8))
        #expect(queue.status == 0, "\(queue.error)")
        #expect(eventually(timeout: 10) { (try? xpb(["paste"], mutter, home).text) == "queued on GNOME" }, "\(daemon.log)")
        // The compositor named: xpbd refuses as xpb does, and the daemon's commands ask no other.
        let named = try xpb(["history", "--backend", "wayland"], mutter, home)
        #expect(named.status != 0 && named.error.contains("Wayland session"), "\(named.error)")
    }
}
