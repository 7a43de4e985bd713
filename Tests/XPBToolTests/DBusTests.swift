import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("D-Bus: Klipper's interface, as pass, gopass and scripts call it")
struct DBusTests {
    private let klipper = ["org.kde.klipper", "/klipper"]

    /// A display, a private session bus, and xpbd on both, once it logged `answering`.
    private static func daemonOnABus(answering: String) throws -> (Xvfb, SessionBus, DaemonHome, DaemonProcess) {
        let x = try Xvfb()
        let bus = try SessionBus(on: x)
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, environment: bus.environment)
        do {
            try daemon.waitForLog(answering)
        } catch {
            _ = try? daemon.stop()
            throw error
        }
        return (x, bus, home, daemon)
    }

    @Test("pass's own line clears xpbd's history, pinned entries kept; qdbus, gdbus and dbus-send read and write it")
    func klipperMethods() throws {
        let (x, bus, home, daemon) = try Self.daemonOnABus(answering: "answers org.kde.klipper.klipper")
        defer { _ = try? daemon.stop() }
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

    @Test("pass -c as people run it: the password is served, never kept; pass's clearClipboardHistory keeps the user's history; --klipper-clear-all clears it as Klipper does")
    func passAsPeopleRunIt() throws {
        let password = "hunter2-correct-horse"
        let (x, bus, home, daemon) = try Self.daemonOnABus(answering: "answers org.kde.klipper.klipper")
        defer { _ = try? daemon.stop() }
        let store = try PasswordStore(home: home, display: x, password: password)
        defer { store.stop() }
        let environment = home.environment.merging(bus.environment) { $1 }.merging(store.environment) { $1 }
        #expect(try xclipCopy("first copy", display: x).status == 0)
        try daemon.waitForLog("kept CLIPBOARD")
        #expect(try xclipCopy("second copy", display: x).status == 0)
        try daemon.waitForLog("kept CLIPBOARD", count: 2)

        // A terminal runs each command as a job of its own: setsid, as a shell with job control.
        // Its output to a file: the xclip it starts would hold our pipes open for the clip time.
        let said = home.root.appendingPathComponent("pass.out").path
        func passCopy(_ daemon: DaemonProcess) throws {
            let clip = try run("/bin/sh", ["-c", "setsid -w pass -c web/site >\(said) 2>&1"], display: x, environment: environment)
            let text = (try? String(contentsOfFile: said, encoding: .utf8)) ?? ""
            #expect(clip.status == 0 && text.contains("Copied web/site"), "\(text)")
        }
        try passCopy(daemon)
        try daemon.waitForLog("marked secret")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == password, "served while pass holds it")
        // After its clip time pass clears Klipper's history, then puts the earlier copy back.
        try daemon.waitForLog("clearClipboardHistory from pass", timeout: 20)
        #expect(eventually(timeout: 10) { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x).text) == "second copy" })
        let history = try xpb(["history"], x, home).text
        #expect(history.contains("first copy") && history.contains("second copy") && !history.contains(password), "\(history)")
        #expect(try filesHolding(Data(password.utf8), under: [home.stateDirectory, home.cacheDirectory]).isEmpty)

        // Klipper's way: everything goes (but what pass puts back after).
        try daemon.stop()
        let klipperLike = try DaemonProcess(x, home: home, arguments: ["--klipper-clear-all"], environment: bus.environment)
        defer { _ = try? klipperLike.stop() }
        try klipperLike.waitForLog("answers org.kde.klipper.klipper")
        try passCopy(klipperLike)
        try klipperLike.waitForLog("clearClipboardHistory: the history was cleared", timeout: 20)
        #expect(eventually(timeout: 10) { (try? xpb(["history"], x, home).text.contains("first copy")) == false })
    }

    @Test("bad input gets a D-Bus error, never a crash: a text over the limit, an unknown method; a second xpbd leaves the name to the first")
    func badInput() throws {
        let (x, bus, home, daemon) = try Self.daemonOnABus(answering: "answers org.kde.klipper.klipper")
        defer { _ = try? daemon.stop() }
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
        #expect(!second.log.contains("answers org.kde.klipper.klipper"))
    }

    @Test("a copy set over D-Bus with a secret marker (KDE's password hint, nspasteboard's concealed type) is served, never kept, never signalled")
    func markedSecretOverDBus() throws {
        let (x, bus, home, daemon) = try Self.daemonOnABus(answering: "answers org.xpb.Pasteboard1")
        defer { _ = try? daemon.stop() }
        let environment = home.environment.merging(bus.environment) { $1 }
        let monitor = try Peer("gdbus", ["monitor", "--session", "--dest", "org.xpb.Pasteboard1"], display: x, environment: environment)
        defer { monitor.stop() }
        try monitor.waitForOutput("Monitoring signals")
        func set(_ text: String, marker: String?) throws {
            let extra = marker.map { ", '\($0)': b'secret'" } ?? ""
            let outcome = try run("/usr/bin/python3", ["-c", """
                from gi.repository import Gio, GLib
                bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
                bus.call_sync("org.xpb.Pasteboard1", "/org/xpb/Pasteboard1", "org.xpb.Pasteboard1", "SetContents",
                              GLib.Variant('(sa{say})', ('CLIPBOARD', {'text/plain;charset=utf-8': b'\(text)'\(extra)})),
                              None, Gio.DBusCallFlags.NONE, 30000, None)
                """], display: x, environment: environment)
            #expect(outcome.status == 0, "\(outcome.error)")
            #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == text, "served")
        }
        let secrets = ["kde-\(UUID().uuidString.prefix(8))", "concealed-\(UUID().uuidString.prefix(8))"]
        try set(secrets[0], marker: "x-kde-passwordManagerHint")
        try daemon.waitForLog("is marked secret: not kept")
        try set(secrets[1], marker: "org.nspasteboard.ConcealedType")
        try daemon.waitForLog("is marked secret: not kept", count: 2)
        // An ordinary copy after them is kept and signalled: the checks below can fail.
        try set("plain words", marker: nil)
        try waitForEntries(1, x, home, daemon: daemon)
        try monitor.waitForOutput("org.xpb.Pasteboard1.Changed ('CLIPBOARD', 'D-Bus (SetContents)'")
        #expect(try history(x, home).map { $0["preview"] as? String } == ["plain words"])
        #expect(monitor.outputSoFar.components(separatedBy: ".Changed (").count == 2, "one Changed: \(monitor.outputSoFar)")
        try daemon.stop()
        let grep = try run("/bin/grep", ["-r", "-a", "-l", "-e", secrets[0], "-e", secrets[1], home.stateDirectory.path], display: x)
        #expect(grep.status == 1, "\(grep.text)")
    }

    @Test("xpbd's own interface (org.xpb.Pasteboard1): typed contents both ways, the history's columns, select, pin and delete by id, the Changed signal naming the app; bad calls get D-Bus errors, a caller that never reads its replies stalls nobody")
    func typedInterface() throws {
        let (x, bus, home, daemon) = try Self.daemonOnABus(answering: "answers org.xpb.Pasteboard1")
        defer { _ = try? daemon.stop() }
        let environment = home.environment.merging(bus.environment) { $1 }
        let object = ["--session", "--dest", "org.xpb.Pasteboard1", "--object-path", "/org/xpb/Pasteboard1"]
        func gdbus(_ method: String, _ arguments: [String] = []) throws -> Outcome {
            try run("gdbus", ["call"] + object + ["--method", "org.xpb.Pasteboard1." + method] + arguments, display: x, environment: environment)
        }
        func python(_ body: String, timeout: Double = 30) throws -> Outcome {
            let script = """
                import os, signal, sys
                from gi.repository import Gio, GLib
                bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
                def call(method, signature=None, values=None, reply=None):
                    result = bus.call_sync("org.xpb.Pasteboard1", "/org/xpb/Pasteboard1", "org.xpb.Pasteboard1", method,
                                           GLib.Variant(signature, values) if signature else None,
                                           GLib.VariantType(reply) if reply else None, Gio.DBusCallFlags.NONE, 30000, None)
                    return result.unpack() if result is not None else None

                """ + body
            return try run("/usr/bin/python3", ["-c", script], display: x, environment: environment, timeout: timeout)
        }
        let monitor = try Peer("gdbus", ["monitor", "--session", "--dest", "org.xpb.Pasteboard1"], display: x, environment: environment)
        defer { monitor.stop() }
        try monitor.waitForOutput("Monitoring signals")

        #expect(try xclipCopy("typed hello", display: x).status == 0)
        try daemon.waitForLog("kept CLIPBOARD")
        try monitor.waitForOutput("org.xpb.Pasteboard1.Changed ('CLIPBOARD', 'xclip', ['text/plain;charset=utf-8'])")
        let got = try python("print(call('GetContents', '(s)', ('CLIPBOARD',), '(a{say})'))")
        #expect(got.text == "({'text/plain;charset=utf-8': [116, 121, 112, 101, 100, 32, 104, 101, 108, 108, 111]},)\n", "\(got.text) \(got.error)")

        let set = try python("""
            call('SetContents', '(sa{say})', ('CLIPBOARD', {'text/html': b'<b>bold</b>', 'text/plain;charset=utf-8': b'bold'}))
            print('set')
            """)
        #expect(set.text == "set\n", "\(set.error)")
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x).text == "<b>bold</b>")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "bold")

        try waitForEntries(2, x, home)
        let rows = try python("""
            for row in call('ListHistory', '(uu)', (0, 10), '(a(xdssastbs))')[0]:
                print(row[0], row[2], row[3], ','.join(row[4]), row[5], row[6], row[7], sep='|')
            """)
        let lines = rows.text.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
        #expect(lines.count == 2 && lines[0].count == 7, "\(rows.text) \(rows.error)")
        guard lines.count == 2, lines[0].count == 7, lines[1].count == 7 else { return }
        #expect(lines[0][1...] == ["CLIPBOARD", "D-Bus (SetContents)", "text/html,text/plain", "4", "False", "bold"], "\(lines[0])")
        #expect(lines[1][1...] == ["CLIPBOARD", "xclip", "text/plain", "11", "False", "typed hello"], "\(lines[1])")
        let (newest, oldest) = (lines[0][0], lines[1][0])

        let item = try python("print(bytes(call('GetHistoryItem', '(x)', (\(oldest),), '(a{say})')[0]['text/plain;charset=utf-8']))")
        #expect(item.text == "b'typed hello'\n", "\(item.error)")
        #expect(try gdbus("Pin", [oldest, "true"]).status == 0)
        #expect(try history(x, home).first { ($0["preview"] as? String) == "typed hello" }?["pinned"] as? Bool == true)
        #expect(try gdbus("Select", [oldest]).status == 0)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "typed hello")
        #expect(try gdbus("Delete", [newest]).status == 0)
        #expect(eventually(timeout: 10) { (try? history(x, home).map { $0["preview"] as? String }) == ["typed hello"] })

        let missing = try gdbus("GetHistoryItem", ["999"])
        #expect(missing.status != 0 && missing.error.contains("InvalidArgs") && missing.error.contains("no history entry with id 999"), "\(missing.error)")
        let wrong = try run("dbus-send", ["--session", "--print-reply", "--dest=org.xpb.Pasteboard1", "/org/xpb/Pasteboard1",
                                          "org.xpb.Pasteboard1.Select", "string:zero"], display: x, environment: environment)
        #expect(wrong.status != 0 && wrong.error.contains("Select takes (x), not (s)"), "\(wrong.error)")
        let badTypes = try python("""
            for contents in ({'': b'x'}, {'TARGETS': b'x'}, {}):
                try:
                    call('SetContents', '(sa{say})', ('CLIPBOARD', contents))
                    print('accepted')
                except GLib.Error as error:
                    print('refused', error.message)
            """)
        let refusals = badTypes.text.split(separator: "\n")
        #expect(refusals.count == 3 && refusals[0].contains("is not a type") && refusals[1].contains("reserves (TARGETS)")
                && refusals[2].contains("at least one type"), "\(badTypes.text) \(badTypes.error)")
        let introspection = try run("gdbus", ["introspect"] + object, display: x, environment: environment)
        #expect(introspection.text.contains("interface org.xpb.Pasteboard1") && introspection.text.contains("ListHistory(in  u offset"), "\(introspection.text)")

        // A caller that asks for 4 MiB forty times and never reads the replies (stopped): others are answered at once.
        let big = home.root.appendingPathComponent("big")
        try Data(repeating: 0x61, count: 4 << 20).write(to: big)
        #expect(try run("/bin/sh", ["-c", "xclip -selection clipboard < \"$0\" >/dev/null 2>&1", big.path], display: x).status == 0)
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        let stalled = try Peer("/usr/bin/python3", ["-c", """
            import os, signal
            from gi.repository import Gio, GLib
            bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
            for _ in range(40):
                bus.call("org.xpb.Pasteboard1", "/org/xpb/Pasteboard1", "org.xpb.Pasteboard1", "GetContents",
                         GLib.Variant("(s)", ("CLIPBOARD",)), None, Gio.DBusCallFlags.NONE, -1, None, None, None)
            bus.flush_sync(None)
            print("sent", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
            """], display: x, environment: environment)
        defer { stalled.stop() }
        try stalled.waitForOutput("sent")
        let answered = try gdbus("ListHistory", ["0", "1"])
        #expect(answered.status == 0 && answered.text.contains("typed hello") == false && answered.text.contains("aaaa"), "\(answered.text) \(answered.error)")
    }
}

