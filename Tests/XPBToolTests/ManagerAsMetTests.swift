import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The pid of the process whose command line has `argument` (a unique file name), if one runs.
private func processID(withArgument argument: String) -> pid_t? {
    for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let pid = pid_t(name),
              let line = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(name)/cmdline")) else { continue }
        if line.split(separator: 0).contains(where: { String(decoding: $0, as: UTF8.self) == argument }) { return pid }
    }
    return nil
}

/// `xpb info --json` on the display.
private func info(_ x: Xvfb, _ home: DaemonHome) throws -> [String: Any] {
    try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x, home).output) as? [String: Any] ?? [:]
}

/// A file of the test's own with `data` in it.
private func file(_ name: String, _ data: Data, in home: DaemonHome) throws -> String {
    let path = home.root.appendingPathComponent(name).path
    try data.write(to: URL(fileURLWithPath: path))
    return path
}

@Suite("the manager as people meet it", .serialized)
struct ManagerAsMetTests {
    @Test("a kept image is served in every format an xpb owner offers, made on request; kept HTML as text; the same after select and restart")
    func keptCopiesConvert() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        var daemon = try DaemonProcess(x, home: home)
        let png = pngFile()
        // Chromium's "Copy image": the PNG and an <img> of it, nothing else.
        let img = try file("img.html", Data(#"<img src="https://example.com/a.png">"#.utf8), in: home)
        let chromium = try toolkitPeer("qt_clipboard.py", ["set-formats", "image/png=\(png)", "text/html=\(img)"], display: x)
        try chromium.waitForOutput("ready")
        try daemon.waitForLog("kept CLIPBOARD from")
        chromium.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        func expectImages(_ when: String) throws {
            let targets = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
            for target in ["image/png", "image/jpeg", "image/bmp", "image/tiff", "image/webp", "text/html"] {
                #expect(targets.contains(target), "\(when): \(target) in \(targets)")
            }
            // An <img> alone has no text: none is offered.
            #expect(!targets.contains("UTF8_STRING"), "\(when): \(targets)")
            let magic: [String: [UInt8]] = ["image/jpeg": [0xFF, 0xD8, 0xFF], "image/bmp": Array("BM".utf8), "image/tiff": Array("II*".utf8),
                                            "image/webp": Array("RIFF".utf8), "image/png": [0x89, 0x50, 0x4E, 0x47]]
            for (target, start) in magic {
                let read = try xclipOut(x, ["-t", target])
                #expect(read.status == 0 && read.output.starts(with: start), "\(when): real xclip -o -t \(target): \(read.error)")
            }
            // Decoded by GdkPixbuf, the JPEG is the picture (within JPEG's loss).
            let jpeg = try file("kept.jpg", try xclipOut(x, ["-t", "image/jpeg"]).output, in: home)
            let compared = try toolkitPeer("gtk_clipboard.py", ["pixel-diff", jpeg, png], display: x).finish()
            #expect(compared.text.contains("size 64 48"), "\(when): \(compared.text) \(compared.error)")
            let difference = compared.text.split(separator: "\n").first { $0.hasPrefix("maxdiff ") }.flatMap { Int($0.dropFirst(8)) }
            #expect(difference.map { $0 >= 0 && $0 <= 48 } == true, "\(when): \(compared.text)")
        }
        try expectImages("kept")

        // A web page's HTML, no text target: its text is offered, in UTF-8 and Latin-1.
        let page = try file("page.html", Data("<p>Hello <b>wörld</b> &amp; more</p>".utf8), in: home)
        let browser = try toolkitPeer("qt_clipboard.py", ["set-formats", "text/html=\(page)"], display: x)
        try browser.waitForOutput("ready")
        try daemon.waitForLog("kept CLIPBOARD from", count: 2)
        browser.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving", count: 2)
        func expectText(_ when: String) throws {
            let targets = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
            #expect(Set(["UTF8_STRING", "STRING", "TEXT", "text/plain", "text/plain;charset=utf-8", "text/html"]).isSubset(of: Set(targets)),
                    "\(when): \(targets)")
            #expect(try xclipOut(x).text == "Hello wörld & more", "\(when): xclip -o")
            #expect(try xclipOut(x, ["-t", "STRING"]).output == Data("Hello w".utf8) + Data([0xF6]) + Data("rld & more".utf8), "\(when)")
            let gtk = try toolkitPeer("gtk_clipboard.py", ["text"], display: x).finish()
            #expect(gtk.text == "Hello wörld & more\n", "\(when): GTK reads \(gtk.text)")
        }
        try expectText("kept")

        // Selected again from the history: the image, in every format.
        #expect(try xpb(["history", "select", "1"], x, home).status == 0)
        try expectImages("selected")
        #expect(try xpb(["history", "select", "1"], x, home).status == 0)
        try expectText("selected")

        // After a restart, what it serves again.
        try daemon.stop()
        daemon = try DaemonProcess(x, home: home)
        try daemon.waitForLog("restored CLIPBOARD from the history")
        try expectText("restored")
        #expect(try xpb(["history", "select", "1"], x, home).status == 0)
        try expectImages("restored and selected")
        try daemon.stop()
    }

