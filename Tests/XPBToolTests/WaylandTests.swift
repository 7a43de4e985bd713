import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// wl-paste of one type, without the newline it adds to text.
private func wlPaste(_ session: Compositor, _ arguments: [String] = []) throws -> Outcome {
    try run("wl-paste", ["-n"] + arguments, display: session)
}

/// wl-copy of bytes as one type (always with -t: without one it runs xdg-mime). It forks a
/// source that serves until another copy replaces it.
private func wlCopy(_ session: Compositor, _ data: Data, type: String, _ arguments: [String] = []) throws {
    let outcome = try run("wl-copy", ["-t", type] + arguments, display: session, input: data)
    guard outcome.status == 0 else { throw TestFailure("wl-copy failed: \(outcome.error)") }
}

@Suite("Wayland: xpb on a headless sway, wl-clipboard as the peer")
struct WaylandTests {
    @Test("text both ways, byte-exact: wl-copy → xpb paste, xpb copy → wl-paste; the types; clear")
    func text() throws {
        let sway = try Compositor()
        try wlCopy(sway, Data("from wl-copy\n".utf8), type: "text/plain;charset=utf-8")
        #expect(try xpb(["paste"], sway).text == "from wl-copy\n")
        #expect(try xpb(["types"], sway).text == "text/plain\n")
        let targets = try xpb(["types", "--targets"], sway)
        #expect(targets.text.contains("text/plain;charset=utf-8"), "\(targets.text) \(targets.error)")

        #expect(try xpb(["copy"], sway, input: Data("from xpb\n".utf8)).status == 0)
        #expect(try wlPaste(sway).text == "from xpb\n")
        let listed = try run("wl-paste", ["--list-types"], display: sway).text.split(separator: "\n")
        for type in ["text/plain;charset=utf-8", "text/plain", "UTF8_STRING", "STRING", "TEXT"] {
            #expect(listed.contains(Substring(type)), "\(listed)")
        }
        // xpb's item targets stay internal, as on X: the first item's types serve it.
        #expect(!listed.contains { $0.hasPrefix("XPB_ITEM_") }, "\(listed)")
        // Two items: the second is read through its item targets, which the source offers.
        let files = try ["first", "second"].map { try scratchFile("\($0).txt", Data($0.utf8)) }
        defer { files.forEach { unlink($0) } }
        #expect(try xpb(["copy"] + files, sway).status == 0)
        #expect(try xpb(["paste", "--item", "1"], sway).text == "second")
        #expect(try xpb(["paste", "--item", "0"], sway).text == "first")
        let twoItems = try run("wl-paste", ["--list-types"], display: sway).text.split(separator: "\n")
        #expect(!twoItems.contains { $0.hasPrefix("XPB_ITEM_0_") } && twoItems.contains("XPB_ITEM_1_0"), "\(twoItems)")
        // Every text name gives what wl-copy gives for it: the UTF-8 text (X's STRING would be
        // Latin-1, with ? for ✓).
        let text = "café ✓"
        _ = try run("wl-copy", [text], display: sway)
        let byWlCopy = try ["STRING", "TEXT", "text/plain", "UTF8_STRING"].map { try wlPaste(sway, ["-t", $0]).output }
        #expect(byWlCopy.allSatisfy { $0 == Data(text.utf8) }, "\(byWlCopy)")
        #expect(try xpb(["copy"], sway, input: Data(text.utf8)).status == 0)
        for (type, expected) in zip(["STRING", "TEXT", "text/plain", "UTF8_STRING"], byWlCopy) {
            #expect(try wlPaste(sway, ["-t", type]).output == expected, "\(type)")
        }
        #expect(try xpb(["paste"], sway).text == text)

        #expect(try xpb(["clear"], sway).status == 0)
        #expect(try wlPaste(sway).status != 0)
        let empty = try xpb(["paste"], sway)
        #expect(empty.status == 2)
        #expect(empty.error.contains("empty"), "\(empty.error)")
    }

    @Test("HTML with its text, an image and the primary selection, both ways")
    func typed() throws {
        let sway = try Compositor()
        let html = Data("<b>bold</b> words".utf8)
        #expect(try xpb(["copy", "-t", "html"], sway, input: html).status == 0)
        #expect(try wlPaste(sway, ["-t", "text/html"]).output == html)
        #expect(try xpb(["paste", "-t", "text"], sway).text == "bold words")

        let png = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Peers/image.png"))
        try wlCopy(sway, png, type: "image/png")
        #expect(try xpb(["types"], sway).text == "image/png\n")
        let fromWlCopy = try xpb(["paste", "-t", "png"], sway)
        #expect(fromWlCopy.output == png, "\(fromWlCopy.status), \(fromWlCopy.output.count) bytes: \(fromWlCopy.error)")
        let jpeg = try xpb(["paste", "-t", "jpeg"], sway).output
        #expect(jpeg.starts(with: [0xFF, 0xD8]), "a JPEG made here from the PNG")

        let path = try scratchFile("image.png", png)
        defer { unlink(path) }
        #expect(try xpb(["copy", path], sway).status == 0)
        #expect(try wlPaste(sway, ["-t", "image/png"]).output == png)
        #expect(try run("wl-paste", ["--list-types"], display: sway).text.contains("image/bmp"))

        try wlCopy(sway, Data("selected".utf8), type: "text/plain", ["--primary"])
        #expect(try xpb(["paste", "--primary"], sway).text == "selected")
        #expect(try xpb(["copy", "--primary"], sway, input: Data("middle click".utf8)).status == 0)
        #expect(try wlPaste(sway, ["--primary"]).text == "middle click")
        // The clipboard did not move.
        let again = try xpb(["paste", "-t", "png"], sway)
        #expect(again.output == png, "\(again.status), \(again.output.count) bytes: \(again.error)")
    }

