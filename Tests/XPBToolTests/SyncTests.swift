import Foundation
import PasteboardWire
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// One display with its own daemon for the sync tests. Every daemon of a test shares one
/// runtime directory (one machine, one user), so that `--sync-display` finds the others' sockets.
private struct Node {
    let x: Xvfb
    let daemon: DaemonProcess

    init(runtime: DaemonHome, arguments: [String] = []) throws {
        x = try Xvfb()
        daemon = try DaemonProcess(x, home: runtime, arguments: ["--state-dir", runtime.root.appendingPathComponent("state-\(UUID().uuidString.prefix(6))").path] + arguments)
    }

    /// Three displays in a star, connected: A and C, and the hub between them that dials both.
    /// Returns A, the hub, C.
    static func star(runtime: DaemonHome) throws -> [Node] {
        let a = try Node(runtime: runtime)
        let c = try Node(runtime: runtime)
        let hub = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display, "--sync-display", c.x.display])
        try hub.daemon.waitForLog("connected to", count: 2, timeout: 15)
        return [a, hub, c]
    }

    /// How many copies made elsewhere this node took so far.
    var taken: Int { daemon.log.components(separatedBy: "is now the copy from").count - 1 }

    /// Waits until this node took `count` copies from elsewhere.
    func waitForTaken(_ count: Int, timeout: Double = 10) throws {
        guard eventually(timeout: timeout, { taken >= count }) else {
            throw TestFailure("display \(x.display) took \(taken) copies, not \(count); its log:\n\(daemon.log)")
        }
    }

    func read(_ target: String) throws -> Outcome {
        try run("xclip", ["-o", "-selection", "clipboard", "-t", target], display: x, timeout: 30)
    }

    /// This display's sync value of `selection` in the status (`syncValues`).
    func syncValue(_ selection: String) throws -> [String: Any]? {
        (try status()["syncValues"] as? [[String: Any]])?.first { $0["selection"] as? String == selection }
    }

    func status() throws -> [String: Any] {
        let outcome = try xpb(["daemon", "status", "--json"], x, environment: daemon.home.environment)
        guard outcome.status == 0, let object = try JSONSerialization.jsonObject(with: outcome.output) as? [String: Any],
              let status = object["status"] as? [String: Any] else {
            throw TestFailure("xpb daemon status failed: \(outcome.error)")
        }
        return status
    }

    func peers() throws -> [[String: Any]] { (try status()["peers"] as? [[String: Any]]) ?? [] }
}

/// Copies on `from` with xclip (one target) and checks that `to` reads the same bytes.
private func roundTrip(_ data: Data, target: String, from: Node, to: Node, taken: Int) throws -> Peer {
    let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", target, "-quiet"], display: from.x, input: data)
    // A copy that does not arrive, or does not read, is told with both daemons' logs: the side
    // that announces is the one to look at as often as the side that takes.
    do { try to.waitForTaken(taken) } catch {
        throw TestFailure("\(error)\nthe copying display's log:\n\(from.daemon.log)")
    }
    let read = try to.read(target)
    #expect(read.status == 0, "xclip -o -t \(target) on the other display: \(read.error)\nits log:\n\(to.daemon.log)\nthe copying display's log:\n\(from.daemon.log)")
    #expect(read.output == data, "\(target): \(read.output.count) bytes read, \(data.count) copied")
    return owner
}