    @Test("xpb copy killed the moment it returns, and 10, 50 and 100 ms after, hands its copy to xpbd, 20 of 20 at each (SIGTERM, SIGINT, SIGHUP); without a manager it dies at once")
    func killedCopyIsKept() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        // Nobody to hand it to: the owner dies of the signal at once.
        let alone = try file("alone.txt", Data("alone".utf8), in: home)
        #expect(try xpb(["copy", alone], x, home).status == 0)
        let lonely = try #require(processID(withArgument: alone))
        let sent = Date()
        kill(lonely, SIGTERM)
        #expect(eventually(timeout: 2) { !isAlive(Int(lonely)) }, "the owner outlived SIGTERM without a manager")
        #expect(Date().timeIntervalSince(sent) < 1.5)

        let daemon = try DaemonProcess(x, home: home)
        let signals: [(Int32, String)] = [(SIGTERM, "TERM"), (SIGINT, "INT"), (SIGHUP, "HUP")]
        var round = 0
        // At once: the owner forked after it took the selection may not have taken its signals
        // yet (they are blocked from before the fork, and wait for it).
        for delay in [0, 0.01, 0.05, 0.1] {
            for _ in 0..<20 {
                round += 1
                let (number, name) = signals[round % signals.count]
                let text = "killed copy \(round) after \(Int(delay * 1000)) ms by SIG\(name)"
                let input = try file("copy-\(round).txt", Data(text.utf8), in: home)
                let copied = try xpb(["copy", input], x, home)
                let returned = Date()
                #expect(copied.status == 0, "\(copied.error)")
                let owner = try #require(processID(withArgument: input), "round \(round): no owner")
                let wait = delay - Date().timeIntervalSince(returned)
                if wait > 0 { usleep(useconds_t(wait * 1_000_000)) }
                kill(owner, number)
                #expect(eventually(timeout: 5) { !isAlive(Int(owner)) }, "round \(round): the owner outlived SIG\(name)")
                #expect(eventually(timeout: 5) { (try? xclipOut(x).text) == text }, "round \(round) (\(text)): not kept\n\(daemon.log)")
            }
        }
        let kept = Set(try history(x, home).compactMap { $0["preview"] as? String })
        #expect(kept.filter { $0.hasPrefix("killed copy") }.count == 80, "\(kept)")
        try daemon.stop()
    }

    @Test("copies through the xclip and xsel stand-ins name who ran them: a program (nvim), tmux's run-shell, a script; xpb info says both sides of a kept copy")
    func whoReallyCopied() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let tools = try ClipboardTools.standIns()
        let standIns = URL(fileURLWithPath: tools.xclip).deletingLastPathComponent().path
        let path = "\(standIns):/usr/bin:/bin"
        func newest() throws -> [String: Any] { try history(x, home).first ?? [:] }

        // An editor that runs xclip itself (Neovim's provider does): a program named nvim.
        let nvim = home.root.appendingPathComponent("nvim").path
        #expect(copyfile(from: "/usr/bin/python3", to: nvim))
        let editor = try run(nvim, ["-c", "import subprocess; subprocess.run(['xclip', '-i', '-selection', 'clipboard'], input=b'from the editor', check=True)"],
                             display: x, environment: ["PATH": path])
        #expect(editor.status == 0, "\(editor.error)")
        try waitForEntries(1, x, home, daemon: daemon)
        let madenvim = try newest()
        #expect(madenvim["app"] as? String == "nvim", "\(madenvim)")
        let live = try info(x, home)
        #expect(live["ownerApp"] as? String == "xpb" && live["copiedBy"] as? String == "nvim", "\(live)")

        // A script: through sh, named by its file.
        let script = home.root.appendingPathComponent("copy-note.sh").path
        try Data("#!/bin/sh\nprintf 'from the script' | xsel -ib\n".utf8).write(to: URL(fileURLWithPath: script))
        chmod(script, 0o755)
        #expect(try run(script, [], display: x, environment: ["PATH": path]).status == 0)
        try waitForEntries(2, x, home, daemon: daemon)
        let madecopynotesh = try newest()
        #expect(madecopynotesh["app"] as? String == "copy-note.sh", "\(madecopynotesh)")

        // tmux runs its commands through sh -c, and env and timeout pass the command on. Its
        // server starts as a shell would start it, no signal blocked (the test's peers inherit
        // the test thread's mask: a tmux server with SIGCHLD blocked never sees a job end).
        let socket = home.root.appendingPathComponent("tmux.socket").path
        let unblocked = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])"
        func tmux(_ arguments: [String]) throws -> Outcome {
            try run("/usr/bin/python3", ["-c", unblocked, "/usr/bin/tmux", "-S", socket] + arguments, display: x, environment: ["PATH": path])
        }
        #expect(try tmux(["-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24"]).status == 0)
        defer { _ = try? tmux(["kill-server"]) }
        #expect(try tmux(["run-shell", "printf 'from tmux' | env timeout 20 xclip -selection clipboard"]).status == 0)
        try waitForEntries(3, x, home, daemon: daemon)
        let madetmux = try newest()
        #expect(madetmux["app"] as? String == "tmux", "\(madetmux)")

        // A kept copy: xpbd owns it, the app it was taken from made it (with the pid it had).
        let app = try toolkitPeer("gtk_clipboard.py", ["set-text", "from a GTK app"], display: x)
        try app.waitForOutput("ready")
        try waitForEntries(4, x, home, daemon: daemon)
        let appName = try #require(try newest()["app"] as? String)
        app.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        let kept = try info(x, home)
        #expect(kept["ownerApp"] as? String == "xpbd", "\(kept)")
        #expect(kept["copiedBy"] as? String == appName && kept["copiedByPID"] as? Int == Int(app.pid) && kept["copiedByRuns"] as? Bool == false,
                "\(kept)")
        let text = try xpb(["info"], x, home).text
        #expect(text.contains("copied by: \(appName) (pid \(app.pid), exited)"), "\(text)")
        try daemon.stop()
    }

    @Test("history tells the truth: content sizes and types (GTK's rich text, a spreadsheet's cells, a JPEG, a FOO_BAR text), the app in the picker's rows, search exits 1 on no match")
    func historyTellsTheTruth() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        // Mousepad: a GtkTextView's copy (43 bytes of text, GTK's rich-text serialisation beside it).
        let mousepad = try toolkitPeer("gtk_clipboard.py", ["set-text-view", "The quick brown fox jumps over the lazy dog"], display: x)
        try mousepad.waitForOutput("ready")
        try waitForEntries(1, x, home, daemon: daemon)
        mousepad.stop()
        // A spreadsheet's cells: its own serialisation first, HTML, and the text.
        let embedded = try file("cells.xml", Data(String(repeating: "<table:table-cell office:value-type=\"float\"/>", count: 100).utf8), in: home)
        let html = try file("cells.html", Data("<table><tr><td>2</td></tr><tr><td>3</td></tr><tr><td>7</td></tr></table>".utf8), in: home)
        let text = try file("cells.txt", Data("2\n3\n7\n".utf8), in: home)
        let calc = try toolkitPeer("qt_clipboard.py", ["set-formats", "application/x-openoffice-embed-source-xml=\(embedded)", "text/html=\(html)",
                                                       "text/plain=\(text)"], display: x)
        try calc.waitForOutput("ready")
        try waitForEntries(2, x, home, daemon: daemon)
        calc.stop()
        // xpb copy of a JPEG.
        #expect(try xpb(["copy", pngFile()], x, home).status == 0)
        try waitForEntries(3, x, home, daemon: daemon)
        let jpeg = try xpb(["paste", "-t", "image/jpeg"], x, home).output
        let photo = try file("photo.jpg", jpeg, in: home)
        #expect(try xpb(["copy", photo], x, home).status == 0)
        try waitForEntries(4, x, home, daemon: daemon)
        // An app's own target name, text inside.
        let foo = try Peer("/usr/bin/xclip", ["-i", "-selection", "clipboard", "-t", "FOO_BAR"], display: x, input: Data("a FOO_BAR text".utf8))
        try waitForEntries(5, x, home, daemon: daemon)
        foo.stop()

        let entries = try history(x, home)
        func entry(_ where: (([String: Any]) -> Bool)) -> [String: Any] { entries.first(where: `where`) ?? [:] }
        let gtk = entry { ($0["preview"] as? String)?.hasPrefix("The quick") == true }
        #expect(gtk["size"] as? Int == 43 && (gtk["types"] as? [String])?.first == "text/plain", "\(gtk)")
        let cells = entry { ($0["preview"] as? String) == "2" }
        #expect(cells["size"] as? Int == 6 && (cells["types"] as? [String])?.prefix(2) == ["text/html", "text/plain"], "\(cells)")
        let picture = entry { ($0["types"] as? [String])?.first == "image/jpeg" }
        #expect(picture["size"] as? Int == jpeg.count && picture["pixelWidth"] as? Int == 64, "\(entries.map { $0["types"] ?? "" })")
        let custom = entry { ($0["targets"] as? [String]) == ["FOO_BAR"] }
        #expect(custom["preview"] as? String == "a FOO_BAR text" && (custom["types"] as? [String]) == ["text/plain"], "\(custom)")
        #expect(custom["app"] as? String == "xclip")
        // The listing's columns say the same.
        let listing = try xpb(["history"], x, home).text
        #expect(listing.contains("43 B ") && listing.contains("6 B ") && listing.contains("image/jpeg"), "\(listing)")

        // The picker's rows end with the app: a menu that picks by app name finds the copy.
        let rows = home.root.appendingPathComponent("rows.txt").path
        let picked = try xpb(["history", "menu", "--menu", "tee \(rows) | grep -m1 'python3[.0-9]*$'"], x, home)
        #expect(picked.status == 0, "\(picked.error)")
        #expect(try xclipOut(x).text == "2\n3\n7\n", "the newest of the Python apps' copies: the cells")
        let written = try String(contentsOfFile: rows, encoding: .utf8)
        #expect(written.contains("The quick brown fox jumps over the lazy dog  · python3"), "\(written)")

        // A search finds by app; one that finds nothing exits 1, as grep.
        let byApp = try xpb(["history", "search", "xclip", "--json"], x, home)
        let found = try JSONSerialization.jsonObject(with: byApp.output) as? [Any]
        #expect(byApp.status == 0 && found?.count == 1, "\(byApp.text)")
        let none = try xpb(["history", "search", "no such words anywhere"], x, home)
        #expect(none.status == 1 && none.text.isEmpty, "\(none.status) \(none.text) \(none.error)")
        #expect(try xpb(["history", "search", "nothing", "--json"], x, home).status == 1)
        try daemon.stop()
    }
}

/// Copies a file (the whole of it), keeping it executable.
private func copyfile(from source: String, to destination: String) -> Bool {
    guard let data = FileManager.default.contents(atPath: source), FileManager.default.createFile(atPath: destination, contents: data) else { return false }
    return chmod(destination, 0o755) == 0
}
