import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A host without a display: its own runtime directory and home, and no `DISPLAY` for anything
/// run there (the Xvfb a ``Peer`` is given only lends its environment, which is then overridden).
private struct Server {
    let root: URL
    var runtime: URL { root.appendingPathComponent("runtime") }
    var home: URL { root.appendingPathComponent("home") }

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-server-\(getpid())-\(UUID().uuidString.prefix(8))")
        for directory in [runtime, home] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
    }

    var environment: [String: String] { ["DISPLAY": "", "XDG_RUNTIME_DIR": runtime.path, "HOME": home.path, "TMUX": "", "STY": ""] }

    /// How the desktop's ssh runs xpb here (sshd passes no environment).
    func remoteXPB(_ xpbPath: String) -> String {
        "env -u DISPLAY XDG_RUNTIME_DIR=\(runtime.path) HOME=\(home.path) \(xpbPath)"
    }

    /// Runs xpb (or a stand-in: `program`) here; `x` only lends the test's base environment.
    func run(_ arguments: [String], _ x: Xvfb, input: Data? = nil, program: String? = nil, timeout: Double = 60) throws -> Outcome {
        try X11TestSupport.run(try program ?? builtProduct("xpb"), arguments, display: x, input: input, environment: environment, timeout: timeout)
    }

    /// The headless daemon's pid, from its status (nil: none runs).
    func daemonPID(_ x: Xvfb) throws -> Int32? {
        let outcome = try run(["daemon", "status", "--json"], x)
        guard outcome.status == 0, let object = try JSONSerialization.jsonObject(with: outcome.output) as? [String: Any],
              let status = object["status"] as? [String: Any], status["display"] as? String == "headless" else { return nil }
        return (status["pid"] as? Int).map(Int32.init)
    }

    /// The previews of `xpb history` here, newest first (index 0).
    func history(_ x: Xvfb, _ arguments: [String] = []) throws -> [String] {
        let outcome = try run(["history", "--json"] + arguments, x)
        guard outcome.status == 0 else { throw HistoryFailure(message: outcome.error) }
        let entries = try JSONSerialization.jsonObject(with: outcome.output) as? [[String: Any]] ?? []
        return entries.map { $0["preview"] as? String ?? "" }
    }

    struct HistoryFailure: Error { let message: String }

    func stopDaemon(_ x: Xvfb) throws {
        guard let pid = try daemonPID(x) else { return }
        kill(pid, SIGTERM)
        _ = eventually(timeout: 10) { kill(pid, 0) != 0 }
    }
}

@Suite("a host without a display", .serialized)
struct HeadlessTests {
    @Test("a server without a display over a real ssh: xpb copies and pastes there, both ways, typed and lazy; stand-ins; no secret crosses; the link drops and comes back")
    func overSSH() throws {
        let desktopHome = try DaemonHome()
        let x = try Xvfb()
        let server = try Server()
        let sshd = try LoopbackSSHD(display: x)
        let sent = desktopHome.root.appendingPathComponent("sent.bin").path
        let received = desktopHome.root.appendingPathComponent("received.bin").path
        let xpbPath = try builtProduct("xpb")
        // Nothing runs on the server yet: xpb there says what to do.
        let none = try server.run(["paste"], x)
        #expect(none.status == 5 && none.error.contains("no display and no headless xpbd"), "\(none.status) \(none.error)")

        // The desktop links to the server: its `xpb daemon link` starts the headless daemon.
        let desktop = try DaemonProcess(x, home: desktopHome, arguments: [
            "--state-dir", desktopHome.root.appendingPathComponent("state").path,
            "--peer", LoopbackSSHD.host,
            "--ssh", try sshd.capturingCommand(sent: sent, received: received),
            "--remote-xpb", server.remoteXPB(xpbPath),
        ])
        defer { try? server.stopDaemon(x) }
        try desktop.waitForLog("connected to", timeout: 20)
        #expect(try server.daemonPID(x) != nil, "a headless daemon runs on the server")

        // Desktop to server: text copied by an X app, pasted on the server.
        var owners = [try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("from the desktop".utf8))]
        #expect(eventually(timeout: 15) { (try? server.run(["paste"], x).text) == "from the desktop" })
        let types = try server.run(["types"], x)
        #expect(types.text.contains("text/plain"), "\(types.text)")

