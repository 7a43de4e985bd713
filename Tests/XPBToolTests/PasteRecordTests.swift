import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The pastes noted on the newest entry, as `xpb history --json` lists them.
private func pastes(_ x: any TestSession, _ home: DaemonHome) throws -> [[String: Any]] {
    try history(x, home).first?["pastes"] as? [[String: Any]] ?? []
}

@Suite("who pasted", .serialized)
struct PasteRecordTests {
    @Test("each paste of a copy xpbd serves is noted on its entry: xclip, xsel and xpb by name and pid, newest first, 16 at most, kept across a restart; none while the app serves its own copy")
    func whoPasted() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        var daemon = try DaemonProcess(x, home: home)
        let text = "who reads me"
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data(text.utf8))
        try waitForEntries(1, x, home, daemon: daemon)
        // The app serves its own copy: its pastes are its own, and nothing is noted.
        #expect(try xclipOut(x).text == text)
        owner.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        #expect(try pastes(x, home).isEmpty)

        // Each reader in turn (TARGETS first, as a toolkit asks, then the text): one paste each.
        #expect(try xclipOut(x, ["-t", "TARGETS"]).status == 0)
        #expect(try xclipOut(x).text == text)
        #expect(try run("xsel", ["-b", "-o"], display: x).text == text)
        #expect(try xpb(["paste"], x, home).text == text)
        let readers = ["xpb", "xsel", "xclip"]
        let noted = try eventually(timeout: 10) { try pastes(x, home).count >= 3 }
        let three = try pastes(x, home)
        #expect(noted, "\(three)\n\(daemon.log)")
        #expect(three.compactMap { $0["app"] as? String } == readers, "\(three)")
        #expect(three.allSatisfy { ($0["pid"] as? Int ?? 0) > 0 && $0["unknown"] == nil }, "\(three)")
        let times = three.compactMap { ($0["time"] as? String).flatMap(ISO8601DateFormatter().date) }
        #expect(times.count == 3 && times == times.sorted(by: >), "\(three)")
        // xpb info names the last reader of the copy xpbd serves.
        let pid = try #require(three.first?["pid"] as? Int)
        #expect(try xpb(["info"], x, home).text.contains("last pasted by: xpb (pid \(pid)) at "))
        let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x, home).output) as? [String: Any]
        #expect((info?["lastPaste"] as? [String: Any])?["app"] as? String == "xpb", "\(String(describing: info))")

        // xpb watch --pastes prints each paste as xpbd notes it.
        let watch = try Peer(try xpbPath(), ["watch", "--pastes", "--count", "2"], display: x, environment: home.environment)
        try daemon.waitForLog("a client follows the pastes of CLIPBOARD")
        #expect(try run("xsel", ["-b", "-o"], display: x).text == text)
        #expect(try xclipOut(x).text == text)
        let watched = try watch.finish(timeout: 10)
        let lines = watched.text.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        #expect(watched.status == 0 && lines.map { $0.count > 2 ? $0[1] + " " + $0[2] : "" } == ["CLIPBOARD xsel", "CLIPBOARD xclip"],
                "\(watched.text)\(watched.error)")
        #expect(try eventually(timeout: 10) { try pastes(x, home).count >= 5 })

        // Kept across a restart (written with the entry), and more readers than an entry keeps:
        // the newest 16.
        try daemon.stop()
        daemon = try DaemonProcess(x, home: home)
        #expect(try pastes(x, home).compactMap { $0["app"] as? String } == ["xclip", "xsel"] + readers)
        try daemon.waitForLog("restored CLIPBOARD from the history")
        for _ in 0..<24 { #expect(try xclipOut(x).text == text) }
        let full = try eventually(timeout: 15) {
            try pastes(x, home).count == 16 && pastes(x, home).first?["app"] as? String == "xclip"
        }
        let sixteen = try pastes(x, home)
        #expect(full, "\(sixteen)\n\(daemon.log)")
        // Still one entry: a paste is no copy.
        #expect(try history(x, home).count == 1)
        try daemon.stop()
    }

    @Test("an xpb owner's pastes are noted on the entry of its copy xpbd keeps: by xclip, xsel and xpb paste (over the fast path), and by xclip of 3 MB (INCR), not xpbd's own capture; xpb info names no last paste of xpbd's while the owner serves")
    func xpbOwnerPastes() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        #expect(try xpb(["copy"], x, home, input: Data("from xpb".utf8)).status == 0)
        try waitForEntries(1, x, home, daemon: daemon)
        // xpbd's keeping the copy is no paste.
        #expect(try pastes(x, home).isEmpty)
        #expect(try xclipOut(x).text == "from xpb")
        #expect(try run("xsel", ["-b", "-o"], display: x).text == "from xpb")
        // xpb paste reads an xpb owner over the same-host fast path, not through the X server.
        #expect(try xpb(["paste"], x, home).text == "from xpb")
        let noted = try eventually(timeout: 10) { try pastes(x, home).count >= 3 }
        let three = try pastes(x, home)
        #expect(noted, "\(three)\n\(daemon.log)")
        #expect(three.compactMap { $0["app"] as? String } == ["xpb", "xsel", "xclip"], "\(three)")
        #expect(three.allSatisfy { ($0["pid"] as? Int ?? 0) > 0 }, "\(three)")
        // The owner still serves: xpbd serves nothing itself, so xpb info names no last paste.
        #expect(try !xpb(["info"], x, home).text.contains("last pasted"))

        // Past one property's size: the reader takes it by INCR, and the paste is noted at its start.
        let big = payload(3_000_000, seed: 5)
        #expect(try xpb(["copy", "-t", "application/octet-stream"], x, home, input: big).status == 0)
        try waitForEntries(2, x, home, daemon: daemon)
        #expect(try xclipOut(x, ["-t", "application/octet-stream"]).output == big)
        let incr = try eventually(timeout: 10) { try pastes(x, home).first?["app"] as? String == "xclip" }
        let bigPastes = try pastes(x, home)
        #expect(incr && bigPastes.count == 1, "\(bigPastes)\n\(daemon.log)")
    }

    @Test("a flood of reads of a copy xpbd serves: 2,000 reads by one client are one paste, the entry keeps 16 at most, and a reader after the flood is noted")
    func flood() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("flooded".utf8))
        try waitForEntries(1, x, home, daemon: daemon)
        owner.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        let flood = try Peer(try attacker(), ["string", "2000", "UTF8_STRING"], display: x)
        try flood.waitForOutput("sent", timeout: 60)
        // A reader after the flood is noted once a look-up is allowed again (4 a second).
        let noted = try eventually(timeout: 10) {
            _ = try xclipOut(x)
            return try pastes(x, home).first?["app"] as? String == "xclip"
        }
        let after = try pastes(x, home)
        #expect(noted, "\(after)\n\(daemon.log)")
        let floods = after.filter { ($0["app"] as? String)?.hasPrefix("xhostile") == true }
        // One paste per two seconds of the flood at most (its reads follow each other closely);
        // none when the flood rules dropped all its reads (a loaded machine reads its requests
        // faster than it answers them, and a flooder's whole queue is dropped).
        #expect(floods.count <= 3, "\(after)")
        #expect(after.count <= 16)
        #expect(try history(x, home).count == 1)
    }

    @Test("on Wayland, each paste of a copy xpbd serves is noted, its reader found through the pipe it reads: xpb and wl-paste (or the cat it runs) by name and pid")
    func waylandPastes() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(sway, home: home)
        defer { _ = try? daemon.stop() }
        let text = "from wayland"
        let source = try Peer("wl-copy", ["--foreground", "-t", "text/plain"], display: sway, input: Data(text.utf8))
        try daemon.waitForLog("kept CLIPBOARD")
        // The source serves its own copy: nothing is noted.
        #expect(try run("wl-paste", ["-n"], display: sway).text == text)
        source.signal(SIGKILL)
        try daemon.waitForLog("serving its")
        #expect(try pastes(sway, home).isEmpty)
        #expect(try run("wl-paste", ["-n"], display: sway).text == text)
        #expect(try xpb(["paste"], sway, home).text == text)
        let noted = try eventually(timeout: 10) { try pastes(sway, home).count >= 2 }
        let two = try pastes(sway, home)
        #expect(noted, "\(two)\n\(daemon.log)")
        // A process that holds the pipe's read end: wl-paste, or the cat it hands it to (once
        // wl-paste closed its own, cat alone holds it).
        let apps = two.compactMap { $0["app"] as? String }
        #expect(apps.count == 2 && apps[0] == "xpb" && ["wl-paste", "cat"].contains(apps[1]), "\(two)")
        #expect(two.allSatisfy { ($0["pid"] as? Int ?? 0) > 0 }, "\(two)")
    }

    @Test("on Wayland, an xpb owner's pastes are noted on the entry of its copy xpbd keeps (its copy named by its bytes, data-control naming no owner): by wl-paste and xpb paste, not xpbd's capture; a copy since, of other bytes, is not noted on")
    func waylandOwnerPastes() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(sway, home: home)
        defer { _ = try? daemon.stop() }
        #expect(try xpb(["copy"], sway, home, input: Data("from an xpb owner".utf8)).status == 0)
        try daemon.waitForLog("kept CLIPBOARD")
        try waitForEntries(1, sway, home, daemon: daemon)
        #expect(try pastes(sway, home).isEmpty, "xpbd's keeping the copy is no paste")
        #expect(try run("wl-paste", ["-n"], display: sway).text == "from an xpb owner")
        #expect(try xpb(["paste"], sway, home).text == "from an xpb owner")
        let noted = try eventually(timeout: 10) { try pastes(sway, home).count >= 2 }
        let two = try pastes(sway, home)
        #expect(noted, "\(two)\n\(daemon.log)")
        let apps = two.compactMap { $0["app"] as? String }
        #expect(apps.count == 2 && apps[0] == "xpb" && ["wl-paste", "cat"].contains(apps[1]), "\(two)")
        #expect(two.allSatisfy { ($0["pid"] as? Int ?? 0) > 0 }, "\(two)")

        // Another copy, by wl-copy: its pastes are not the xpb owner's, and the first entry keeps its two.
        let other = try Peer("wl-copy", ["--foreground", "-t", "text/plain"], display: sway, input: Data("from wl-copy".utf8))
        defer { other.stop() }
        try waitForEntries(2, sway, home, daemon: daemon)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "from wl-copy")
        let entries = try history(sway, home)
        let newest = entries.first?["pastes"] as? [[String: Any]]
        let older = entries.dropFirst().first?["pastes"] as? [[String: Any]]
        #expect(newest == nil || newest?.isEmpty == true, "the source serves its own copy: \(entries.first ?? [:])")
        #expect(older?.count == 2, "\(entries.dropFirst().first ?? [:])")
    }
}
