import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Secrets that never linger (issue 46): a password manager that marks nothing clears the
/// clipboard itself after a while; the copy it takes back is forgotten, with no byte left in the
/// state or cache directories.
@Suite("secrets that never linger")
struct SecretTests {
    /// The files under the daemon's state and cache directories that hold `needle`.
    private func filesHolding(_ needle: Data, in home: DaemonHome) -> [String] {
        var found: [String] = []
        for root in [home.stateDirectory, home.cacheDirectory] {
            guard let walker = FileManager.default.enumerator(atPath: root.path) else { continue }
            while let relative = walker.nextObject() as? String {
                let path = root.appendingPathComponent(relative).path
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                      let bytes = FileManager.default.contents(atPath: path) else { continue }
                if bytes.range(of: needle) != nil { found.append(relative) }
            }
        }
        return found
    }

    /// `grep -r` over the state and cache directories, as a user checks it: true when it finds `text`.
    private func grepFinds(_ text: String, in home: DaemonHome, _ x: Xvfb) throws -> Bool {
        let directories = [home.stateDirectory.path] + (FileManager.default.fileExists(atPath: home.cacheDirectory.path) ? [home.cacheDirectory.path] : [])
        let outcome = try run("/bin/grep", ["-r", "-a", "-l", "-F", "--", text] + directories, display: x)
        #expect(outcome.status == 0 || outcome.status == 1, "grep: \(outcome.error)")
        return outcome.status == 0
    }

    @Test("a copy that its app (an xclip named buttercup, a password manager xpbd does not know) replaces with an empty copy within the window is listed meanwhile and never touches a file: a password, a 40 KiB key, an image")
    func emptyCopyTakesBack() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        // Plain at rest: what reaches a file is then seen in it (sealed, nothing would be).
        let daemon = try DaemonProcess(x, home: home, arguments: ["--plain-history"])
        defer { _ = try? daemon.stop() }
        let manager = try renamedXclip("buttercup", in: home.root.appendingPathComponent("bin"))

        #expect(try xclipCopy("an ordinary note", display: x).status == 0)
        try daemon.waitForLog("kept CLIPBOARD")
        var kept = 1
        var forgotten = 0
        func copySecret(_ data: Data, type: String?) throws {
            let typeArguments = type.map { " -t \($0)" } ?? ""
            #expect(try run("/bin/sh", ["-c", "\"$0\" -selection clipboard\(typeArguments) >/dev/null 2>&1", manager], display: x, input: data).status == 0)
            kept += 1
            try daemon.waitForLog("kept CLIPBOARD", count: kept)
            // Written on the history's own queue, after the log line.
            try waitForEntries(2, x, home)
            #expect(daemon.log.components(separatedBy: "kept CLIPBOARD from").last?.contains("buttercup") == true)
        }
        func takeBack() throws {
            // Bitwarden's and Buttercup's clear: an empty copy of their own.
            #expect(try run("/bin/sh", ["-c", "printf '' | \"$0\" -selection clipboard >/dev/null 2>&1", manager], display: x).status == 0)
            forgotten += 1
            try daemon.waitForLog("the copy was a secret, forgotten", count: forgotten)
            try daemon.waitForLog("holds an empty copy", count: forgotten)
            #expect(!daemon.log.contains("stay in the history's log"), "\(daemon.log)")
        }

        let password = "Tr0ub4dor&3-correct-horse-\(UUID().uuidString)"
        try copySecret(Data(password.utf8), type: nil)
        // Listed and served from memory while its app may take it back; in no file.
        #expect(try history(x, home).contains { ($0["preview"] as? String) == password })
        #expect(try !grepFinds(password, in: home, x), "\(filesHolding(Data(password.utf8), in: home))")
        try takeBack()
        #expect(try !history(x, home).contains { ($0["preview"] as? String) == password })
        #expect(try !grepFinds(password, in: home, x), "\(filesHolding(Data(password.utf8), in: home))")

        var key = "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        while key.utf8.count < 40 << 10 { key += UUID().uuidString + "\n" }
        try copySecret(Data(key.utf8), type: nil)
        let keyLine = String(key.split(separator: "\n")[200])
        #expect(try !grepFinds(keyLine, in: home, x), "\(filesHolding(Data(keyLine.utf8), in: home))")
        try takeBack()
        #expect(try !grepFinds(keyLine, in: home, x), "\(filesHolding(Data(keyLine.utf8), in: home))")

