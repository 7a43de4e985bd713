import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The history sealed at rest, through the built xpbd and xpb against real peers: xclip's copies,
/// a real keyring (gnome-keyring-daemon on a private session bus), a real full disk.
@Suite("History sealed at rest (the built binaries)")
struct SealedHistoryToolTests {
    /// Every file under `directories` whose bytes hold `needle`.
    private func files(under directories: [URL], holding needle: String) -> [String] {
        files(under: directories, holding: Data(needle.utf8))
    }

    private func files(under directories: [URL], holding bytes: Data) -> [String] {
        var found: [String] = []
        for directory in directories {
            let enumerator = FileManager.default.enumerator(atPath: directory.path)
            while let name = enumerator?.nextObject() as? String {
                let path = directory.appendingPathComponent(name).path
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                      let contents = FileManager.default.contents(atPath: path), contents.range(of: bytes) != nil else { continue }
                found.append(path)
            }
        }
        return found
    }

    /// A plain history of `count` rows another writer left (made by xpbd --plain-history, then
    /// filled), under caps above its size: the upkeep prunes nothing while a test looks. Its path.
    @discardableResult
    private func plainHistory(_ x: Xvfb, _ home: DaemonHome, count: Int, text: String) throws -> String {
        try home.writeConfig("--max-entries 5000\n")
        try DaemonProcess(x, home: home, arguments: ["--plain-history"]).stop()
        let database = home.historyDirectory.appendingPathComponent("history.sqlite").path
        try fillHistory(database, count: count, text: text, on: x)
        return database
    }

    private func search(_ text: String, _ x: Xvfb, _ home: DaemonHome) throws -> [String] {
        let outcome = try xpb(["history", "search", text, "--json"], x, home)
        guard let list = try JSONSerialization.jsonObject(with: outcome.output) as? [[String: Any]] else { return [] }
        return list.compactMap { $0["preview"] as? String }
    }

    /// A private session bus with gnome-keyring-daemon's Secret Service on it, its login keyring
    /// made and unlocked with a password, in `home`.
    private final class Keyring {
        let bus: SessionBus
        let daemon: Peer
        let environment: [String: String]