    @Test("50 MiB both ways, byte-exact")
    func large() throws {
        let sway = try Compositor()
        let data = payload(50 << 20)
        let path = try scratchFile("large.bin", data)
        defer { unlink(path) }
        #expect(try xpb(["copy", "-t", "application/octet-stream", path], sway).status == 0)
        let pasted = try run("wl-paste", ["-t", "application/octet-stream"], display: sway, timeout: 60)
        #expect(pasted.output.count == data.count)
        #expect(pasted.output == data)
        try wlCopy(sway, data, type: "application/x-test-bytes")
        let read = try xpb(["paste", "-t", "application/x-test-bytes"], sway, timeout: 60)
        #expect(read.status == 0, "\(read.error)")
        #expect(read.output.count == data.count)
        #expect(read.output == data)
    }

    @Test("watch sees each copy with its types; paste --follow writes each; copy --paste-once serves one paste")
    func changes() throws {
        let sway = try Compositor()
        let watcher = try Peer(try xpbPath(), ["watch"], display: sway)
        defer { watcher.stop() }
        // The watcher counts from when it connects: copy until it has seen one.
        var copies = 0
        #expect(eventually(timeout: 10) {
            copies += 1
            try? wlCopy(sway, Data("copy \(copies)".utf8), type: "text/plain")
            return (try? watcher.waitForOutput("\n", timeout: 0.3)) != nil
        })
        try wlCopy(sway, Data("<i>x</i>".utf8), type: "text/html")
        try watcher.waitForOutput("text/html", timeout: 10)
        let lines = watcher.outputSoFar.split(separator: "\n")
        let counts = lines.compactMap { Int($0.prefix { $0 != "\t" }) }
        #expect(counts.count == lines.count && counts == Array(counts[0] ..< counts[0] + counts.count), "\(lines)")
        #expect(lines.allSatisfy { $0.contains("\tCLIPBOARD\t") }, "\(lines)")
        #expect(lines.last?.contains("text/html") == true, "\(lines)")

        let follower = try Peer(try xpbPath(), ["paste", "--follow"], display: sway)
        try follower.waitForOutput("<i>x</i>", timeout: 10)
        try wlCopy(sway, Data("next".utf8), type: "text/plain")
        try follower.waitForOutput("<i>x</i>next", timeout: 10)
        // A follower reads each copy: it would take the one paste below.
        follower.stop()

        #expect(try xpb(["copy", "--paste-once"], sway, input: Data("once".utf8)).status == 0)
        // Read by xpb, not wl-paste, whose own race with a source that goes as it reads makes it
        // say "No selection" under load (with the real wl-copy -o too).
        #expect(try xpb(["paste"], sway).text == "once")
        #expect(eventually(timeout: 10) { (try? wlPaste(sway).status) != 0 })
    }

    /// A reader killed mid-paste, or a client that asks and closes its pipe at once, made the
    /// owner's write raise SIGPIPE, which ended the xpb owner: the copy was lost.
    @Test("an xpb copy outlives readers that close their pipe before it writes: small bytes written at once, 3 MB from memory, a file")
    func readersClosingEarly() throws {
        let sway = try Compositor()
        let peer = packageRoot.appendingPathComponent("Tests/Peers/wayland_receiver.py").path
        let socket = sway.runtimeDirectory + "/" + sway.socketName
        func receiveAfterEarlyCloses(_ type: String) throws -> Outcome {
            try run("/usr/bin/python3", [peer, socket, type, "8"], display: sway, timeout: 60)
        }
        let small = Data("hello, world\n".utf8)
        #expect(try xpb(["copy"], sway, input: small).status == 0)
        let smallRead = try receiveAfterEarlyCloses("text/plain;charset=utf-8")
        #expect(smallRead.status == 0 && smallRead.output == small, "\(smallRead.error)")
        #expect(try xpb(["paste"], sway).output == small)

        let large = payload(3_000_000)
        #expect(try xpb(["copy", "-t", "application/octet-stream"], sway, input: large).status == 0)
        let largeRead = try receiveAfterEarlyCloses("application/octet-stream")
        #expect(largeRead.status == 0 && largeRead.output == large, "\(largeRead.error)")
        #expect(try xpb(["paste", "-t", "application/octet-stream"], sway).output == large)

        let path = try scratchFile("early.bin", large)
        defer { unlink(path) }
        #expect(try xpb(["copy", "-t", "application/octet-stream", path], sway).status == 0)
        let fileRead = try receiveAfterEarlyCloses("application/octet-stream")
        #expect(fileRead.status == 0 && fileRead.output == large, "\(fileRead.error)")
        #expect(try xpb(["paste", "-t", "application/octet-stream"], sway).output == large)
    }

    @Test("the backend: WAYLAND_DISPLAY wins over DISPLAY; --backend and XPB_BACKEND choose; a bad name is a usage error")
    func choice() throws {
        let sway = try Compositor()
        let x = try Xvfb()
        _ = try xclipCopy("on X", display: x)
        try wlCopy(sway, Data("on Wayland".utf8), type: "text/plain")
        let both = ["DISPLAY": x.display]
        #expect(try xpb(["paste"], sway, environment: both).text == "on Wayland")
        #expect(try xpb(["paste", "--backend", "x11"], sway, environment: both).text == "on X")
        #expect(try xpb(["paste"], sway, environment: both.merging(["XPB_BACKEND": "x11"]) { $1 }).text == "on X")
        #expect(try xpb(["paste", "--display", x.display], sway).text == "on X")
        #expect(try xpb(["paste", "--backend", "wayland"], x, environment: sway.environment).text == "on Wayland")
        let bad = try xpb(["paste", "--backend", "mir"], sway)
        #expect(bad.status == 64)
        #expect(bad.error.contains("x11 or wayland"), "\(bad.error)")
        let conflicting = try xpb(["paste", "--backend", "wayland", "--display", x.display], sway)
        #expect(conflicting.status == 64)
    }

    @Test("a compositor without data-control (weston) is a clear error that names the way out; a gone compositor too")
    func missing() throws {
        let weston = try Compositor(.weston)
        let outcome = try xpb(["paste"], weston)
        #expect(outcome.status != 0)
        #expect(outcome.error.contains("data-control"), "\(outcome.error)")
        // weston here runs no XWayland: nothing to go through.
        #expect(outcome.error.contains("XWayland"), "\(outcome.error)")
        let copy = try xpb(["copy"], weston, input: Data("x".utf8))
        #expect(copy.status != 0)
        #expect(copy.error.contains("data-control"), "\(copy.error)")

        let sway = try Compositor()
        let environment = sway.environment
        sway.kill()
        #expect(eventually(timeout: 10) { !isAlive(Int(sway.serverPID)) })
        unlink(sway.runtimeDirectory + "/" + sway.socketName)
        let gone = try run(try xpbPath(), ["paste"], display: sway, environment: environment, timeout: 10)
        #expect(gone.status != 0)
        #expect(gone.error.contains("Wayland compositor"), "\(gone.error)")
    }
}