/// The same round trips over any link: UTF-8 text, HTML with text (one xpb item with two
/// representations), a PNG, a 50 MiB binary target, and text back the other way. Returns the
/// copies `b` took.
private func checkRoundTrips(_ a: Node, _ b: Node) throws -> Int {
    var taken = b.taken
    var owners: [Peer] = []
    taken += 1
    owners.append(try roundTrip(Data("Grüße — synced ✓\nline 2".utf8), target: "UTF8_STRING", from: a, to: b, taken: taken))

    let html = try scratchFile("page.html", Data("<p><b>bold</b> &amp; more</p>".utf8))
    let text = try scratchFile("page.txt", Data("bold & more".utf8))
    let copy = try xpb(["copy", "-t", "html=\(html)", "-t", "text=\(text)"], a.x, environment: a.daemon.home.environment)
    #expect(copy.status == 0, "\(copy.error)")
    taken += 1
    try b.waitForTaken(taken)
    #expect(try b.read("text/html").output == Data("<p><b>bold</b> &amp; more</p>".utf8))
    #expect(try b.read("UTF8_STRING").output == Data("bold & more".utf8))
    // xpb on the other side sees the item and its types (the manifest crossed, its fast-path field dropped).
    let pasted = try xpb(["paste", "-t", "html"], b.x, environment: b.daemon.home.environment)
    #expect(pasted.output == Data("<p><b>bold</b> &amp; more</p>".utf8), "xpb paste -t html: \(pasted.error)")
    // A GTK 3 reader there sees the types and the text.
    let targets = try toolkitPeer("gtk_clipboard.py", ["targets"], display: b.x).finish().text
    #expect(targets.contains("text/html") && targets.contains("UTF8_STRING"), "GTK sees: \(targets)")
    #expect(try toolkitPeer("gtk_clipboard.py", ["text"], display: b.x).finish().text == "bold & more\n")

    let png = try Data(contentsOf: packageRoot.appendingPathComponent("Tests/Peers/image.png"))
    taken += 1
    owners.append(try roundTrip(png, target: "image/png", from: a, to: b, taken: taken))

    // 50 MiB: INCR on both displays, streamed across the link.
    taken += 1
    owners.append(try roundTrip(payload(50 << 20, seed: 5), target: "application/octet-stream", from: a, to: b, taken: taken))

    // And back.
    let before = a.taken
    let back = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: b.x, input: Data("from the other side".utf8))
    try a.waitForTaken(before + 1)
    #expect(try a.read("UTF8_STRING").output == Data("from the other side".utf8))
    back.stop()
    owners.forEach { $0.stop() }
    return taken
}