        let image = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers/image.png"))
        try copySecret(image, type: "image/png")
        // A picker lists it by its size; no thumbnail is made of it (a file) while it is held.
        let listed = try xpb(["history", "--json"], x, home)
        #expect(listed.status == 0 && listed.text.contains("\"pixelWidth\"") && !listed.text.contains("\"thumbnail\""), "\(listed.text)")
        let thumbnails = home.cacheDirectory.appendingPathComponent("xpb/thumbnails").path
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: thumbnails)) ?? []).isEmpty)
        let middle = image.subdata(in: image.count / 2 ..< image.count / 2 + 64)
        #expect(filesHolding(middle, in: home).isEmpty, "\(filesHolding(middle, in: home))")
        try takeBack()
        #expect(filesHolding(middle, in: home).isEmpty, "\(filesHolding(middle, in: home))")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: thumbnails)) ?? []).isEmpty)

        let entries = try history(x, home)
        #expect(entries.contains { ($0["preview"] as? String) == "an ordinary note" }, "\(entries)")
        #expect(!entries.contains { ($0["app"] as? String) == "buttercup" && (($0["size"] as? Int) ?? 0) > 0 }, "\(entries)")
    }

    @Test("an ordinary copy reaches the disk only once its app can no longer take it back: after the window, at once when its owner exits")
    func writtenAfterWindow() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--forget-cleared-within", "2", "--plain-history"])
        defer { _ = try? daemon.stop() }
        let note = "a note \(UUID().uuidString)"
        let owner = try Peer("xclip", ["-selection", "clipboard", "-quiet"], display: x, input: Data(note.utf8))
        defer { owner.stop() }
        try waitForEntries(1, x, home, daemon: daemon)
        #expect(try !grepFinds(note, in: home, x), "within the window: \(filesHolding(Data(note.utf8), in: home))")
        let read = try run("xclip", ["-o", "-selection", "clipboard"], display: x)
        #expect(read.text == note, "xclip -o: status \(read.status), \(read.output.count) B, error \(read.error); the owner \(owner.isRunning ? "runs" : "exited"): \(owner.errorSoFar)\nxpbd's log:\n\(daemon.log)")
        try daemon.waitForLog("its app did not take it back within 2 s")
        #expect(try grepFinds(note, in: home, x))
        #expect(try history(x, home).filter { ($0["preview"] as? String) == note }.count == 1, "one entry, held then written")

        try daemon.stop()
        owner.stop()

        // The default window (120 s): the owner's exit ends it.
        let later = try DaemonProcess(x, home: home, arguments: ["--plain-history"])
        defer { _ = try? later.stop() }
        let other = "another \(UUID().uuidString)"
        let second = try Peer("xclip", ["-selection", "clipboard", "-quiet"], display: x, input: Data(other.utf8))
        try later.waitForLog("kept CLIPBOARD")
        try waitForEntries(2, x, home, daemon: later)
        #expect(try !grepFinds(other, in: home, x))
        second.stop()
        try later.waitForLog("its owner went away")
        #expect(try grepFinds(other, in: home, x))
        #expect(try history(x, home).map { $0["preview"] as? String } == [other, note])
    }

    @Test("a GTK password manager that clears the clipboard 2 s after its copy: the copy is forgotten; an owner that exits, or an empty copy by another app, forgets nothing")
    func clearTakesBack() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--plain-history"])
        defer { _ = try? daemon.stop() }
        let secret = "gtk-generated-\(UUID().uuidString)"
        let manager = try toolkitPeer("gtk_clipboard.py", ["set-text-and-clear", secret, "2000"], display: x)
        defer { manager.stop() }
        try manager.waitForOutput("ready")
        try daemon.waitForLog("kept CLIPBOARD")
        try waitForEntries(1, x, home)
        #expect(try !grepFinds(secret, in: home, x), "held in memory: \(filesHolding(Data(secret.utf8), in: home))")
        try manager.waitForOutput("cleared")
        try daemon.waitForLog("the copy was a secret, forgotten")
        #expect(try !grepFinds(secret, in: home, x), "\(filesHolding(Data(secret.utf8), in: home))")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).status != 0, "a cleared secret is not brought back")

        // Not secrets: a clear after the owner exited (xsel's empty input clears), and an empty
        // copy by another app.
        let note = "a note \(UUID().uuidString)"
        let owner = try Peer("xclip", ["-selection", "clipboard", "-quiet"], display: x, input: Data(note.utf8))
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == note)
        owner.stop()
        try daemon.waitForLog("serving its")
        #expect(try run("/bin/sh", ["-c", "printf '' | xsel -b -i"], display: x).status == 0)
        try daemon.waitForLog("CLIPBOARD was cleared by its owner", count: 2)
        let other = "another note \(UUID().uuidString)"
        let gtk = try toolkitPeer("gtk_clipboard.py", ["set-text", other], display: x)
        defer { gtk.stop() }
        try gtk.waitForOutput("ready")
        try daemon.waitForLog("kept CLIPBOARD", count: 3)
        #expect(try run("/bin/sh", ["-c", "printf '' | xclip -selection clipboard"], display: x).status == 0)
        try daemon.waitForLog("holds an empty copy")
        let entries = try history(x, home)
        #expect(entries.contains { ($0["preview"] as? String) == note } && entries.contains { ($0["preview"] as? String) == other }, "\(entries)")
        // The note was written when its owner went away; the GTK copy, which its app could
        // still take back, when xpbd stops.
        #expect(try grepFinds(note, in: home, x) && !grepFinds(other, in: home, x))
        #expect(daemon.log.components(separatedBy: "was a secret").count == 2, "only the GTK copy was forgotten: \(daemon.log)")
        try daemon.stop()
        #expect(try grepFinds(other, in: home, x))
        #expect(daemon.log.contains("written to the history (entry") && daemon.log.contains("xpbd stops"), "\(daemon.log)")
    }
}