@Suite("Wayland: the wl-copy and wl-paste stand-ins, and xclip's, on a headless sway")
struct WaylandStandInTests {
    /// Links named after the tools, to the built xpb.
    private static func link(_ name: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-wl-standins-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/" + name
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) == nil {
            try? FileManager.default.removeItem(atPath: path)
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: try xpbPath())
        }
        return path
    }

    @Test("wl-copy and wl-paste: text arguments, -n both ways, the newline after text, -l, -t, -p, -c, -o, exit statuses")
    func habits() throws {
        let sway = try Compositor()
        let copy = try Self.link("wl-copy")
        let paste = try Self.link("wl-paste")
        #expect(try run(copy, ["hello", "world"], display: sway).status == 0)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "hello world")
        // wl-paste's own habit, kept: a newline after text, none with -n.
        #expect(try run(paste, [], display: sway).text == "hello world\n")
        #expect(try run(paste, ["-n"], display: sway).text == "hello world")
        #expect(try run(copy, ["-n"], display: sway, input: Data("line\n".utf8)).status == 0)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "line")
        #expect(try run(paste, ["--list-types"], display: sway).text.contains("text/plain;charset=utf-8\n"))
        #expect(try run(copy, ["--type=text/html", "<p>x</p>"], display: sway).status == 0)
        #expect(try run("wl-paste", ["-n", "-t", "text/html"], display: sway).text == "<p>x</p>")
        #expect(try run(paste, ["-nt", "text/html"], display: sway).text == "<p>x</p>")
        // Not text: no newline added.
        _ = try run("wl-copy", ["-t", "image/png"], display: sway, input: Data([0x89, 0x50, 0x4E, 0x47, 1, 2]))
        #expect(try run(paste, ["-t", "image/png"], display: sway).output == Data([0x89, 0x50, 0x4E, 0x47, 1, 2]))
        #expect(try run(copy, ["-p", "prim"], display: sway).status == 0)
        #expect(try run("wl-paste", ["-np"], display: sway).text == "prim")
        #expect(try run(paste, ["--primary", "--no-newline"], display: sway).text == "prim")
        #expect(try run(copy, ["-c"], display: sway).status == 0)
        let empty = try run(paste, [], display: sway)
        #expect(empty.status == 1)
        #expect(empty.error.contains("empty"), "\(empty.error)")
        #expect(try run(copy, ["-o", "just once"], display: sway).status == 0)
        // Read by xpb: wl-paste itself may say "No selection" when a paste-once source goes as it
        // reads (under load it does so with the real wl-copy -o as well: 3 of 8).
        let once = try xpb(["paste"], sway)
        #expect(once.text == "just once", "\(once.status) [\(once.text)] \(once.error)")
        #expect(eventually(timeout: 10) { (try? run("wl-paste", [], display: sway).status) != 0 })
        let seat = try run(paste, ["-s", "seat0"], display: sway)
        #expect(seat.status == 1 && seat.error.contains("seat"), "\(seat.error)")
        #expect(try run(paste, ["--bogus"], display: sway).status == 1)
        #expect(try run(copy, ["--help"], display: sway).text.contains("wl-copy"))
    }

    @Test("wl-paste --watch runs its command with each copy's contents; xclip's stand-in reads and writes the Wayland clipboard")
    func watchAndXclip() throws {
        let sway = try Compositor()
        let paste = try Self.link("wl-paste")
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-wl-watch-\(UUID().uuidString)").path
        defer { unlink(marker) }
        let watcher = try Peer(paste, ["--watch", "sh", "-c", "cat >> '\(marker)'; echo >> '\(marker)'"], display: sway)
        defer { watcher.stop() }
        var copies = 0
        #expect(eventually(timeout: 10) {
            copies += 1
            _ = try? run("wl-copy", ["-t", "text/plain", "seen \(copies)"], display: sway)
            return ((try? String(contentsOfFile: marker, encoding: .utf8)) ?? "").contains("seen")
        })
        _ = try run("wl-copy", ["-t", "text/plain", "last one"], display: sway)
        #expect(eventually(timeout: 10) { ((try? String(contentsOfFile: marker, encoding: .utf8)) ?? "").hasSuffix("last one\n") })

        let xclip = try Self.link("xclip")
        #expect(try run(xclip, ["-o", "-selection", "clipboard"], display: sway).text == "last one")
        #expect(try run(xclip, ["-selection", "clipboard"], display: sway, input: Data("via xclip".utf8)).status == 0)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "via xclip")
    }
}