@Suite("xpbd sync", .serialized)
struct SyncTests {
    @Test("two displays on one machine: text, HTML + text, PNG and 50 MiB cross byte-exact; a GTK reader sees the types")
    func twoDisplays() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display])
        try b.daemon.waitForLog("connected to")
        _ = try checkRoundTrips(a, b)
        // The last copy was xclip's on b: the announce names b and the app, never a path.
        let origin = try #require(try a.syncValue("CLIPBOARD")?["origin"] as? String)
        #expect(origin.hasSuffix("(xclip)") && !origin.contains("/usr"), "\(origin)")
        // xpb info on a says who made the copy it serves for b: the announce's node and app.
        let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], a.x, environment: a.daemon.home.environment).output) as? [String: Any]
        #expect(info?["copiedBy"] as? String == origin && info?["copiedByPID"] == nil, "\(info ?? [:])")
        let peers = try b.peers()
        #expect(peers.count == 1)
        #expect(peers.first?["state"] as? String == "connected")
        #expect((peers.first?["bytesReceived"] as? Int ?? 0) > 50 << 20, "bytes moved are counted: \(peers)")
        // The heartbeat measures the round trip.
        #expect(eventually(timeout: 5) { (try? b.peers().first?["roundTripMilliseconds"] as? Double) != nil }, "no round-trip time: \((try? b.peers()) ?? [])")
        try b.daemon.stop()
        try a.daemon.stop()
    }

    @Test("a secret its app takes back (an empty copy by an xclip named buttercup) is withdrawn from the peer too: it serves it no more, and no state directory holds it")
    func takenBackSecretLeavesPeers() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display])
        try b.daemon.waitForLog("connected to")
        let manager = try renamedXclip("buttercup", in: runtime.root.appendingPathComponent("bin"))
        let secret = "peer-secret-\(UUID().uuidString)"
        #expect(try xclipCopy(secret, program: manager, display: a.x).status == 0)
        try b.waitForTaken(1)
        #expect(try b.read("UTF8_STRING").text == secret, "the peer serves the copy before it is taken back")
        try waitForEntries(1, a.x, a.daemon.home)
        #expect(try xclipCopy("", program: manager, display: a.x).status == 0)
        try a.daemon.waitForLog("the copy was a secret, forgotten")
        #expect(eventually(timeout: 10) { (try? b.read("UTF8_STRING").text) != secret }, "the peer still serves the secret")
        let grep = try run("/bin/grep", ["-r", "-a", "-l", "-F", "--", secret, runtime.root.path], display: a.x)
        #expect(grep.status == 1, "found in \(grep.text)")
        try b.daemon.stop()
        try a.daemon.stop()
    }

    @Test("copies by a password manager (xclip renamed keepassxc) and by a --no-sync-app app stay on their display; a text --ignore-match matches is withdrawn once read")
    func appRulesKeepCopiesHome() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime, arguments: ["--no-sync-app", "homebody", "--ignore-match", "^\\d{6}$"])
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display])
        try b.daemon.waitForLog("connected to")
        let xclip = try xclipPath()
        func renamed(_ name: String) throws -> String { try renamedXclip(name, in: runtime.root) }
        var owners: [Peer] = []
        defer { owners.forEach { $0.stop() } }
        owners.append(try Peer(xclip, ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("shared".utf8)))
        try b.waitForTaken(1)
        #expect(try b.read("UTF8_STRING").text == "shared")
        owners.append(try Peer(try renamed("keepassxc"), ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("hunter2".utf8)))
        try a.daemon.waitForLog("sync: CLIPBOARD is marked secret: not shared")
        owners.append(try Peer(try renamed("homebody"), ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("at home".utf8)))
        try a.daemon.waitForLog("sync: CLIPBOARD is local-only: not shared")
        // Kept on its own display all the same.
        try a.daemon.waitForLog("homebody): 1 targets")
        #expect(b.taken == 1)
        let onB = try b.read("UTF8_STRING").text
        #expect(onB != "hunter2" && onB != "at home", "\(onB)")
        // A one-time code: announced at once (its text is not read yet), withdrawn once read.
        owners.append(try Peer(xclip, ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("123456".utf8)))
        try a.daemon.waitForLog("sync: CLIPBOARD withdrawn: its text matches --ignore-match")
        #expect(eventually(timeout: 10) { (try? b.read("UTF8_STRING").text) != "123456" })
        try a.daemon.waitForLog("not kept: its text matches --ignore-match")
        try b.daemon.stop()
        try a.daemon.stop()
    }

    @Test("two machines over a real ssh to a loopback sshd: round trips, reconnection after ssh is killed, nothing secret in the stream")
    func overSSH() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let sshd = try LoopbackSSHD(display: a.x)
        let sent = runtime.root.appendingPathComponent("sent.bin").path
        let received = runtime.root.appendingPathComponent("received.bin").path
        let xpbPath = try builtProduct("xpb")
        // The remote shell runs xpb with the test's runtime directory (sshd passes no environment).
        let b = try Node(runtime: runtime, arguments: [
            "--peer", "\(LoopbackSSHD.host),display=\(a.x.display)",
            "--ssh", try sshd.capturingCommand(sent: sent, received: received),
            "--remote-xpb", "XDG_RUNTIME_DIR=\(runtime.runtimeDirectory.path) \(xpbPath)",
        ])
        try b.daemon.waitForLog("connected to", timeout: 20)
        var taken = try checkRoundTrips(a, b)

        // Kill the ssh process: the daemon reconnects and sync resumes.
        #expect(try b.peers().first?["transportPID"] as? Int != nil, "the status names the transport's process")
        let clients = sshd.clientPIDs()
        #expect(clients.count == 1, "one ssh runs: \(clients)")
        for pid in clients { kill(pid, SIGKILL) }
        try b.daemon.waitForLog("link lost")
        #expect(eventually(timeout: 15) { (try? b.peers().first?["state"] as? String) == "connected" }, "reconnected: \((try? b.peers()) ?? [])")
        taken += 1
        let after = try roundTrip(Data("after the reconnection".utf8), target: "UTF8_STRING", from: a, to: b, taken: taken)
        #expect(b.daemon.log.components(separatedBy: "link lost").count - 1 == 1, "one log line per state change")

        // Secrets never cross: a --local-only copy, a --sensitive copy, and an owner that marks
        // its data for password managers.
        let secrets = ["local-only-secret-4711", "sensitive-secret-4712"]
        for (flag, secret) in zip(["--local-only", "--sensitive"], secrets) {
            let copy = try xpb(["copy", flag], a.x, input: Data(secret.utf8), environment: a.daemon.home.environment)
            #expect(copy.status == 0, "\(copy.error)")
            try a.daemon.waitForLog(flag == "--local-only" ? "is local-only: not shared" : "is marked secret: not shared")
        }
        let marked = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "x-kde-passwordManagerHint", "-quiet"], display: a.x,
                              input: Data("secret".utf8))
        try a.daemon.waitForLog("is marked secret: not shared", count: 2, timeout: 15)
        marked.stop()
        // A's earlier copy is no longer on A's clipboard: it is withdrawn on B too, and B shows no secret.
        try b.daemon.waitForLog("was cleared or withdrawn elsewhere")
        let shown = try b.read("UTF8_STRING").output
        #expect(shown.isEmpty, "B shows \(String(decoding: shown, as: UTF8.self))")
        // A barrier: a copy made on A after the secrets reaches B on the same ordered link, so
        // anything sent for the secrets would have come before it.
        taken += 1
        let barrier = try roundTrip(Data("after the secrets".utf8), target: "UTF8_STRING", from: a, to: b, taken: taken)
        barrier.stop()
        after.stop()
        try b.daemon.stop()
        try a.daemon.stop()
        sshd.stop()
        // The stream as it crossed ssh, both ways: the non-secret text is there, no secret is.
        let stream = (try Data(contentsOf: URL(fileURLWithPath: sent))) + (try Data(contentsOf: URL(fileURLWithPath: received)))
        #expect(stream.range(of: Data("after the reconnection".utf8)) != nil, "the capture holds the stream")
        for secret in secrets {
            #expect(stream.range(of: Data(secret.utf8)) == nil, "\(secret) crossed the link")
        }
        #expect(stream.range(of: Data("x-kde-passwordManagerHint".utf8)) == nil, "the secret owner was announced")
    }

    @Test("three displays in a star: a copy on each in turn reaches all, nothing loops; simultaneous copies settle on one")
    func star() throws {
        let nodes = try Node.star(runtime: try DaemonHome())
        let (a, c) = (nodes[0], nodes[2])
        var owners: [Peer] = []
        // A copy on each in turn, then on A again: the last round is the barrier for the one before.
        var expected = [0, 0, 0]
        for (index, origin) in (nodes + [a]).enumerated() {
            let others = nodes.filter { $0.x.display != origin.x.display }
            let text = Data("copy \(index) on \(origin.x.display)".utf8)
            owners.append(try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: origin.x, input: text))
            for (position, node) in nodes.enumerated() where node.x.display != origin.x.display { expected[position] += 1 }
            for other in others {
                try other.waitForTaken(expected[nodes.firstIndex { $0.x.display == other.x.display }!])
                #expect(try other.read("UTF8_STRING").output == text)
            }
            // No echo, nothing taken twice: each display took exactly the copies made elsewhere.
            // An echo (or a second take) of an earlier round would have travelled ahead of this
            // round's copy on the same links (each is an ordered stream), so it has been seen.
            for (position, node) in nodes.enumerated() {
                #expect(node.taken == expected[position], "\(node.x.display) took \(node.taken) copies, not \(expected[position]): an echo or a copy taken twice")
            }
            #expect(owners.last!.isRunning, "the copy came back to \(origin.x.display) and took its clipboard")
        }
        owners.forEach { $0.stop() }
        // Simultaneous copies on the two leaves: all three settle on the same contents.
        let first = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("simultaneous A".utf8))
        let second = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: c.x, input: Data("simultaneous C".utf8))
        var settled: [Data] = []
        let agreed = eventually(timeout: 10) {
            settled = nodes.map { (try? $0.read("UTF8_STRING").output) ?? Data() }
            return Set(settled).count == 1 && !settled[0].isEmpty
        }
        #expect(agreed, "the displays hold \(settled.map { String(decoding: $0, as: UTF8.self) })")
        // The status says which copy won, with the same stamp on every display.
        let values = try nodes.map { node -> String in
            let value = (try node.status()["syncValues"] as? [[String: Any]])?.first { $0["selection"] as? String == "CLIPBOARD" }
            return (value?["stamp"] as? String) ?? "none"
        }
        #expect(Set(values).count == 1 && values[0] != "none", "the displays' statuses name \(values)")
        let line = try xpb(["daemon", "status"], a.x, environment: a.daemon.home.environment).text
        #expect(line.contains("sync CLIPBOARD: copy \(values[0])"), "\(line)")
        first.stop()
        second.stop()
        for node in nodes { try node.daemon.stop() }
    }

    @Test("a stopped peer delays neither a local copy and paste nor anything else; a paste of its data fails in time")
    func stoppedPeer() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display])
        try b.daemon.waitForLog("connected to")
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("lives on A".utf8))
        try b.waitForTaken(1)
        func copyAndPaste(_ text: String) throws -> Double {
            let started = Date()
            let copy = try xpb(["copy"], b.x, input: Data(text.utf8), environment: b.daemon.home.environment)
            let paste = try xpb(["paste"], b.x, environment: b.daemon.home.environment)
            #expect(copy.status == 0 && paste.output == Data(text.utf8), "\(copy.error) \(paste.error)")
            return Date().timeIntervalSince(started)
        }
        let usual = try (0..<3).map { try copyAndPaste("usual \($0)") }.max()!
        // Back to A's copy on B, then stop A's daemon.
        owner.stop()
        let again = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("lives on A, again".utf8))
        try b.waitForTaken(2)
        a.daemon.peer.signal(SIGSTOP)
        defer { a.daemon.peer.signal(SIGCONT) }
        for attempt in 0..<3 {
            let took = try copyAndPaste("while A is stopped \(attempt)")
            // A stall would cost the link's dead-peer timeout (10 s) or a fetch timeout (3 s).
            #expect(took < usual + 1, "copy + paste took \(took) s with the peer stopped, \(usual) s before")
        }
        // A's copy on B again (announced before the stop), then a paste of it: refused in time.
        a.daemon.peer.signal(SIGCONT)
        again.stop()
        let last = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("lives on A, third".utf8))
        try b.waitForTaken(3)
        a.daemon.peer.signal(SIGSTOP)
        let started = Date()
        let paste = try xpb(["paste"], b.x, environment: b.daemon.home.environment, timeout: 30)
        let took = Date().timeIntervalSince(started)
        #expect(paste.status != 0, "a paste of a stopped peer's data cannot succeed")
        #expect(took < 8, "the paste failed after \(took) s")
        a.daemon.peer.signal(SIGCONT)
        last.stop()
        try b.daemon.stop()
        try a.daemon.stop()
    }
}