        // 20 MiB of binary, desktop to server, moved when pasted on the server.
        let binary = payload(20 << 20, seed: 41)
        let file = desktopHome.root.appendingPathComponent("blob.bin")
        try binary.write(to: file)
        owners.append(try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "application/octet-stream", "-quiet", file.path], display: x))
        // (The desktop daemon's log, at debug level, says what it announced and when.)
        #expect(eventually(timeout: 15) { (try? server.run(["types", "--targets"], x).text.contains("application/octet-stream")) == true },
                "the server never listed the 20 MiB copy; the desktop daemon's log:\n\(desktop.log)")
        let pasted = server.root.appendingPathComponent("pasted.bin")
        let paste = try server.run(["paste", "-t", "application/octet-stream", "-o", pasted.path], x)
        #expect(paste.status == 0, "\(paste.error)\nthe desktop daemon's log:\n\(desktop.log)")
        #expect((try? Data(contentsOf: pasted)) == binary, "the 20 MiB arrived whole")

        // Server to desktop: an HTML+text item, read by any X app.
        let html = server.root.appendingPathComponent("page.html")
        let text = server.root.appendingPathComponent("page.txt")
        try Data("<b>bold</b> words".utf8).write(to: html)
        try Data("bold words".utf8).write(to: text)
        let copy = try server.run(["copy", "-t", "html=\(html.path)", "-t", "text=\(text.path)"], x)
        #expect(copy.status == 0, "\(copy.error)")
        #expect(eventually(timeout: 15) { (try? run("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x).text) == "<b>bold</b> words" })
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "UTF8_STRING"], display: x).text == "bold words")
        let desktopTypes = try run(xpbPath, ["types", "--items"], display: x)
        #expect(desktopTypes.text.contains("0\ttext/html") && desktopTypes.text.contains("0\ttext/plain"), "\(desktopTypes.text)")

        // Two items copied on the server: both reach the desktop (xpb's manifest comes with
        // the announce, its item targets are announced too), and back the other way.
        let items = ["item one", "item two"].map { server.root.appendingPathComponent("\($0).txt") }
        for file in items { try Data(file.lastPathComponent.utf8).write(to: file) }
        #expect(try server.run(["copy", "-t", "text"] + items.map(\.path), x).status == 0)
        #expect(eventually(timeout: 15) { (try? run(xpbPath, ["paste", "--item", "1"], display: x).text) == "item two.txt" })
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "item one.txt")
        let listed = try run("xclip", ["-o", "-selection", "clipboard", "-t", "TARGETS"], display: x).text
        #expect(listed.contains("XPB_MANIFEST") && !listed.contains("XPB_ITEM_"), "item targets are served, not listed: \(listed)")
        let desktopItems = desktopHome.root.appendingPathComponent("desk.txt")
        try Data("from the desk".utf8).write(to: desktopItems)
        owners.append(try Peer(xpbPath, ["copy", "--foreground", "-t", "text", desktopItems.path, items[0].path], display: x))
        #expect(eventually(timeout: 15) { (try? server.run(["paste", "--item", "1"], x).text) == "item one.txt" })
        #expect(try server.run(["paste"], x).text == "from the desk")

        // 20 MiB from the server: announced at once, its bytes cross only when the desktop pastes.
        let big = payload(20 << 20, seed: 42)
        let bigFile = server.root.appendingPathComponent("big.bin")
        try big.write(to: bigFile)
        let taken = desktop.log.components(separatedBy: "is now the copy from").count - 1
        #expect(try server.run(["copy", "-t", "application/octet-stream", bigFile.path], x).status == 0)
        try desktop.waitForLog("is now the copy from", count: taken + 1, timeout: 15)
        let before = (try? FileManager.default.attributesOfItem(atPath: received)[.size] as? Int) ?? 0
        #expect(before < 1 << 20, "\(before) bytes came before any paste")
        let read = try run("xclip", ["-o", "-selection", "clipboard", "-t", "application/octet-stream"], display: x, timeout: 60)
        #expect(read.output == big, "the desktop read \(read.output.count) bytes")

        // The stand-ins on the server: tmux's copy-pipe and editors call xclip and xsel.
        let bin = server.root.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for name in ["xclip", "xsel"] { try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent(name).path, withDestinationPath: xpbPath) }
        let xclip = bin.appendingPathComponent("xclip").path
        let xsel = bin.appendingPathComponent("xsel").path
        #expect(try server.run(["-selection", "clipboard", "-i"], x, input: Data("through the xclip stand-in".utf8), program: xclip).status == 0)
        #expect(try server.run(["-b", "-o"], x, program: xsel).text == "through the xclip stand-in")
        #expect(eventually(timeout: 15) { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x).text) == "through the xclip stand-in" })
        #expect(try server.run(["-b", "-i"], x, input: Data("through xsel".utf8), program: xsel).status == 0)
        #expect(try server.run(["-o", "-selection", "clipboard"], x, program: xclip).text == "through xsel")

        // A secret copied on the server never crosses.
        let secret = "server-secret-5813"
        #expect(try server.run(["copy", "--sensitive"], x, input: Data(secret.utf8)).status == 0)
        #expect(try server.run(["paste"], x).text == secret, "served on the server itself")
        // A barrier: a later copy reaches the desktop on the same ordered link.
        #expect(try server.run(["copy"], x, input: Data("after the secret".utf8)).status == 0)
        #expect(eventually(timeout: 15) { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x).text) == "after the secret" })

        // The link drops (ssh killed) and is dialed again; the server's clipboard survived it.
        let clients = sshd.clientPIDs()
        #expect(clients.count == 1, "one ssh runs: \(clients)")
        for pid in clients { kill(pid, SIGKILL) }
        try desktop.waitForLog("link lost")
        #expect(try server.run(["paste"], x).text == "after the secret", "the server kept its clipboard")
        try desktop.waitForLog("connected to", count: 2, timeout: 20)
        owners.append(try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("after the redial".utf8)))
        #expect(eventually(timeout: 15) { (try? server.run(["paste"], x).text) == "after the redial" })

        // The server's history holds the copies made there (never the secret, never the
        // desktop's); one selected again there is the desktop's clipboard again.
        let history = try server.history(x)
        #expect(history.contains("after the secret") && history.contains("through xsel"), "\(history)")
        #expect(!history.contains(secret) && !history.contains("after the redial") && !history.contains("from the desktop"), "\(history)")
        let index = try #require(history.firstIndex(of: "after the secret"))
        #expect(try server.run(["history", "select", "\(index)"], x).status == 0)
        #expect(eventually(timeout: 15) { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x).text) == "after the secret" })

        try desktop.stop()
        owners.forEach { $0.stop() }
        sshd.stop()
        let stream = (try Data(contentsOf: URL(fileURLWithPath: sent))) + (try Data(contentsOf: URL(fileURLWithPath: received)))
        #expect(stream.range(of: Data("after the secret".utf8)) != nil, "the capture holds the stream")
        #expect(stream.range(of: Data(secret.utf8)) == nil, "the secret crossed the link")
        #expect(stream.range(of: Data("x-kde-passwordManagerHint".utf8)) == nil, "the secret was announced")
    }

    @Test("without a display, xpb history lists, searches, selects, pins and deletes the copies made on the host, kept in its SQLite file across restarts; xpb info names who copied")
    func historyAndInfo() throws {
        let x = try Xvfb()
        let server = try Server()
        let arguments = ["--headless", "--idle-exit", "0", "--ignore-match", "token-[0-9]+"]
        var daemon = try Peer(try builtProduct("xpbd"), arguments, display: x, environment: server.environment)
        defer { daemon.stop() }
        #expect(eventually(timeout: 10) { daemon.errorSoFar.contains("listening on") }, "\(daemon.errorSoFar)")

        // Nothing yet: an empty history, and info says nobody owns the clipboard (exit 2).
        #expect(try server.history(x) == [])
        let empty = try server.run(["info"], x)
        #expect(empty.status == 2 && empty.text.contains("owner: none"), "\(empty.status) \(empty.text)")

        let page = server.root.appendingPathComponent("page.html")
        let pageText = server.root.appendingPathComponent("page.txt")
        try Data("<i>styled</i> page".utf8).write(to: page)
        try Data("styled page".utf8).write(to: pageText)
        let files = ["first", "second"].map { server.root.appendingPathComponent("\($0).txt") }
        for file in files { try Data(file.lastPathComponent.utf8).write(to: file) }
        #expect(try server.run(["copy"], x, input: Data("plain one".utf8)).status == 0)
        #expect(try server.run(["copy", "-t", "html=\(page.path)", "-t", "text=\(pageText.path)"], x).status == 0)
        #expect(try server.run(["copy", "--sensitive"], x, input: Data("hunter2-secret".utf8)).status == 0)
        #expect(try server.run(["copy"], x, input: Data("the token-4242 here".utf8)).status == 0)
        #expect(try server.run(["copy", "-t", "text"] + files.map(\.path), x).status == 0)
        #expect(try server.run(["copy"], x, input: Data("newest".utf8)).status == 0)

        // Written in the background: the history holds the four copies, newest first; neither
        // the secret nor the text --ignore-match refuses.
        #expect(eventually(timeout: 10) { (try? server.history(x).count) == 4 }, "\((try? server.history(x)) ?? [])")
        #expect(try server.history(x) == ["newest", "first.txt", "styled page", "plain one"])
        #expect(daemon.errorSoFar.contains("not kept: its text matches --ignore-match"), "\(daemon.errorSoFar)")
        #expect(try server.history(x, ["search", "PAGE"]) == ["styled page"])
        // Credited to the program that ran xpb: this test runner.
        let runner = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")).lastPathComponent
        let listed = try server.run(["history"], x)
        #expect(listed.text.contains("\(runner) (\(getpid()))"), "the program that copied is named: \(listed.text)")

        // info: who copied (this host's xpb, its pid) and the items.
        let info = try server.run(["info", "--json"], x)
        let report = try #require(try JSONSerialization.jsonObject(with: info.output) as? [String: Any], "\(info.error)")
        #expect(report["owner"] as? String == "xpb" && report["ownerApp"] as? String == "xpb", "\(report)")
        #expect((report["ownerPID"] as? Int ?? 0) > 0 && (report["ownerExecutable"] as? String)?.hasSuffix("/xpb") == true, "\(report)")
        #expect(report["items"] as? [[String]] == [["public.utf8-plain-text"]], "\(report)")
        #expect(report["copiedBy"] as? String == runner && report["copiedByPID"] as? Int == Int(getpid()), "\(report)")

        // Selected again: the HTML entry with all its types, the two-item entry with both items.
        #expect(try server.run(["history", "select", "2"], x).text.contains("entry 2 is now CLIPBOARD"))
        #expect(try server.run(["paste", "-t", "html"], x).text == "<i>styled</i> page")
        #expect(try server.run(["paste"], x).text == "styled page")
        let selected = try server.run(["info"], x)
        #expect(selected.text.contains("owner: history (\(runner))") && selected.text.contains("item 0: public.html, public.utf8-plain-text"), "\(selected.text)")
        // A selection moves the entry to the front; nothing is added.
        #expect(try server.history(x) == ["styled page", "newest", "first.txt", "plain one"])
        #expect(try server.run(["history", "select", "2"], x).status == 0)
        #expect(try server.run(["types", "--items"], x).text.components(separatedBy: "\n").contains("1\ttext/plain"))
        #expect(try server.run(["paste", "--item", "1"], x).text == "second.txt")
        #expect(try server.history(x) == ["first.txt", "styled page", "newest", "plain one"])

        // Pin, delete, clear (the pinned stays).
        #expect(try server.run(["history", "pin", "3"], x).status == 0)
        #expect(try server.run(["history", "delete", "2"], x).status == 0)
        #expect(try server.history(x) == ["first.txt", "styled page", "plain one"])
        #expect(try server.run(["history", "clear"], x).status == 0)
        #expect(try server.history(x) == ["plain one"])
        let missing = try server.run(["history", "select", "7"], x)
        #expect(missing.status == 1 && missing.error.contains("no history entry 7"), "\(missing.status) \(missing.error)")

        // The history is the state directory's SQLite file: a new daemon finds it.
        let database = server.home.appendingPathComponent(".local/state/xpb/history.sqlite")
        #expect(FileManager.default.fileExists(atPath: database.path))
        let stopped = try { () throws -> Outcome in
            kill(daemon.pid, SIGTERM)
            return try daemon.finish(timeout: 10)
        }()
        #expect(stopped.status == 0 && stopped.error.contains("history written"), "\(stopped.error)")
        daemon = try Peer(try builtProduct("xpbd"), arguments, display: x, environment: server.environment)
        #expect(eventually(timeout: 10) { daemon.errorSoFar.contains("listening on") }, "\(daemon.errorSoFar)")
        #expect(try server.history(x) == ["plain one"])
        #expect(try server.run(["history", "select", "0"], x).status == 0)
        #expect(try server.run(["paste"], x).text == "plain one")

        // An expiring copy is forgotten by the history too when it expires. Both steps are waited
        // for in the daemon's log: under load, a look at the history between the write and the
        // expiry (polling xpb history) could miss the entry's whole life.
        let logged = { (line: String) in daemon.errorSoFar.components(separatedBy: line).count - 1 }
        let kept = logged("kept in the history")
        #expect(try server.run(["copy", "--expire", "3"], x, input: Data("brief".utf8)).status == 0)
        #expect(eventually(timeout: 10) { logged("kept in the history") > kept }, "\(daemon.errorSoFar)")
        #expect(eventually(timeout: 10) { logged("a copy expired: dropped from the pasteboard and the history") == 1 }, "\(daemon.errorSoFar)")
        #expect(try server.history(x) == ["plain one"])
        #expect(try server.run(["paste"], x).status == 2, "the expired copy is gone from the clipboard")
    }

    @Test("a headless daemon holds at most 32 named pasteboards and --max-size in all; a copy past either is refused whole with a clear error, the others unchanged")
    func namedPasteboardCaps() throws {
        let x = try Xvfb()
        let server = try Server()
        let daemon = try Peer(try builtProduct("xpbd"), ["--headless", "--idle-exit", "0", "--max-size", "8M"], display: x, environment: server.environment)
        defer { daemon.stop() }
        #expect(eventually(timeout: 10) { daemon.errorSoFar.contains("listening on") }, "\(daemon.errorSoFar)")
        for index in 1...32 {
            let copied = try server.run(["copy", "--pasteboard", "n\(index)"], x, input: Data("named \(index)".utf8))
            #expect(copied.status == 0, "n\(index): \(copied.error)")
        }
        let over = try server.run(["copy", "--pasteboard", "n33"], x, input: Data("one too many".utf8))
        #expect(over.status != 0 && over.error.contains("holds 32 named pasteboards already"), "\(over.status) \(over.error)")
        #expect(try server.run(["paste", "--pasteboard", "n33"], x).status == 2)
        // One that exists is replaced, and CLIPBOARD is not a named one.
        #expect(try server.run(["copy", "--pasteboard", "n1"], x, input: Data("named 1 again".utf8)).status == 0)
        #expect(try server.run(["paste", "--pasteboard", "n1"], x).text == "named 1 again")
        // The bytes: 3 × 3 MiB fit in 8 MiB with the rest, the third does not.
        let big = Data(repeating: 0x61, count: 3 << 20)
        #expect(try server.run(["copy"], x, input: big).status == 0)
        #expect(try server.run(["copy", "--pasteboard", "n2"], x, input: big).status == 0)
        let heavy = try server.run(["copy", "--pasteboard", "n3"], x, input: big)
        #expect(heavy.status != 0 && heavy.error.contains("would pass its 8.0 MiB (--max-size)"), "\(heavy.status) \(heavy.error)")
        #expect(try server.run(["paste", "--pasteboard", "n3"], x).text == "named 3", "unchanged")
        #expect(try server.run(["paste"], x).output == big)
    }

    @Test("twelve writers of 32 MiB at once to one named pasteboard (round four, 15): writes under way count against --max-size, the daemon holds at most that much, and the ones refused say why")
    func concurrentWritersAreBounded() throws {
        let x = try Xvfb()
        let server = try Server()
        let daemon = try Peer(try builtProduct("xpbd"), ["--headless", "--idle-exit", "0", "--max-size", "64M", "--max-target-size", "40M"],
                              display: x, environment: server.environment)
        defer { daemon.stop() }
        #expect(eventually(timeout: 10) { daemon.errorSoFar.contains("listening on") }, "\(daemon.errorSoFar)")
        let file = server.root.appendingPathComponent("big")
        try Data(repeating: 0x62, count: 32 << 20).write(to: file)
        let writers = try (0..<12).map { _ in
            try Peer("/bin/sh", ["-c", "exec \"$0\" copy --pasteboard big < \"$1\"", try builtProduct("xpb"), file.path], display: x, environment: server.environment)
        }
        let outcomes = try writers.map { try $0.finish(timeout: 120) }
        let held = outcomes.filter { $0.status == 0 }.count
        let refused = outcomes.filter { $0.status != 0 }
        #expect(held >= 1, "\(outcomes.map(\.error))")
        #expect(refused.allSatisfy { $0.error.contains("(--max-size)") }, "\(refused.map(\.error))")
        let status = (try? String(contentsOfFile: "/proc/\(daemon.pid)/status", encoding: .utf8)) ?? ""
        let peak = (Int(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "0") ?? 0) >> 10
        // Twelve 32 MiB copies held at once would be 384 MiB; 64 MiB being written at most, and
        // what the daemon keeps of the one held, is far less.
        #expect(peak < 250, "the headless daemon's peak: \(peak) MiB")
        #expect(try server.run(["paste", "--pasteboard", "big"], x).output.count == 32 << 20)
    }

    @Test("a headless daemon exits after --idle-exit with no link and no client, and not while a client watches")
    func idleExit() throws {
        let x = try Xvfb()
        let server = try Server()
        let daemon = try Peer(try builtProduct("xpbd"), ["--headless", "--idle-exit", "1"], display: x, environment: server.environment)
        defer { daemon.stop() }
        #expect(eventually(timeout: 10) { daemon.errorSoFar.contains("listening on") }, "\(daemon.errorSoFar)")
        // A watcher is a client: the daemon stays while it waits.
        let watcher = try Peer(try builtProduct("xpb"), ["watch", "--count", "1"], display: x, environment: server.environment)
        #expect(eventually(timeout: 10) { (try? server.run(["daemon", "status", "--json"], x).status) == 0 })
        Thread.sleep(forTimeInterval: 2.5)
        #expect(daemon.isRunning, "the daemon left its watcher: \(daemon.errorSoFar)")
        #expect(try server.run(["copy"], x, input: Data("wake".utf8)).status == 0)
        let watched = try watcher.finish(timeout: 10)
        #expect(watched.text.hasPrefix("1\tCLIPBOARD\ttext/plain"), "\(watched.text)")
        // Then nobody: it exits by itself, cleanly, and says why.
        let ended = try daemon.finish(timeout: 15)
        #expect(ended.status == 0, "\(ended.error)")
        #expect(ended.error.contains("no link and no client for 1 s: exiting (--idle-exit)"), "\(ended.error)")
    }

    @Test("OSC 52 is the last resort of xpb copy: to the terminal, wrapped for tmux and screen, text only, a clear error past its size")
    func osc52() throws {
        let x = try Xvfb()
        let server = try Server()
        let xpbPath = try builtProduct("xpb")
        let script = try which("script")
        // Under a pseudo-terminal: `script` gives the command one and copies what it writes.
        func throughTerminal(_ input: String, _ arguments: String = "", environment: [String: String] = [:]) throws -> Outcome {
            let command = "printf '%s' '\(input)' | \(xpbPath) copy \(arguments)"
            return try run(script, ["-q", "-e", "-c", command, "/dev/null"], display: x, environment: server.environment.merging(environment) { $1 })
        }
        let plain = try throughTerminal("hi there")
        #expect(plain.status == 0, "\(plain.error) \(plain.text)")
        #expect(plain.output.range(of: Data("\u{1B}]52;c;aGkgdGhlcmU=\u{07}".utf8)) != nil, "\(plain.text.debugDescription)")
        let primary = try throughTerminal("hi there", "--primary")
        #expect(primary.output.range(of: Data("\u{1B}]52;p;aGkgdGhlcmU=\u{07}".utf8)) != nil, "\(primary.text.debugDescription)")
        let tmux = try throughTerminal("hi there", environment: ["TMUX": "/tmp/tmux-1/default,1,0"])
        #expect(tmux.output.range(of: Data("\u{1B}Ptmux;\u{1B}\u{1B}]52;c;aGkgdGhlcmU=\u{07}\u{1B}\\".utf8)) != nil, "\(tmux.text.debugDescription)")
        let screen = try throughTerminal("hi there", environment: ["STY": "1.pts-0.host"])
        #expect(screen.output.range(of: Data("\u{1B}P\u{1B}]52;c;aGkgdGhlcmU=\u{07}\u{1B}\\".utf8)) != nil, "\(screen.text.debugDescription)")
        // Past the documented size: an error, and nothing written to the terminal.
        let long = String(repeating: "a", count: 80_000)
        let tooLong = try throughTerminal(long)
        #expect(tooLong.status == 1, "\(tooLong.status)")
        #expect(tooLong.text.contains("OSC 52 through the terminal carries at most 74994"), "\(tooLong.text.prefix(300))")
        #expect(tooLong.output.range(of: Data("]52;".utf8)) == nil)
        // Without a terminal either (a new session has none): the error says what to do.
        let none = try server.run(["-w", xpbPath, "copy"], x, input: Data("nowhere".utf8), program: try which("setsid"))
        #expect(none.status == 5 && none.error.contains("xpbd --headless"), "\(none.status) \(none.error)")
    }
}