/// A real password store: pass, with a gpg key made for the test (no passphrase), holding one
/// password at web/site, cleared from the clipboard 5 s after `pass -c`.
private struct PasswordStore {
    let environment: [String: String]
    private let display: any TestSession

    init(home: DaemonHome, display: any TestSession, password: String) throws {
        self.display = display
        let gnupg = home.root.appendingPathComponent("gnupg").path
        guard mkdir(gnupg, 0o700) == 0 else { throw TestFailure("cannot make \(gnupg)") }
        environment = ["GNUPGHOME": gnupg, "PASSWORD_STORE_DIR": home.root.appendingPathComponent("store").path, "PASSWORD_STORE_CLIP_TIME": "5"]
        let key = try run("gpg", ["--batch", "--passphrase", "", "--quick-gen-key", "xpb test <test@example.invalid>", "default", "default", "never"],
                          display: display, environment: environment)
        guard key.status == 0 else { throw TestFailure("gpg could not make a key: \(key.error)") }
        let keys = try run("gpg", ["--list-keys", "--with-colons"], display: display, environment: environment).text
        guard let fingerprint = keys.split(separator: "\n").first(where: { $0.hasPrefix("fpr:") })?.split(separator: ":", omittingEmptySubsequences: false).dropFirst(9).first
        else { throw TestFailure("gpg listed no key: \(keys)") }
        for (arguments, input) in [(["init", String(fingerprint)], nil), (["insert", "-m", "web/site"], Data((password + "\n").utf8))] {
            let outcome = try run("pass", arguments, display: display, input: input, environment: environment)
            guard outcome.status == 0 else { throw TestFailure("pass \(arguments.joined(separator: " ")): \(outcome.error)") }
        }
    }

    /// Ends the gpg agent the store started.
    func stop() {
        _ = try? run("gpgconf", ["--kill", "gpg-agent"], display: display, environment: environment)
    }
}

/// The files under `directories` whose bytes hold `needle`.
private func filesHolding(_ needle: Data, under directories: [URL]) throws -> [String] {
    var found: [String] = []
    for directory in directories {
        guard let walker = FileManager.default.enumerator(atPath: directory.path) else { continue }
        for case let path as String in walker {
            let full = directory.appendingPathComponent(path).path
            if let data = FileManager.default.contents(atPath: full), data.range(of: needle) != nil { found.append(full) }
        }
    }
    return found
}