@Suite("Wayland: xpbd keeps a Wayland session's clipboard")
struct WaylandDaemonTests {
    @Test("an older copy's expiry leaves a newer copy xpbd serves alone: only the copy kept is given up")
    func expiryLeavesNewerCopy() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(sway, home: home)
        defer { _ = try? daemon.stop() }
        #expect(try xpb(["copy", "--expire", "3"], sway, home, input: Data("brief".utf8)).status == 0)
        try daemon.waitForLog("kept CLIPBOARD")
        let later = try Peer("wl-copy", ["--foreground", "-t", "text/plain"], display: sway, input: Data("later".utf8))
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        later.signal(SIGKILL)
        try daemon.waitForLog("serving its")
        #expect(eventually(timeout: 10) { (try? run("wl-paste", ["-n"], display: sway).text) == "later" })
        // The brief copy's expiry has come once the history forgot it.
        #expect(eventually(timeout: 15) { (try? history(sway, home))?.contains { $0["preview"] as? String == "brief" } == false }, "\(daemon.log)")
        #expect(try run("wl-paste", ["-n"], display: sway).text == "later", "\(daemon.log)")
        #expect(!daemon.log.contains("contents expired: dropped"), "\(daemon.log)")
        // Never given up and offered again: the clipboard did not change under the user.
        #expect(daemon.log.components(separatedBy: "serving its").count == 2, "\(daemon.log)")
    }

    @Test("a killed wl-copy's copy is kept and offered again byte-exact; an image too; the history lists both, their app unknown")
    func keeps() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(sway, home: home)
        defer { _ = try? daemon.stop() }
        #expect(daemon.log.contains("data-control"), "\(daemon.log)")
        let html = Data("<p>kept</p>".utf8)
        let source = try Peer("wl-copy", ["--foreground", "-t", "text/html"], display: sway, input: html)
        try daemon.waitForLog("kept CLIPBOARD")
        source.signal(SIGKILL)
        try daemon.waitForLog("serving its")
        #expect(try run("wl-paste", ["-n", "-t", "text/html"], display: sway).output == html)

        let png = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Peers/image.png"))
        let image = try Peer("wl-copy", ["--foreground", "-t", "image/png"], display: sway, input: png)
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        image.signal(SIGKILL)
        try daemon.waitForLog("serving its", count: 2)
        #expect(try run("wl-paste", ["-t", "image/png"], display: sway).output == png)
        #expect(try run("wl-paste", ["--list-types"], display: sway).text.contains("image/png"))
        let history = try xpb(["history"], sway, home)
        #expect(history.status == 0, "\(history.error)")
        #expect(history.text.split(separator: "\n").count == 2, "\(history.text)")
        #expect(history.text.contains("unknown app"), "\(history.text)")
        #expect(try xpb(["daemon", "status"], sway, home).text.contains("CLIPBOARD"))
    }

    @Test("a Wayland source offering 5,000 MIME types (round four, 8): xpbd reads the flood of offers, stays connected, and keeps the clipboard")
    func manyTypes() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(sway, home: home)
        defer { _ = try? daemon.stop() }
        let file = home.root.appendingPathComponent("x")
        try Data("many types".utf8).write(to: file)
        let pairs = (0..<5000).flatMap { ["-t", "application/x-many-\($0)=\(file.path)"] }
        let copy = try xpb(["copy"] + pairs + ["-t", "text/plain=\(file.path)"], sway, home, timeout: 120)
        #expect(copy.status == 0, "\(copy.error)")
        #expect(eventually(timeout: 30) { (try? run("wl-paste", ["-n", "-t", "text/plain"], display: sway).text) == "many types" })
        let listed = try run("wl-paste", ["--list-types"], display: sway).text.split(separator: "\n").count
        #expect(listed > 5000, "the source offers \(listed) types")
        // Still connected: the next copy is kept.
        _ = try run("wl-copy", ["-t", "text/plain", "after the flood"], display: sway)
        try daemon.waitForLog("kept CLIPBOARD from", count: 1, timeout: 30)
        #expect(eventually(timeout: 10) { daemon.log.contains("after the flood") || (try? xpb(["history"], sway, home).text.contains("after the flood")) == true },
                "\(daemon.log.suffix(3000))")
        #expect(!daemon.log.contains("lost the connection"), "\(daemon.log.suffix(3000))")
        #expect(daemon.peer.isRunning)
    }

    @Test("the compositor crashes and comes back on the same socket: xpbd connects again, says so, offers the last copy again and keeps the next")
    func compositorComesBack() throws {
        let first = try Compositor()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(first, home: home)
        defer { _ = try? daemon.stop() }
        _ = try run("wl-copy", ["-t", "text/plain", "before the crash"], display: first)
        try daemon.waitForLog("kept CLIPBOARD")
        let sway = try first.restarted()
        try daemon.waitForLog("lost the connection to the Wayland compositor")
        try daemon.waitForLog("connected again", timeout: 20)
        try daemon.waitForLog("restored CLIPBOARD")
        #expect(try run("wl-paste", ["-n"], display: sway).text == "before the crash")
        _ = try run("wl-copy", ["-t", "text/plain", "after it"], display: sway)
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        #expect(try history(sway, home).compactMap { $0["preview"] as? String } == ["after it", "before the crash"])
        #expect(daemon.peer.isRunning)
    }

    @Test("a copy marked secret is neither kept nor offered again; a restarted xpbd offers the last copy again")
    func secretsAndRestart() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        var daemon = try DaemonProcess(sway, home: home)
        let kept = try Peer("wl-copy", ["--foreground", "-t", "text/plain"], display: sway, input: Data("ordinary".utf8))
        try daemon.waitForLog("kept CLIPBOARD")
        let secret = try Peer(try xpbPath(), ["copy", "--foreground", "--sensitive"], display: sway,
                              input: Data("hunter2".utf8), environment: home.environment)
        try daemon.waitForLog("marked secret")
        secret.signal(SIGKILL)
        kept.signal(SIGKILL)
        try daemon.waitForLog("nothing of it was kept")
        #expect(try run("wl-paste", [], display: sway).status != 0)
        let history = try xpb(["history"], sway, home).text
        #expect(!history.contains("hunter2") && history.contains("ordinary"), "\(history)")
        _ = try daemon.stop()
        daemon = try DaemonProcess(sway, home: home)
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("restored CLIPBOARD")
        #expect(try run("wl-paste", ["-n"], display: sway).text == "ordinary")
    }
}

