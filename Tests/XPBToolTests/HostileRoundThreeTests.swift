import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The third attack round (issue 41), end to end: the built xpb and xpbd against hostile owners
/// and inputs on a private Xvfb.
@Suite("hostile input, round three")
struct HostileRoundThreeTests {
    @Test("attribution never guesses: a keepassxc that forks 100 ms after taking the clipboard is named by its child, not by a client started beside it; its copy is secret, never kept")
    func forkingPasswordManager() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let bin = home.root.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let keepass = bin.appendingPathComponent("keepassxc").path
        try copyExecutable(try attacker(), to: keepass)
        for round in 1...3 {
            // Started by a shell, which reaps the parent at once (a zombie still shows its name).
            let said = home.root.appendingPathComponent("forked-\(round)").path
            let owner = try Peer("/bin/sh", ["-c", "\"$0\" owner-fork-later 100 > \"$1\"", keepass, said], display: x)
            defer { owner.stop() }
            // Another client of the display, started beside it: the old look for a successor took
            // the first process after the owner's pid that had a connection to the display.
            let decoy = try Peer("/usr/bin/xprop", ["-root", "-spy", "WM_NAME"], display: x)
            defer { decoy.stop() }
            var child: Int?
            #expect(eventually(timeout: 10) {
                child = (try? String(contentsOfFile: said, encoding: .utf8))?.components(separatedBy: "forked ").dropFirst().first
                    .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                return child != nil
            })
            let childPID = try #require(child)
            try daemon.waitForLog("holds data marked secret", count: round)
            let info = try #require(try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x, home).output) as? [String: Any])
            #expect(info["ownerPID"] as? Int == childPID, "round \(round): \(info), decoy \(decoy.pid)")
            #expect(info["ownerApp"] as? String == "keepassxc", "round \(round): \(info)")
            kill(pid_t(childPID), SIGKILL)
            #expect(eventually(timeout: 10) { !isAlive(childPID) })
            try daemon.waitForLog("the owner of CLIPBOARD went away; nothing of it was kept", count: round)
        }
        #expect(try history(x, home).isEmpty, "\(daemon.log)")
        try daemon.stop()
    }

    @Test("what an owner names (its window's name, its executable's name) reaches xpbd's log and --on-copy's XPB_OWNER_APP escaped: no forged line, no raw ESC or BEL")
    func ownerNamesAreEscaped() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let bin = home.root.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let evil = bin.appendingPathComponent("xh\u{1B}]0;pwned\u{07}").path
        try copyExecutable(try attacker(), to: evil)
        let seen = home.root.appendingPathComponent("app").path
        let daemon = try DaemonProcess(x, home: home, arguments: ["--log-level", "debug", "--on-copy", "printf %s \"$XPB_OWNER_APP\" > '\(seen)'"])
        let owner = try Peer(evil, ["owner-evil-lines"], display: x)
        defer { owner.stop() }
        try daemon.waitForLog("kept CLIPBOARD")
        // The shell's `>` makes the file before printf writes to it: wait for what it writes.
        #expect(eventually(timeout: 10) { !((try? String(contentsOfFile: seen, encoding: .utf8)) ?? "").isEmpty })
        let app = try String(contentsOfFile: seen, encoding: .utf8)
        #expect(app == "xh\\x1B]0;pwned\\x07", "XPB_OWNER_APP: \(app.debugDescription)")
        let log = daemon.log
        #expect(!log.contains("\u{1B}") && !log.contains("\u{07}"), "raw controls in the log: \(log.debugDescription)")
        #expect(!log.split(separator: "\n").contains { $0.hasPrefix("FORGED") }, "a forged line: \(log)")
        #expect(log.contains("'evil\\x0AFORGED: a second log line\\x1B[2J\\x07'"), "\(log)")
        try daemon.stop()
    }

    /// The processes of group `group` that run (not zombies).
    private func groupMembers(_ group: Int) -> [Int] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry -> Int? in
            guard let pid = Int(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 2 && fields[0] != "Z" && Int(fields[2]) == group ? pid : nil
        }
    }

    @Test("--on-copy: what an action puts in the background is the action too: it counts against the four at once, and the timeout kills all of it")
    func onCopyBackgroundedChildren() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let directory = home.root.path
        let action = "for i in 1 2 3 4 5; do sleep 60 & done; echo $$ > '\(directory)/group.'$(cat)"
        // The timeout runs from each action's start: it must outlast the four copies' setup (3 s
        // did not under a full parallel run, and the first action's end freed a slot before the
        // fifth copy).
        let daemon = try DaemonProcess(x, home: home, arguments: ["--on-copy", action, "--on-copy-timeout", "10"])
        var groups: [Int] = []
        for copy in 1...4 {
            #expect(try xpb(["copy"], x, home, input: Data("copy\(copy)".utf8)).status == 0)
            try daemon.waitForLog("kept CLIPBOARD", count: copy)
            // The shell's `>` makes the file before `echo` writes the number: wait for the number.
            let written = { () -> Int? in
                (try? String(contentsOfFile: "\(directory)/group.copy\(copy)", encoding: .utf8)).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
            #expect(eventually(timeout: 10) { written() != nil })
            let group = try #require(written())
            groups.append(group)
            // The group file is the shell's last word: it may not have exited yet when it is read.
            #expect(eventually(timeout: 10) { groupMembers(group).count == 5 }, "copy \(copy): the shell is gone, its five sleeps run: \(groupMembers(group))")
        }
        // The four actions still run (their shells are gone): a fifth copy gets none.
        #expect(try xpb(["copy"], x, home, input: Data("copy5".utf8)).status == 0)
        try daemon.waitForLog("kept CLIPBOARD", count: 5)
        try daemon.waitForLog("on-copy: 4 actions still run; none for this copy")
        // Past the timeout, every sleep of every action is killed.
        try daemon.waitForLog("ran 10.0 s and was killed", count: 4, timeout: 20)
        #expect(eventually(timeout: 10) { groups.allSatisfy { groupMembers($0).isEmpty } }, "\(groups.map { groupMembers($0) })")
        // The slots are free again.
        #expect(try xpb(["copy"], x, home, input: Data("copy6".utf8)).status == 0)
        #expect(eventually(timeout: 10) { FileManager.default.fileExists(atPath: "\(directory)/group.copy6") })
        try daemon.stop()
    }

    /// A 24-bit BMP of `width` × `height`, bottom-up, of noise.
    private func noiseBMP(width: Int, height: Int) -> Data {
        let row = (width * 3 + 3) / 4 * 4
        var data = Data()
        func le(_ value: Int, _ bytes: Int) { for index in 0..<bytes { data.append(UInt8(truncatingIfNeeded: value >> (8 * index))) } }
        data += [0x42, 0x4D]; le(54 + row * height, 4); le(0, 4); le(54, 4)
        le(40, 4); le(width, 4); le(height, 4); le(1, 2); le(24, 2); le(0, 4); le(row * height, 4); le(2835, 4); le(2835, 4); le(0, 4); le(0, 4)
        var random = SeededRandom(seed: 41)
        data += (0..<(row * height)).map { _ in UInt8.random(in: 0...255, using: &random) }
        return data
    }

    @Test("a kept image asked for under eight names of one format is converted and held once, not once per name")
    func conversionsByFormat() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        // The kept image is a PNG (made by xpb from a BMP of noise): each BMP asked for is a decode
        // and an encode of 9 MB.
        let bmp = noiseBMP(width: 2000, height: 1500)
        let bmpFile = home.root.appendingPathComponent("noise.bmp")
        try bmp.write(to: bmpFile)
        #expect(try xpb(["copy", "--pasteboard", "convert", bmpFile.path], x, home).status == 0)
        let png = try xpb(["paste", "--pasteboard", "convert", "-t", "png"], x, home)
        #expect(png.status == 0 && png.output.starts(with: [0x89, 0x50, 0x4E, 0x47]), "\(png.error)")
        let file = home.root.appendingPathComponent("noise.png")
        try png.output.write(to: file)
        let spellings = ["image/bmp", "IMAGE/BMP", "Image/Bmp", "image/BMP", "IMAGE/bmp", "image/x-bmp", "image/x-MS-bmp", "IMAGE/X-BMP"]
        let owner = try Peer(try attacker(), ["owner-spellings", file.path, "image/png"] + spellings, display: x)
        try daemon.waitForLog("kept CLIPBOARD")
        owner.stop()
        try daemon.waitForLog("went away; serving its")
        // The copy is written to the history once its owner is gone (its sealed payload's
        // buffers): measured from after that, or a loaded run counts the write as conversions'.
        try daemon.waitForLog("written to the history")
        let before = try #require(residentMemory(daemon.peer.pid))
        var sizes: [Int] = []
        for name in spellings {
            let read = try run("/usr/bin/xclip", ["-o", "-selection", "clipboard", "-t", name], display: x, timeout: 60)
            #expect(read.status == 0, "\(name): \(read.error)")
            sizes.append(read.output.count)
        }
        // Every spelling the same BMP, made from the kept PNG.
        #expect(Set(sizes).count == 1 && sizes[0] >= bmp.count, "\(sizes)")
        let after = try #require(residentMemory(daemon.peer.pid))
        // Held once: one converted BMP (9 MB), one decode's pixels (12 MB) and the allocator's
        // slack, about 34 MB; one conversion held per name grew it by 113 MB.
        #expect(after - before < 6 * bmp.count, "xpbd grew by \((after - before) >> 20) MiB serving \(spellings.count) spellings of a \(bmp.count >> 20) MiB BMP")
        try daemon.stop()
    }

    @Test("an image that gives no thumbnail (a JPEG of 151 scans) is refused before decoding, remembered as failed and not decoded again; the listing works")
    func failedThumbnailsAreRemembered() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        #expect(try xpb(["copy", "--pasteboard", "convert", testImage], x, home).status == 0)
        let jpeg = try xpb(["paste", "--pasteboard", "convert", "-t", "jpeg"], x, home).output
        // The one scan of the JPEG, 151 times: a progressive-looking file whose header is valid.
        let bytes = [UInt8](jpeg)
        let start = try #require((0..<bytes.count - 1).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA })
        let end = try #require((0..<bytes.count - 1).last { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xD9 })
        let scan = bytes[start..<end]
        var crafted = Array(bytes[..<start])
        for _ in 0..<151 { crafted += scan }
        crafted += [0xFF, 0xD9]
        let file = home.root.appendingPathComponent("scans.jpg")
        try Data(crafted).write(to: file)
        // Offered by xclip as image/jpeg alone, so the manager keeps it as it came.
        let owner = try Peer("xclip", ["-selection", "clipboard", "-t", "image/jpeg", "-i", file.path, "-quiet"], display: x)
        try daemon.waitForLog("kept CLIPBOARD")
        // Written to the history (thumbnails are made of entries there) once its owner is gone.
        owner.stop()
        try daemon.waitForLog("its owner went away")
        let thumbnails = home.runtimeDirectory.appendingPathComponent("xpb/thumbnails")
        for round in 1...2 {
            let listed = try history(x, home)
            let entry = try #require(listed.first)
            #expect(entry["pixelWidth"] as? Int == 64 && entry["thumbnail"] == nil, "round \(round): \(entry)")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: thumbnails.path)) ?? []
            #expect(names.count == 1 && names[0].hasSuffix(".failed"), "round \(round): \(names)")
        }
        // Forgotten with its entry.
        #expect(try xpb(["history", "clear"], x, home).status == 0)
        _ = try history(x, home)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: thumbnails.path)) ?? []).isEmpty)
        try daemon.stop()
    }

    @Test("a history of 100,000 entries: xpb history shows the newest 1000 and says so, --count and --all page through every one, search pages too")
    func historyAtScale() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        // The database made by xpbd, then filled as 100,000 copies would fill it (one transaction).
        try DaemonProcess(x, home: home, arguments: ["--max-entries", "200000", "--plain-history"]).stop()
        let database = home.historyDirectory.appendingPathComponent("history.sqlite").path
        try fillHistory(database, count: 100_000, text: "\"entry %d%s\" % (n, \" needle\" if n % 1000 == 7 else \"\")", on: x)
        let daemon = try DaemonProcess(x, home: home, arguments: ["--max-entries", "200000"])
        let newest = try xpb(["history"], x, home)
        #expect(newest.status == 0, "\(newest.error)")
        let lines = newest.text.split(separator: "\n")
        #expect(lines.count == 1000 && lines.first?.hasSuffix("entry 99999") == true, "\(lines.count) \(lines.first ?? "")")
        #expect(newest.error.contains("the newest 1000 of 100000 entries"), "\(newest.error)")
        let some = try xpb(["history", "--count", "2500", "--json"], x, home)
        let someEntries = try JSONSerialization.jsonObject(with: some.output) as? [[String: Any]] ?? []
        #expect(someEntries.count == 2500 && someEntries.last?["index"] as? Int == 2499, "\(someEntries.count)")
        let all = try xpb(["history", "--all", "--json"], x, home, timeout: 300)
        #expect(all.status == 0, "\(all.error)")
        let entries = try JSONSerialization.jsonObject(with: all.output) as? [[String: Any]] ?? []
        #expect(entries.count == 100_000, "\(entries.count)")
        #expect(entries.map { $0["index"] as? Int ?? -1 } == Array(0..<100_000), "indexes in order, each once")
        #expect(entries.last?["preview"] as? String == "entry 0")
        // A search pages too; each match keeps its index in the whole history.
        let found = try xpb(["history", "search", "needle", "--all", "--json"], x, home, timeout: 300)
        let matches = try JSONSerialization.jsonObject(with: found.output) as? [[String: Any]] ?? []
        #expect(matches.count == 100 && matches.first?["index"] as? Int == 99_999 - 99_007, "\(matches.count) \(matches.first ?? [:])")
        #expect(try xpb(["history", "select", "\(matches[0]["index"] as? Int ?? 0)"], x, home).status == 0)
        #expect(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text == "entry 99007 needle")
        try daemon.stop()
    }

    @Test("--clipboard-to-primary beside an autocutsel-like syncer (PRIMARY to CLIPBOARD): no ping-pong, said once; the user's copies stay whole, never replaced by nothing")
    func syncerLoop() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--clipboard-to-primary"])
        let syncer = try Peer(try attacker(), ["syncer"], display: x)
        defer { syncer.stop() }
        // It takes the owner it finds at its start for one it has synced: a copy carried to
        // PRIMARY before then would never be synced (seen once on a loaded machine).
        try syncer.waitForOutput("ready")
        func read(_ selection: String) throws -> String { try run("/usr/bin/xclip", ["-o", "-selection", selection], display: x).text }
        func synced() -> [Substring] { syncer.outputSoFar.split(separator: "\n").filter { $0.hasPrefix("synced ") } }

        #expect(try xclipCopy("first copy", display: x).status == 0)
        try daemon.waitForLog("CLIPBOARD also serves PRIMARY")
        try syncer.waitForOutput("synced 1 ")
        try daemon.waitForLog("not carried back")
        // Each selection serves the copy, read through the other's owner; reading them is what the
        // syncer reacted to before, and nothing moves now.
        for _ in 0..<3 {
            #expect(try read("clipboard") == "first copy")
            #expect(try read("primary") == "first copy")
        }
        #expect(synced() == ["synced 1 10"], "the syncer copied again: \(synced())")
        #expect(daemon.log.components(separatedBy: "CLIPBOARD also serves PRIMARY").count - 1 == 1, "\(daemon.log)")

        // The next copy is carried; the syncer's copy of it is not carried back either.
        #expect(try xclipCopy("second copy", display: x).status == 0)
        #expect(eventually(timeout: 10) { (try? read("clipboard")) == "second copy" && (try? read("primary")) == "second copy" })
        #expect(!synced().contains { $0.hasSuffix(" 0") }, "a copy of nothing: \(synced())")
        #expect(synced().count <= 2, "\(synced())")
        #expect(daemon.log.components(separatedBy: "by the program that just read it").count - 1 == 1, "said once: \(daemon.log)")
        try daemon.stop()
    }

    @Test("a paste whose guess is refused late (a loaded owner) waits for the refusal before closing: the owner, which dies of a window gone as xclip does, lives")
    func lateRefusalOutlivesTheReader() throws {
        let x = try Xvfb()
        let owner = try Peer(try attacker(), ["owner-slow-refusal", "300"], display: x)
        defer { owner.stop() }
        try owner.waitForOutput("ready")
        for round in 1...3 {
            // Its TARGETS say text/html: the guess for -t png is refused, 300 ms later.
            let png = try XPBToolTests.xpb(["paste", "-t", "png"], x)
            #expect(png.status == 3, "round \(round): \(png.status) \(png.error)")
            #expect(owner.isRunning, "round \(round): the owner died of our window")
            let targets = try XPBToolTests.xpb(["types", "--targets"], x)
            #expect(targets.text == "TARGETS\ntext/html\n", "round \(round): \(targets.status) \(targets.error)")
        }
    }
}
