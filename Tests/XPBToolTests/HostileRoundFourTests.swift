import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Issue 57's attacks, each as it was made: through the binaries, on a real session bus and real
/// X clients.
@Suite("hostile input, round four")
struct HostileRoundFourTests {
    /// A display, a private session bus, and xpbd on both, answering xpbd's interface.
    private static func daemonOnABus(_ arguments: [String] = []) throws -> (Xvfb, SessionBus, DaemonHome, DaemonProcess, [String: String]) {
        let x = try Xvfb()
        let bus = try SessionBus(on: x)
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: arguments, environment: bus.environment)
        do {
            try daemon.waitForLog("answers org.xpb.Pasteboard1")
            try daemon.waitForLog("answers org.kde.klipper.klipper")
        } catch {
            _ = try? daemon.stop()
            throw error
        }
        return (x, bus, home, daemon, home.environment.merging(bus.environment) { $1 })
    }

    @Test("setClipboardContents called back to back for 5 s: every call is served, none fails with a timeout it did not have (a timer failed whichever timestamp waiter was oldest)")
    func sustainedCopiesNeverTimeOut() throws {
        let (x, bus, _, daemon, environment) = try Self.daemonOnABus()
        defer { withExtendedLifetime(bus) { _ = try? daemon.stop() } }
        let outcome = try run("/usr/bin/python3", ["-c", """
            import time
            from gi.repository import Gio, GLib
            bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
            calls, failures, end = 0, [], time.monotonic() + 5
            while time.monotonic() < end:
                try:
                    bus.call_sync("org.kde.klipper", "/klipper", "org.kde.klipper.klipper", "setClipboardContents",
                                  GLib.Variant('(s)', ('copy %d' % calls,)), None, Gio.DBusCallFlags.NONE, 30000, None)
                except GLib.Error as error:
                    failures.append(error.message)
                calls += 1
            print(calls, len(failures), failures[:3])
            """], display: x, environment: environment, timeout: 60)
        let words = outcome.text.split(separator: " ", maxSplits: 2)
        #expect(outcome.status == 0 && words.count == 3, "\(outcome.text) \(outcome.error)")
        guard words.count == 3 else { return }
        #expect((Int(words[0]) ?? 0) > 50, "the run made calls: \(outcome.text)")
        #expect(words[1] == "0", "\(outcome.text)")
        #expect(!daemon.log.contains("timed out"), "\(daemon.log.suffix(2000))")
    }
}