extension SyncTests {
    @Test("a transfer over the cap fails on the reading side at once with a clear error; the link goes on")
    func transferCap() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display, "--sync-max-transfer", "1M", "--sync-max-total", "2M"])
        try b.daemon.waitForLog("connected to")
        // xclip announces its size through INCR; xpb through TARGET_SIZES as well.
        let big = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "application/octet-stream", "-quiet"], display: a.x,
                           input: payload(3 << 20, seed: 9))
        try b.waitForTaken(1)
        let started = Date()
        let read = try b.read("application/octet-stream")
        #expect(read.status != 0 && read.output.isEmpty, "a 3 MiB target crossed a 1 MiB cap")
        #expect(Date().timeIntervalSince(started) < 5, "the refusal took \(Date().timeIntervalSince(started)) s")
        try b.daemon.waitForLog("cap per transfer")
        big.stop()
        let copy = try xpb(["copy"], a.x, input: payload(3 << 20, seed: 3), environment: a.daemon.home.environment)
        #expect(copy.status == 0)
        try b.waitForTaken(2)
        let pasted = try xpb(["paste"], b.x, environment: b.daemon.home.environment, timeout: 10)
        #expect(pasted.status != 0 && pasted.output.isEmpty, "xpb paste of a 3 MiB copy over a 1 MiB cap: \(pasted.error)")
        let small = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("small".utf8))
        try b.waitForTaken(3)
        #expect(try b.read("UTF8_STRING").output == Data("small".utf8))
        small.stop()
        try b.daemon.stop()
        try a.daemon.stop()
    }
}