        init(_ x: Xvfb, _ home: DaemonHome) throws {
            // The test's own bus, which starts no service on demand: a keyring that went away
            // stays away.
            bus = try SessionBus(on: x)
            environment = bus.environment
            let keyringHome = home.root.appendingPathComponent("keyring-home").path
            try FileManager.default.createDirectory(atPath: keyringHome, withIntermediateDirectories: true)
            daemon = try Peer("gnome-keyring-daemon", ["--unlock", "--components=secrets", "--foreground"], display: x,
                              input: Data("a test password".utf8),
                              environment: environment.merging(["HOME": keyringHome, "XDG_DATA_HOME": keyringHome + "/data",
                                                                "XDG_RUNTIME_DIR": home.runtimeDirectory.path]) { $1 })
            let owned = eventually(timeout: 20) { (try? self.call(x, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", ["org.freedesktop.secrets"]))?.contains("true") == true }
            guard owned else { throw TestFailure("gnome-keyring-daemon did not take org.freedesktop.secrets: \(daemon.errorSoFar)") }
        }

        /// A method call on the bus through gdbus; its output.
        func call(_ x: Xvfb, _ destination: String, _ path: String, _ method: String, _ arguments: [String]) throws -> String {
            let outcome = try run("gdbus", ["call", "--session", "--dest", destination, "--object-path", path, "--method", method] + arguments,
                                  display: x, environment: environment)
            guard outcome.status == 0 else { throw TestFailure("gdbus \(method): \(outcome.error); \(account)") }
            return outcome.text
        }

        /// The paths of the keyring's items that hold xpb's history key.
        func historyItems(_ x: Xvfb) throws -> String {
            try call(x, "org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.SearchItems",
                     ["{'application': 'xpb', 'xpb': 'history key'}"])
        }

        /// The prompts the keyring holds for its clients (gnome-keyring exports each under
        /// /org/freedesktop/secrets/prompt until it completes or its client's connection closes).
        func prompts(_ x: Xvfb) throws -> [String] {
            let outcome = try run("gdbus", ["introspect", "--session", "--dest", "org.freedesktop.secrets",
                                            "--object-path", "/org/freedesktop/secrets/prompt"], display: x, environment: environment)
            guard outcome.status == 0 else { throw TestFailure("gdbus introspect: \(outcome.error); \(account)") }
            return outcome.text.split(separator: "\n").compactMap { line in
                let words = line.split(separator: " ")
                return line.first == " " && words.first == "node" && words.count >= 2 ? String(words[1]) : nil
            }
        }

        func lock(_ x: Xvfb) throws {
            _ = try call(x, "org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
                         ["['/org/freedesktop/secrets/collection/login']"])
        }

        /// Unlocks the login keyring with its password, as a login does (no prompt).
        func unlock(_ x: Xvfb) throws {
            let outcome = try toolkitPeer("keyring_unlock.py", ["a test password"], display: x, environment: environment).finish(timeout: 20)
            guard outcome.status == 0 else { throw TestFailure("keyring_unlock.py: \(outcome.error); \(account)") }
        }

        /// Whether gnome-keyring-daemon still runs, else how it ended, and what it wrote on standard
        /// error (GLib's warnings and criticals go there besides syslog): for a failure's message,
        /// since a keyring that left the bus mid-test was seen once and not explained.
        var account: String {
            let state = daemon.exitStatus.map { "gnome-keyring-daemon ended with status \($0)" } ?? "gnome-keyring-daemon runs"
            let said = daemon.errorSoFar.trimmingCharacters(in: .whitespacesAndNewlines)
            return said.isEmpty ? state : "\(state); its standard error: \(said.suffix(2000))"
        }

        deinit { daemon.stop() }
    }

    @Test("nothing a copy holds is readable in any file under xpbd's state, cache and config directories (text, a 200 KiB page, an image's thumbnail), while history search finds it")
    func canaryNowhere() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        #expect(daemon.log.contains("no keyring (Secret Service) on the session bus: the history is sealed with the key in"), "\(daemon.log)")
        let canary = "canary-\(UUID().uuidString)"
        // The image first: written once the next copy ends its app's ownership.
        #expect(try xpb(["copy", testImage], x, home).status == 0)
        try waitForEntries(1, x, home, daemon: daemon)
        let small = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("the \(canary) text".utf8))
        try waitForEntries(2, x, home, daemon: daemon)
        small.stop()
        let page = Data((String(repeating: "<p>a long page</p>\n", count: 12_000) + "<p>\(canary) page</p>").utf8)
        let large = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "text/html", "-quiet"], display: x, input: page)
        try waitForEntries(3, x, home, daemon: daemon)
        large.stop()
        // The image's thumbnail is made, where no disk keeps it.
        var thumbnail: String?
        _ = try eventually {
            thumbnail = try history(x, home).first { ($0["types"] as? [String])?.first == "image/png" }?["thumbnail"] as? String
            return thumbnail != nil
        }
        let listed = try history(x, home)
        let made = try #require(thumbnail, "\(listed) \(daemon.log)")
        #expect(made.hasPrefix(home.runtimeDirectory.path), "\(made)")
        // Search reads texts (the page is markup alone: found by its selection below).
        #expect(try search(canary, x, home) == ["the \(canary) text"])
        // Selected again from the history, the page comes back whole.
        #expect(try xpb(["history", "select", "0"], x, home).status == 0)
        #expect(try eventually { try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x).output == page })
        let directories = [home.stateDirectory, home.cacheDirectory, home.configDirectory]
        #expect(files(under: directories, holding: canary).isEmpty)
        #expect(files(under: directories, holding: "a long page").isEmpty)
        // The image's own bytes (its compressed pixels, past the header every PNG shares).
        let png = try Data(contentsOf: URL(fileURLWithPath: testImage))
        #expect(png.count > 200)
        #expect(files(under: directories, holding: png.subdata(in: 100 ..< 164)).isEmpty)
        // The key file is the user's alone.
        var info = stat()
        #expect(stat(home.configDirectory.appendingPathComponent("xpb/history.key").path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        try daemon.stop()
        // After the stop (the log written back), still nothing.
        #expect(files(under: directories, holding: canary).isEmpty)
    }

    @Test("an earlier plain history is sealed at the first start: every entry kept, search works, no plain byte left in any file")
    func plainHistoryConverted() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        try plainHistory(x, home, count: 3000, text: "f'plain entry {n} oldcanary'")
        #expect(!files(under: [home.stateDirectory], holding: "oldcanary").isEmpty, "the history is plain before")
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("is sealed now")
        #expect(try history(x, home).count == 1000, "the newest 1,000 of 3,000 listed")
        let status = try xpb(["daemon", "status", "--json"], x, home)
        let entries = ((try JSONSerialization.jsonObject(with: status.output) as? [String: Any])?["status"] as? [String: Any])?["entryCount"] as? Int
        #expect(entries == 3000, "\(status.text)")
        #expect(status.text.contains("the key file"), "\(status.text)")
        #expect(try search("plain entry 2999 oldcanary", x, home).first == "plain entry 2999 oldcanary")
        #expect(files(under: [home.stateDirectory, home.cacheDirectory], holding: "oldcanary").isEmpty)
        let left = try FileManager.default.contentsOfDirectory(atPath: home.historyDirectory.path)
        #expect(!left.contains { $0.contains("plain-old") || $0.contains("sealing") }, "\(left)")
    }

    @Test("the key in a real keyring (gnome-keyring-daemon): no key file; a restart opens the history; locked, the file is left byte for byte and this run keeps copies in memory; gone, a new key never opens or replaces it")
    func keyring() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let keyring = try Keyring(x, home)
        let keyFile = home.configDirectory.appendingPathComponent("xpb/history.key").path
        do {
            let daemon = try DaemonProcess(x, home: home, arguments: ["--no-dbus-klipper"], environment: keyring.environment)
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("kept with the keyring's key".utf8))
            try waitForEntries(1, x, home, daemon: daemon)
            owner.stop()
            #expect(!FileManager.default.fileExists(atPath: keyFile), "\(daemon.log)")
            #expect(try keyring.historyItems(x).contains("/org/freedesktop/secrets/collection/login/"))
            try daemon.stop()
        }
        do {
            let daemon = try DaemonProcess(x, home: home, arguments: ["--no-dbus-klipper"], environment: keyring.environment)
            #expect(try history(x, home).first?["preview"] as? String == "kept with the keyring's key", "\(daemon.log)")
            try daemon.stop()
        }
        let path = home.historyDirectory.appendingPathComponent("history.sqlite").path
        let sealed = try #require(FileManager.default.contents(atPath: path))
        try keyring.lock(x)
        do {
            let daemon = try DaemonProcess(x, home: home, arguments: ["--no-dbus-klipper"], environment: keyring.environment)
            #expect(daemon.log.contains("the keyring holding the history's key is locked"), "\(daemon.log) \(keyring.account)")
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("while locked".utf8))
            try waitForEntries(1, x, home, daemon: daemon)
            owner.stop()
            try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
            #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "while locked")
            try daemon.stop()
        }
        #expect(FileManager.default.contents(atPath: path) == sealed, "the locked keyring's history is untouched")
        #expect(!FileManager.default.fileExists(atPath: keyFile))
        // The keyring goes away: a key file is made, and it does not open (nor replace) the history.
        keyring.daemon.stop()
        do {
            let daemon = try DaemonProcess(x, home: home, arguments: ["--no-dbus-klipper"], environment: keyring.environment)
            #expect(daemon.log.contains("is sealed with a key that"), "\(daemon.log)")
            try daemon.stop()
        }
        #expect(FileManager.default.contents(atPath: path) == sealed)
    }

    @Test("a keyring locked at xpbd's start is waited for: once it unlocks, the copies kept in memory meanwhile are written to the history, later copies go to it too, and a restart lists them all")
    func lockedKeyringWaitedFor() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let keyring = try Keyring(x, home)
        let previews = { try history(x, home).compactMap { $0["preview"] as? String } }
        do {
            let daemon = try DaemonProcess(x, home: home, arguments: ["--no-dbus-klipper"], environment: keyring.environment)
            #expect(try xpb(["copy"], x, home, input: Data("before the lock".utf8)).status == 0)
            try waitForEntries(1, x, home, daemon: daemon)
            try daemon.stop()
        }
        try keyring.lock(x)
        // Nothing on the clipboard as the locked xpbd starts: it would keep "before the lock"
        // again at its start, 150 ms in, once the next copy comes later than that (under load it
        // did), as the first entry in memory, and the next wait for one entry would not wait.
        #expect(try xpb(["clear"], x, home).status == 0)
        do {
            let daemon = try DaemonProcess(x, home: home, arguments: ["--no-dbus-klipper"], environment: keyring.environment)
            defer { _ = try? daemon.stop() }
            #expect(daemon.log.contains("the keyring holding the history's key is locked"), "\(daemon.log) \(keyring.account)")
            // Two copies: the first is in the history kept in memory once the second replaces
            // it; the second is still held where its app could take it back.
            #expect(try xpb(["copy"], x, home, input: Data("while locked 1".utf8)).status == 0)
            try waitForEntries(1, x, home, daemon: daemon)
            #expect(try xpb(["copy"], x, home, input: Data("while locked 2".utf8)).status == 0)
            try waitForEntries(2, x, home, daemon: daemon)
            #expect(try previews() == ["while locked 2", "while locked 1"], "the history on disk is not open yet")
            // The wait asks nothing of the keyring that leaves it a prompt to keep (an Unlock a
            // look would: one more each minute for as long as the keyring stays locked).
            #expect(try keyring.prompts(x).isEmpty, "\(daemon.log)")
            try keyring.unlock(x)
            try daemon.waitForLog("the keyring is unlocked: the history in", timeout: 20)
            #expect(daemon.log.contains("copies kept in memory meanwhile, now written to it: 1"), "\(daemon.log)")
            #expect(try previews() == ["while locked 2", "while locked 1", "before the lock"], "\(daemon.log)")
            #expect(try xpb(["copy"], x, home, input: Data("after the unlock".utf8)).status == 0)
            try waitForEntries(4, x, home, daemon: daemon)
            try daemon.stop()
        }
        let daemon = try DaemonProcess(x, home: home, arguments: ["--no-dbus-klipper"], environment: keyring.environment)
        defer { _ = try? daemon.stop() }
        #expect(try previews() == ["after the unlock", "while locked 2", "while locked 1", "before the lock"], "\(daemon.log)")
    }

    @Test("a key file from a session without a keyring moves into the keyring once one answers; the history opens with it")
    func keyFileMovesIntoKeyring() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let keyFile = home.configDirectory.appendingPathComponent("xpb/history.key").path
        do {
            let daemon = try DaemonProcess(x, home: home)
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("sealed by the key file".utf8))
            try waitForEntries(1, x, home, daemon: daemon)
            owner.stop()
            try daemon.stop()
        }
        #expect(FileManager.default.fileExists(atPath: keyFile))
        let keyring = try Keyring(x, home)
        let daemon = try DaemonProcess(x, home: home, arguments: ["--no-dbus-klipper"], environment: keyring.environment)
        defer { _ = try? daemon.stop() }
        #expect(daemon.log.contains("moved from \(keyFile) into the keyring"), "\(daemon.log)")
        #expect(!FileManager.default.fileExists(atPath: keyFile))
        #expect(try history(x, home).first?["preview"] as? String == "sealed by the key file")
        #expect(try keyring.historyItems(x).contains("/org/freedesktop/secrets/collection/login/"))
    }

    @Test("a full disk while a plain history is sealed (a tmpfs too small for the sealed copy): the history stays plain and whole, nothing half-made is left, and copies are still kept")
    func fullDiskDuringSealing() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let database = try plainHistory(x, home, count: 4000, text: "f'plain entry {n} ' + 'y' * 400")
        var info = stat()
        #expect(stat(database, &info) == 0)
        let size = Int(info.st_size)
        // A tmpfs holding the plain history with room for less than half of a sealed copy; the
        // history is copied in, in the daemon's own mount namespace.
        let saved = home.root.appendingPathComponent("saved").path
        #expect(rename(home.historyDirectory.path, saved) == 0)
        let room = (size + size / 3 + (1 << 20)) / 4096 * 4096
        let mount = "mount -t tmpfs -o size=\(room),mode=0700 xpb-test \"$XDG_STATE_HOME\" && cp -a '\(saved)' \"$XDG_STATE_HOME/xpb\" && exec \"$@\""
        let daemon = try DaemonProcess(x, home: home, launcher: ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh"])
        defer { _ = try? daemon.stop() }
        #expect(daemon.log.contains("could not be sealed"), "\(daemon.log)")
        #expect(daemon.log.contains("it stays plain until the next start, whole"))
        #expect(try history(x, home).count == 1000)
        #expect(try search("plain entry 3999", x, home).count == 1)
        let listed = try run("nsenter", ["-t", "\(daemon.peer.pid)", "-m", "ls", "-a", home.historyDirectory.path], display: x)
        #expect(listed.status == 0 && !listed.text.contains("sealing") && !listed.text.contains("plain-old"), "\(listed.text) \(listed.error)")
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("after the full disk".utf8))
        defer { owner.stop() }
        #expect(try eventually { try history(x, home).first?["preview"] as? String == "after the full disk" }, "\(daemon.log)")
    }
}
