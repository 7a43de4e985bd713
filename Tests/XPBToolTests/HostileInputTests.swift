import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

// The attacks of issue 10, each played against a private Xvfb by a real hostile client
// (Tests/Attackers/xhostile.c) or by bad command lines, with xpb as owner or reader. Each test
// also checks that xpb stays responsive: another reader is still served within a few seconds
// (its usual time is milliseconds), and memory stays bounded where the attack was about memory.

/// Copies `text` with a background owner and returns the owner's pid.
private func copy(_ text: Data, _ x: Xvfb, _ arguments: [String] = []) throws -> Int32 {
    let copied = try xpb(["copy"] + arguments, x, input: text)
    guard copied.status == 0 else { throw TestFailure("xpb copy failed: \(copied.error)") }
    return try ownerPID(x)
}

private func ownerPID(_ x: Xvfb) throws -> Int32 {
    let outcome = try xpb(["info", "--json"], x)
    let info = try JSONSerialization.jsonObject(with: outcome.output) as? [String: Any]
    // What xpb info said, and the xpb processes there are, if it names none (seen once, under
    // four times the issues' load).
    return Int32(try #require(info?["ownerPID"] as? Int, "xpb info: \(outcome.text) \(outcome.error); xpb processes: \((try? run("/usr/bin/pgrep", ["-a", "xpb"], display: x).text) ?? "?")"))
}

/// `xclip -o` of the clipboard: what it printed, and how long it took.
private func timedXclip(_ x: Xvfb, _ arguments: [String] = []) throws -> (text: String, seconds: Double) {
    var outcome: Outcome?
    let elapsed = try seconds { outcome = try run("xclip", ["-o", "-selection", "clipboard"] + arguments, display: x, timeout: 20) }
    return (outcome?.text ?? "", elapsed)
}

/// An attacker mode run to its end.
@discardableResult
private func attack(_ arguments: [String], _ x: Xvfb, timeout: Double = 60) throws -> Outcome {
    try run(try attacker(), arguments, display: x, timeout: timeout)
}

/// An attacker playing an owner: started, and ready once it owns the clipboard.
private func hostileOwner(_ arguments: [String], _ x: Xvfb) throws -> Peer {
    let peer = try Peer(try attacker(), arguments, display: x)
    try peer.waitForOutput("ready", timeout: 10)
    return peer
}

/// The number a newly interned atom gets: the difference of two probes is how many atoms the
/// server made in between (atoms are never freed).
private func atomProbe(_ x: Xvfb) throws -> Int {
    try #require(Int(try attack(["atom-probe"], x).text.trimmingCharacters(in: .whitespacesAndNewlines)))
}

/// The attack suites run one test at a time: each loads the machine (hundreds of megabytes
/// through Xvfb), and other suites' deadlines must not feel it more than one at a time.
@Suite("Hostile input", .serialized)
struct HostileInput {}

extension HostileInput {
@Suite("Hostile requestors against an owner")
struct HostileRequestorTests {
    @Test("1. MULTIPLE: a million pairs are refused at once; 2000 pairs of 1 MB cannot bloat the server")
    func multiple() throws {
        let x = try Xvfb()
        _ = try copy(Data("small".utf8), x)
        let flood = try Peer(try attacker(), ["multiple", "1000000", "5"], display: x)
        Thread.sleep(forTimeInterval: 0.3)
        let during = try timedXclip(x)
        #expect(during.text == "small")
        #expect(during.seconds < 3, "the owner was frozen for \(during.seconds) s")
        #expect(try flood.finish(timeout: 60).status == 0)

        let text = utf8Text(1 << 20)
        _ = try copy(text, x, ["-t", "text"])
        let before = try #require(residentMemory(x.serverPID))
        try attack(["multiple", "2000", "1"], x)
        let reply = try timedXclip(x, ["-t", "UTF8_STRING"])
        #expect(reply.text.utf8.count == text.count)
        let grown = try #require(residentMemory(x.serverPID)) - before
        #expect(grown < 64 << 20, "the X server grew by \(grown >> 20) MiB for one MULTIPLE request")
    }

    @Test("1b. A flood of MULTIPLE and STRING requests: readers are served during it and after it, the backlog costing the owner little; its memory comes back")
    func flood() throws {
        let x = try Xvfb()
        // The README's build, as users run it: a debug build's owner handles events several
        // times slower than the server makes them, and no fairness can keep up with that.
        let copied = try run(try InstallTests.staticBinary(), ["copy"], display: x, input: Data("small".utf8))
        #expect(copied.status == 0, "\(copied.error)")
        let owner = try ownerPID(x)
        let flood = try Peer(try attacker(), ["flood", "3", "100"], display: x)
        defer { flood.stop() }
        try flood.waitForOutput("flooding", timeout: 10)
        Thread.sleep(forTimeInterval: 0.3)
        // Served, not dropped; on a loaded machine perhaps only as the flood ends (the flood
        // lasts 3 s, and before the fix the owner took minutes to work through it).
        let during = try timedXclip(x)
        #expect(during.text == "small")
        #expect(during.seconds < 10, "the owner was frozen for \(during.seconds) s")
        try flood.waitForOutput("sent", timeout: 30)
        // The flooder is gone: its window's id may now be the next reader's. What the server
        // queued for the owner and has not yet written to it comes first: on a loaded machine
        // the owner falls behind the flood (its share of the processor is too small), and the
        // server writes such a backlog at a cost that grows with its square (Xorg's FlushClient
        // moves what is left of its buffer to the front after every partial write: a 2.9 M-event
        // backlog took Xvfb 1.8 s of processor, 98 % in memmove, and the owner 0.38 s). So the
        // owner is held to its own work: once it is given the backlog, the dropped requests
        // cost it little and the reader is served; the wait is bounded like the one above.
        let ownerBefore = try #require(cpuSeconds(owner)), serverBefore = try #require(cpuSeconds(x.serverPID))
        let after = try timedXclip(x)
        let ownerWork = try #require(cpuSeconds(owner)) - ownerBefore
        let serverWork = try #require(cpuSeconds(x.serverPID)) - serverBefore
        #expect(after.text == "small")
        #expect(ownerWork < 1, "the owner worked \(ownerWork) s of processor through the flood's backlog after it ended (the server \(serverWork) s; the reader waited \(after.seconds) s)")
        #expect(after.seconds < 10, "the reader waited \(after.seconds) s after the flood ended (the owner worked \(ownerWork) s of processor, the server \(serverWork) s)")
        // Millions of requests were read; once handled, their memory goes back.
        #expect(eventually(timeout: 5) { (residentMemory(owner) ?? .max) < 64 << 20 },
                "the owner keeps \((residentMemory(owner) ?? 0) >> 20) MiB after the flood")
    }

    @Test("2. STRING of a large text is converted once, shared by every requestor, off the X thread")
    func stringFlood() throws {
        let x = try Xvfb()
        let text = utf8Text(16 << 20)
        let path = try scratchFile("large.txt", text)
        defer { unlink(path) }
        #expect(try xpb(["copy", path], x).status == 0)
        let owner = try ownerPID(x)
        // 30 requests for STRING (each a 14 MB Latin-1 conversion), from windows that never read.
        // It stays connected meanwhile: a departed client's window ids go to the next client,
        // and xclip would then receive notifications meant for it (see the closing note of issue 10).
        let flood = try Peer(try attacker(), ["string", "30", "STRING", "30"], display: x)
        defer { flood.stop() }
        try flood.waitForOutput("sent", timeout: 30)
        let during = try timedXclip(x, ["-t", "TARGETS"])
        #expect(during.text.contains("UTF8_STRING"))
        #expect(during.seconds < 3, "the owner was unresponsive for \(during.seconds) s")
        let latin1 = try run("xclip", ["-o", "-selection", "clipboard", "-t", "STRING"], display: x, timeout: 30)
        #expect(latin1.output.count == String(decoding: text, as: UTF8.self).unicodeScalars.count, "\(latin1.error)")
        let peak = try #require(peakMemory(owner))
        #expect(peak < 200 << 20, "the owner peaked at \(peak >> 20) MiB serving 30 STRING requests of 16 MB")
    }

    @Test("3. A request naming the owner's own window or the root window is refused; the owner keeps working")
    func forgedRequestor() throws {
        let x = try Xvfb()
        let big = payload(3 << 20)
        let path = try scratchFile("big.bin", big)
        defer { unlink(path) }
        // A foreground owner is the one process that must keep working after the attack.
        let owner = try Peer(try xpbPath(), ["copy", "--foreground", "-t", "application/octet-stream", path], display: x)
        defer { owner.stop() }
        #expect(eventually(timeout: 10) { (try? xpb(["types"], x).text) == "application/octet-stream\n" })
        try attack(["self-requestor", "application/octet-stream"], x)
        try attack(["root-requestor", "application/octet-stream"], x)
        Thread.sleep(forTimeInterval: 0.3)
        // An INCR transfer needs the owner's own event mask: it still works, through X and xclip.
        let read = try run("xclip", ["-o", "-selection", "clipboard", "-t", "application/octet-stream"], display: x, timeout: 20)
        #expect(read.output == big)
        #expect(owner.isRunning)
    }
}
}

