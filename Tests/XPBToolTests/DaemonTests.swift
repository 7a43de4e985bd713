import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// xpb on the display, talking to the daemon of `home`.
@discardableResult
func xpb(_ arguments: [String], _ x: any TestSession, _ home: DaemonHome, input: Data? = nil, timeout: Double = 30) throws -> Outcome {
    try xpb(arguments, x, input: input, environment: home.environment, timeout: timeout)
}

/// The history as `xpb history --json` lists it.
func history(_ x: any TestSession, _ home: DaemonHome) throws -> [[String: Any]] {
    let outcome = try xpb(["history", "--json"], x, home)
    guard outcome.status == 0, let list = try JSONSerialization.jsonObject(with: outcome.output) as? [[String: Any]] else {
        throw TestFailure("xpb history --json failed: \(outcome.error)")
    }
    return list
}

/// Fills the history database at `path` (made plain by an xpbd with `--plain-history`, which is
/// stopped: sealed, no other writer opens it; the next xpbd seals it) as `count` copies of
/// CLIPBOARD by xclip would, in one transaction: entry n's text is `text(n)` (a Python
/// expression of `n`), each used a second after the one before.
func fillHistory(_ path: String, count: Int, text: String, on x: any TestSession) throws {
    let fill = """
        import hashlib, sqlite3, sys
        db = sqlite3.connect(sys.argv[1])
        with db:
            for n in range(\(count)):
                text = \(text)
                data = text.encode()
                cursor = db.execute("INSERT INTO entries(selection, display, created, used, source, pid, size, preview, text, advertised) VALUES ('general', ':0', ?, ?, 'xclip', 1, ?, ?, ?, 'UTF8_STRING')",
                                    (1e9 + n, 1e9 + n, len(data), text[:80], text))
                db.execute("INSERT INTO targets(entry, position, name, type, digest, size, data) VALUES (?, 0, 'UTF8_STRING', 'UTF8_STRING', ?, ?, ?)",
                           (cursor.lastrowid, hashlib.sha256(data).hexdigest(), len(data), data))
        """
    let filled = try run("/usr/bin/python3", ["-c", fill, path], display: x, timeout: 300)
    guard filled.status == 0 else { throw TestFailure("filling the history failed: \(filled.error)") }
}

