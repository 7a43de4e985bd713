import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `--refuse-secret-to`: data marked secret goes only to the apps the rule lets have it, where xpb
/// serves it (an `xpb copy` owner on X and on Wayland, the headless xpbd).
@Suite("secrets refused to apps", .serialized)
struct SecretRefusalTests {
    @Test("on X, a secret an xpb owner serves is refused to the app xpbd's rule names (xclip) and served to others (xsel, xpb over the fast path); a copy not marked secret goes to all; after SIGHUP the file's new rule refuses xpb, over the fast path and through X")
    func onX() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        try home.writeConfig("--refuse-secret-to XClip  # as the app rules match: any case\n")
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        let secret = "hunter2-\(getpid())"
        let copied = try xpb(["copy", "--sensitive"], x, home, input: Data(secret.utf8))
        #expect(copied.status == 0, "\(copied.error)")
        let refused = try xclipOut(x)
        #expect(refused.status != 0 && !refused.text.contains(secret), "\(refused.text)\(refused.error)")
        // TARGETS is no paste: the reader sees what is offered, and the secret's marker.
        #expect(try xclipOut(x, ["-t", "TARGETS"]).text.contains("x-kde-passwordManagerHint"))
        #expect(try run("xsel", ["-b", "-o"], display: x).text == secret)
        #expect(try xpb(["paste"], x, home).text == secret)
        // Data not marked secret: every reader has it.
        #expect(try xpb(["copy"], x, home, input: Data("plain".utf8)).status == 0)
        #expect(try xclipOut(x).text == "plain")
        // The secret was never kept: the history holds the plain copy alone.
        try waitForEntries(1, x, home, daemon: daemon)
        #expect(try history(x, home).compactMap { $0["preview"] as? String } == ["plain"])

        // The rule reread: xpb refused now, over the fast path and through X both; xclip served.
        try home.writeConfig("--refuse-secret-to xpb\n")
        kill(daemon.peer.pid, SIGHUP)
        try daemon.waitForLog("SIGHUP: reread")
        #expect(try xpb(["copy", "--sensitive"], x, home, input: Data(secret.utf8)).status == 0)
        let byXPB = try xpb(["paste"], x, home)
        #expect(byXPB.status != 0 && !byXPB.text.contains(secret), "\(byXPB.text)\(byXPB.error)")
        let overX = try xpb(["paste"], x, input: nil, environment: home.environment.merging(["XPB_FAST_PATH": "0"]) { $1 })
        #expect(overX.status != 0 && !overX.text.contains(secret), "\(overX.text)\(overX.error)")
        #expect(try xclipOut(x).text == secret)
    }

    @Test("a secret is not copied when xpbd is there but does not say which apps it is refused to (stopped): a clear error within seconds, and the clipboard keeps what it had")
    func stoppedDaemon() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--refuse-secret-to", "xclip"])
        defer { _ = try? daemon.stop() }
        #expect(try xpb(["copy"], x, home, input: Data("before".utf8)).status == 0)
        daemon.peer.signal(SIGSTOP)
        defer { daemon.peer.signal(SIGCONT) }
        let started = Date()
        let copied = try xpb(["copy", "--sensitive"], x, home, input: Data("not copied".utf8))
        #expect(copied.status != 0 && copied.error.contains("did not say which apps a secret is refused to"), "\(copied.error)")
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(try run("xsel", ["-b", "-o"], display: x).text == "before")
    }

    @Test("on Wayland, a secret an xpb owner serves is refused to the app named (wl-paste, or the cat it runs), whose pipe closes empty, and served to xpb; a copy not marked secret goes to wl-paste")
    func onWayland() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(sway, home: home, arguments: ["--refuse-secret-to", "wl-paste"])
        defer { _ = try? daemon.stop() }
        let secret = "wayland-secret-\(getpid())"
        let copied = try xpb(["copy", "--sensitive"], sway, home, input: Data(secret.utf8))
        #expect(copied.status == 0, "\(copied.error)")
        let refused = try run("wl-paste", ["-n"], display: sway)
        #expect(!refused.text.contains(secret), "\(refused.text)\(refused.error)")
        #expect(try xpb(["paste"], sway, home).text == secret)
        #expect(try xpb(["copy"], sway, home, input: Data("plain".utf8)).status == 0)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "plain")
    }

    @Test("the headless xpbd refuses a secret it holds to the app named (xpb's caller, here xpb), with a clear error, and serves what is not secret")
    func headless() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let host = DaemonHost.memory
        let daemon = try host.start(x, home, ["--refuse-secret-to", "xpb"])
        defer { _ = try? daemon.stop() }
        #expect(try host.xpb(["copy", "--sensitive"], x, home, input: Data("held secret".utf8)).status == 0)
        let refused = try host.xpb(["paste"], x, home)
        #expect(refused.status != 0 && refused.error.contains("--refuse-secret-to refuses to this app") && !refused.text.contains("held secret"),
                "\(refused.text)\(refused.error)")
        try host.copy("held plain", x, home)
        #expect(try host.xpb(["paste"], x, home).text == "held plain")
    }
}