extension HostileInput {
@Suite("Hostile clients of the fast path and flapping owners")
struct HostileFastPathTests {
    @Test("4. descriptor exhaustion does not spin the owner; request names and flapping owners intern no atoms")
    func exhaustion() throws {
        let x = try Xvfb()
        // An owner with few descriptors, flooded with connections it cannot all accept.
        let owner = try Peer("/bin/sh", ["-c", "ulimit -n 24; exec \"$0\" copy --foreground", try xpbPath()], display: x, input: Data("data".utf8))
        defer { owner.stop() }
        #expect(eventually(timeout: 10) { (try? xpb(["paste"], x).text) == "data" })
        let manifest = try run("xclip", ["-o", "-selection", "clipboard", "-t", "XPB_MANIFEST"], display: x).text
        let name = try #require(manifest.split(separator: "\t").first { $0.hasPrefix("fast-path2=") }?.dropFirst("fast-path2=".count))
            .split(separator: "\n").first.map(String.init) ?? ""
        let client = """
            import socket, sys, time
            held = []
            for i in range(200):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(0.2)
                try:
                    s.connect("\\0" + sys.argv[1])
                except OSError:
                    pass
                held.append(s)
            print("connected", flush=True)
            time.sleep(4)
            """
        let holder = try Peer("/usr/bin/python3", ["-c", client, name], display: x)
        defer { holder.stop() }
        try holder.waitForOutput("connected", timeout: 20)
        let before = try #require(cpuSeconds(owner.pid))
        Thread.sleep(forTimeInterval: 2)
        let used = try #require(cpuSeconds(owner.pid)) - before
        #expect(used < 0.5, "the owner used \(used) s of CPU in 2 s with its descriptors exhausted")
        let during = try timedXclip(x)
        #expect(during.text == "data")
        #expect(during.seconds < 3)
        holder.stop()

        // Fast-path requests for targets that do not exist: no atom each.
        let names = """
            import socket, sys
            for i in range(300):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(5)
                s.connect("\\0" + sys.argv[1])
                s.recv(100)
                s.sendall(("XPB2\\tCLIPBOARD\\tNO_SUCH_TARGET_%d\\n" % i).encode())
                s.recv(100)
                s.close()
            print("done")
            """
        let first = try atomProbe(x)
        #expect(try run("/usr/bin/python3", ["-c", names, name], display: x).text == "done\n")
        let second = try atomProbe(x)
        #expect(second - first < 20, "\(second - first) atoms were made for 300 fast-path requests")

        // An owner that takes and gives up the clipboard without ever answering, watched by xpb.
        let watcher = try Peer(try xpbPath(), ["watch"], display: x)
        defer { watcher.stop() }
        Thread.sleep(forTimeInterval: 0.5)
        let third = try atomProbe(x)
        try attack(["flap", "300"], x)
        Thread.sleep(forTimeInterval: 1)
        let fourth = try atomProbe(x)
        #expect(fourth - third < 100, "\(fourth - third) atoms were made for 300 owner changes")
        #expect(watcher.isRunning)
    }
}
}