/// Waits until the history has `count` entries; a failure shows `daemon`'s log.
func waitForEntries(_ count: Int, _ x: any TestSession, _ home: DaemonHome, daemon: DaemonProcess? = nil, timeout: Double = 10) throws {
    guard try eventually(timeout: timeout, { try history(x, home).count >= count }) else {
        throw TestFailure("the history did not reach \(count) entries: \(try history(x, home))\(daemon.map { "\nxpbd's log:\n\($0.log)" } ?? "")")
    }
}

/// The control socket a daemon listens on, as it logged it.
private func controlSocket(of daemon: DaemonProcess) throws -> String {
    guard let path = daemon.log.components(separatedBy: "listening on ").last?.split(separator: "\n").first.map(String.init) else {
        throw TestFailure("xpbd did not log its socket: \(daemon.log)")
    }
    return path
}

/// Python that speaks xpb's sync protocol on a control socket, for the tests that play a
/// hostile peer: `frame` encodes a frame, `next_frame` reads one (None at the end), `join`
/// connects and says hello, returning the socket and whether the daemon answered with its own.
private let fakeSyncPeer = """
    import json, socket, struct, sys, time
    def frame(kind, payload):
        return struct.pack(">IB", len(payload), kind) + payload
    def read(s, n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk: return None
            data += chunk
        return data
    def next_frame(s):
        header = read(s, 5)
        if header is None: return None, None
        length, kind = struct.unpack(">IB", header)
        return kind, read(s, length)
    def join(path, node, sends, receives):
        s = socket.socket(socket.AF_UNIX); s.connect(path)
        hello = {"protocol": "xpb-sync", "version": 2, "node": node, "name": "attacker",
                 "sends": sends, "receives": receives, "selections": ["CLIPBOARD"]}
        s.sendall(frame(1, json.dumps(hello).encode()))
        kind, _ = next_frame(s)
        return s, kind == 1
    def announced_stamp(s):
        while True:
            kind, payload = next_frame(s)
            if kind is None: print("closed before the announce", flush=True); sys.exit(1)
            if kind == 16:
                message = json.loads(payload)
                if message.get("kind") == "announce": return message["stamp"]

    """

/// Every byte of every file under a directory (the WAL and payload files included).
private func bytesUnder(_ directory: URL) -> Data {
    var all = Data()
    let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
    while let url = enumerator?.nextObject() as? URL {
        if let data = try? Data(contentsOf: url) { all.append(data) }
    }
    return all
}

/// A small real PNG (made for the tests by Python's zlib: 64 × 48 RGB).
func pngFile() -> String {
    packageRoot.appendingPathComponent("Tests/Peers/image.png").path
}

@Suite("xpbd", .serialized)
struct DaemonTests {
    @Test("xclip's text, HTML and PNG survive xclip being killed: every target byte-exact, TARGETS the same")
    func keepsKilledOwners() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let png = try Data(contentsOf: URL(fileURLWithPath: pngFile()))
        let cases: [(target: String, data: Data)] = [
            ("UTF8_STRING", Data("Grüße, clipboard — 1\n2".utf8)),
            ("text/html", Data("<p><b>bold</b> &amp; <i>italic</i></p>".utf8)),
            ("image/png", png),
            // Larger than one property write: INCR from xclip to xpbd, and from xpbd to the reader.
            ("application/octet-stream", payload(3_000_000, seed: 11)),
        ]
        for (number, item) in cases.enumerated() {
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", item.target, "-quiet"], display: x, input: item.data)
            // The daemon's copy first: xclip -i serves one INCR reader at a time, and a reader that
            // asks while the daemon reads a large target would get nothing.
            try waitForEntries(number + 1, x, home, daemon: daemon)
            #expect(try xclipOut(x, ["-t", item.target]).output == item.data)
            let targets = try xclipOut(x, ["-t", "TARGETS"]).text
            owner.stop()
            // Once for each owner killed so far: the daemon serves this one's kept contents.
            try daemon.waitForLog("the owner of CLIPBOARD went away; serving", count: number + 1)
            #expect(try xclipOut(x, ["-t", item.target]).output == item.data, "\(item.target) from the daemon")
            // Every target xclip listed, in its order; besides, only what xpbd makes of a kept
            // image (the other formats) or of kept HTML (its text).
            let listed = targets.split(separator: "\n").map(String.init)
            let served = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
            #expect(served.filter(listed.contains) == listed, "\(served)")
            let made: Set<String> = ["image/jpeg", "image/bmp", "image/x-bmp", "image/x-MS-bmp", "image/tiff", "image/webp",
                                     "UTF8_STRING", "text/plain;charset=utf-8", "TEXT", "STRING", "text/plain"]
            #expect(Set(served.filter { !listed.contains($0) }).isSubset(of: made), "\(served)")
        }
        let entries = try history(x, home)
        #expect(entries.count == 4)
        #expect((entries.first?["targets"] as? [String]) == ["application/octet-stream"])
        try daemon.stop()
    }

    @Test("a GTK 3 app and a Qt 5 app that exit hand their rich clipboards over, without waiting")
    func toolkitsHandOff() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let pngPath = pngFile()
        let png = try Data(contentsOf: URL(fileURLWithPath: pngPath))

        let qtStart = Date()
        // Qt quits at once: its SAVE_TARGETS (property None) comes before the daemon's own fetch, so
        // the daemon asks TARGETS itself and fetches with one MULTIPLE.
        let qt = try toolkitPeer("qt_clipboard.py", ["set-rich-and-exit", "plain Qt text", "<b>Qt html</b>", pngPath, "0"], display: x)
        let qtOutcome = try qt.finish(timeout: 30)
        let qtSeconds = Date().timeIntervalSince(qtStart)
        #expect(qtOutcome.status == 0, "\(qtOutcome.error)")
        #expect(qtOutcome.text.contains("exiting"))
        try daemon.waitForLog("saved CLIPBOARD for")
        // One text (of Qt's six text targets), the HTML and one image (of its image formats):
        // with one MULTIPLE request. On a busy machine Qt can take longer to exit than the
        // keeper's debounce: the keeper has read the copy whole by then, and the save is answered
        // from it (seen under load). Either way the copy is kept whole (below).
        let log = daemon.log
        let keptFirst = log.range(of: "kept CLIPBOARD from").map { kept in
            log.range(of: "saved CLIPBOARD for").map { kept.lowerBound < $0.lowerBound } ?? false
        } ?? false
        #expect(keptFirst || log.contains("fetched 3 targets with one MULTIPLE request"), "\(log)")
        #expect(try xclipOut(x, ["-t", "text/plain"]).text == "plain Qt text")
        #expect(try xclipOut(x, ["-t", "UTF8_STRING"]).text == "plain Qt text")
        #expect(try xclipOut(x, ["-t", "text/html"]).text == "<b>Qt html</b>")
        #expect(try xclipOut(x, ["-t", "image/png"]).output == png)
        let qtTargets = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n")
        #expect(Set(qtTargets).isSuperset(of: ["text/plain", "UTF8_STRING", "STRING", "TEXT", "text/html", "image/png", "TARGETS"]))
        // Qt waits up to 5 s for the manager; the whole app, Python and Qt start-up included, took:
        #expect(qtSeconds < 4, "Qt's exit took \(qtSeconds) s")

        let gtk = try toolkitPeer("gtk_clipboard.py", ["set-image-and-exit", pngPath, "300"], display: x)
        let gtkOutcome = try gtk.finish(timeout: 30)
        #expect(gtkOutcome.status == 0, "\(gtkOutcome.error)")
        let stored = gtkOutcome.text.split(separator: "\n").first { $0.hasPrefix("stored ") }.flatMap { Double($0.dropFirst(7)) }
        #expect(stored != nil && stored! < 1, "gtk_clipboard_store took \(stored ?? -1) s (GTK waits up to 10 s)")
        let gtkTargets = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
        #expect(gtkTargets.contains("image/png") && gtkTargets.contains("image/bmp") && gtkTargets.contains("image/tiff"), "\(gtkTargets)")
        for target in gtkTargets where target.hasPrefix("image/") {
            #expect(try xclipOut(x, ["-t", target]).output.count > 100, "\(target) is served")
        }
        #expect(try xclipOut(x, ["-t", "image/png"]).output.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        // What GTK now reads back is an image again.
        let reread = try toolkitPeer("gtk_clipboard.py", ["targets"], display: x).finish()
        #expect(reread.text.contains("image/png"))
        try daemon.stop()
    }

    @Test("an app that leaves the manager's first request unanswered as it shuts down (as Qt 5 may) is still saved: the save asks it again")
    func saveAfterLostRequest() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let app = try Peer(try attacker(), ["owner-lossy-exit", "kept after a lost request"], display: x)
        defer { app.stop() }
        // The requests of its first 400 ms (the keeper's TARGETS among them) went unanswered; the
        // app asks to be saved and waits.
        try app.waitForOutput("dropped", timeout: 30)
        let outcome = try app.finish(timeout: 30)
        #expect(outcome.text.contains("saved"), "\(outcome.text) \(daemon.log)")
        try daemon.waitForLog("saved CLIPBOARD for")
        #expect(try xclipOut(x, ["-t", "UTF8_STRING"]).text == "kept after a lost request")
        try daemon.stop()
    }

    @Test("a GTK text handed off is fetched once, as UTF-8: STRING, TEXT, COMPOUND_TEXT and text/plain are made from it, and GTK decodes them")
    func gtkTextKeptOnce() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let text = "Grüße € 日本\nzwei"
        let gtk = try toolkitPeer("gtk_clipboard.py", ["set-text-and-exit", text, "300"], display: x)
        let outcome = try gtk.finish(timeout: 30)
        #expect(outcome.status == 0, "\(outcome.error)")
        try daemon.waitForLog("saved CLIPBOARD for")
        // GTK offered six text targets; one was fetched and stored.
        try waitForEntries(1, x, home, daemon: daemon)
        let entry = try #require(try history(x, home).first)
        #expect((entry["targets"] as? [String]) == ["UTF8_STRING"], "\(entry)")
        let targets = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
        #expect(Set(targets).isSuperset(of: ["UTF8_STRING", "COMPOUND_TEXT", "TEXT", "STRING", "text/plain;charset=utf-8", "text/plain"]), "\(targets)")
        for target in ["UTF8_STRING", "TEXT", "text/plain", "text/plain;charset=utf-8"] {
            #expect(try xclipOut(x, ["-t", target]).output == Data(text.utf8), "\(target)")
        }
        // Latin-1: what is outside it becomes ?.
        #expect(try xclipOut(x, ["-t", "STRING"]).output == Data([0x47, 0x72, 0xFC, 0xDF, 0x65, 0x20, 0x3F, 0x20, 0x3F, 0x3F, 0x0A]) + Data("zwei".utf8))
        // GTK decodes Compound Text with Xlib: the whole text comes back.
        let compound = try toolkitPeer("gtk_clipboard.py", ["target-text", "COMPOUND_TEXT"], display: x).finish()
        #expect(compound.status == 0, "\(compound.error)")
        #expect(compound.text == text + "\n", "\(compound.text)")
        let latin1 = try toolkitPeer("gtk_clipboard.py", ["target-text", "STRING"], display: x).finish()
        #expect(latin1.text == "Grüße ? ??\nzwei\n")
        try daemon.stop()
    }

    @Test("a cut in one file manager's flavour still reads as a cut in the other's after its owner exits: GNOME's list from xclip, KDE's mark from Qt")
    func cutSurvivesInBothFlavours() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let urls = ["file:///tmp/xpb%20cut/a.txt", "file:///tmp/xpb%20cut/b.txt"]
        func read(_ target: String) throws -> String { try xclipOut(x, ["-t", target]).text }
        // GNOME's flavour (Nautilus, Thunar…): the list says cut.
        let gnome = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "x-special/gnome-copied-files", "-quiet"], display: x,
                             input: Data(("cut\n" + urls.joined(separator: "\n")).utf8))
        try daemon.waitForLog("kept CLIPBOARD from")
        gnome.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        #expect(try read("x-special/gnome-copied-files") == "cut\n" + urls.joined(separator: "\n"))
        #expect(try read("application/x-kde-cutselection") == "1")
        #expect(try read("text/uri-list") == urls.map { $0 + "\r\n" }.joined())
        // KDE's flavour (Dolphin, any Qt app): a uri-list and the mark.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-cut-\(getpid())-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let list = directory.appendingPathComponent("list"), mark = directory.appendingPathComponent("mark")
        try Data(urls.map { $0 + "\r\n" }.joined().utf8).write(to: list)
        try Data("1".utf8).write(to: mark)
        let qt = try toolkitPeer("qt_clipboard.py", ["set-formats", "text/uri-list=\(list.path)", "application/x-kde-cutselection=\(mark.path)"], display: x)
        try qt.waitForOutput("ready")
        try daemon.waitForLog("kept CLIPBOARD from", count: 2)
        qt.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving", count: 2)
        #expect(try read("x-special/gnome-copied-files") == "cut\n" + urls.joined(separator: "\n"))
        #expect(try read("application/x-kde-cutselection") == "1")
        // xpb copy --cut offers both flavours itself.
        #expect(try xpb(["copy", "--cut", directory.path], x, home).status == 0)
        #expect(try read("x-special/gnome-copied-files") == "cut\n" + URL(fileURLWithPath: directory.path).standardizedFileURL.absoluteString)
        #expect(try read("application/x-kde-cutselection") == "1")
        try daemon.stop()
    }

    @Test("a Qt image kept after Qt exits: every target Qt offered, in its order, lossless ones pixel for pixel, from one kept image")
    func qtImageKeptOnce() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let flag = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-qt-exit-\(getpid())-\(UUID().uuidString.prefix(6))")
        defer { try? FileManager.default.removeItem(at: flag) }
        let qt = try toolkitPeer("qt_clipboard.py", ["set-image-and-exit", testImage, flag.path], display: x)
        try qt.waitForOutput("ready")
        try daemon.waitForLog("kept CLIPBOARD from")
        // What Qt itself serves, every target.
        let offered = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
        let images = offered.filter { $0.hasPrefix("image/") }
        #expect(images.first == "image/png" && images.contains("image/bmp") && images.contains("image/jpeg"), "\(offered)")
        var fromQt: [String: Data] = [:]
        for target in images { fromQt[target] = try xclipOut(x, ["-t", target]).output }
        try Data().write(to: flag)
        #expect(try qt.finish(timeout: 30).status == 0)
        try daemon.waitForLog("saved CLIPBOARD for")

        let served = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
        // Qt's image targets in its order, then those an xpb owner offers that Qt did not.
        let extra = ["image/png", "image/jpeg", "image/bmp", "image/x-bmp", "image/x-MS-bmp", "image/tiff", "image/webp"].filter { !images.contains($0) }
        #expect(served.filter { $0.hasPrefix("image/") } == images + extra, "the image targets, in Qt's order")
        // The lossless targets (GdkPixbuf decodes each, independently of xpb).
        let decodable: Set<String> = ["image/png", "image/bmp", "image/tiff", "image/ppm", "image/pgm", "image/xpm"]
        for target in images {
            let data = try xclipOut(x, ["-t", target]).output
            #expect(!data.isEmpty, "\(target) is served")
            guard decodable.contains(target), let original = fromQt[target], !original.isEmpty else { continue }
            let diff = try pixelDiff(try scratchFile("kept", data), try scratchFile("qt", original), x)
            #expect(diff.width == 64 && diff.height == 48 && diff.maxDiff == 0, "\(target): \(diff)")
        }
        let jpeg = try xclipOut(x, ["-t", "image/jpeg"]).output
        #expect(try pixelDiff(try scratchFile("kept.jpg", jpeg), testImage, x).width == 64)
        // Kept once: the image formats xpb writes are not stored, only the PNG (and what xpb
        // does not write, Qt's icons and X bitmap, as they came).
        let entry = try #require(try history(x, home).first)
        let stored = try #require(entry["keptBytes"] as? Int)
        let offeredBytes = Set(fromQt.values).reduce(0) { $0 + $1.count }
        let convertible: Set<String> = ["image/jpeg", "image/jpg", "image/bmp", "image/x-bmp", "image/x-MS-bmp", "image/tiff", "image/webp",
                                        "image/ppm", "image/pgm", "image/pbm", "image/xpm"]
        let unconverted = Set(fromQt.filter { !convertible.contains($0.key) }.values).reduce(0) { $0 + $1.count }
        #expect(stored == unconverted && stored < offeredBytes, "stored \(stored) bytes of \(offeredBytes) offered")
        try daemon.stop()
    }

    @Test("image entries: xpb history shows pixel sizes, --json a cached thumbnail, rofi gets it as the row's icon, dmenu plain rows; clear removes it")
    func imageEntriesAreShownAsPictures() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        #expect(try xpb(["copy", testImage], x, home).status == 0)
        try waitForEntries(1, x, home, daemon: daemon)
        #expect(try xpb(["copy"], x, home, input: Data("some text".utf8)).status == 0)
        try waitForEntries(2, x, home, daemon: daemon)
        let listed = try xpb(["history"], x, home).text.split(separator: "\n").map(String.init)
        let imageLine = try #require(listed.first { $0.contains("image/png") })
        #expect(imageLine.contains("64×48") && imageLine.contains("[image/png 64×48]") && !imageLine.contains(" B "), "\(imageLine)")
        let entries = try history(x, home)
        let image = try #require(entries.first { ($0["types"] as? [String])?.first == "image/png" })
        #expect(image["pixelWidth"] as? Int == 64 && image["pixelHeight"] as? Int == 48)
        let thumbnail = try #require(image["thumbnail"] as? String)
        // A sealed history's thumbnails live in memory's file system, never on disk.
        #expect(thumbnail.hasPrefix(home.runtimeDirectory.appendingPathComponent("xpb/thumbnails/").path), "\(thumbnail)")
        #expect(try pixelDiff(thumbnail, testImage, x).maxDiff == 0, "a small image is its own thumbnail")
        #expect(entries.first { ($0["types"] as? [String])?.first != "image/png" }?["thumbnail"] == nil)

        // Menus: a fake rofi and a fake dmenu that record their input and pick the image's row.
        let bin = home.root.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for name in ["rofi", "dmenu"] {
            let script = bin.appendingPathComponent(name)
            try Data("#!/bin/sh\ncat > \"$0.input\"\ngrep -a 'image/png' \"$0.input\" | head -n 1 | cut -f 1\n".utf8).write(to: script)
            chmod(script.path, 0o755)
        }
        for (name, icons) in [("rofi", true), ("dmenu", false)] {
            let menu = try xpb(["history", "menu", "--menu", bin.appendingPathComponent(name).path + " -dmenu"], x, home)
            #expect(menu.status == 0, "\(name): \(menu.error)")
            let input = try Data(contentsOf: bin.appendingPathComponent("\(name).input"))
            let row = try #require(String(decoding: input, as: UTF8.self).split(separator: "\n").first { $0.contains("image/png") })
            #expect(row.hasSuffix("\0icon\u{1F}" + thumbnail) == icons, "\(name): \(row)")
            #expect(String(decoding: input, as: UTF8.self).split(separator: "\n").allSatisfy { !$0.contains("\0") || icons })
        }
        #expect(try xclipOut(x, ["-t", "image/png"]).output == Data(contentsOf: URL(fileURLWithPath: testImage)), "the menu selected the image")
        // Forgotten entries take their thumbnails with them.
        #expect(try xpb(["history", "clear"], x, home).status == 0)
        #expect(!FileManager.default.fileExists(atPath: thumbnail))
        try daemon.stop()
    }

    @Test("the history records who copied: xclip by its executable's name, shown in xpb history and --json")
    func historyRecordsTheApp() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        #expect(try xclipCopy("from xclip", display: x).status == 0)
        try waitForEntries(1, x, home, daemon: daemon)
        let entry = try #require(try history(x, home).first)
        #expect(entry["app"] as? String == "xclip", "\(entry)")
        let pid = try #require(entry["pid"] as? Int)
        #expect(try xpb(["history"], x, home).text.contains("xclip (\(pid))"))
        // It survives a restart: read back from the database.
        try daemon.stop()
        let again = try DaemonProcess(x, home: home)
        #expect(try history(x, home).first?["app"] as? String == "xclip")
        try again.stop()
    }

    @Test("a password manager's copy (xclip renamed keepassxc) is secret by default: served while it runs, never kept or brought back; --ignore-app and --secret-app name others; --no-default-secret-apps keeps it")
    func secretAndIgnoredApps() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let xclip = try xclipPath()
        func renamed(_ name: String) throws -> String { try renamedXclip(name, in: home.root.appendingPathComponent("bin")) }
        func copy(_ text: String, with program: String) throws { #expect(try xclipCopy(text, program: program, display: x).status == 0) }
        let daemon = try DaemonProcess(x, home: home, arguments: ["--ignore-app", "ignoreme", "--secret-app", "MyVault"])
        try copy("hunter2", with: try renamed("keepassxc"))
        try daemon.waitForLog("holds data marked secret")
        #expect(try xclipOut(x).text == "hunter2", "served while its owner lives")
        let owner = try #require((try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x, home).output) as? [String: Any])?["ownerPID"] as? Int)
        #expect(try String(contentsOfFile: "/proc/\(owner)/comm", encoding: .utf8) == "keepassxc\n")
        // (SIGKILL: the test process's children may inherit a blocked SIGTERM.)
        kill(pid_t(owner), SIGKILL)
        #expect(eventually(timeout: 10) { !isAlive(owner) }, "pid \(owner) still runs")
        try daemon.waitForLog("the owner of CLIPBOARD went away; nothing of it was kept")
        #expect(try xpb(["info"], x, home).status == 2, "not brought back")
        try copy("ignored", with: try renamed("ignoreme"))
        try daemon.waitForLog("from an ignored app")
        try copy("vault", with: try renamed("myvault"))
        try daemon.waitForLog("holds data marked secret", count: 2)
        #expect(try history(x, home).isEmpty)
        // An ordinary copy is kept.
        try copy("ordinary", with: xclip)
        try waitForEntries(1, x, home, daemon: daemon)
        #expect(try history(x, home).map { $0["preview"] as? String } == ["ordinary"])
        try daemon.stop()

        // Without the default list, keepassxc is an app like any other.
        let plain = try DaemonProcess(x, home: home, arguments: ["--no-default-secret-apps"])
        try copy("kept now", with: try renamed("keepassxc"))
        try waitForEntries(2, x, home, daemon: plain)
        #expect(try history(x, home).first?["app"] as? String == "keepassxc")
        try plain.stop()
    }

    @Test("pins: a pinned entry outlives the caps and clear (not clear --pinned), is listed marked and first in the menu; unpin lets it go")
    func pins() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--max-entries", "2"])
        func previews() throws -> [String] { try history(x, home).compactMap { $0["preview"] as? String } }
        #expect(try xpb(["copy"], x, home, input: Data("keep me".utf8)).status == 0)
        try waitForEntries(1, x, home, daemon: daemon)
        #expect(try xpb(["history", "pin", "0"], x, home).text == "pinned entry 0\n")
        #expect(try xpb(["history", "pin", "9"], x, home).status != 0)
        for text in ["b", "c", "d"] {
            #expect(try xpb(["copy"], x, home, input: Data(text.utf8)).status == 0)
            #expect(eventually(timeout: 10) { (try? previews().first) == text }, "\(text) kept")
        }
        // Two unpinned entries (the cap) and the pinned one.
        #expect(eventually(timeout: 10) { (try? previews()) == ["d", "c", "keep me"] }, "\((try? previews()) ?? [])")
        let pinned = try #require(try history(x, home).last)
        #expect(pinned["pinned"] as? Bool == true)
        #expect(try xpb(["history"], x, home).text.split(separator: "\n").last?.contains("[pinned] keep me") == true)
        // The menu lists it first, marked.
        let menu = home.root.appendingPathComponent("menu.sh")
        try Data("#!/bin/sh\ncat > \"$0.input\"\nhead -n 1 \"$0.input\" | cut -f 1\n".utf8).write(to: menu)
        chmod(menu.path, 0o755)
        #expect(try xpb(["history", "menu", "--menu", menu.path], x, home).status == 0)
        let rows = try String(contentsOfFile: menu.path + ".input", encoding: .utf8).split(separator: "\n")
        #expect(rows.first?.contains("\t[pinned] keep me  · ") == true, "\(rows)")
        // Selected from the menu: it is the clipboard again.
        #expect(try xclipOut(x).text == "keep me")
        #expect(try xpb(["history", "clear"], x, home).status == 0)
        #expect(try previews() == ["keep me"])
        #expect(try xpb(["history", "clear", "--pinned"], x, home).status == 0)
        #expect(try previews().isEmpty)
        // Unpinned, an entry is evicted like any other.
        #expect(try xpb(["copy"], x, home, input: Data("e".utf8)).status == 0)
        #expect(eventually(timeout: 10) { (try? previews()) == ["e"] })
        #expect(try xpb(["history", "pin", "0"], x, home).status == 0)
        #expect(try xpb(["history", "unpin", "0"], x, home).text == "unpinned entry 0\n")
        for text in ["f", "g"] {
            #expect(try xpb(["copy"], x, home, input: Data(text.utf8)).status == 0)
            #expect(eventually(timeout: 10) { (try? previews().first) == text })
        }
        #expect(eventually(timeout: 10) { (try? previews()) == ["g", "f"] })
        try daemon.stop()
    }

    @Test("the configuration file: options as on the command line, comments, the command line overrides it, a bad line names file and line, SIGHUP rereads the rules")
    func configFile() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let path = home.configDirectory.appendingPathComponent("xpb/xpbd.conf").path
        // A bad line: xpbd does not start, and says where.
        try home.writeConfig("# rules\n--max-entries 5\n--no-such-option\n")
        let refused = try run(try builtProduct("xpbd"), [], display: x, environment: home.environment)
        #expect(refused.status == 64 && refused.error.contains("\(path):3:"), "\(refused.error)")
        try home.writeConfig("--max-entries 5\n--version\n")
        #expect(try run(try builtProduct("xpbd"), [], display: x, environment: home.environment).error.contains("\(path):2: --version has no place"))
        try home.writeConfig("--ignore-app 'xclip'   # its copies are not kept\n\n--max-entries 5 --no-restore\n")
        let daemon = try DaemonProcess(x, home: home, arguments: ["--max-entries", "7"])
        func status() throws -> [String: Any] {
            let reply = try JSONSerialization.jsonObject(with: try xpb(["daemon", "status", "--json"], x, home).output) as? [String: Any]
            return reply?["status"] as? [String: Any] ?? [:]
        }
        #expect(try status()["maxEntries"] as? Int == 7, "the command line overrides the file")
        func copy(_ text: String) throws { #expect(try xclipCopy(text, display: x).status == 0) }
        try copy("ignored")
        try daemon.waitForLog("from an ignored app")
        // Reread: the rule is gone, the cap from the file is still overridden.
        try home.writeConfig("--max-entries 3\n")
        kill(daemon.peer.pid, SIGHUP)
        try daemon.waitForLog("SIGHUP: reread \(path)")
        try copy("kept now")
        try waitForEntries(1, x, home, daemon: daemon)
        #expect(try status()["maxEntries"] as? Int == 7)
        // A bad file on SIGHUP changes nothing.
        try home.writeConfig("--ignore-app xclip\n--keep general\n")
        kill(daemon.peer.pid, SIGHUP)
        try daemon.waitForLog("\(path):2:")
        try copy("still kept")
        try waitForEntries(2, x, home, daemon: daemon)
        #expect(daemon.log.components(separatedBy: "from an ignored app").count == 2, "the bad file's rule did not apply")
        try daemon.stop()
    }

    @Test("--on-copy: runs with the contents and who copied, filtered by app, never for a secret; killed past its timeout with what it started; a failure is logged")
    func onCopyActions() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let directory = home.root.path
        func read(_ name: String) -> String? { try? String(contentsOfFile: "\(directory)/\(name)", encoding: .utf8) }
        let xclip = try xclipPath()
        let keepass = try renamedXclip("keepassxc", in: home.root)
        func copy(_ text: String, with program: String) throws { #expect(try xclipCopy(text, program: program, display: x).status == 0) }
        let action = "cat > '\(directory)/out.'$XPB_OWNER_APP; printf '%s|%s|%s' \"$XPB_SELECTION\" \"$XPB_TYPES\" \"$XPB_OWNER_PID\" > '\(directory)/env.'$XPB_OWNER_APP"
        let daemon = try DaemonProcess(x, home: home, arguments: ["--on-copy", action, "--on-copy-app", "xclip", "--on-copy-app", "keepassxc",
                                                                  "--no-default-secret-apps", "--secret-app", "keepassxc"])
        try copy("hello", with: xclip)
        // (The action writes out.* then env.*: the second is there once the action is done.)
        #expect(eventually(timeout: 10) { read("out.xclip") == "hello" && read("env.xclip")?.filter { $0 == "|" }.count == 2 })
        let environment = try #require(read("env.xclip")).split(separator: "|", omittingEmptySubsequences: false)
        #expect(environment.count == 3 && environment[0] == "CLIPBOARD" && environment[1] == "text/plain" && Int(environment[2]) != nil, "\(environment)")
        try copy("hunter2", with: keepass)
        try daemon.waitForLog("holds data marked secret")
        #expect(try xpb(["copy"], x, home, input: Data("via xpb".utf8)).status == 0)
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        try copy("second", with: xclip)
        #expect(eventually(timeout: 10) { read("out.xclip") == "second" })
        #expect(read("out.keepassxc") == nil, "never for a secret")
        #expect(read("out.xpb") == nil, "filtered by app")
        try daemon.stop()

        // Past its timeout an action is killed with what it started; a failing one is logged.
        let slow = "if [ \"$XPB_OWNER_APP\" = xclip ]; then sleep 30; touch '\(directory)/late'; else exit 3; fi"
        let second = try DaemonProcess(x, home: home, arguments: ["--on-copy", slow, "--on-copy-timeout", "1"])
        try copy("slow", with: xclip)
        try second.waitForLog("ran 1.0 s and was killed")
        #expect(read("late") == nil)
        #expect(try xpb(["copy"], x, home, input: Data("fails".utf8)).status == 0)
        try second.waitForLog("exited with status 3")
        try second.stop()
    }

    @Test("--primary-to-clipboard and --clipboard-to-primary: a selection pastes from CLIPBOARD and a copy from PRIMARY, from their owners when pasted; a secret is not carried; no loop")
    func primaryAndClipboard() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--primary-to-clipboard", "--clipboard-to-primary"])
        func set(_ text: String, _ selection: String) throws { #expect(try xclipCopy(text, selection: selection, display: x).status == 0) }
        func read(_ selection: String) throws -> String { try run("xclip", ["-o", "-selection", selection], display: x).text }
        try set("selected words", "primary")
        try daemon.waitForLog("PRIMARY also serves CLIPBOARD")
        #expect(try read("clipboard") == "selected words")
        try set("copied text", "clipboard")
        try daemon.waitForLog("CLIPBOARD also serves PRIMARY")
        #expect(try read("primary") == "copied text")
        #expect(try read("clipboard") == "copied text")
        // The carried selection is read from its owner at paste time: once that owner is replaced
        // by the next copy, the next copy is what is carried.
        try set("newer words", "primary")
        try daemon.waitForLog("PRIMARY also serves CLIPBOARD", count: 2)
        #expect(try read("clipboard") == "newer words")
        // A secret stays where it was copied.
        #expect(try xpb(["copy", "--primary", "--sensitive"], x, home, input: Data("hunter2".utf8)).status == 0)
        try daemon.waitForLog("PRIMARY not carried to CLIPBOARD: marked secret")
        // What CLIPBOARD carried was the selection the secret replaced (its owner, xclip, left):
        // CLIPBOARD is emptied rather than left naming bytes nobody has.
        try daemon.waitForLog("CLIPBOARD, which carried the earlier PRIMARY, is empty now")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).output.isEmpty)
        // Our own ownerships are not carried back: one line each way so far.
        #expect(daemon.log.components(separatedBy: "CLIPBOARD also serves PRIMARY").count == 2)
        try daemon.stop()
    }

    @Test("content rules: text matching --ignore-match and copies under --min-size or over --max-copy-size are not kept; a bad pattern is a usage error")
    func contentRules() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let refused = try run(try builtProduct("xpbd"), ["--ignore-match", "(unclosed"], display: x, environment: home.environment)
        #expect(refused.status == 64 && refused.error.contains("--ignore-match"), "\(refused.error)")
        let daemon = try DaemonProcess(x, home: home, arguments: ["--ignore-match", "^\\d{6}$", "--ignore-match", "(?i)password", "--min-size", "3",
                                                                  "--max-copy-size", "20"])
        func copy(_ text: String) throws { #expect(try xpb(["copy"], x, home, input: Data(text.utf8)).status == 0) }
        try copy("123456")
        try daemon.waitForLog("matches --ignore-match '^\\d{6}$'")
        try copy("my PassWord is x")
        try daemon.waitForLog("matches --ignore-match '(?i)password'")
        try copy("ab")
        try daemon.waitForLog("under --min-size 3")
        try copy(String(repeating: "long ", count: 10))
        try daemon.waitForLog("50 bytes, over --max-copy-size 20")
        try copy("1234567 is fine")
        try waitForEntries(1, x, home, daemon: daemon)
        #expect(try history(x, home).map { $0["preview"] as? String } == ["1234567 is fine"])
        try daemon.stop()
    }

    @Test("the daemon's copy is not a paste: xpb copy --paste-once still serves the first real reader")
    func pasteOnceSurvivesTheDaemon() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        // A copy cleared by its owner within 120 s is forgotten by default (a secret taken back):
        // here it is kept, to see what the daemon kept of it.
        let daemon = try DaemonProcess(x, home: home, arguments: ["--forget-cleared-within", "0"])
        let html = try scratchFile("page.html", Data("<h1>xpb</h1>".utf8))
        let copy = try xpb(["copy", "--paste-once", "-t", "text/plain=-", "-t", "text/html=\(html)"], x, home, input: Data("xpb text".utf8))
        #expect(copy.status == 0, "\(copy.error)")
        try waitForEntries(1, x, home)
        #expect(try xclipOut(x, ["-t", "text/html"]).text == "<h1>xpb</h1>")
        // The one paste used it up: the owner cleared the clipboard on purpose, and the daemon
        // does not bring it back.
        try daemon.waitForLog("cleared by its owner")
        #expect(try xclipOut(x).status != 0)
        #expect((try history(x, home).first?["targets"] as? [String])?.contains("text/html") == true)
        try daemon.stop()
    }

    @Test("what xpb copied, xpbd serves and xpb reads: an entry selected again, a --foreground owner gone, an image, a restart")
    func servesWhatXpbCopied() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        var daemon = try DaemonProcess(x, home: home)
        let xsel = try ClipboardTools.standIns().xsel
        /// Every reader gets `expected` (with and without the fast path); the manifest the daemon
        /// serves names only targets that convert.
        func expectServed(_ expected: Data, text: Bool, _ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            for fastPath in ["1", "0"] {
                let paste = try xpb(["paste"], x, environment: home.environment.merging(["XPB_FAST_PATH": fastPath]) { $1 })
                #expect(paste.status == 0 && paste.output == expected, "\(path), fast path \(fastPath): \(paste.status) \(paste.error)",
                        sourceLocation: sourceLocation)
            }
            if text {
                let standIn = try run(xsel, ["-b", "-o"], display: x)
                #expect(standIn.status == 0 && standIn.output == expected, "\(path): xsel stand-in \(standIn.status) \(standIn.error)",
                        sourceLocation: sourceLocation)
            }
            let manifest = try xclipOut(x, ["-t", "XPB_MANIFEST"])
            #expect(manifest.status == 0, "\(path): the daemon serves xpb's manifest", sourceLocation: sourceLocation)
            for line in manifest.text.split(separator: "\n").dropFirst() {
                let target = String(line.split(separator: "\t").last ?? "")
                #expect(try xclipOut(x, ["-t", target]).status == 0, "\(path): the manifest names \(target), which must convert",
                        sourceLocation: sourceLocation)
            }
        }

        // A history entry selected again.
        #expect(try xpb(["copy"], x, home, input: Data("first entry".utf8)).status == 0)
        try waitForEntries(1, x, home)
        #expect(try xpb(["copy"], x, home, input: Data("second entry".utf8)).status == 0)
        try waitForEntries(2, x, home)
        #expect(try xpb(["history", "select", "1"], x, home).status == 0)
        try expectServed(Data("first entry".utf8), text: true, "history select")

        // An image, from a --foreground owner that exits.
        let png = try Data(contentsOf: URL(fileURLWithPath: pngFile()))
        let image = try Peer(try xpbPath(), ["copy", "--foreground", pngFile()], display: x, environment: home.environment)
        try waitForEntries(3, x, home)
        image.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        try expectServed(png, text: false, "a --foreground owner's image, after it exited")

        // Text kept across a restart of the daemon.
        let owner = try Peer(try xpbPath(), ["copy", "--foreground"], display: x, input: Data("kept across restarts".utf8),
                             environment: home.environment)
        try waitForEntries(4, x, home)
        owner.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving", count: 2)
        try expectServed(Data("kept across restarts".utf8), text: true, "a --foreground owner's text, after it exited")
        #expect(try daemon.stop().status == 0)
        daemon = try DaemonProcess(x, home: home)
        try daemon.waitForLog("restored CLIPBOARD from the history")
        try expectServed(Data("kept across restarts".utf8), text: true, "restored by a restarted daemon")
        try daemon.stop()
    }

    @Test("xsel --clear and a secret owner are respected: nothing comes back, no secret byte on disk")
    func respectsClearAndSecrets() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("cleared on purpose".utf8))
        #expect(eventually { (try? xclipOut(x))?.text == "cleared on purpose" })
        try waitForEntries(1, x, home)
        #expect(try run("xsel", ["--clear", "--clipboard"], display: x).status == 0)
        try daemon.waitForLog("cleared by its owner: not brought back")
        owner.stop()
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try xclipOut(x).status != 0, "a cleared clipboard stays empty")

        let secret = "hunter2-\(UUID().uuidString)"
        let copy = try xpb(["copy", "--sensitive"], x, home, input: Data(secret.utf8))
        #expect(copy.status == 0)
        #expect(eventually { (try? xclipOut(x))?.text == secret })
        try daemon.waitForLog("marked secret")
        // The owner ends without a word (as a crashed password manager would).
        let pid = try xpb(["info", "--json"], x, home).text
        if let data = pid.data(using: .utf8), let info = try JSONSerialization.jsonObject(with: data) as? [String: Any],
           let ownerPID = info["ownerPID"] as? Int {
            kill(pid_t(ownerPID), SIGKILL)
        } else {
            Issue.record("no owner pid in \(pid)")
        }
        try daemon.waitForLog("nothing of it was kept")
        #expect(try xclipOut(x).status != 0, "a secret is never brought back")
        try daemon.stop()
        let disk = bytesUnder(home.historyDirectory)
        #expect(!disk.isEmpty)
        #expect(disk.range(of: Data(secret.utf8)) == nil, "the secret reached the state directory")
        // Cleared while its owner lived, within --forget-cleared-within: taken back, forgotten.
        #expect(disk.range(of: Data("cleared on purpose".utf8)) == nil, "a copy cleared within the window stayed in the history")
        #expect(daemon.log.contains("the copy was a secret, forgotten"))
    }

    @Test("SIGTERM, SIGINT and SIGHUP are blocked in every thread of xpbd (its signal sources take them, whichever thread would have); SIGTERM as soon as it listens stops it, 10 of 10")
    func signalsBlockedInEveryThread() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let handled: UInt64 = (1 << (UInt64(SIGTERM) - 1)) | (1 << (UInt64(SIGINT) - 1)) | (1 << (UInt64(SIGHUP) - 1))
        for round in 0..<10 {
            let daemon = try DaemonProcess(x, home: home)
            let pid = daemon.peer.pid
            if round == 0 {
                // Running: the X thread, the control socket's, the sync hub's (the last made
                // at the start), libdispatch's.
                let names = { () -> [String: String] in
                    let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
                    return Dictionary(uniqueKeysWithValues: threads.map { thread in
                        (thread, ((try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/comm", encoding: .utf8)) ?? "?").trimmingCharacters(in: .newlines))
                    })
                }
                #expect(eventually { names().values.contains("xpbd.sync.tick") }, "\(names())")
                let threads = names().keys
                #expect(threads.count > 2, "\(names())")
                for thread in threads {
                    let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8)) ?? ""
                    let name = names()[thread] ?? "?"
                    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigBlk:") }),
                          let blocked = UInt64(line.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16) else { continue }
                    #expect(blocked & handled == handled, "thread \(name) blocks \(line)")
                }
            }
            // At once: a signal that found a thread of its own would be lost, and the stop wait.
            let stopped = try daemon.stop()
            #expect(stopped.status == 0, "round \(round): \(stopped.error)")
            #expect(stopped.error.contains("stopped; history written"), "round \(round): \(stopped.error)")
        }
    }

    @Test("restarting the daemon and restarting the X server both restore the last clipboard")
    func restoresAfterRestarts() throws {
        let home = try DaemonHome()
        let text = "survives restarts \(UUID().uuidString)"
        do {
            let x = try Xvfb()
            let daemon = try DaemonProcess(x, home: home)
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data(text.utf8))
            #expect(eventually { (try? xclipOut(x))?.text == text })
            try waitForEntries(1, x, home)
            owner.stop()
            #expect(try daemon.stop().status == 0)
            #expect(try xclipOut(x).status != 0, "the clipboard went with the daemon")
            let again = try DaemonProcess(x, home: home)
            try again.waitForLog("restored CLIPBOARD from the history")
            #expect(try xclipOut(x).text == text)
            // The X server goes away: the daemon says so. (No other test's server takes the
            // display's number in this run (``Xvfb/freshNumber()``), so it gives up after its
            // wait; ReconnectPolicyTests hold the rule.)
            x.kill()
            try again.waitForLog("lost the connection to the X server", timeout: 20)
            _ = try? again.stop()
        }
        let x = try Xvfb()
        let daemon = try DaemonProcess(x, home: home)
        try daemon.waitForLog("restored CLIPBOARD from the history")
        #expect(try xclipOut(x).text == text)
        try daemon.stop()
    }

    @Test("the X server restarts on the same display: xpbd connects again, says so, and restores the last clipboard")
    func xServerComesBack() throws {
        let home = try DaemonHome()
        let text = "across the restart \(UUID().uuidString.prefix(8))"
        // A number of its own: one -displayfd picks could go to another test's server meanwhile.
        let number = Xvfb.privateNumber(base: 600)
        let first = try Xvfb(number: number)
        let daemon = try DaemonProcess(first, home: home)
        defer { _ = try? daemon.stop() }
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard"], display: first, input: Data(text.utf8))
        _ = try owner.finish(timeout: 10)
        try daemon.waitForLog("kept CLIPBOARD")
        first.kill()
        try daemon.waitForLog("lost the connection to the X server")
        let x = try Xvfb(number: number)
        try daemon.waitForLog("connected again", timeout: 20)
        try daemon.waitForLog("restored CLIPBOARD from the history")
        #expect(try xclipOut(x).text == text)
        #expect(daemon.peer.isRunning)
    }

    @Test("a copy made just as the daemon brings back a gone owner's contents is kept, and stays the clipboard")
    func copyDuringTakeOver() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        // Each owner is killed, and the next one copies at once: the daemon's taking over from
        // the gone one races with the new copy (whose window often has the gone one's id).
        for round in 0..<12 {
            let text = "round \(round)"
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data(text.utf8))
            try waitForEntries(round + 1, x, home, daemon: daemon)
            #expect(try xclipOut(x).text == text)
            owner.stop()
        }
        try daemon.waitForLog("the owner of CLIPBOARD went away", count: 12)
        #expect(try xclipOut(x).text == "round 11")
        try daemon.stop()
    }

    @Test("an owner that exits without a hand-off: watchers see xpbd take over, one change, never a transient empty one")
    func noFlickerOnTakeOver() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let watcher = try Peer(try xpbPath(), ["watch"], display: x, environment: home.environment)
        defer { watcher.stop() }
        // Subscribed once a copy of ours shows. The probes are of a type of their own: the line
        // of xclip's copy below (text/plain) must not be mistaken for a late probe's (a probe's
        // line that came after the loop ended once stood for it under load, and the count of the
        // lines that follow began too early).
        var probe = 0
        #expect(eventually(timeout: 20) {
            probe += 1
            _ = try? xpb(["copy", "-t", "application/x-xpb-probe"], x, home, input: Data("probe \(probe)".utf8))
            return watcher.outputSoFar.contains("CLIPBOARD")
        })
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("kept text".utf8))
        try daemon.waitForLog("kept CLIPBOARD from window")
        #expect(eventually { watcher.outputSoFar.split(separator: "\n").last?.hasSuffix("\ttext/plain") == true })
        let before = watcher.outputSoFar.split(separator: "\n").count
        owner.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        // The take-over's line first: the watcher reads a change's types once it has seen the
        // change, and a copy made before that (under load) has its types read for both lines.
        #expect(eventually { watcher.outputSoFar.split(separator: "\n").count > before })
        // A last change of another type: once it shows, every earlier one has.
        #expect(try xpb(["copy", "-t", "html"], x, home, input: Data("<b>after</b>".utf8)).status == 0)
        #expect(eventually { watcher.outputSoFar.contains("text/html") })
        let lines = watcher.outputSoFar.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(before).filter { !$0.isEmpty }
        #expect(lines.count == 2, "the take-over and the last copy, nothing between: \(lines)")
        #expect(lines.first?.hasSuffix("\ttext/plain") == true, "\(lines)")
        #expect(!lines.contains { $0.hasSuffix("\t") }, "no empty change: \(lines)")
        #expect(try xpb(["paste"], x, home).text == "<b>after</b>")
        // Nothing to take over (a secret is never kept): the empty change comes, a moment late.
        let secret = try Peer(try xpbPath(), ["copy", "--sensitive", "--foreground"], display: x, input: Data("pw".utf8),
                              environment: home.environment)
        #expect(eventually { watcher.outputSoFar.split(separator: "\n").last?.hasSuffix("text/html") == false })
        secret.stop()
        #expect(eventually { watcher.outputSoFar.hasSuffix("\tCLIPBOARD\t\n") }, "\(watcher.outputSoFar)")
        try daemon.stop()
    }

    @Test("three daemons started in the same instant, each on its own display, share one new history: all three run and keep")
    func concurrentStart() throws {
        let home = try DaemonHome()
        let displays = try (0..<3).map { _ in try Xvfb() }
        // Started together, then waited for: none may lose the race for the new database.
        let daemons = try displays.map { x in
            try Peer(try builtProduct("xpbd"), ["--log-level", "debug"], display: x, environment: home.environment)
        }
        defer { daemons.forEach { $0.stop() } }
        for (daemon, x) in zip(daemons, displays) {
            #expect(eventually(timeout: 30) { daemon.errorSoFar.contains("listening on") || !daemon.isRunning },
                    "xpbd on \(x.display): \(daemon.errorSoFar)")
            #expect(daemon.isRunning, "xpbd on \(x.display) exited: \(daemon.errorSoFar)")
            #expect(!daemon.errorSoFar.contains("damaged"), "\(daemon.errorSoFar)")
        }
        for (number, x) in displays.enumerated() {
            #expect(try xpb(["copy"], x, home, input: Data("display \(number)".utf8)).status == 0)
            #expect(eventually(timeout: 15) { ((try? history(x, home)) ?? []).count >= 1 }, "\(daemons[number].errorSoFar)")
        }
        // Each copy is held in its daemon's memory while its app may take it back; a daemon that
        // stops writes it to the shared history.
        for daemon in daemons.dropFirst() {
            kill(daemon.pid, SIGTERM)
            #expect(try daemon.finish(timeout: 20).status == 0)
        }
        #expect(eventually(timeout: 15) { ((try? history(displays[0], home)) ?? []).count == 3 },
                "\((try? history(displays[0], home)) ?? [])")
    }

    @Test("an owner trickling INCR (a byte a second) does not hold the keeper: copies made meanwhile by owners that exit are kept and served")
    func tricklingOwner() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let trickle = try Peer(try attacker(), ["owner-trickle", "1"], display: x)
        defer { trickle.stop() }
        try trickle.waitForOutput("ready", timeout: 10)
        // The keeper is reading its text (for up to --target-deadline, 30 s, before).
        try trickle.waitForOutput("incr", timeout: 10)
        for round in 0 ..< 3 {
            let text = "copied while an owner trickles, \(round)"
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data(text.utf8))
            try waitForEntries(round + 1, x, home, daemon: daemon, timeout: 8)
            owner.stop()
            try daemon.waitForLog("the owner of CLIPBOARD went away; serving", count: round + 1)
            #expect(try xclipOut(x).text == text, "round \(round)")
        }
        #expect(daemon.log.contains("CLIPBOARD changed owner during the read"), "\(daemon.log)")
        try daemon.stop()
    }

    /// xclip sends one INCR transfer at a time and drops the requests that come meanwhile: a
    /// paste of a large copy that is slow (a loaded machine, a stopped reader) once left the
    /// keeper with nothing after its 2 s read timeout, and the copy was lost when xclip exited.
    @Test("xclip busy sending 3 MB to a stopped reader drops xpbd's requests: xpbd asks again, keeps the copy whole once the reader goes on, and serves it after xclip exits")
    func busyOwnerAskedAgain() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let expected = utf8Text(3_000_000)
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet", try scratchFile("busy-owner", expected)], display: x)
        defer { owner.stop() }
        #expect(eventually(timeout: 10) { (try? ownerPID(x)) == owner.pid }, "xclip does not own CLIPBOARD")
        // Takes the first chunk and stops: xclip waits for it to ask for the next.
        let reader = try Peer(try attacker(), ["read-hold"], display: x)
        defer { reader.stop() }
        try reader.waitForOutput("holding")
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("CLIPBOARD: its owner did not answer TARGETS in 2 s")
        #expect(!daemon.log.contains("kept CLIPBOARD"))
        reader.signal(SIGCONT)
        try reader.waitForOutput("read 3000000")
        try daemon.waitForLog("kept CLIPBOARD from", timeout: 30)
        owner.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        let pasted = try xclipOut(x)
        #expect(pasted.status == 0 && pasted.output == expected, "\(pasted.output.count) of \(expected.count) bytes; \(pasted.error)")
        try daemon.stop()
    }

    /// The other side of asking again: an owner that answers the first request late, by INCR,
    /// and waits for its chunks without end (xclip's way, dropping every other request meanwhile)
    /// serves nobody else until that transfer is taken. xpbd drains it on the window it rested.
    @Test("an xclip-like owner answers xpbd's first request 3 s late, by INCR: xpbd drains that transfer, keeps the copy from a request sent again, and the owner still serves a paste")
    func lateIncrAnswerDrained() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let expected = utf8Text(1_000_000)
        let owner = try Peer(try attacker(), ["owner-late-incr", "3", try scratchFile("late-incr", expected)], display: x)
        defer { owner.stop() }
        try owner.waitForOutput("ready")
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        try daemon.waitForLog("CLIPBOARD: its owner did not answer UTF8_STRING in 2 s")
        try owner.waitForOutput("late answer")
        try daemon.waitForLog("kept CLIPBOARD from", timeout: 30)
        // The late transfer went to its end (drained), then the one xpbd kept.
        #expect(eventually(timeout: 10) { owner.outputSoFar.components(separatedBy: "sent 1000000").count - 1 >= 2 }, "\(owner.outputSoFar)")
        #expect(!owner.outputSoFar.contains("stuck"), "\(owner.outputSoFar)")
        let pasted = try xclipOut(x)
        #expect(pasted.status == 0 && pasted.output == expected, "\(pasted.output.count) of \(expected.count) bytes; \(pasted.error)")
        owner.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        #expect(try xclipOut(x).output == expected)
        try daemon.stop()
    }

    @Test("a copy made and gone while xpbd could not look, its window id a gone owner's (X reuses them): the older copy is not brought back")
    func reusedWindowIDUnseen() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        func owner() throws -> String? {
            try xpb(["info"], x, home).text.split(separator: "\n").first { $0.hasPrefix("owner: ") }.map { String($0.dropFirst(7)) }
        }
        // The X server gives a departed client's slot (and its window ids) to the next client
        // that connects, if nothing connects in between: tried until it does.
        var reused = false
        for attempt in 0 ..< 5 where !reused {
            let a = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("A\(attempt), an older copy".utf8))
            try waitForEntries(attempt + 1, x, home, daemon: daemon)
            let windowA = try owner()
            let goneSeen = daemon.log.components(separatedBy: "the owner of CLIPBOARD went away").count - 1
            // xpbd stopped: it reads the events of A's exit, B's copy and B's exit only afterwards.
            daemon.peer.signal(SIGSTOP)
            a.stop()
            let b = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("B, the newer copy".utf8))
            #expect(eventually { (try? xclipOut(x).text) == "B, the newer copy" })
            reused = try owner() == windowA
            b.stop()
            #expect(eventually { (try? xclipOut(x).status) == 1 })
            daemon.peer.signal(SIGCONT)
            try daemon.waitForLog("the owner of CLIPBOARD went away", count: goneSeen + 2)
            // B, the newest copy, was never fetched: nothing to paste is right, A's bytes are not.
            let read = try xclipOut(x)
            #expect(!read.text.hasPrefix("A"), "attempt \(attempt) (window id reused: \(reused)): \(read.text)")
        }
        #expect(reused, "the X server never gave B the window id of A")
        try daemon.stop()
    }

    @Test("SAVE_TARGETS from a client that does not own CLIPBOARD is refused: the owner keeps it (any X client could make xpbd take it)")
    func saveTargetsFromStranger() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("the owner's".utf8))
        defer { owner.stop() }
        try daemon.waitForLog("kept CLIPBOARD from window")
        let outcome = try run(try attacker(), ["save-targets"], display: x, timeout: 20)
        #expect(outcome.text == "refused\n", "\(outcome.text) \(outcome.error)")
        #expect(owner.isRunning, "xclip lost CLIPBOARD to the daemon")
        #expect(!daemon.log.contains("saved CLIPBOARD for"), "\(daemon.log)")
        #expect(try xclipOut(x).text == "the owner's")
        try daemon.stop()
    }

    @Test("a full disk (the state directory on a 2 MiB file system): history delete and clear work, and later copies are written again")
    func fullDisk() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        // A real full disk: a 2 MiB tmpfs over the state directory, in the daemon's own mount
        // namespace (CI runs as root, as this machine does).
        let mount = "mount -t tmpfs -o size=2m,mode=0700 xpb-test \"$XDG_STATE_HOME\" && exec \"$@\""
        let daemon = try DaemonProcess(x, home: home, launcher: ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh"])
        var generator = SystemRandomNumberGenerator()
        /// Copies of 150 KiB that do not compress until one is not written; returns the entries.
        func fill() throws -> Int {
            let full = daemon.log.components(separatedBy: "the disk is full").count - 1
            for _ in 0 ..< 40 {
                let kept = daemon.log.components(separatedBy: "kept CLIPBOARD from").count - 1
                let entries = try history(x, home).count
                let bytes = Data((0 ..< 112 << 10).map { _ in UInt8.random(in: 0 ... 255, using: &generator) }).base64EncodedData()
                let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: bytes)
                defer { owner.stop() }
                try daemon.waitForLog("kept CLIPBOARD from", count: kept + 1)
                // Written, or refused for the disk.
                #expect(try eventually { try history(x, home).count > entries || daemon.log.components(separatedBy: "the disk is full").count - 1 > full })
                if daemon.log.components(separatedBy: "the disk is full").count - 1 > full { return try history(x, home).count }
            }
            throw TestFailure("40 copies of 150 KiB did not fill 2 MiB: \(daemon.log)")
        }
        let entries = try fill()
        #expect(entries > 3)
        let deleted = try xpb(["history", "delete", "0"], x, home)
        #expect(deleted.status == 0, "\(deleted.error)")
        #expect(try history(x, home).count == entries - 1)
        // The space of the deleted entry is free again: a copy is written.
        let small = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("sixteen bytes ok".utf8))
        defer { small.stop() }
        #expect(try eventually { try history(x, home).first?["preview"] as? String == "sixteen bytes ok" }, "\(daemon.log)")
        _ = try fill()
        let cleared = try xpb(["history", "clear"], x, home)
        #expect(cleared.status == 0, "\(cleared.error) \(daemon.log)")
        #expect(try history(x, home).isEmpty)
        try daemon.stop()
    }

    @Test("a state directory that cannot be made or written: one warning naming it; the history is kept in memory and the clipboard survives")
    func unusableStateDirectory() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        // /proc takes no new directory, even from root: as a read-only file system does.
        let directory = "/proc/xpb-state-\(getpid())"
        let daemon = try DaemonProcess(x, home: home, arguments: ["--state-dir", directory])
        #expect(daemon.log.components(separatedBy: "the history cannot be kept in \(directory)").count == 2, "\(daemon.log)")
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("kept in memory".utf8))
        try waitForEntries(1, x, home, daemon: daemon)
        owner.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        #expect(try xclipOut(x).text == "kept in memory")
        #expect(try xpb(["daemon", "status"], x, home).status == 0)
        #expect(try daemon.stop().status == 0)
    }

    @Test("the control socket held by 16 tricklers and 16 silent connections: xpb daemon status and history still answer")
    func controlSocketFlood() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let socket = try controlSocket(of: daemon)
        // 16 connections send a hello frame a byte a second, 16 say nothing; each reconnects when
        // dropped, for as long as the attack runs.
        let script = """
            import socket, sys, time, threading
            path = sys.argv[1]
            connected = threading.Semaphore(0)
            def trickle():
                first = True
                while True:
                    s = socket.socket(socket.AF_UNIX); s.connect(path)
                    if first: connected.release(); first = False
                    try:
                        for byte in b'\\x00\\x00\\x00\\x40' + b'x' * 64:
                            s.send(bytes([byte])); time.sleep(1)
                    except OSError:
                        pass
            def silent():
                first = True
                while True:
                    s = socket.socket(socket.AF_UNIX); s.connect(path)
                    if first: connected.release(); first = False
                    try:
                        s.recv(1)
                    except OSError:
                        pass
            for work in [trickle] * 16 + [silent] * 16:
                threading.Thread(target=work, daemon=True).start()
            for _ in range(32): connected.acquire()
            print("attacking", flush=True)
            time.sleep(600)
            """
        let attack = try Peer("/usr/bin/python3", ["-c", script, socket], display: x)
        defer { attack.stop() }
        // Every attacking connection is in (the old code's 16 slots were full then).
        try attack.waitForOutput("attacking")
        for _ in 0..<20 {
            let status = try xpb(["daemon", "status"], x, home)
            #expect(status.status == 0, "\(status.error)")
            let history = try xpb(["history"], x, home)
            #expect(history.status == 0, "\(history.error)")
        }
        try daemon.stop()
    }

    @Test("history pages asked with numbers at Int's ends, searched or not, compact or JSON: each gets an answer, and xpbd stays up")
    func extremePages() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let socket = try controlSocket(of: daemon)
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("one entry".utf8))
        defer { owner.stop() }
        try waitForEntries(1, x, home, daemon: daemon)
        let script = fakeSyncPeer + """
            big = 9223372036854775807
            answers = []
            for search in [None, "entry", "en"]:
                for offset, limit in [(big, big), (0, big), (big, 1), (1, big), (-big - 1, 5), (0, -1)]:
                    for compact in [None, True]:
                        s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                        s.sendall(frame(1, json.dumps({"protocol": "xpb-control", "version": 1}).encode()))
                        next_frame(s)
                        page = {"search": search, "offset": offset, "limit": limit}
                        if compact: page["compact"] = True
                        s.sendall(frame(2, json.dumps({"historyPage": page}).encode()))
                        kind, _ = next_frame(s)
                        answers.append(kind)
                        s.close()
            print("answered", sorted(set(answers)), len(answers), flush=True)
            """
        let asked = try run("/usr/bin/python3", ["-c", script, socket], display: x)
        #expect(asked.text.hasPrefix("answered") && asked.text.contains(" 36"), "\(asked.text)\(asked.error)\n\(daemon.log.suffix(2000))")
        #expect(!asked.text.contains("None"), "every request was answered: \(asked.text)")
        #expect(try history(x, home).first?["preview"] as? String == "one entry", "\(daemon.log.suffix(2000))")
        #expect(try daemon.stop().status == 0)
    }

    @Test("incoming sync links are capped: 60 hellos on the control socket, 32 links, the rest refused; the CLI still answers")
    func incomingLinkCap() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let socket = try controlSocket(of: daemon)
        let script = fakeSyncPeer + """
            held, accepted, refused = [], 0, 0
            for i in range(60):
                s, joined = join(sys.argv[1], "attacker-%d" % i, True, True)
                if joined: accepted += 1
                else: refused += 1
                held.append(s)
            print("accepted %d refused %d" % (accepted, refused), flush=True)
            time.sleep(600)
            """
        let attack = try Peer("/usr/bin/python3", ["-c", script, socket], display: x)
        defer { attack.stop() }
        try attack.waitForOutput("refused")
        #expect(attack.outputSoFar.contains("accepted 32 refused 28"), "\(attack.outputSoFar)")
        let status = try xpb(["daemon", "status", "--json"], x, home)
        #expect(status.status == 0, "\(status.error)")
        let peers = ((try JSONSerialization.jsonObject(with: status.output) as? [String: Any])?["status"] as? [String: Any])?["peers"] as? [Any]
        #expect((peers?.count ?? 0) <= 32, "\(peers?.count ?? -1) links")
        try daemon.stop()
    }

    @Test("a newer peer (a higher version, a message kind and fields this one does not know) keeps its link, and its copy crosses: ignored and counted")
    func newerPeer() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let socket = try controlSocket(of: daemon)
        // A peer of a later version: its hello has a field more; it sends a kind this version does
        // not know, then announces a text with fields more (in the announce and in a target), and
        // serves the fetch with a field more in its begin; it answers pings as long as it runs.
        let script = fakeSyncPeer + """
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            hello = {"protocol": "xpb-sync", "version": 7, "node": "future", "name": "future", "sends": True,
                     "receives": False, "selections": ["CLIPBOARD"], "compression": ["zstd"]}
            s.sendall(frame(1, json.dumps(hello).encode()))
            kind, payload = next_frame(s)
            if kind != 1: print("refused", payload, flush=True); sys.exit(1)
            print("joined version", json.loads(payload)["version"], flush=True)
            s.sendall(frame(16, json.dumps({"kind": "presence", "state": "typing"}).encode()))
            text = b"from the future"
            announce = {"kind": "announce", "selection": "CLIPBOARD", "stamp": {"clock": int(time.time() * 1000), "node": "future"},
                        "origin": "future host", "thumbnail": "AAAA",
                        "targets": [{"target": "UTF8_STRING", "size": len(text), "hash": "x"}]}
            s.sendall(frame(16, json.dumps(announce).encode()))
            while True:
                kind, payload = next_frame(s)
                if kind is None: print("link closed", flush=True); sys.exit(1)
                if kind != 16: continue
                message = json.loads(payload)
                if message.get("kind") == "ping":
                    s.sendall(frame(16, json.dumps({"kind": "pong", "seq": message["seq"]}).encode()))
                if message.get("kind") == "fetch":
                    s.sendall(frame(16, json.dumps({"kind": "begin", "id": message["id"], "type": "UTF8_STRING", "size": len(text), "compressed": False}).encode()))
                    s.sendall(frame(17, struct.pack(">Q", message["id"]) + text))
                    s.sendall(frame(16, json.dumps({"kind": "end", "id": message["id"], "total": len(text)}).encode()))
            """
        let peer = try Peer("/usr/bin/python3", ["-c", script, socket], display: x)
        defer { peer.stop() }
        #expect(eventually(timeout: 10) { peer.outputSoFar.contains("joined version \(2)") }, "\(peer.outputSoFar) \(daemon.log.suffix(1500))")
        try daemon.waitForLog("sent a 'presence' message, which this version does not know: ignored")
        #expect(eventually(timeout: 10) { (try? xclipOut(x).text) == "from the future" }, "\(daemon.log.suffix(2000))")
        let status = try xpb(["daemon", "status", "--json"], x, home)
        let object = try #require(try JSONSerialization.jsonObject(with: status.output) as? [String: Any], "\(status.error)")
        let peers = try #require((object["status"] as? [String: Any])?["peers"] as? [[String: Any]])
        #expect(peers.count == 1 && peers[0]["state"] as? String == "connected", "\(peers)")
        #expect(peers.first?["ignoredMessages"] as? Int == 1 && peers.first?["ignoredFields"] as? Int == 2, "\(peers)")
        #expect(try xpb(["daemon", "status"], x, home).text.contains("ignored from a newer peer: 1 messages, 2 fields"))
        #expect(peer.isRunning && !peer.outputSoFar.contains("link closed"))
        try daemon.stop()
    }

    @Test("a sync peer that sends past the credit window to a reader that does not read: the transfer is cancelled, nothing piles up")
    func peerIgnoresWindow() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let socket = try controlSocket(of: daemon)
        // A sending peer: announces a text, and answers the fetch with 256 KiB frames as fast as
        // it can, ignoring credit, until it is told to stop (or 256 MiB, the cap per transfer).
        let script = fakeSyncPeer + """
            s, joined = join(sys.argv[1], "attacker", True, False)
            if not joined: print("refused", flush=True); sys.exit(1)
            announce = {"selection": "CLIPBOARD", "stamp": {"clock": int(time.time() * 1000), "node": "attacker"},
                        "origin": "attacker", "targets": [{"target": "UTF8_STRING", "size": 256 << 20}]}
            s.sendall(frame(16, json.dumps(dict(announce, kind="announce")).encode()))
            print("announced", flush=True)
            fetch = None
            while fetch is None:
                kind, payload = next_frame(s)
                if kind is None: print("closed before the fetch", flush=True); sys.exit(1)
                if kind == 16 and json.loads(payload).get("kind") == "fetch": fetch = json.loads(payload)
            s.sendall(frame(16, json.dumps({"kind": "begin", "id": fetch["id"], "type": "UTF8_STRING", "size": 256 << 20}).encode()))
            chunk = frame(17, struct.pack(">Q", fetch["id"]) + b"x" * (256 << 10))
            import select
            sent, told, pending = 0, None, b""
            while sent < 256 << 20 and told is None:
                try:
                    if select.select([s], [], [], 0)[0]:
                        received = s.recv(65536)
                        if not received: told = "link closed"
                        pending += received
                        if b'"cancel"' in pending: told = "cancelled"
                    if told is None:
                        s.sendall(chunk); sent += 256 << 10
                except (BrokenPipeError, ConnectionResetError):
                    told = "link closed"
            print("%s: window %d, sent %d" % (told, fetch["window"], sent), flush=True)
            time.sleep(600)
            """
        let attack = try Peer("/usr/bin/python3", ["-c", script, socket], display: x)
        defer { attack.stop() }
        try attack.waitForOutput("announced")
        #expect(eventually(timeout: 10) { (try? xpb(["types", "--targets"], x, home).text.contains("UTF8_STRING")) == true })
        // A hung app: asks for the text and never reads the reply.
        let stalled = try Peer(try attacker(), ["string", "1", "UTF8_STRING", "60"], display: x)
        defer { stalled.stop() }
        try attack.waitForOutput("window", timeout: 30)
        // Cancelled, or the link closed as the cancel was sent; long before the 256 MiB cap.
        let outcome = attack.outputSoFar
        #expect(outcome.contains("cancelled:") || outcome.contains("link closed:"), "\(outcome) \(daemon.log.suffix(1500))")
        let sent = Int(outcome.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? .max
        #expect(sent < 64 << 20, "the peer sent \(sent) bytes before xpbd stopped it")
        try daemon.waitForLog("the peer sent past its credit window")
        #expect(daemon.peer.isRunning)
        #expect(try xpb(["daemon", "status"], x, home).status == 0)
        try daemon.stop()
    }

    @Test("a sync peer announcing copies with ever new target names cannot make xpbd intern atoms without bound")
    func announcedNamesBounded() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let socket = try controlSocket(of: daemon)
        let probe = { () throws -> Int in
            try #require(Int(try run(try attacker(), ["atom-probe"], display: x).text.trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        let before = try probe()
        // 60 copies, each with 100 target names never seen before: 6,000 names.
        let script = fakeSyncPeer + """
            s, joined = join(sys.argv[1], "attacker", True, False)
            if not joined: print("refused", flush=True); sys.exit(1)
            clock = int(time.time() * 1000)
            for copy in range(60):
                targets = [{"target": "application/x-attack-%d-%d" % (copy, n)} for n in range(100)]
                announce = {"selection": "CLIPBOARD", "stamp": {"clock": clock + copy, "node": "attacker"},
                            "origin": "attacker", "targets": targets}
                s.sendall(frame(16, json.dumps(dict(announce, kind="announce")).encode()))
            print("announced", flush=True)
            time.sleep(600)
            """
        let attack = try Peer("/usr/bin/python3", ["-c", script, socket], display: x)
        defer { attack.stop() }
        try attack.waitForOutput("announced")
        // Every announce handled: the last copy's owner is the daemon (it serves the remote copy).
        #expect(eventually(timeout: 20) { (try? xpb(["types", "--targets"], x, home).text.contains("application/x-attack-59-99")) == true
            || daemon.log.contains("target names") })
        let grown = try probe() - before
        #expect(grown <= 1_200, "the X server made \(grown) atoms for one peer's names")
        #expect(try xpb(["daemon", "status"], x, home).status == 0)
        try daemon.stop()
    }

    @Test("a sync peer granting credit Int.max (or zero, or less) loses its link; xpbd stays up; a 64 KiB window gets data")
    func hostileCredit() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let socket = try controlSocket(of: daemon)
        #expect(try xpb(["copy"], x, home, input: Data(repeating: 0x61, count: 1 << 20)).status == 0)
        try daemon.waitForLog("kept CLIPBOARD from 'xpb'")
        // A receiving peer: takes the announce, fetches UTF8_STRING with a 64 KiB window, reads
        // the first data, then grants the credit given as argument; prints how the link ended.
        let script = fakeSyncPeer + """
            s, joined = join(sys.argv[1], "attacker-%s" % sys.argv[2], False, True)
            if not joined: print("refused", flush=True); sys.exit(1)
            stamp = announced_stamp(s)
            fetch = {"kind": "fetch", "id": 1, "selection": "CLIPBOARD", "stamp": stamp, "target": "UTF8_STRING", "window": 65536, "limit": 1 << 30}
            s.sendall(frame(16, json.dumps(fetch).encode()))
            got = 0
            while got == 0:
                kind, payload = next_frame(s)
                if kind is None: print("closed before data", flush=True); sys.exit(1)
                if kind == 17: got += len(payload) - 8
            s.sendall(frame(16, json.dumps({"kind": "credit", "id": 1, "bytes": int(sys.argv[2])}).encode()))
            s.settimeout(20)
            try:
                while True:
                    kind, payload = next_frame(s)
                    if kind is None: print("link closed", flush=True); break
            except socket.timeout:
                print("link kept", flush=True)
            """
        for credit in ["9223372036854775807", "0", "-5"] {
            let peer = try run("/usr/bin/python3", ["-c", script, socket, credit], display: x, timeout: 40)
            #expect(peer.text == "link closed\n", "credit \(credit): \(peer.text) \(peer.error) \(daemon.log.suffix(1500))")
            #expect(daemon.peer.isRunning, "xpbd died on credit \(credit): \(daemon.log.suffix(2000))")
            #expect(try xpb(["daemon", "status"], x, home).status == 0)
        }
        try daemon.stop()
    }

    @Test("a sync peer asking for 40 transfers at once, granting no credit: the 8 past 32 are refused with a clear message; xpbd answers meanwhile")
    func fetchFlood() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let socket = try controlSocket(of: daemon)
        #expect(try xpb(["copy"], x, home, input: Data(repeating: 0x61, count: 1 << 20)).status == 0)
        try daemon.waitForLog("kept CLIPBOARD from 'xpb'")
        // A receiving peer: takes the announce, asks for the copy 40 times with 64 KiB windows
        // (a MiB each: every transfer waits for credit that never comes), counts the transfers
        // that sent data and the refusals, then holds the link until told to end.
        let script = fakeSyncPeer + """
            s, joined = join(sys.argv[1], "attacker-flood", False, True)
            if not joined: print("refused", flush=True); sys.exit(1)
            stamp = announced_stamp(s)
            for number in range(1, 41):
                fetch = {"kind": "fetch", "id": number, "selection": "CLIPBOARD", "stamp": stamp, "target": "UTF8_STRING", "window": 65536, "limit": 1 << 30}
                s.sendall(frame(16, json.dumps(fetch).encode()))
            # Fetches are answered in turn: the refusal of one for a target never announced comes
            # after every refusal of the 40.
            fetch = {"kind": "fetch", "id": 99, "selection": "CLIPBOARD", "stamp": stamp, "target": "NOT_ANNOUNCED", "window": 65536, "limit": 1 << 30}
            s.sendall(frame(16, json.dumps(fetch).encode()))
            refused, message = [], "-"
            s.settimeout(30)
            while True:
                kind, payload = next_frame(s)
                if kind is None: print("closed", flush=True); sys.exit(1)
                if kind != 16: continue
                failed = json.loads(payload)
                if failed.get("kind") != "failed": continue
                if failed.get("id") == 99: break
                if "under way" in failed.get("message", ""):
                    refused.append(failed["id"])
                    message = failed["message"]
            print("%s %s" % (",".join(map(str, refused)), message), flush=True)
            time.sleep(120)
            """
        let peer = try Peer("/usr/bin/python3", ["-c", script, socket], display: x)
        defer { peer.stop() }
        try peer.waitForOutput("\n", timeout: 40)
        let line = peer.outputSoFar
        #expect(line.hasPrefix("33,34,35,36,37,38,39,40 "), "the fetches past 32 refused: \(line) \(peer.errorSoFar) \(daemon.log.suffix(1500))")
        #expect(line.contains("32 transfers from this node are under way; ask again once one ends"), "\(line)")
        // The served transfers hold their threads; xpbd still answers, and a paste still works.
        #expect(try xpb(["daemon", "status"], x, home).status == 0)
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x, timeout: 20).output.count == 1 << 20)
        #expect(daemon.peer.isRunning)
        try daemon.stop()
    }

    @Test("a truncated database is moved aside with a warning; SIGKILL during writes leaves one that opens")
    func survivesDamage() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        var daemon = try DaemonProcess(x, home: home)
        for number in 0..<3 {
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("entry \(number) ".utf8) + payload(40_000, seed: UInt8(number)))
            try waitForEntries(number + 1, x, home, daemon: daemon)
            owner.stop()
        }
        try daemon.stop()
        let database = home.historyDirectory.appendingPathComponent("history.sqlite")
        let size = try FileManager.default.attributesOfItem(atPath: database.path)[.size] as? Int ?? 0
        #expect(size > 0)
        #expect(truncate(database.path, off_t(size / 3)) == 0)
        daemon = try DaemonProcess(x, home: home)
        try daemon.waitForLog("history database is damaged")
        let aside = try FileManager.default.contentsOfDirectory(atPath: home.historyDirectory.path).filter { $0.contains(".corrupt-") }
        #expect(!aside.isEmpty, "the damaged file is kept aside")
        #expect(try xpb(["daemon", "status"], x, home).status == 0)

        // Writes killed at arbitrary moments: each start finds a database that opens and checks.
        for round in 0..<4 {
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: payload(3_000_000 + round, seed: UInt8(round + 9)))
            Thread.sleep(forTimeInterval: 0.15 + 0.1 * Double(round))
            kill(daemon.peer.pid, SIGKILL)
            _ = try daemon.peer.finish(timeout: 10)
            owner.stop()
            daemon = try DaemonProcess(x, home: home)
            #expect(try xpb(["history"], x, home).status == 0)
            #expect(!daemon.log.contains("damaged"), "round \(round): \(daemon.log)")
        }
        try daemon.stop()
    }

    @Test("after each copy the listing is encoded ahead, and what xpb history gets is never stale: the new copy first")
    func listingEncodedAhead() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        var owners: [Peer] = []
        defer { owners.forEach { $0.stop() } }
        for number in 1...3 {
            owners.append(try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("copy \(number)".utf8)))
            try daemon.waitForLog("history listing encoded ahead", count: number)
            let listed = try history(x, home)
            #expect(listed.count == number)
            #expect(listed.first?["preview"] as? String == "copy \(number)", "\(listed)")
        }
        try daemon.stop()
    }

    @Test("every xpb history and xpb daemon status command, with --json")
    func commands() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        #expect(try xpb(["daemon", "status"], x, home).status == 1)
        let notRunning = try xpb(["daemon", "status", "--json"], x, home)
        #expect(notRunning.status == 1 && notRunning.text.contains("\"running\":false"))
        #expect(try xpb(["history"], x, home).error.contains("xpbd is not running"))

        let daemon = try DaemonProcess(x, home: home)
        for word in ["alpha one", "beta two", "gamma three"] {
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data(word.utf8))
            #expect(eventually { (try? xclipOut(x))?.text == word })
            try waitForEntries(["alpha one", "beta two", "gamma three"].firstIndex(of: word)! + 1, x, home)
            owner.stop()
        }
        let list = try xpb(["history"], x, home).text.split(separator: "\n")
        #expect(list.count == 3)
        #expect(list[0].hasPrefix("0") && list[0].hasSuffix("gamma three") && list[0].contains("text/plain") && !list[0].contains("UTF8_STRING"))
        #expect(list[2].hasSuffix("alpha one"))
        let found = try xpb(["history", "search", "BETA"], x, home).text
        #expect(found.contains("beta two") && !found.contains("alpha"))
        let foundJSON = try JSONSerialization.jsonObject(with: try xpb(["history", "search", "beta", "--json"], x, home).output) as? [[String: Any]]
        #expect(foundJSON?.count == 1 && foundJSON?.first?["index"] as? Int == 1)

        let select = try xpb(["history", "select", "2"], x, home)
        #expect(select.status == 0 && select.text.contains("entry 2 is now CLIPBOARD"))
        #expect(try xclipOut(x).text == "alpha one")
        #expect((try history(x, home).first?["preview"] as? String) == "alpha one", "a selected entry moves to the top")

        // The menu program gets one line per entry and prints the chosen one.
        let menu = try xpb(["history", "menu", "--menu", "grep beta"], x, home)
        #expect(menu.status == 0, "\(menu.error)")
        #expect(try xclipOut(x).text == "beta two")
        #expect(try xpb(["history", "menu", "--menu", "true"], x, home).status == 2, "a cancelled menu selects nothing")

        #expect(try xpb(["history", "delete", "1"], x, home).status == 0)
        #expect(try history(x, home).count == 2)
        #expect(try xpb(["history", "delete", "7"], x, home).error.contains("no history entry 7"))
        #expect(try xpb(["history", "select", "x"], x, home).status == 64)

        let status = try xpb(["daemon", "status"], x, home).text
        #expect(status.contains("running (pid \(daemon.peer.pid)") && status.contains("2 entries") && status.contains(home.historyDirectory.path))
        let json = try JSONSerialization.jsonObject(with: try xpb(["daemon", "status", "--json"], x, home).output) as? [String: Any]
        let inner = json?["status"] as? [String: Any]
        #expect(json?["running"] as? Bool == true)
        #expect(inner?["entryCount"] as? Int == 2 && inner?["display"] as? String == x.display && inner?["keeps"] as? [String] == ["CLIPBOARD"])

        #expect(try xpb(["history", "clear"], x, home).status == 0)
        #expect(try history(x, home).isEmpty)
        try daemon.stop()
    }

    @Test("a history a person reads: no repeated rows, content sizes, recognisable types first, more lines shown and matched")
    func readableHistory() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let html = try scratchFile("rich.html", Data("<b>rich</b>".utf8))
        let copies: [[String]] = [["copy"], ["copy"], ["copy", "-t", "text/plain=-", "-t", "text/html=\(html)"], ["copy"]]
        let inputs = ["alpha", "beta one\nbeta two\nbeta three\n", "rich", "alpha"]
        for (number, (arguments, input)) in zip(copies, inputs).enumerated() {
            #expect(try xpb(arguments, x, home, input: Data(input.utf8)).status == 0)
            // Each copy is kept (the last one moves the first entry up instead of adding one).
            try daemon.waitForLog("kept CLIPBOARD", count: number + 1)
        }
        let entries = try history(x, home)
        #expect(entries.map { $0["preview"] as? String } == ["alpha", "rich", "beta one"], "one row per content: \(entries)")
        let list = try xpb(["history"], x, home).text.split(separator: "\n").map(String.init)
        #expect(list.count == 3)
        #expect(list[0].contains("5 B") && list[0].contains("text/plain") && !list[0].contains("UTF8_STRING"), "\(list[0])")
        #expect(list[1].contains("text/html,text/plain"), "\(list[1])")
        #expect(list[2].hasSuffix("beta one … (+2 lines)"), "\(list[2])")
        // Any line of an entry finds it, in the picker as in search.
        #expect(try xpb(["history", "search", "beta three"], x, home).text.contains("beta one"))
        let menu = try xpb(["history", "menu", "--menu", "grep 'beta three'"], x, home)
        #expect(menu.status == 0, "\(menu.error)")
        #expect(try xpb(["paste"], x, home).text == "beta one\nbeta two\nbeta three\n")
        #expect((try history(x, home).first?["preview"] as? String) == "beta one", "a selected entry moves to the top")
        #expect(try history(x, home).count == 3)
        try daemon.stop()
    }

    @Test("one manager per display: a second xpbd names the first and exits; --replace takes over")
    func oneManager() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let first = try DaemonProcess(x, home: home)
        let second = try run(try builtProduct("xpbd"), [], display: x, environment: home.environment, timeout: 15)
        #expect(second.status == 1)
        #expect(second.error.contains("another clipboard manager") && second.error.contains("pid \(first.peer.pid)"), "\(second.error)")
        #expect(second.error.contains("'xpbd'"), "the running manager is named by its window: \(second.error)")
        // One version everywhere: xpb, its stand-ins, xpbd and what the running daemon reports.
        let version = try xpb(["--version"], x, home).text.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.split(separator: ".").count == 3)
        #expect(try run(try builtProduct("xpbd"), ["--version"], display: x).text.trimmingCharacters(in: .whitespacesAndNewlines) == version)
        let tools = try ClipboardTools.standIns()
        #expect(try run(tools.xclip, ["-version"], display: x).text.contains("xpb \(version),"))
        #expect(try run(tools.xsel, ["--version"], display: x).text.contains("xpb \(version),"))
        let status = try JSONSerialization.jsonObject(with: try xpb(["daemon", "status", "--json"], x, home).output) as? [String: Any]
        #expect((status?["status"] as? [String: Any])?["version"] as? String == version)
        let replacing = try DaemonProcess(x, home: home, arguments: ["--replace"])
        let ended = try first.peer.finish(timeout: 10)
        #expect(ended.status == 0)
        #expect(ended.error.contains("another clipboard manager took CLIPBOARD_MANAGER"))
        #expect(try xpb(["daemon", "status"], x, home).text.contains("pid \(replacing.peer.pid)"))
        try replacing.stop()
    }

    @Test("expired contents are dropped: not served, not in the history")
    func expiry() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        #expect(try xpb(["copy", "--expire", "2"], x, home, input: Data("short-lived".utf8)).status == 0)
        try waitForEntries(1, x, home)
        // The owner gives the selection up at its expiry; the daemon forgets its copy then too.
        #expect(eventually(timeout: 8) { (try? history(x, home))?.isEmpty == true })
        #expect(try xclipOut(x).status != 0)
        try daemon.stop()
    }
}