extension SyncTests {
    @Test("a receive-only, CLIPBOARD-only link: A's clipboard reaches B; B's copies and A's PRIMARY do not")
    func oneWay() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime, arguments: ["--sync-primary"])
        let b = try Node(runtime: runtime, arguments: ["--sync-display", "\(a.x.display),receive-only,clipboard-only", "--sync-primary"])
        try b.daemon.waitForLog("connected to")
        let fromA = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data("A to B".utf8))
        try b.waitForTaken(1)
        #expect(try b.read("UTF8_STRING").output == Data("A to B".utf8))
        let primary = try Peer("xclip", ["-i", "-selection", "primary", "-quiet"], display: a.x, input: Data("A's PRIMARY".utf8))
        let fromB = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: b.x, input: Data("B to A".utf8))
        // Barrier: each daemon has read its display's new copy and decided to keep it to itself
        // (no link sends it: its offer is not even read). Nothing was sent, so nothing can arrive.
        let decided = eventually(timeout: 10) {
            (try? b.syncValue("CLIPBOARD")?["localState"] as? String) == "pending"
                && (try? a.syncValue("PRIMARY")?["localState"] as? String) == "pending"
        }
        #expect(decided, "B: \(String(describing: try? b.syncValue("CLIPBOARD"))); A: \(String(describing: try? a.syncValue("PRIMARY")))")
        #expect(a.taken == 0, "B's copy reached A over a receive-only link")
        #expect(b.taken == 1, "A's PRIMARY reached B over a CLIPBOARD-only link")
        #expect(try a.read("UTF8_STRING").output == Data("A to B".utf8))
        let peers = try b.peers()
        #expect(peers.first?["direction"] as? String == "receive-only" && peers.first?["selections"] as? [String] == ["CLIPBOARD"])
        #expect(peers.first?["announcesSent"] as? Int == 0, "announces went out on a receive-only link: \(peers)")
        fromA.stop()
        primary.stop()
        fromB.stop()
        try b.daemon.stop()
        try a.daemon.stop()
    }

    @Test("PRIMARY with --sync-primary, and a history entry selected again, cross like copies")
    func primaryAndHistory() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime, arguments: ["--sync-primary"])
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display, "--sync-primary"])
        try b.daemon.waitForLog("connected to")
        let primary = try Peer("xclip", ["-i", "-selection", "primary", "-quiet"], display: a.x, input: Data("selected text".utf8))
        try b.waitForTaken(1)
        let read = try run("xclip", ["-o", "-selection", "primary"], display: b.x)
        #expect(read.output == Data("selected text".utf8), "PRIMARY on the other display: \(read.error)")
        primary.stop()
        // Two clipboard copies on A (kept in A's history), then the older one selected again.
        for (index, text) in ["first entry", "second entry"].enumerated() {
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: Data(text.utf8))
            try b.waitForTaken(2 + index)
            try a.daemon.waitForLog("kept CLIPBOARD from", count: index + 1, timeout: 15)
            owner.stop()
        }
        let select = try xpb(["history", "select", "1"], a.x, environment: a.daemon.home.environment)
        #expect(select.status == 0, "\(select.error)")
        try b.waitForTaken(4)
        #expect(try b.read("UTF8_STRING").output == Data("first entry".utf8), "the selected entry on the other display")
        try b.daemon.stop()
        try a.daemon.stop()
    }

    @Test("an expiring copy is withdrawn everywhere when it expires")
    func expiry() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display])
        try b.daemon.waitForLog("connected to")
        let copy = try xpb(["copy", "--expire", "2"], a.x, input: Data("short-lived".utf8), environment: a.daemon.home.environment)
        #expect(copy.status == 0)
        try b.waitForTaken(1)
        #expect(try b.read("UTF8_STRING").output == Data("short-lived".utf8))
        let gone = eventually(timeout: 6) { (try? b.read("UTF8_STRING").output) != Data("short-lived".utf8) }
        #expect(gone, "the expired copy is still served on the other display")
        #expect(try b.read("TARGETS").output.isEmpty, "the other display's clipboard should be empty")
        try b.daemon.stop()
        try a.daemon.stop()
    }

    @Test("copies made while no link is up keep the order their daemons saw them in once a link comes")
    func copiesBeforeTheLink() throws {
        let runtime = try DaemonHome()
        let xA = try Xvfb()
        // B dials A's display before A's daemon runs: it retries meanwhile.
        let xB = try Xvfb()
        let b = try DaemonProcess(xB, home: runtime, arguments: ["--state-dir", runtime.root.appendingPathComponent("state-b").path,
                                                               "--sync-display", xA.display])
        let a = try DaemonProcess(xA, home: runtime, arguments: ["--state-dir", runtime.root.appendingPathComponent("state-a").path])
        let older = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: xA, input: Data("older, on A".utf8))
        // A copy is stamped when its daemon sees it: B's copy comes after A's daemon saw A's (its
        // keeper fetched it), however loaded the machine is.
        try a.waitForLog("kept CLIPBOARD from")
        let newer = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: xB, input: Data("newer, on B".utf8))
        try b.waitForLog("connected to", timeout: 15)
        let settled = eventually(timeout: 10) {
            (try? run("xclip", ["-o", "-selection", "clipboard"], display: xA).output) == Data("newer, on B".utf8)
        }
        #expect(settled, "A's display shows \(String(decoding: (try? run("xclip", ["-o", "-selection", "clipboard"], display: xA).output) ?? Data(), as: UTF8.self)); A's log:\n\(a.log)\nB's log:\n\(b.log)")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: xB).output == Data("newer, on B".utf8))
        #expect(newer.isRunning, "B's own newer copy was replaced by A's older one")
        older.stop()
        newer.stop()
        try b.stop()
        try a.stop()
    }

    @Test("a peer ssh cannot reach: the status gives ssh's own last line, read once its standard error ends")
    func sshSaysWhy() throws {
        let runtime = try DaemonHome()
        // An ssh that fails as a real one does: a line on standard error, then exit 255.
        let ssh = "/bin/sh -c 'echo one line before >&2; echo \"ssh: connect to host nowhere port 22: No route to host\" >&2; exit 255' ssh"
        let b = try Node(runtime: runtime, arguments: ["--peer", "nowhere", "--ssh", ssh])
        try b.daemon.waitForLog("(ssh: ssh: connect to host nowhere port 22: No route to host); retrying")
        let peer = try #require(try b.peers().first)
        #expect((peer["lastError"] as? String)?.hasSuffix("(ssh: ssh: connect to host nowhere port 22: No route to host)") == true, "\(peer)")
        try b.daemon.stop()
    }

    @Test("a link whose daemon is not there retries with backoff, says why in the status, and logs it once")
    func retries() throws {
        let runtime = try DaemonHome()
        let b = try Node(runtime: runtime, arguments: ["--sync-display", ":4242"])
        // Three attempts (at 0, 0.5 and 1.5 s): the first logged as a warning, the others at debug.
        try b.daemon.waitForLog("sync with display :4242: no xpbd runs", count: 3)
        let peer = try #require(try b.peers().first)
        #expect(peer["state"] as? String == "retrying", "\(peer)")
        #expect((peer["lastError"] as? String)?.contains("no xpbd runs for display :4242") == true, "\(peer)")
        // Once at warning level; the retries after it only at debug.
        #expect(b.daemon.log.components(separatedBy: "warning xpbd: [PasteboardDaemon] sync with display :4242").count - 1 == 1, "logged once: \(b.daemon.log)")
        let text = try xpb(["daemon", "status"], b.x, environment: b.daemon.home.environment).text
        #expect(text.contains("display :4242: retrying") && text.contains("last error: no xpbd runs"), "\(text)")
        try b.daemon.stop()
    }

    @Test("a peer speaking only an older protocol version is refused at hello with a message naming both versions; a newer one is answered with this version")
    func versionMismatch() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let path = ControlEndpoint.socketPath(display: a.x.display, environment: runtime.environment, uid: getuid())
        var channel = FrameChannel(fd: try LocalSocket.connect(path))
        defer { close(channel.fd) }
        channel.setTimeout(5)
        try channel.send(.hello, SyncHello(node: "past", name: "an old xpb", sends: true, receives: true, selections: ["CLIPBOARD"],
                                           version: SyncHello.oldestVersion - 1))
        let reply = try #require(try channel.receive())
        #expect(reply.kind == .error)
        let message = try ControlCoding.decode(ControlFailure.self, from: reply.payload).message
        #expect(message.contains("up to version \(SyncHello.oldestVersion - 1), this side versions \(SyncHello.oldestVersion) to \(SyncHello.version)"), "\(message)")
        try a.daemon.waitForLog("refused a link from an old xpb")

        var newer = FrameChannel(fd: try LocalSocket.connect(path))
        defer { close(newer.fd) }
        newer.setTimeout(5)
        try newer.send(.hello, SyncHello(node: "future", name: "a future xpb", sends: true, receives: true, selections: ["CLIPBOARD"],
                                         version: SyncHello.version + 1))
        let answer = try #require(try newer.receive())
        #expect(answer.kind == .hello)
        let theirs = try ControlCoding.decode(SyncHello.self, from: answer.payload)
        #expect(theirs.version == SyncHello.version)
        try a.daemon.stop()
    }
}