extension HostileInput {
@Suite("Hostile owners against a reader")
struct HostileOwnerTests {
    @Test("5. INCR data forever fails at --max-size; a trickling owner at --max-time")
    func endlessIncr() throws {
        let x = try Xvfb()
        let forever = try hostileOwner(["owner-incr-forever"], x)
        let paste = try Peer(try xpbPath(), ["paste", "--max-size", "20M"], display: x)
        let outcome = try paste.finish(timeout: 30)
        #expect(outcome.status == 1)
        #expect(outcome.error.contains("more than the 20971520-byte limit"))
        #expect(outcome.output.count <= 20 << 20)
        forever.stop()

        let trickle = try hostileOwner(["owner-trickle", "1"], x)
        defer { trickle.stop() }
        var result: Outcome?
        let elapsed = try seconds { result = try xpb(["paste", "--max-time", "3", "--timeout", "2"], x, timeout: 30) }
        #expect(result?.status == 4)
        #expect(result?.error.contains("whole transfer") == true)
        #expect(elapsed < 8, "a trickling owner kept the paste alive \(elapsed) s past --max-time 3")
    }

    @Test("6. a TARGETS list of a million bogus atoms: paste, types and watch keep their time")
    func hugeTargets() throws {
        let x = try Xvfb()
        let watcher = try Peer(try xpbPath(), ["watch"], display: x)
        defer { watcher.stop() }
        Thread.sleep(forTimeInterval: 0.5)
        let owner = try hostileOwner(["owner-targets", "1000000"], x)
        defer { owner.stop() }
        var paste: Outcome?
        let pasteTime = try seconds { paste = try xpb(["paste", "--timeout", "1"], x) }
        #expect(paste?.status != 0)
        #expect(pasteTime < 4, "paste --timeout 1 took \(pasteTime) s")
        let typesTime = try seconds { _ = try xpb(["types", "--timeout", "1"], x) }
        #expect(typesTime < 4, "types took \(typesTime) s")
        // watch reported the change promptly (its line for the new owner).
        #expect(eventually(timeout: 5) { watcher.outputSoFar.contains("CLIPBOARD") })
    }

