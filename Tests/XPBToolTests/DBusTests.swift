import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("D-Bus: Klipper's interface, as pass, gopass and scripts call it")
struct DBusTests {
    private let klipper = ["org.kde.klipper", "/klipper"]

    @Test("pass's own line clears xpbd's history, pinned entries kept; qdbus, gdbus and dbus-send read and write it")
    func klipperMethods() throws {
        let x = try Xvfb()
        let bus = try SessionBus(on: x)
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, environment: bus.environment)
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("answers Klipper's interface")
        let environment = home.environment.merging(bus.environment) { $1 }
        func call(_ program: String, _ arguments: [String]) throws -> Outcome {
            try run(program, arguments, display: x, environment: environment)
        }
        let monitor = try Peer("gdbus", ["monitor", "--session", "--dest", "org.kde.klipper"], display: x, environment: environment)
        defer { monitor.stop() }
        try monitor.waitForOutput("Monitoring signals")

        #expect(try xclipCopy("first copy", display: x).status == 0)
        try daemon.waitForLog("kept CLIPBOARD")
        #expect(try xclipCopy("second copy", display: x).status == 0)
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        try monitor.waitForOutput("clipboardHistoryUpdated")
        #expect(try call("qdbus", klipper + ["org.kde.klipper.klipper.getClipboardContents"]).text == "second copy\n")
        #expect(try call("qdbus", klipper + ["org.kde.klipper.klipper.getClipboardHistoryMenu"]).text == "second copy\nfirst copy\n")
        #expect(try call("gdbus", ["call", "--session", "--dest", "org.kde.klipper", "--object-path", "/klipper",
                                   "--method", "org.kde.klipper.klipper.getClipboardHistoryItem", "1"]).text == "('first copy',)\n")
        let missing = try call("gdbus", ["call", "--session", "--dest", "org.kde.klipper", "--object-path", "/klipper",
                                         "--method", "org.kde.klipper.klipper.getClipboardHistoryItem", "99"])
        #expect(missing.status != 0 && missing.error.contains("no history entry 99"), "\(missing.error)")
        let wrong = try call("dbus-send", ["--session", "--print-reply", "--dest=org.kde.klipper", "/klipper",
                                           "org.kde.klipper.klipper.getClipboardHistoryItem", "string:zero"])
        #expect(wrong.status != 0 && wrong.error.contains("InvalidArgs"), "\(wrong.error)")

        #expect(try call("dbus-send", ["--session", "--print-reply", "--dest=org.kde.klipper", "/klipper",
                                       "org.kde.klipper.klipper.setClipboardContents", "string:set over D-Bus"]).status == 0)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "set over D-Bus")
        #expect(eventually(timeout: 10) { (try? xpb(["history"], x, home).text.contains("set over D-Bus")) == true })
        #expect(try xpb(["history", "pin", "2"], x, home).status == 0)

        // pass's line (password-store.sh, after the password it copied is cleared).
        let pass = try call("/bin/sh", ["-c", "qdbus org.kde.klipper /klipper org.kde.klipper.klipper.clearClipboardHistory &>/dev/null; echo $?"])
        #expect(pass.text == "0\n")
        let left = try xpb(["history"], x, home).text.split(separator: "\n")
        #expect(left.count == 1 && left.first?.contains("first copy") == true, "the pinned entry stays: \(left)")
        #expect(try call("qdbus", klipper + ["org.kde.klipper.klipper.clearClipboardContents"]).status == 0)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).status != 0)
        #expect(try call("qdbus", klipper + ["org.kde.klipper.klipper.saveClipboardHistory"]).status == 0)
    }

    @Test("bad input gets a D-Bus error, never a crash: a text over the limit, an unknown method; a second xpbd leaves the name to the first")
    func badInput() throws {
        let x = try Xvfb()
        let bus = try SessionBus(on: x)
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, environment: bus.environment)
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("answers Klipper's interface")
        let environment = home.environment.merging(bus.environment) { $1 }
        let script = """
            import sys
            from gi.repository import Gio, GLib
            bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
            try:
                bus.call_sync("org.kde.klipper", "/klipper", "org.kde.klipper.klipper", "setClipboardContents",
                              GLib.Variant("(s)", ("x" * (17 << 20),)), None, Gio.DBusCallFlags.NONE, 30000, None)
                print("accepted")
            except GLib.Error as error:
                print("refused", error.message)
            """
        let huge = try run("/usr/bin/python3", ["-c", script], display: x, environment: environment, timeout: 60)
        #expect(huge.text.hasPrefix("refused") && huge.text.contains("more than"), "\(huge.text) \(huge.error)")
        let unknown = try run("dbus-send", ["--session", "--print-reply", "--dest=org.kde.klipper", "/klipper", "org.kde.klipper.klipper.noSuchMethod"],
                              display: x, environment: environment)
        #expect(unknown.status != 0 && unknown.error.contains("UnknownMethod"), "\(unknown.error)")
        // Still answering.
        #expect(try run("qdbus", klipper + ["org.kde.klipper.klipper.getClipboardHistoryMenu"], display: x, environment: environment).status == 0)

        let other = try Xvfb()
        let second = try DaemonProcess(other, home: home, environment: bus.environment)
        defer { _ = try? second.stop() }
        try second.waitForLog("not taken")
        #expect(!second.log.contains("answers Klipper's interface"))
    }
}