/// Regression tests of races found by Benchmarks/converge.py (simultaneous copies everywhere).
extension SyncTests {
    @Test("a new owner with the window id of one gone (the X server reuses them) is never served the earlier copy's bytes")
    func reusedWindowID() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display])
        try b.daemon.waitForLog("connected to")
        for round in 0 ..< 4 {
            let text = Data("copy \(round) on A".utf8)
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: text)
            try b.waitForTaken(round + 1)
            // Read at once, before A's keeper has fetched this copy (150 ms later): a peer's fetch
            // is served by this owner, not by what was kept of the previous one.
            let read = try b.read("UTF8_STRING")
            #expect(read.output == text, "round \(round): B read \(String(decoding: read.output, as: UTF8.self))")
            try a.daemon.waitForLog("kept CLIPBOARD from", count: round + 1, timeout: 15)
            owner.stop()
            // The next xclip gets this one's client slot, and so its window id.
            try a.daemon.waitForLog("the owner of CLIPBOARD went away; serving", count: round + 1, timeout: 15)
        }
        try b.daemon.stop()
        try a.daemon.stop()
    }

    @Test("a reader on one display that never reads a synced 5 MB text does not hold the other's keeper: copies made there by owners that exit are kept and served")
    func stalledReaderElsewhere() throws {
        let runtime = try DaemonHome()
        let a = try Node(runtime: runtime)
        let b = try Node(runtime: runtime, arguments: ["--sync-display", a.x.display])
        try b.daemon.waitForLog("connected to")
        let big = Data(repeating: UInt8(ascii: "x"), count: 5 << 20)
        let first = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: big)
        defer { first.stop() }
        try a.daemon.waitForLog("kept CLIPBOARD from", timeout: 15)
        try b.waitForTaken(1)
        // A hung app on B: asks for the text and never reads the reply.
        let stalled = try Peer(try attacker(), ["string", "1", "UTF8_STRING", "120"], display: b.x)
        defer { stalled.stop() }
        try stalled.waitForOutput("sent")
        // A serves B's fetch, and waits for credit B will not grant.
        #expect(eventually(timeout: 10) { ((try? a.peers())?.first?["bytesSent"] as? Int ?? 0) > 0 }, "A sent nothing to B")
        for round in 0 ..< 3 {
            let text = Data("copied on A during a stalled paste on B, \(round)".utf8)
            let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: a.x, input: text)
            try a.daemon.waitForLog("kept CLIPBOARD from", count: round + 2, timeout: 8)
            owner.stop()
            try a.daemon.waitForLog("the owner of CLIPBOARD went away; serving", count: round + 1)
            #expect(try a.read("UTF8_STRING").output == text, "round \(round) on A")
            #expect(eventually(timeout: 10) { (try? b.read("UTF8_STRING").output) == text }, "round \(round) on B")
        }
        try b.daemon.stop()
        try a.daemon.stop()
    }

    @Test("rounds of simultaneous copies on three displays in a star: every round all agree, and no display is left empty")
    func simultaneousRounds() throws {
        let nodes = try Node.star(runtime: try DaemonHome())
        for round in 0 ..< 15 {
            let texts = nodes.map { Data("round \(round) on \($0.x.display)".utf8) }
            let owners = try zip(nodes, texts).map { node, text in
                try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: node.x, input: text)
            }
            var shown: [Data] = []
            let agreed = eventually(timeout: 10) {
                shown = nodes.map { (try? $0.read("UTF8_STRING").output) ?? Data() }
                return Set(shown).count == 1 && texts.contains(shown[0])
            }
            #expect(agreed, "round \(round): the displays hold \(shown.map { String(decoding: $0, as: UTF8.self) })")
            for owner in owners { owner.stop() }
            guard agreed else { break }
        }
        for node in nodes { try node.daemon.stop() }
    }
}