    @Test("7. pasting a file over the X path streams: bounded memory; over the limit fails before reading")
    func streaming() throws {
        let x = try Xvfb()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-sparse-\(getpid())").path
        #expect(truncate(path, 0) == 0 || creat(path, 0o600) >= 0)
        #expect(truncate(path, 300 << 20) == 0)
        defer { unlink(path) }
        #expect(try xpb(["copy", "-t", "application/octet-stream", path], x).status == 0)
        // Through X (XPB_FAST_PATH=0), to a pipe: 300 MB pass through, never all in memory.
        let script = "XPB_FAST_PATH=0 /usr/bin/time -f %M \"$0\" paste | wc -c"
        let outcome = try run("/bin/sh", ["-c", script, try xpbPath()], display: x, timeout: 120)
        #expect(outcome.text.trimmingCharacters(in: .whitespacesAndNewlines) == String(300 << 20))
        let peakKB = try #require(Int(outcome.error.split(separator: "\n").last ?? ""))
        #expect(peakKB < 120 * 1024, "paste peaked at \(peakKB / 1024) MiB for 300 MiB")
        // Larger than --max-size: refused from the announced size, at once.
        var refused: Outcome?
        let elapsed = try seconds { refused = try xpb(["paste", "--max-size", "100M"], x, environment: ["XPB_FAST_PATH": "0"]) }
        #expect(refused?.status == 1)
        #expect(refused?.error.contains("limit") == true)
        #expect(elapsed < 3)
        // And over the fast path the same limit holds.
        let fast = try xpb(["paste", "--max-size", "100M"], x)
        #expect(fast.status == 1)
        #expect(fast.error.contains("limit"))
    }

    @Test("8. escape sequences in target and window names never reach the terminal; --json stays valid")
    func escapes() throws {
        let x = try Xvfb()
        let owner = try hostileOwner(["owner-evil-names"], x)
        defer { owner.stop() }
        let targets = try xpb(["types", "--targets"], x)
        #expect(targets.status == 0)
        #expect(!targets.output.contains(0x1B) && !targets.output.contains(0x07))
        #expect(targets.text.contains("EVIL\\x1B]0;pwned\\x07"))
        let info = try xpb(["info"], x)
        #expect(!info.output.contains(0x1B) && !info.output.contains(0x07))
        #expect(info.text.contains("owner name: evil\\x1B]0;pwned"))
        let json = try xpb(["info", "--json"], x)
        let object = try JSONSerialization.jsonObject(with: json.output) as? [String: Any]
        #expect((object?["ownerName"] as? String)?.contains("\u{1B}]0;pwned") == true)
    }