@Suite("Wayland: the paste queue")
struct WaylandQueueTests {
    @Test("three queued items go to three pastes in order (xpb paste, wl-paste, xpb paste); the last stays; text, an image, text; another copy ends a queue")
    func queue() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(sway, home: home)
        defer { _ = try? daemon.stop() }
        for text in ["first", "second", "third"] {
            let added = try xpb(["copy", "--queue"], sway, home, input: Data(text.utf8))
            #expect(added.status == 0, "\(added.error)")
        }
        #expect(try xpb(["queue"], sway, home).text.split(separator: "\n").count == 3)
        #expect(try xpb(["paste"], sway, home).text == "first")
        try daemon.waitForLog("an item was pasted; 2 left")
        let second = try wlPaste(sway)
        #expect(second.text == "second", "\(second.text) \(second.error) \(daemon.log)")
        try daemon.waitForLog("an item was pasted; 1 left")
        #expect(try xpb(["paste"], sway, home).text == "third")
        try daemon.waitForLog("its last item was pasted")
        #expect(try xpb(["paste"], sway, home).text == "third", "the clipboard keeps the last item")
        #expect(try xpb(["queue", "--json"], sway, home).text == "[]\n")

        // Items of other types: each set as a source of its own.
        let png = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Peers/image.png"))
        let image = home.root.appendingPathComponent("picture.png")
        try png.write(to: image)
        #expect(try xpb(["queue", "add", "-"], sway, home, input: Data("before".utf8)).status == 0)
        #expect(try xpb(["queue", "add", image.path], sway, home).status == 0)
        #expect(try xpb(["queue", "add", "-"], sway, home, input: Data("after".utf8)).status == 0)
        #expect(try xpb(["paste"], sway, home).text == "before")
        try daemon.waitForLog("an item was pasted; 2 left", count: 2)
        // A new source once the paste before has ended (its reader exited): a reader asks for
        // the types the selection offers.
        try daemon.waitForLog("item 2 of 3 is served", count: 2)
        #expect(try xpb(["paste", "-t", "image/png"], sway, home).output == png)
        try daemon.waitForLog("an item was pasted; 1 left", count: 2)
        try daemon.waitForLog("item 3 of 3 is served", count: 2)
        #expect(try xpb(["paste"], sway, home).text == "after")
        try daemon.waitForLog("its last item was pasted", count: 2)

        for text in ["one", "two"] { #expect(try xpb(["queue", "add", "-"], sway, home, input: Data(text.utf8)).status == 0) }
        try wlCopy(sway, Data("another app".utf8), type: "text/plain")
        try daemon.waitForLog("another app copied: its 2 items are dropped")
        #expect(try wlPaste(sway).text == "another app")
    }
}