    @Test("9. a manifest naming someone else's socket gets no request sent there")
    func manifestSocket() throws {
        let x = try Xvfb()
        // A listener of this user in the abstract namespace that records what it receives.
        let listener = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind("\\0xpb-test-victim")
            s.listen(8)
            print("listening", flush=True)
            s.settimeout(20)
            received = b""
            try:
                while True:
                    c, _ = s.accept()
                    c.settimeout(3)
                    try:
                        while True:
                            chunk = c.recv(4096)
                            if not chunk:
                                break
                            received += chunk
                            print("got", repr(chunk), flush=True)
                    except socket.timeout:
                        pass
                    c.close()
            except socket.timeout:
                pass
            """
        let victim = try Peer("/usr/bin/python3", ["-c", listener], display: x)
        defer { victim.stop() }
        try victim.waitForOutput("listening")
        let owner = try hostileOwner(["owner-manifest", "xpb-test-victim"], x)
        defer { owner.stop() }
        var paste: Outcome?
        let elapsed = try seconds { paste = try xpb(["paste"], x) }
        #expect(paste?.text == "hello")
        #expect(elapsed < 5)
        Thread.sleep(forTimeInterval: 0.5)
        #expect(!victim.outputSoFar.contains("got"), "the victim socket received: \(victim.outputSoFar)")
    }

    @Test("15. a reply in one property of 256 MiB is read (in pieces)")
    func hugeProperty() throws {
        let x = try Xvfb()
        let owner = try hostileOwner(["owner-bigprop", "256"], x)
        defer { owner.stop() }
        let outcome = try run("/bin/sh", ["-c", "\"$0\" paste --timeout 60 | wc -c", try xpbPath()], display: x, timeout: 120)
        #expect(outcome.text.trimmingCharacters(in: .whitespacesAndNewlines) == String(256 << 20), "\(outcome.error)")
        #expect(outcome.error.isEmpty)
        // Past the limit, the error says what happened.
        let limited = try xpb(["paste", "--max-size", "100M", "--timeout", "60"], x, timeout: 120)
        #expect(limited.status == 1)
        #expect(limited.error.contains("reply is 268435456 bytes, more than the 104857600-byte limit"))
    }

    @Test("16. a manifest naming a target its owner refuses: readers fall back to the plain targets")
    func manifestTargetRefused() throws {
        let x = try Xvfb()
        let owner = try hostileOwner(["owner-manifest-refusing"], x)
        defer { owner.stop() }
        let paste = try xpb(["paste"], x)
        #expect(paste.status == 0 && paste.text == "hello", "\(paste.status) \(paste.error)")
        #expect(try xpb(["paste", "-t", "text"], x).text == "hello")
        let standIn = try run(try ClipboardTools.standIns().xsel, ["-b", "-o"], display: x)
        #expect(standIn.status == 0 && standIn.text == "hello", "\(standIn.status) \(standIn.error)")
    }

    @Test("17. a manifest's owner that answers the guess: taken only for its first item target's type")
    func manifestGuess() throws {
        let x = try Xvfb()
        // Text first: the guess (UTF8_STRING, asked with TARGETS) is what the first item target
        // holds, as an xpb owner answers it; the paste takes it and asks nothing more.
        var owner = try hostileOwner(["owner-manifest-guess"], x)
        #expect(try xpb(["paste"], x).text == "guessed")
        #expect(try xpb(["paste", "-t", "text"], x).text == "guessed")
        owner.stop()
        // HTML first, the text second: the text is read from a target of its own, not the guess.
        owner = try hostileOwner(["owner-manifest-guess", "public.html"], x)
        defer { owner.stop() }
        let text = try xpb(["paste", "-t", "text"], x)
        #expect(text.status == 0 && text.text == "hello", "\(text.status) \(text.error)")
    }
}
}

extension HostileInput {
@Suite("Files, input and secrets under attack")
struct HostileInputFileTests {
    @Test("0. closed standard descriptors: no clipboard bytes reach the X server, no crash")
    func closedDescriptors() throws {
        let x = try Xvfb()
        let before = try attack(["screensaver"], x).text
        let xpb = try xpbPath()
        // Bytes that, sent on the X connection, would set the screen saver (timeout 1234 s).
        let script = """
            printf '\\153\\000\\003\\000\\322\\004\\130\\002\\002\\002\\000\\000' | "$0" copy || exit 9
            "$0" paste >&-; echo "paste $?"
            "$0" copy <&-; echo "copy $?"
            "$0" paste --pasteboard nothing-here 2>&-; echo "stderr $?"
            """
        let outcome = try run("/bin/sh", ["-c", script, xpb], display: x)
        #expect(outcome.text == "paste 1\ncopy 1\nstderr 2\n", "\(outcome.error)")
        #expect(outcome.error.contains("standard output is closed"))
        #expect(outcome.error.contains("standard input is closed"))
        #expect(try attack(["screensaver"], x).text == before)
    }

    @Test("0b. paste -o writes like a shell redirection: symlinks, mode, links kept; /dev/null works")
    func outputFile() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy"], x, input: Data("new".utf8)).status == 0)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-out-\(getpid())-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = directory + "/target"
        let link = directory + "/link"
        let hard = directory + "/hard"
        try Data("old".utf8).write(to: URL(fileURLWithPath: target))
        chmod(target, 0o755)
        symlink(target, link)
        Glibc.link(target, hard)
        #expect(try xpb(["paste", "-o", link], x).status == 0)
        var status = stat()
        lstat(link, &status)
        #expect(status.st_mode & S_IFMT == S_IFLNK)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "new")
        #expect(try String(contentsOfFile: hard, encoding: .utf8) == "new")
        stat(target, &status)
        #expect(status.st_mode & 0o777 == 0o755)
        #expect(status.st_nlink == 2)
        #expect(try xpb(["paste", "-o", "/dev/null"], x).status == 0)
        // A failed read leaves the file as it was.
        #expect(try xpb(["paste", "-o", target, "-t", "image/png"], x).status == 3)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "new")
    }

    @Test("10. --sensitive input is kept in a memory file, never in a file on disk")
    func sensitive() throws {
        let x = try Xvfb()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-tmp-\(getpid())-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = Data(repeating: 0x53, count: 2 << 20)
        #expect(try xpb(["copy", "--sensitive"], x, input: secret, environment: ["TMPDIR": directory]).status == 0)
        let owner = try ownerPID(x)
        let links = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(owner)/fd").compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(owner)/fd/\($0)")
        }
        #expect(links.contains { $0.hasPrefix("/memfd:xpb-secret") }, "\(links)")
        #expect(!links.contains { $0.hasPrefix(directory) || $0.contains("xpb-copy-") }, "\(links)")
        #expect(try xpb(["paste"], x).output == secret)
    }

    @Test("10b. standard input is saved in a memory file up to 4 MiB, past that in an unlinked file of TMPDIR; pasted byte-exact either side of the bound",
          arguments: [0, 13, 4 << 20, (4 << 20) + 1, 12 << 20])
    func savedInput(size: Int) throws {
        let x = try Xvfb()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-tmp-\(getpid())-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let input = payload(size)
        #expect(try xpb(["copy", "-t", "application/octet-stream"], x, input: input, environment: ["TMPDIR": directory]).status == 0)
        let owner = try ownerPID(x)
        let links = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(owner)/fd").compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(owner)/fd/\($0)")
        }
        if size <= Self.memorySaveBudget {
            #expect(links.contains { $0.hasPrefix("/memfd:xpb-copy") }, "\(links)")
            #expect(!links.contains { $0.hasPrefix(directory) }, "\(links)")
        } else {
            #expect(links.contains { $0.hasPrefix(directory + "/xpb-copy-") && $0.hasSuffix("(deleted)") }, "\(links)")
            #expect(!links.contains { $0.hasPrefix("/memfd:xpb-copy") }, "\(links)")
        }
        // Nothing named is left in TMPDIR either way.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
        #expect(try xpb(["paste", "-t", "application/octet-stream"], x).output == input)
    }

    @Test("10c. a stream past 4 MiB with no TMPDIR to spill to is refused, saying why; the clipboard keeps what it had, a small one is still copied")
    func savedInputWithoutTemporaryDirectory() throws {
        let x = try Xvfb()
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-none-\(UUID().uuidString)").path
        #expect(try xpb(["copy"], x, input: Data("before".utf8)).status == 0)
        let large = try xpb(["copy", "-t", "application/octet-stream"], x, input: payload((4 << 20) + 1), environment: ["TMPDIR": missing])
        #expect(large.status != 0 && large.error.contains("cannot create a temporary file"), "\(large.status) \(large.error)")
        #expect(try xpb(["paste"], x).text == "before")
        #expect(try xpb(["copy"], x, input: Data("small".utf8), environment: ["TMPDIR": missing]).status == 0)
        #expect(try xpb(["paste"], x).text == "small")
    }

    /// Inputs.memorySaveBudget, as the docs state it.
    static let memorySaveBudget = 4 << 20

    @Test("11. a copied file that is cut short or edited: the copy is pasted, or refused, never a hang")
    func changedFile() throws {
        let x = try Xvfb()
        // Within the snapshot budget: what was copied is pasted.
        let small = payload(3 << 20)
        let path = try scratchFile("shrinks.bin", small)
        defer { unlink(path) }
        #expect(try xpb(["copy", "-t", "application/octet-stream", path], x).status == 0)
        #expect(truncate(path, 10) == 0)
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "application/octet-stream"], display: x).output == small)
        #expect(try xpb(["paste"], x).output == small)
        // Past the budget (no clone on this file system): refused at once, not silence.
        let large = try scratchFile("large.bin", payload(70 << 20))
        defer { unlink(large) }
        #expect(try xpb(["copy", "-t", "application/octet-stream", large], x).status == 0)
        let handle = try #require(FileHandle(forWritingAtPath: large))
        try handle.truncate(atOffset: 1 << 20)
        try handle.close()
        var xclip: Outcome?
        let elapsed = try seconds { xclip = try run("xclip", ["-o", "-selection", "clipboard", "-t", "application/octet-stream"], display: x, timeout: 20) }
        #expect(xclip?.status != 0)
        #expect(xclip?.output.isEmpty == true)
        #expect(elapsed < 5)
        let refused = try xpb(["paste"], x, environment: ["XPB_FAST_PATH": "0"])
        #expect(refused.status == 1)
        #expect(refused.error.contains("refused to convert"), "\(refused.error)")
    }

    @Test("12. unbounded input stops at --max-size with a clear error; the clipboard keeps what it had")
    func unboundedInput() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy"], x, input: Data("before".utf8)).status == 0)
        let script = "\"$0\" copy --max-size 8M < /dev/zero; echo \"background $?\"; \"$0\" copy --foreground --max-size 8M < /dev/zero; echo \"foreground $?\""
        let outcome = try run("/bin/sh", ["-c", script, try xpbPath()], display: x, timeout: 30)
        #expect(outcome.text == "background 1\nforeground 1\n")
        #expect(outcome.error.contains("larger than the 8388608-byte limit"))
        #expect(try xpb(["paste"], x).text == "before")
    }

    @Test("13. no input crashes: a directory, huge numbers")
    func crashes() throws {
        let x = try Xvfb()
        let directory = FileManager.default.temporaryDirectory.path
        let foreground = try xpb(["copy", "--foreground", directory], x)
        #expect(foreground.status == 1)
        #expect(foreground.error.contains("directory"))
        #expect(try xpb(["copy", directory], x).status == 1)
        let huge = try xpb(["paste", "--timeout", "1.85e10"], x)
        #expect(huge.status == 64)
        #expect(try xpb(["paste", "--timeout", "1e9"], x).status == 2)
        #expect(try xpb(["copy", "--expire", "9e18"], x, input: Data("x".utf8)).status == 64)
        #expect(try xpb(["paste", "--max-size", "99999999999T"], x).status == 64)
        // The background owner's hidden --ready-fd: a descriptor that is not open is a usage
        // error (it was Foundation's try! trap, SIGILL); and xpbd with its standard error closed.
        for fd in ["57", "-3"] {
            let ready = try xpb(["copy", "--ready-fd", fd], x, input: Data("x".utf8))
            #expect(ready.status == 64 && ready.error.contains("not an open descriptor"), "\(ready.status) \(ready.error)")
        }
        let closed = try run("/bin/sh", ["-c", "\"$0\" --bogus 2>&-; echo $?", try builtProduct("xpbd")], display: x)
        #expect(closed.text == "64\n")
    }

    @Test("14. reserved target names and commas in types are refused by copy -t")
    func reservedTargets() throws {
        let x = try Xvfb()
        for name in ["INCR", "TARGETS", "MULTIPLE", "ATOM", "XPB_MANIFEST"] {
            let outcome = try xpb(["copy", "-t", name], x, input: Data("x".utf8))
            #expect(outcome.status == 64, "\(name)")
            #expect(outcome.error.contains("reserves"), "\(name): \(outcome.error)")
        }
        let comma = try xpb(["copy", "-t", "text/a,b"], x, input: Data("x".utf8))
        #expect(comma.status == 64)
        #expect(comma.error.contains("comma"))
    }
}
}