@Suite("Wayland: sync between a Wayland session and an X display")
struct WaylandSyncTests {
    @Test("a copy on either side reaches the other byte-exact, text and 5 MiB; the announce names the Wayland node")
    func bothWays() throws {
        let runtime = try DaemonHome()
        let sway = try Compositor()
        let wayland = try DaemonProcess(sway, home: runtime, arguments: ["--state-dir", runtime.root.appendingPathComponent("state-w").path])
        defer { _ = try? wayland.stop() }
        let x = try Xvfb()
        let desktop = try DaemonProcess(x, home: runtime, arguments: ["--state-dir", runtime.root.appendingPathComponent("state-x").path,
                                                                      "--sync-display", sway.socketName])
        defer { _ = try? desktop.stop() }
        try desktop.waitForLog("connected to")

        _ = try run("wl-copy", ["-t", "text/plain;charset=utf-8", "from Wayland"], display: sway)
        try desktop.waitForLog("is now the copy from")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "from Wayland")

        let data = payload(5 << 20)
        let path = try scratchFile("sync.bin", data)
        defer { unlink(path) }
        _ = try run("xclip", ["-i", "-selection", "clipboard", "-t", "application/octet-stream", path], display: x)
        try wayland.waitForLog("is now the copy from")
        let read = try run("wl-paste", ["-t", "application/octet-stream"], display: sway, timeout: 30)
        #expect(read.output.count == data.count)
        #expect(read.output == data)
        // A copy on the Wayland side again replaces it there and here.
        _ = try run("wl-copy", ["-t", "text/plain", "again"], display: sway)
        try desktop.waitForLog("is now the copy from", count: 2)
        #expect(eventually(timeout: 10) { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x).text) == "again" })
        // An xpb copy carried over offers what it offers where it was made: no item target of
        // its first item.
        #expect(try xpb(["copy"], x, input: Data("from xpb on X".utf8)).status == 0)
        try wayland.waitForLog("is now the copy from", count: 2)
        let listed = try run("wl-paste", ["--list-types"], display: sway).text.split(separator: "\n")
        #expect(listed.contains("XPB_MANIFEST") && !listed.contains { $0.hasPrefix("XPB_ITEM_") }, "\(listed)")
        #expect(try xpb(["paste"], sway).text == "from xpb on X")
    }
}

@Suite("Wayland: xpbd bridges XWayland and the Wayland session")
struct WaylandBridgeTests {
    /// The daemon's status.
    private static func status(_ session: any TestSession, _ home: DaemonHome, environment: [String: String]) throws -> [String: Any] {
        let outcome = try xpb(["daemon", "status", "--json"], session, input: nil, environment: home.environment.merging(environment) { $1 })
        let object = try JSONSerialization.jsonObject(with: outcome.output) as? [String: Any]
        return (object?["status"] as? [String: Any]) ?? [:]
    }

    /// The daemon's change counts from its status.
    private static func counts(_ session: any TestSession, _ home: DaemonHome, environment: [String: String]) throws -> [String: Int] {
        try status(session, home, environment: environment)["changeCounts"] as? [String: Int] ?? [:]
    }

    /// Copies on either side reach the other, CLIPBOARD and PRIMARY; one copy is one history entry
    /// and one change on the other side; nothing loops.
    private func checkBridge(sway: Compositor, xDisplay: String) throws {
        let home = try DaemonHome()
        let both = ["DISPLAY": xDisplay]
        let daemon = try DaemonProcess(sway, home: home, environment: both)
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("connected to")
        #expect(daemon.log.contains("bridging display \(xDisplay)"), "\(daemon.log)")
        // The X side's clients (xpb told so: WAYLAND_DISPLAY stays in the session's environment).
        var x = sway.environment
        x["DISPLAY"] = xDisplay
        x["XPB_BACKEND"] = "x11"
        func onX(_ program: String, _ arguments: [String], input: Data? = nil) throws -> Outcome {
            try run(program, arguments, display: sway, input: input, environment: x)
        }
        /// xclip -i, whose serving child must not hold our pipes open.
        func copyOnX(_ text: String, _ selection: String) throws {
            _ = try onX("/bin/sh", ["-c", "xclip -i -selection \(selection) >/dev/null 2>&1"], input: Data(text.utf8))
        }
        let before = try Self.counts(sway, home, environment: both)

        try copyOnX("from X", "clipboard")
        try daemon.waitForLog("is now the copy from", count: 1)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "from X")
        _ = try run("wl-copy", ["-t", "text/plain;charset=utf-8", "from Wayland"], display: sway)
        try daemon.waitForLog("is now the copy from", count: 2)
        #expect(eventually(timeout: 10) { (try? onX("xclip", ["-o", "-selection", "clipboard"]).text) == "from Wayland" })
        try copyOnX("selected on X", "primary")
        try daemon.waitForLog("PRIMARY is now the copy from")
        #expect(try run("wl-paste", ["-n", "--primary"], display: sway).text == "selected on X")

        // Read a few times on both sides: nothing moves any more.
        for _ in 0..<3 {
            #expect(try run("wl-paste", ["-n"], display: sway).text == "from Wayland")
            #expect(try onX("xclip", ["-o", "-selection", "clipboard"]).text == "from Wayland")
        }
        let after = try Self.counts(sway, home, environment: both)
        // The Wayland side: its own copy, and the X copy carried (each one change).
        #expect(after["CLIPBOARD"].map { $0 - (before["CLIPBOARD"] ?? 0) } == 2, "\(before) → \(after)")
        #expect(daemon.log.components(separatedBy: "is now the copy from").count - 1 == 3, "\(daemon.log)")
        let history = try xpb(["history"], sway, home).text.split(separator: "\n")
        #expect(history.count == 2, "one entry per copy: \(history)")
        // One daemon: a client that sees only the X display (told so) reaches the same one, with
        // the same history, as a client of the Wayland session.
        let onWayland = try Self.status(sway, home, environment: both)
        let onXOnly = try Self.status(sway, home, environment: ["DISPLAY": xDisplay, "XPB_BACKEND": "x11"])
        #expect(onXOnly["socket"] as? String == onWayland["socket"] as? String && onWayland["socket"] != nil, "\(onWayland) / \(onXOnly)")
        #expect((onWayland["display"] as? String)?.contains(xDisplay) == true && (onWayland["display"] as? String)?.contains(sway.socketName) == true,
                "\(onWayland)")
        #expect(try xpb(["history"], sway, environment: home.environment.merging(["XPB_BACKEND": "x11", "DISPLAY": xDisplay]) { $1 }).text.split(separator: "\n") == history)
        #expect(daemon.log.contains("listening on") && daemon.log.contains("too"), "\(daemon.log)")

        // A copy marked secret on X stays there: not carried, not kept.
        let secret = try Peer(try xpbPath(), ["copy", "--foreground", "--sensitive"], display: sway, input: Data("hunter2".utf8),
                              environment: x.merging(home.environment) { $1 })
        defer { secret.stop() }
        try daemon.waitForLog("marked secret")
        #expect(try onX("xclip", ["-o", "-selection", "clipboard"]).text == "hunter2")
        #expect(try run("wl-paste", ["-n"], display: sway).text != "hunter2")
        #expect(try xpb(["history"], sway, home).text.split(separator: "\n").count == 2)
    }

    @Test("with an X display beside the compositor: each side's copies reach the other, one history entry each, no loop")
    func besideXvfb() throws {
        let sway = try Compositor()
        let x = try Xvfb()
        try checkBridge(sway: sway, xDisplay: x.display)
    }

    @Test("beside the wl-clipboard recipe `wl-paste --watch xclip -i -selection clipboard` (round four, 4): one wl-copy is one change on each side, nothing ping-pongs, the copy stays on both sides")
    func besideAWatchScript() throws {
        let sway = try Compositor(.sway(xwayland: true))
        let display = try #require(sway.xDisplay)
        let home = try DaemonHome()
        let both = ["DISPLAY": display]
        let daemon = try DaemonProcess(sway, home: home, environment: both)
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("connected to")
        var x = sway.environment
        x["DISPLAY"] = display
        let script = try Peer("wl-paste", ["--watch", "sh", "-c", "xclip -i -selection clipboard >/dev/null 2>&1; echo copied"], display: sway, environment: x)
        defer { script.stop() }
        // wl-paste --watch runs once for the clipboard as it finds it; then once per change.
        for round in 1...3 {
            let runs = script.outputSoFar.components(separatedBy: "copied").count - 1
            let before = try Self.counts(sway, home, environment: both)
            let text = "copied on Wayland \(round)"
            _ = try run("wl-copy", ["-t", "text/plain", text], display: sway)
            #expect(eventually(timeout: 10) { (try? run("xclip", ["-o", "-selection", "clipboard"], display: sway, environment: x).text) == text })
            #expect(eventually(timeout: 10) { script.outputSoFar.components(separatedBy: "copied").count - 1 > runs })
            // Settled: a quiet second later, nothing has moved since.
            var last = try Self.counts(sway, home, environment: both)
            var quiet = false
            for _ in 0..<20 where !quiet {
                Thread.sleep(forTimeInterval: 0.5)
                let now = try Self.counts(sway, home, environment: both)
                quiet = now == last
                last = now
            }
            let changes = (last["CLIPBOARD"] ?? 0) - (before["CLIPBOARD"] ?? 0)
            #expect(quiet && changes <= 2, "round \(round): \(changes) changes on Wayland; the script ran \(script.outputSoFar.components(separatedBy: "copied").count - 1 - runs) times")
            #expect(try run("wl-paste", ["-n"], display: sway).text == text, "round \(round)")
            #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: sway, environment: x).text == text, "round \(round)")
        }
        #expect(script.outputSoFar.components(separatedBy: "copied").count - 1 <= 8, "\(script.outputSoFar)")
    }

    @Test("with the compositor's own XWayland, no X window focused: the same")
    func withXWayland() throws {
        let sway = try Compositor(.sway(xwayland: true))
        let display = try #require(sway.xDisplay)
        try checkBridge(sway: sway, xDisplay: display)
    }

    @Test("with an X window focused, the compositor bridges too: its copies are told from copies, nothing loops, nothing is lost")
    func besideTheCompositorsBridge() throws {
        let sway = try Compositor(.sway(xwayland: true))
        let display = try #require(sway.xDisplay)
        var x = sway.environment
        x["DISPLAY"] = display
        x["XPB_BACKEND"] = "x11"
        x["GDK_BACKEND"] = "x11"
        // A GTK window on XWayland: sway focuses it, and from then on carries copies itself.
        let window = try toolkitPeer("gtk_clipboard.py", ["set-text-window", "from the window"], display: sway, environment: x)
        defer { window.stop() }
        try window.waitForOutput("ready")
        let home = try DaemonHome()
        let daemon = try DaemonProcess(sway, home: home, environment: ["DISPLAY": display])
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("connected to")
        func onX(_ program: String, _ arguments: [String]) throws -> Outcome {
            try run(program, arguments, display: sway, environment: x)
        }
        _ = try onX("/bin/sh", ["-c", "printf 'copied on X' | xclip -i -selection clipboard >/dev/null 2>&1"])
        #expect(eventually(timeout: 10) { (try? run("wl-paste", ["-n"], display: sway).text) == "copied on X" })
        #expect(try onX("xclip", ["-o", "-selection", "clipboard"]).text == "copied on X")
        try daemon.waitForLog("kept CLIPBOARD from window")
        _ = try run("wl-copy", ["-t", "text/plain", "copied on Wayland"], display: sway)
        #expect(eventually(timeout: 10) { (try? onX("xclip", ["-o", "-selection", "clipboard"]).text) == "copied on Wayland" },
                "X: \((try? onX("xclip", ["-o", "-selection", "clipboard"]).text) ?? "?"); Wayland: \((try? run("wl-paste", ["-n"], display: sway).text) ?? "?"); \(daemon.log)")
        #expect(try run("wl-paste", ["-n"], display: sway).text == "copied on Wayland", "\(daemon.log)")
        // Settled: reads on both sides change nothing, and neither bridge carries a copy back.
        let carried = daemon.log.components(separatedBy: "is now the copy from").count
        for _ in 0..<3 {
            #expect(try onX("xclip", ["-o", "-selection", "clipboard"]).text == "copied on Wayland")
            #expect(try run("wl-paste", ["-n"], display: sway).text == "copied on Wayland")
        }
        #expect(daemon.log.components(separatedBy: "is now the copy from").count == carried, "\(daemon.log)")
        #expect(carried - 1 <= 2, "\(daemon.log)")
        let history = try xpb(["history"], sway, home).text
        #expect(history.contains("copied on X") && history.contains("copied on Wayland"), "\(history)")
        #expect(history.components(separatedBy: "copied on").count - 1 == 2, "one entry per copy: \(history)")

        // A copy marked secret on X: the compositor carries it without its mark (wlroots keeps
        // only text/plain types); the bridge knows it all the same: kept nowhere.
        let secret = try Peer(try xpbPath(), ["copy", "--foreground", "--sensitive"], display: sway, input: Data("hunter2".utf8),
                              environment: x.merging(home.environment) { $1 })
        defer { secret.stop() }
        try daemon.waitForLog("without its mark")
        #expect(eventually(timeout: 10) { (try? run("wl-paste", ["-n"], display: sway).text) == "hunter2" })
        #expect(!(try xpb(["history"], sway, home).text.contains("hunter2")))
    }
}

@Suite("Wayland: xpbd's rules, actions and history as on X; info and the xsel stand-in")
struct WaylandDaemonRulesTests {
    @Test("--ignore-match and --on-copy act on Wayland copies; a history entry pinned and selected again is served; info names no app")
    func rulesAndHistory() throws {
        let sway = try Compositor()
        let home = try DaemonHome()
        let marker = home.root.appendingPathComponent("copied").path
        let daemon = try DaemonProcess(sway, home: home, arguments: ["--ignore-match", "^\\d{6}$", "--on-copy", "cat > '\(marker)'"])
        defer { _ = try? daemon.stop() }
        _ = try run("wl-copy", ["-t", "text/plain", "123456"], display: sway)
        try daemon.waitForLog("matches --ignore-match")
        _ = try run("wl-copy", ["-t", "text/plain", "first kept"], display: sway)
        #expect(eventually(timeout: 10) { (try? String(contentsOfFile: marker, encoding: .utf8)) == "first kept" })
        _ = try run("wl-copy", ["-t", "text/plain", "second kept"], display: sway)
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        let listed = try xpb(["history"], sway, home).text.split(separator: "\n")
        #expect(listed.count == 2 && !listed.joined().contains("123456"), "\(listed)")
        #expect(try xpb(["history", "select", "1"], sway, home).status == 0)
        #expect(eventually(timeout: 10) { (try? run("wl-paste", ["-n"], display: sway).text) == "first kept" })
        #expect(try xpb(["history", "pin", "0"], sway, home).status == 0)
        // xpb info on Wayland: the owner is named only when it is this process; here, xpbd's copy.
        let info = try xpb(["info"], sway, home).text
        #expect(info.contains("owner: unknown"), "\(info)")
        // xpb clear tells xpbd: an emptied clipboard that is a clear is not filled again.
        #expect(try xpb(["clear"], sway, home).status == 0)
        try daemon.waitForLog("cleared on request")
        #expect(try xpb(["paste"], sway, home).status == 2)
        #expect(!daemon.log.contains("emptied (its source went"), "\(daemon.log)")
    }

    @Test("the xsel stand-in reads and writes the Wayland clipboard and primary selection")
    func xsel() throws {
        let sway = try Compositor()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-wl-xsel-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let xsel = directory + "/xsel"
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: xsel)) == nil {
            try FileManager.default.createSymbolicLink(atPath: xsel, withDestinationPath: try xpbPath())
        }
        #expect(try run(xsel, ["-ib"], display: sway, input: Data("via xsel".utf8)).status == 0)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "via xsel")
        _ = try run("wl-copy", ["-t", "text/plain", "--primary", "from wl-copy"], display: sway)
        #expect(try run(xsel, ["-op"], display: sway).text == "from wl-copy")
        #expect(try run(xsel, ["-cb"], display: sway).status == 0)
        #expect(try run("wl-paste", [], display: sway).status != 0)
    }
}
