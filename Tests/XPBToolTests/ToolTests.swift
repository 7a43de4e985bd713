import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The xpb binary built next to this test bundle; missing is a failure, never a skip.
func xpbPath() throws -> String { try builtProduct("xpb") }

/// Runs xpb on the test display.
@discardableResult
func xpb(_ arguments: [String], _ x: any TestSession, input: Data? = nil, environment: [String: String] = [:], timeout: Double = 30) throws -> Outcome {
    try run(try xpbPath(), arguments, display: x, input: input, environment: environment, timeout: timeout)
}

func xclipOut(_ x: Xvfb, _ arguments: [String] = []) throws -> Outcome {
    try run("xclip", ["-o", "-selection", "clipboard"] + arguments, display: x)
}

/// Whether a process runs (an exited one waiting to be reaped by init does not count).
func isAlive(_ pid: Int) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return false }
    let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).prefix(1)
    return state != "Z" && state != "X"
}

/// The xpb processes whose display is `x`'s (background owners, daemons), by pid.
func xpbProcesses(on x: Xvfb) -> [Int] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int.init).filter { pid in
        guard isAlive(pid), let environ = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ")),
              (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) == "xpb\n" else { return false }
        return environ.split(separator: 0).contains { String(decoding: $0, as: UTF8.self) == "DISPLAY=\(x.display)" }
    }
}

/// A scratch directory for files a test copies.
func scratchFile(_ name: String, _ data: Data) throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-tests-\(getpid())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let url = directory.appendingPathComponent(UUID().uuidString + "-" + name)
    try data.write(to: url)
    return url.path
}

@Suite("xpb copy")
struct CopyTests {
    @Test("out=$(xpb copy <<< hi) returns at once and the background owner serves")
    func copyReturnsAtOnce() throws {
        let x = try Xvfb()
        let shell = try run("/bin/sh", ["-c", "out=$(printf 'hi\\n' | \"$0\" copy); printf '[%s]' \"$out\"", try xpbPath()], display: x, timeout: 10)
        #expect(shell.status == 0)
        #expect(shell.text == "[]")
        #expect(try xclipOut(x).text == "hi\n")
        #expect(try xpb(["paste"], x).text == "hi\n")
        // The background owner leaves when another client takes the clipboard.
        let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        let ownerPID = try #require(info?["ownerPID"] as? Int)
        #expect(isAlive(ownerPID))
        // ps, top and pgrep name it after its binary, not `exe` (of /proc/self/exe).
        let comm = try String(contentsOfFile: "/proc/\(ownerPID)/comm", encoding: .utf8)
        #expect(comm == "xpb\n", "the background owner shows as '\(comm)'")
        _ = try run("/bin/sh", ["-c", "printf other | xclip -i -selection clipboard >/dev/null 2>&1"], display: x)
        #expect(eventually(timeout: 10) { !isAlive(ownerPID) })
    }

    /// Both ways a background owner starts: forked after it owns the selection (a plain copy,
    /// xclip's order), and forked first (--expire: a timer's thread must not exist at a fork).
    /// Each holds none of the caller's descriptors, runs in a session of its own, and writes its
    /// errors to --log: here, the X server's death.
    @Test("the background owner, forked after owning or before: no caller descriptor held, its own session, its errors in --log", arguments: [[], ["--expire", "600"]])
    func backgroundOwnerLogs(_ extra: [String]) throws {
        let x = try Xvfb()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-owner-\(getpid())-\(extra.count).log").path
        defer { try? FileManager.default.removeItem(atPath: log) }
        // Descriptor 7 is the caller's pipe (the test reads it): the owner must not keep it, or
        // a reader of it would wait forever.
        let script = "exec 7>&1; readlink /proc/$$/fd/7; \"$0\" copy --log \"$@\"; echo rc=$?"
        let copied = try run("/bin/sh", ["-c", script, try xpbPath(), log] + extra, display: x, input: Data("logged".utf8), timeout: 30)
        let lines = copied.text.split(separator: "\n").map(String.init)
        #expect(copied.status == 0 && lines.count == 2 && lines[1] == "rc=0", "\(copied.text) \(copied.error)")
        let callerPipe = try #require(lines.first)
        #expect(callerPipe.hasPrefix("pipe:"))
        #expect(try xpb(["paste"], x).text == "logged")
        let owner = try #require(xpbProcesses(on: x).first)
        let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(owner)/fd").compactMap { fd -> String? in
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(owner)/fd/\(fd)")
        }
        #expect(!held.contains(callerPipe), "the owner holds the caller's pipe: \(held)")
        #expect(held.filter { $0 == "/dev/null" }.count == 2, "standard input and output on /dev/null: \(held)")
        #expect(held.contains(log), "standard error is the log: \(held)")
        let stat = try String(contentsOfFile: "/proc/\(owner)/stat", encoding: .utf8)
        let fields = stat[stat.range(of: ") ")!.upperBound...].split(separator: " ")
        #expect(fields[3] == "\(owner)", "the owner leads a session of its own: \(stat)")
        x.kill()
        #expect(eventually(timeout: 20) { !isAlive(owner) })
        let written = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(written.contains("xpb: "), "the log holds [\(written)]")
    }

    /// `xpb copy` forks its owner (one program start): it must still return only once the owner
    /// holds CLIPBOARD, never before. A script's yank then paste, a thousand times, each read by
    /// xpb or xclip in turn; the owners replaced along the way all leave.
    @Test("copy then paste at once, 1,000 times in a row: every paste gets the copy just made; the replaced owners leave")
    func copyThenPasteNeverMisses() throws {
        let x = try Xvfb()
        let script = """
            i=0
            while [ $i -lt 1000 ]; do
                i=$((i + 1))
                printf 'copy %d' "$i" | "$0" copy || { echo "copy $i failed"; exit 1; }
                if [ $((i % 2)) -eq 0 ]; then got=$("$0" paste); else got=$(xclip -o -selection clipboard); fi
                [ "$got" = "copy $i" ] || { echo "paste $i got [$got]"; exit 1; }
            done
            echo "all $i"
            """
        let outcome = try run("/bin/sh", ["-c", script, try xpbPath()], display: x, timeout: 600)
        #expect(outcome.status == 0 && outcome.text == "all 1000\n", "\(outcome.text) \(outcome.error)")
        // Only the last copy's owner stays (the others exit once replaced, transfers done), and it
        // is the one `xpb info` names. Asked while replaced owners still exit (a loaded machine),
        // info names no pid: several xpb processes hold connections their parents made, and
        // which of them owns is not guessed.
        #expect(eventually(timeout: 20) { xpbProcesses(on: x).count == 1 }, "\(xpbProcesses(on: x))")
        let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        let last = try #require(info?["ownerPID"] as? Int, "\(info ?? [:])")
        #expect(xpbProcesses(on: x) == [last])
    }

    /// Four copies at once, again and again, as scripts and editors make them: each returns
    /// within its time (one won, or a clear "another client took it" for a loser), none hangs,
    /// and every owner but the last leaves. A forked owner's main thread once kept the parent's
    /// thread id in the Swift runtime's locks, and a lock it held while its X thread waited was
    /// never released (both spun, and the copy never returned); an owner that lost the selection
    /// before it had recorded owning it never learned it lost, and stayed.
    @Test("four copies at once, 30 times: each returns (won, or lost the race and says so), and only the last owner stays")
    func concurrentCopies() throws {
        let x = try Xvfb()
        var outcomes: [Outcome] = []
        for round in 1...30 {
            let copies = try (1...4).map { copy in
                try Peer(try xpbPath(), ["copy"], display: x, input: Data("round \(round) copy \(copy)".utf8))
            }
            outcomes += try copies.map { try $0.finish(timeout: 30) }
        }
        let strays = outcomes.filter { $0.status != 0 && !$0.error.contains("another client took it at the same moment") }
        #expect(strays.isEmpty, "\(strays.map { "\($0.status) \($0.error)" })")
        #expect(outcomes.filter { $0.status == 0 }.count >= 30)
        let text = try xpb(["paste"], x).text
        #expect(text.hasPrefix("round 30 copy "), "\(text)")
        #expect(eventually(timeout: 20) { xpbProcesses(on: x).count == 1 }, "\(xpbProcesses(on: x))")
    }

    @Test("text-like files (JSON, HTML, -t text/markdown) are offered as text to xclip and GTK")
    func textLikeAsText() throws {
        let x = try Xvfb()
        let json = try scratchFile("conf.json", Data("{\"a\": 1}\n".utf8))
        #expect(try xpb(["copy", json], x).status == 0)
        #expect(try xclipOut(x, ["-t", "application/json"]).output == Data("{\"a\": 1}\n".utf8))
        #expect(try xclipOut(x).output == Data("{\"a\": 1}\n".utf8), "xclip -o (UTF8_STRING)")
        #expect(try toolkitPeer("gtk_clipboard.py", ["text"], display: x).finish().text == "{\"a\": 1}\n\n")
        #expect(try xpb(["copy", "-t", "text/markdown"], x, input: Data("# Title\n".utf8)).status == 0)
        #expect(try xclipOut(x, ["-t", "STRING"]).output == Data("# Title\n".utf8))
        // With a plain-text representation, the text targets stay the plain text's.
        let html = try scratchFile("p.html", Data("<b>bold</b>".utf8))
        let text = try scratchFile("p.txt", Data("bold".utf8))
        #expect(try xpb(["copy", "-t", "html=\(html)", "-t", "text=\(text)"], x).status == 0)
        #expect(try xclipOut(x).output == Data("bold".utf8))
    }

    @Test("an unknown bare type name is used as given, with a warning naming the nearest known one")
    func typoWarning() throws {
        let x = try Xvfb()
        let typo = try xpb(["copy", "-t", "pgn"], x, input: Data("x".utf8))
        #expect(typo.status == 0)
        #expect(typo.error.contains("'pgn' is not a type name xpb knows") && typo.error.contains("did you mean 'png'?"), "\(typo.error)")
        #expect(try xclipOut(x, ["-t", "pgn"]).output == Data("x".utf8))
        let known = try xpb(["copy", "-t", "txt"], x, input: Data("y".utf8))
        #expect(known.status == 0 && known.error.isEmpty, "\(known.error)")
        #expect(try xclipOut(x, ["-t", "UTF8_STRING"]).output == Data("y".utf8), "-t txt is text")
        #expect(try xpb(["paste", "-t", "hmtl"], x).error.contains("did you mean 'html'?"))
    }

    @Test("HTML and text of one item, read back as each type by xclip -t")
    func htmlAndText() throws {
        let x = try Xvfb()
        let html = try scratchFile("a.html", Data("<b>bold</b>".utf8))
        let text = try scratchFile("a.txt", Data("bold".utf8))
        #expect(try xpb(["copy", "-t", "html=\(html)", "-t", "text=\(text)"], x).status == 0)
        #expect(try xclipOut(x, ["-t", "text/html"]).text == "<b>bold</b>")
        #expect(try xclipOut(x, ["-t", "UTF8_STRING"]).text == "bold")
        #expect(try xclipOut(x, ["-t", "text/plain"]).text == "bold")
        #expect(try xpb(["types"], x).text == "text/html\ntext/plain\n")
        #expect(try xpb(["types", "--uti"], x).text == "public.html\npublic.utf8-plain-text\n")
        #expect(try xpb(["paste", "-t", "html"], x).text == "<b>bold</b>")
        #expect(try xpb(["paste", "-t", "image/png,text/html"], x).text == "<b>bold</b>")
    }

    @Test("pipes as files (<(cmd)) and standard input together reach the background owner")
    func pipesAsFiles() throws {
        let x = try Xvfb()
        let shell = try run("/bin/bash", ["-c", "printf plain | \"$0\" copy -t html=<(printf '<b>x</b>') -t text=-", try xpbPath()], display: x, timeout: 10)
        #expect(shell.status == 0, "\(shell.error)")
        #expect(try xclipOut(x, ["-t", "text/html"]).text == "<b>x</b>")
        #expect(try xclipOut(x, ["-t", "UTF8_STRING"]).text == "plain")
        #expect(try run("/bin/bash", ["-c", "\"$0\" copy <(printf fifo)", try xpbPath()], display: x, timeout: 10).status == 0)
        #expect(try xpb(["paste"], x).text == "fifo")
    }

    @Test("Latin-1 text (not UTF-8) is text: converted to UTF-8, served as Latin-1 under STRING")
    func latin1() throws {
        let x = try Xvfb()
        let latin1 = Data([0x63, 0x61, 0x66, 0xE9]) // "café" in ISO 8859-1
        #expect(try xpb(["copy"], x, input: latin1).status == 0)
        #expect(try xpb(["types"], x).text == "text/plain\n")
        #expect(try xpb(["paste"], x).text == "café")
        #expect(try xclipOut(x).text == "café")
        #expect(try xclipOut(x, ["-t", "STRING"]).output == latin1)
        // The same from a file; binary data (control bytes) stays binary.
        #expect(try xpb(["copy", try scratchFile("old.txt", latin1)], x).status == 0)
        #expect(try xpb(["paste"], x).text == "café")
        #expect(try xpb(["copy"], x, input: Data([0x00, 0xE9, 0x01, 0xFF])).status == 0)
        #expect(try xpb(["types"], x).text == "application/octet-stream\n")
    }

    @Test("a PNG file: inferred type, xclip -o -t image/png byte-exact")
    func png() throws {
        let x = try Xvfb()
        let bytes = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + payload(300_000)
        let file = try scratchFile("picture.png", bytes)
        #expect(try xpb(["copy", file], x).status == 0)
        #expect(try xclipOut(x, ["-t", "image/png"]).output == bytes)
        #expect(try xpb(["types"], x).text == "image/png\n")
        // Content sniffing without a telling name.
        let unnamed = try scratchFile("noextension", bytes)
        #expect(try xpb(["copy", unnamed], x).status == 0)
        #expect(try xclipOut(x, ["-t", "image/png"]).output == bytes)
    }

    @Test("a large file is streamed from disk in pieces, byte-exact, to several readers")
    func largeFile() throws {
        let x = try Xvfb()
        let bytes = payload(12 << 20, seed: 9)
        let file = try scratchFile("big.bin", bytes)
        #expect(try xpb(["copy", "-t", "application/octet-stream", file], x).status == 0)
        let readers = try (0..<3).map { _ in try Peer("xclip", ["-o", "-selection", "clipboard", "-t", "application/octet-stream"], display: x) }
        for reader in readers { #expect(try reader.finish(timeout: 60).output == bytes) }
        #expect(try xpb(["paste"], x).output == bytes)
    }

    @Test("several files make several items; --item picks one")
    func severalFiles() throws {
        let x = try Xvfb()
        let first = try scratchFile("one.txt", Data("one".utf8))
        let second = try scratchFile("two.html", Data("<i>two</i>".utf8))
        #expect(try xpb(["copy", first, second], x).status == 0)
        #expect(try xpb(["types", "--items"], x).text == "0\ttext/plain\n0\ttext/uri-list\n1\ttext/html\n1\ttext/uri-list\n")
        #expect(try xpb(["paste", "--item", "1"], x).text == "<i>two</i>")
        #expect(try xpb(["paste"], x).text == "one")
        // Plain X clients: text readers get the first file, file managers every file.
        #expect(try xclipOut(x).text == "one")
        let urls = [first, second].map { URL(fileURLWithPath: $0).absoluteString }
        #expect(try xclipOut(x, ["-t", "text/uri-list"]).text == urls.map { $0 + "\r\n" }.joined())
        #expect(try xclipOut(x, ["-t", "x-special/gnome-copied-files"]).text == "copy\n" + urls.joined(separator: "\n"))
        let missing = try xpb(["paste", "--item", "5"], x)
        #expect(missing.status == 3)
        #expect(missing.error.contains("item 5 does not exist"))
    }

    @Test("xpb to xpb moves the data byte-exact with the fast path and without it; to stdout, a pipe, -o")
    func xpbToXpb() throws {
        let x = try Xvfb()
        let bytes = payload(20 << 20, seed: 4)
        let source = try scratchFile("big.bin", bytes)
        for environment in [[:], ["XPB_FAST_PATH": "0"]] {
            #expect(try xpb(["copy", "-t", "application/octet-stream", source], x, environment: environment).status == 0)
            #expect(try xpb(["paste"], x, environment: environment).output == bytes)
            let piped = try run("/bin/sh", ["-c", "\"$0\" paste | cat", try xpbPath()], display: x, environment: environment)
            #expect(piped.output == bytes)
            let target = try scratchFile("out.bin", Data())
            #expect(try xpb(["paste", "-o", target], x, environment: environment).status == 0)
            #expect(FileManager.default.contents(atPath: target) == bytes)
            // Standard input is saved by the parent and served from that copy.
            #expect(try xpb(["copy"], x, input: bytes, environment: environment).status == 0)
            #expect(try xpb(["paste"], x, environment: environment).output == bytes)
        }
        // --paste-once counts a paste over the fast path too.
        #expect(try xpb(["copy", "--paste-once"], x, input: Data("once".utf8)).status == 0)
        #expect(try xpb(["paste"], x).text == "once")
        #expect(eventually { (try? xpb(["paste"], x).status) == 2 })
    }

    @Test("a small file is read when copied: a later change to it does not reach the clipboard")
    func smallFileSnapshot() throws {
        let x = try Xvfb()
        let path = try scratchFile("note.txt", Data("before".utf8))
        #expect(try xpb(["copy", path], x).status == 0)
        try Data("after!".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try xpb(["paste"], x).text == "before")
        #expect(try xclipOut(x).text == "before")
    }

    @Test("--paste-once gives the selection up after one paste")
    func pasteOnce() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy", "--paste-once"], x, input: Data("once".utf8)).status == 0)
        #expect(try xclipOut(x).text == "once")
        #expect(eventually { (try? xclipOut(x).status) != 0 })
        #expect(try xpb(["paste"], x).status == 2)
    }

    @Test("--expire 1 clears within about a second")
    func expire() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy", "--expire", "1"], x, input: Data("brief".utf8)).status == 0)
        // Counted from the copy's return, when its owner holds it: the copy's own start is not the
        // expiry's (under two busy loops and the suite, copy and paste took three seconds once).
        let copied = Date()
        #expect(try xpb(["paste"], x).text == "brief")
        #expect(eventually(timeout: 3) { (try? xpb(["paste"], x).status) == 2 })
        #expect(Date().timeIntervalSince(copied) < 3)
    }

    @Test("-n trims one trailing newline (as wl-copy -n); -t sets the type; --local-only and --sensitive reach the manifest; a secret's owner locks its pages in memory")
    func options() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy", "-n"], x, input: Data("line\n".utf8)).status == 0)
        #expect(try xclipOut(x).text == "line")
        // The wl-copy habit: `-n FILE` trims and copies FILE, never names a pasteboard "FILE".
        let notes = try scratchFile("notes.txt", Data("from notes\n".utf8))
        #expect(try xpb(["copy", "-n", notes], x).status == 0)
        #expect(try xclipOut(x).text == "from notes")
        #expect(try xpb(["paste", "--trim-newline"], x).text == "from notes")
        #expect(try xpb(["copy", "-t", "application/x-xpb-test"], x, input: Data([0, 1, 2])).status == 0)
        #expect(try xclipOut(x, ["-t", "application/x-xpb-test"]).output == Data([0, 1, 2]))
        #expect(try xpb(["copy", "--local-only"], x, input: Data("local".utf8)).status == 0)
        #expect(try xclipOut(x, ["-t", "XPB_MANIFEST"]).text.contains("local-only=1"))
        #expect(try xpb(["copy", "--sensitive"], x, input: Data("hunter2".utf8)).status == 0)
        #expect(try xclipOut(x, ["-t", "x-kde-passwordManagerHint"]).text == "secret")
        let manifest = try xclipOut(x, ["-t", "XPB_MANIFEST"]).text
        #expect(manifest.contains("local-only=1") && !manifest.contains("expires=-"))
        // Out of swap: the owner locks its pages once the copy is made, where the memory-lock
        // limit allows all of them (root, or no limit).
        let limits = (try? String(contentsOfFile: "/proc/self/limits", encoding: .utf8)) ?? ""
        let unlimited = limits.split(separator: "\n").contains { $0.hasPrefix("Max locked memory") && $0.contains("unlimited") }
        if getuid() == 0 || unlimited {
            let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
            let pid = try #require(info?["ownerPID"] as? Int, "\(String(describing: info))")
            let locked = eventually {
                let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
                let line = status.split(separator: "\n").first { $0.hasPrefix("VmLck:") } ?? ""
                return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) > 0
            }
            #expect(locked)
        }
    }

    @Test("--foreground stays attached until another client takes the selection")
    func foreground() throws {
        let x = try Xvfb()
        let owner = try Peer(try xpbPath(), ["copy", "--foreground"], display: x, input: Data("fg".utf8))
        #expect(eventually { (try? xclipOut(x).text) == "fg" })
        #expect(owner.isRunning)
        _ = try run("/bin/sh", ["-c", "printf other | xclip -i -selection clipboard >/dev/null 2>&1"], display: x)
        let outcome = try owner.finish(timeout: 10)
        #expect(outcome.status == 0)
    }

    @Test("usage errors exit 64 with a message")
    func usage() throws {
        let x = try Xvfb()
        let mixed = try xpb(["copy", "-t", "html=a.html", "-t", "text"], x)
        #expect(mixed.status == 64)
        #expect(mixed.error.contains("TYPE=FILE"))
        #expect(try xpb(["paste", "--item", "-1"], x).status == 64)
        #expect(try xpb(["paste", "-p", "--pasteboard", "notes"], x).status == 64)
        #expect(try xpb(["paste", "--secondary", "-p"], x).status == 64)
        #expect(try xpb(["copy", "--expire", "soon"], x).status == 64)
        let missing = try xpb(["copy", "/nonexistent/file"], x)
        #expect(missing.status == 1)
        #expect(missing.error.contains("cannot read /nonexistent/file"))
        let unknown = try xpb(["paste", "--frobnicate"], x)
        #expect(unknown.status == 64)
        #expect(unknown.error.contains("unknown option '--frobnicate'"))
        #expect(unknown.error.contains("Usage: xpb paste"))
        #expect(try xpb(["paste", "--type"], x).error.contains("missing value for '--type"))
        #expect(try xpb(["paste", "extra"], x).error.contains("unexpected argument 'extra'"))
        #expect(try xpb(["paste", "--item", "two"], x).status == 64)
        #expect(try xpb(["watch", "--json=yes"], x).status == 64)
        #expect(try xpb(["frob"], x).status == 64)
        #expect(try xpb([], x).status == 64)
    }

    @Test("option spellings: --name=value, -tvalue, grouped short flags, -- ends the options")
    func grammar() throws {
        let x = try Xvfb()
        let file = try scratchFile("notes.txt", Data("grouped\n".utf8))
        // -pn: the primary selection and trimming, grouped.
        #expect(try xpb(["copy", "-pn", file], x).status == 0)
        #expect(try run("xclip", ["-o", "-selection", "primary"], display: x).text == "grouped")
        // After --, '-n' is a file name, not an option.
        let dashed = try xpb(["copy", "--", "-n"], x)
        #expect(dashed.status == 1)
        #expect(dashed.error.contains("cannot read -n"))
        // The background owner's own options go before a `--`, so `copy --` still starts it.
        #expect(try xpb(["copy", "--"], x, input: Data("after dashes".utf8)).status == 0)
        #expect(try xclipOut(x).text == "after dashes")
        #expect(try xpb(["copy", "--type=text/html"], x, input: Data("<b>b</b>".utf8)).status == 0)
        #expect(try xpb(["paste", "-thtml"], x).text == "<b>b</b>")
        #expect(try xpb(["paste", "--type", "html", "--timeout=2"], x).text == "<b>b</b>")
        // A repeated single option: the last one wins.
        #expect(try xpb(["paste", "-t", "png", "-t", "html"], x).text == "<b>b</b>")
        #expect(try xpb(["help", "paste"], x).text.contains("USAGE: xpb paste"))
        #expect(try xpb(["--version"], x).text.split(separator: ".").count == 3)
    }
}

@Suite("xpb paste, types, info, detect, clear, watch")
struct ReadTests {
    @Test("paste with no owner exits 2 within the timeout, with a clear message")
    func emptyClipboard() throws {
        let x = try Xvfb()
        let start = Date()
        let out = try xpb(["paste", "--timeout", "1"], x)
        #expect(out.status == 2)
        #expect(out.error == "xpb: the clipboard is empty (no owner for CLIPBOARD)\n")
        #expect(Date().timeIntervalSince(start) < 5)
        #expect(try xpb(["types"], x).status == 2)
    }

    @Test("paste asks TARGETS and its likely target in one round trip to the owner; a guess not taken costs an xpb owner nothing")
    func pipelinedPaste() throws {
        let x = try Xvfb()
        // This owner holds each TARGETS answer until the reader's next request is in (3 s at most).
        let owner = try Peer(try attacker(), ["owner-pipeline", "3"], display: x)
        try owner.waitForOutput("ready", timeout: 10)
        let paste = try xpb(["paste"], x)
        #expect(paste.status == 0 && paste.text == "hello", "\(paste.status) \(paste.error)")
        try owner.waitForOutput("pipelined UTF8_STRING", timeout: 10)
        // -t names the likely type: its target is asked with TARGETS; refused, the error says what there is.
        let html = try xpb(["paste", "-t", "html"], x)
        #expect(html.status == 3 && html.error.contains("has no text/html; it offers text/plain"), "\(html.status) \(html.error)")
        try owner.waitForOutput("pipelined text/html", timeout: 10)
        #expect(!owner.outputSoFar.contains("sequential"), "\(owner.outputSoFar)")
        owner.stop()
        // An xpb owner refuses a guess past 64 KiB (its readers take the manifest and the fast
        // path): a large text is read whole, again and again, --paste-once counts only the real
        // paste, and xclip reads it too.
        let big = payload(3 << 20, seed: 9).base64EncodedData()
        #expect(try xpb(["copy"], x, input: big).status == 0)
        for environment in [[:], ["XPB_FAST_PATH": "0"]] {
            #expect(try xpb(["paste"], x, environment: environment).output == big)
        }
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).output == big)
        #expect(try xpb(["copy", "--paste-once"], x, input: Data("once".utf8)).status == 0)
        #expect(try xpb(["paste"], x).text == "once")
        #expect(eventually { (try? xpb(["paste"], x).status) == 2 })
    }

    @Test("an xpb owner answers a reader's guess with its first item's first representation alone, up to 64 KiB, and not while it counts pastes")
    func guessAnswered() throws {
        let x = try Xvfb()
        let reader = try attacker()
        // xhostile's plain read of `target` into `property`; by default a guess property, of the
        // kind xpb's readers ask their guess into (any client's XPB_SEL_<n>_G).
        func read(_ target: String, into property: String = "XPB_SEL_9_G") throws -> String {
            try run(reader, ["read", target, property], display: x).text
        }
        #expect(try xpb(["copy"], x, input: Data("hello".utf8)).status == 0)
        #expect(try read("UTF8_STRING") == "asked\nread 5\n")
        #expect(try read("text/html") == "asked\nrefused\n")
        let limit = 64 << 10
        for (size, answered) in [(limit, true), (limit + 1, false)] {
            #expect(try xpb(["copy", "-t", "text"], x, input: Data(repeating: UInt8(ascii: "a"), count: size)).status == 0)
            #expect(try read("UTF8_STRING") == (answered ? "asked\nread \(size)\n" : "asked\nrefused\n"), "\(size) bytes")
            // The same read into a property of another name is no guess: answered.
            #expect(try read("UTF8_STRING", into: "XHOSTILE_READ") == "asked\nread \(size)\n")
            #expect(try xpb(["paste"], x).output.count == size)
        }
        // The first representation alone: here HTML, the text second.
        let html = try scratchFile("guess.html", Data("<b>hi</b>".utf8))
        let text = try scratchFile("guess.txt", Data("hi text".utf8))
        #expect(try xpb(["copy", "-t", "html=\(html)", "-t", "text=\(text)"], x).status == 0)
        #expect(try read("text/html") == "asked\nread 9\n")
        #expect(try read("UTF8_STRING") == "asked\nrefused\n")
        #expect(try xpb(["paste"], x).text == "hi text")
        #expect(try xpb(["paste", "-t", "html"], x).text == "<b>hi</b>")
        // While pastes are counted (--paste-once), an answered guess the reader then dropped would
        // use the paste up: refused, and the paste after it is the one.
        #expect(try xpb(["copy", "--paste-once"], x, input: Data("once".utf8)).status == 0)
        #expect(try read("UTF8_STRING") == "asked\nrefused\n")
        #expect(try xpb(["paste"], x).text == "once")
        #expect(eventually { (try? xpb(["paste"], x).status) == 2 })
    }

    @Test("a stopped owner: paste times out with status 4")
    func timeout() throws {
        let x = try Xvfb()
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("zzz".utf8))
        defer { owner.stop() }
        #expect(eventually { (try? xpb(["paste"], x).text) == "zzz" })
        owner.signal(SIGSTOP)
        let start = Date()
        let out = try xpb(["paste", "--timeout", "1"], x)
        #expect(out.status == 4)
        #expect(out.error.contains("timed out after 1 s"))
        #expect(Date().timeIntervalSince(start) < 5)
        owner.signal(SIGCONT)
    }

    @Test("a stopped xpb owner: the fast-path read times out once, with status 4, not again through X")
    func stoppedXpbOwner() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy"], x, input: Data("zzz".utf8)).status == 0)
        let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        let pid = try #require(info?["ownerPID"] as? Int)
        kill(pid_t(pid), SIGSTOP)
        defer { kill(pid_t(pid), SIGKILL); kill(pid_t(pid), SIGCONT) }
        let start = Date()
        let out = try xpb(["paste", "--timeout", "1"], x)
        // Said on a failure: what was pasted, and who owned the selection by then (it failed once
        // in a whole-suite run with status 0, as if the process stopped was not the owner).
        let account = { "pasted \(out.text.debugDescription); stopped \(pid) (/proc: \((try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? "gone")); \(info ?? [:]); now \((try? xpb(["info", "--timeout", "1"], x).text) ?? "")" }
        #expect(out.status == 4, "\(account())")
        #expect(out.error.contains("timed out after 1 s"))
        #expect(Date().timeIntervalSince(start) < 1.9)
    }

    @Test("plain text asked of an HTML-only copy is its text, from xpb (fast path and X) and from xclip; --no-convert refuses")
    func textFromHTML() throws {
        let x = try Xvfb()
        let html = "<html><head><title>t</title></head><body><p>Fish &amp; Chips</p><ul><li>caf&eacute;</li><li>&#x1F41F;</li></ul></body></html>"
        let text = "Fish & Chips\n\ncafé\n🐟"
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-html-\(getpid())-\(UUID().uuidString.prefix(6)).html")
        try Data(html.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try xpb(["copy", "-t", "html=\(file.path)"], x).status == 0)
        #expect(try xpb(["paste", "-t", "text"], x).text == text)
        #expect(try xpb(["paste", "-t", "text"], x, environment: ["XPB_FAST_PATH": "0"]).text == text)
        #expect(try xpb(["paste"], x).text == html, "the default is the type the item has")
        let refused = try xpb(["paste", "-t", "text", "--no-convert"], x)
        #expect(refused.status == 3 && refused.error.contains("has no text/plain; it offers text/html"), "\(refused.error)")
        #expect(try xclipOut(x).text == text)
        // The toolkits' text readers: GTK's wait_for_text, Qt's QMimeData.text().
        #expect(try toolkitPeer("gtk_clipboard.py", ["text"], display: x).finish().text == text + "\n")
        let qt = try toolkitPeer("qt_clipboard.py", ["read"], display: x).finish().text
        #expect(qt.hasSuffix("text " + text + "\n"), "\(qt)")
        // A foreign owner with HTML alone (xclip): made into text on this side.
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "text/html", "-quiet"], display: x, input: Data(html.utf8))
        defer { owner.stop() }
        #expect(eventually { (try? xpb(["types"], x).text) == "text/html\n" })
        #expect(try xpb(["paste", "-t", "text", "--trim-newline"], x).text == text)
    }

    /// `xpb watch --json` on `x`, once it has printed a line: copies by xpb are made until it
    /// prints one (nothing else shows that it has started).
    private func watchingJSON(_ x: Xvfb) throws -> Peer {
        let watch = try Peer(try xpbPath(), ["watch", "--json"], display: x)
        for _ in 0..<20 where watch.outputSoFar.isEmpty {
            #expect(try xpb(["copy"], x, input: Data("probe".utf8)).status == 0)
            _ = eventually(timeout: 1) { !watch.outputSoFar.isEmpty }
        }
        return watch
    }

    @Test("who copied: xclip's live pid and executable (it sets no window property and forks), a renamed copy's own name, a GTK app's WM_CLASS; info and watch --json")
    func ownerAttribution() throws {
        let x = try Xvfb()
        let watch = try watchingJSON(x)
        defer { watch.stop() }
        // Then one xclip copy, whose line the watcher prints later. (Retried xclip copies would
        // leave earlier xclips exiting while the last one's change is reported: two xclips
        // holding connections handed down by their gone parents name the executable alone,
        // never a guessed pid.)
        #expect(try xclipCopy("hi", display: x).status == 0)
        #expect(eventually(timeout: 10) { (try? xpb(["types", "--targets"], x).text.contains("UTF8_STRING")) == true && (try? xpb(["info"], x).text.contains("owner app: xclip")) == true })
        let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        let pid = try #require(info?["ownerPID"] as? Int)
        // The pid the server recorded is xclip's parent, gone once it forked: the one shown lives.
        #expect(isAlive(pid))
        #expect(try String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) == "xclip\n")
        #expect(info?["ownerApp"] as? String == "xclip")
        let executable = try #require(info?["ownerExecutable"] as? String)
        #expect(executable.hasSuffix("/xclip") && FileManager.default.isExecutableFile(atPath: executable))
        let text = try xpb(["info"], x).text
        #expect(text.contains("owner pid: \(pid)\n") && text.contains("owner app: xclip (\(executable))\n"), "\(text)")
        let xclipLine = { watch.outputSoFar.split(separator: "\n").first { $0.contains("\"ownerApp\":\"xclip\"") } }
        #expect(eventually(timeout: 20) { xclipLine() != nil }, "\(watch.outputSoFar)")
        let line = try #require(xclipLine())
        let change = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        // The watcher looks as soon as the change comes: xclip's first process, which forks and
        // exits, may still be there (a pid gone since); else the one that lives on.
        let watchedPID = change?["ownerPID"] as? Int
        #expect(change?["ownerApp"] as? String == "xclip" && (watchedPID == pid || watchedPID.map { !isAlive($0) } == true), "\(line)")

        // A copy of xclip under another name is named by its own executable.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-renamed-\(getpid())-\(UUID().uuidString.prefix(6))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let renamed = try renamedXclip("keepassxc", in: directory)
        #expect(try xclipCopy("secret", program: renamed, display: x).status == 0)
        #expect(try xpb(["info"], x).text.contains("owner app: keepassxc (\(renamed))"))

        // A GTK app: its clipboard window is hidden; WM_CLASS is its top-level window's.
        let gtk = try toolkitPeer("gtk_clipboard.py", ["set-text-window", "from gtk"], display: x)
        defer { gtk.stop() }
        try gtk.waitForOutput("ready")
        let gtkInfo = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        #expect(gtkInfo?["ownerPID"] as? Int == Int(gtk.pid))
        #expect((gtkInfo?["ownerClass"] as? String)?.lowercased().contains("gtk_clipboard") == true, "\(String(describing: gtkInfo))")
    }

    @Test("who copied, beside a process on an X connection handed down to it: xclip is named by watch (which has read the owner's targets already) and info while that process sleeps; while it keeps running, it is never named")
    func ownerAttributionBesideAHolder() throws {
        let x = try Xvfb()
        let watch = try watchingJSON(x)
        defer { watch.stop() }
        // A client that connects and forks; its parent exits, and the child wakes every
        // millisecond on the connection it was handed (as an owner that lost its selection runs
        // while it exits, but for as long as the test wants), or sleeps when stopped (as
        // dbus-launch's child waits).
        let script = """
        import ctypes, os, sys, time
        x = ctypes.CDLL("libX11.so.6"); x.XOpenDisplay.restype = ctypes.c_void_p
        if not x.XOpenDisplay(None): sys.exit(1)
        if os.fork() == 0:
            print(os.getpid(), flush=True)
            while True: time.sleep(0.001)
        os._exit(0)
        """
        let forker = try Peer("python3", ["-c", script], display: x)
        defer { forker.stop() }
        #expect(eventually(timeout: 10) { forker.outputSoFar.hasSuffix("\n") })
        let holder = try #require(Int(forker.outputSoFar.trimmingCharacters(in: .whitespacesAndNewlines)))
        defer { kill(pid_t(holder), SIGKILL); kill(pid_t(holder), SIGCONT) }
        #expect(eventually(timeout: 10) { !forker.isRunning })
        func watchedAfter(_ count: Int) throws -> [[String: Any]] {
            #expect(eventually(timeout: 20) { watch.outputSoFar.split(separator: "\n").count > count }, "\(watch.outputSoFar)")
            return try watch.outputSoFar.split(separator: "\n").dropFirst(count).map {
                try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
            }
        }

        // Asleep: the owner is asked itself, and the one that runs to answer is xclip's child.
        kill(pid_t(holder), SIGSTOP)
        var lines = watch.outputSoFar.split(separator: "\n").count
        #expect(try xclipCopy("hi", display: x).status == 0)
        let first = try #require(try watchedAfter(lines).last)
        #expect(first["ownerApp"] as? String == "xclip", "\(first)")
        let firstPID = try #require(first["ownerPID"] as? Int)
        #expect(firstPID != holder)
        // Named while the change came: xclip's child that owns the clipboard, or (under load)
        // its parent, which made the connection and exits right after forking the child, and
        // was still running when watch looked. A pid still there is xclip's.
        if let name = try? String(contentsOfFile: "/proc/\(firstPID)/comm", encoding: .utf8) { #expect(name == "xclip\n") }

        // Running through every request: it and xclip both run to each, so nobody is named by
        // either, never the holder.
        kill(pid_t(holder), SIGCONT)
        lines = watch.outputSoFar.split(separator: "\n").count
        #expect(try xclipCopy("hi again", display: x).status == 0)
        for change in try watchedAfter(lines) {
            #expect(change["ownerPID"] as? Int != holder && change["ownerApp"] as? String != "python3", "\(change)")
        }
        let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        #expect(info?["ownerPID"] as? Int != holder && info?["ownerApp"] as? String != "python3", "\(String(describing: info))")
        // Stopped again: info names xclip.
        kill(pid_t(holder), SIGSTOP)
        let named = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        #expect(named?["ownerApp"] as? String == "xclip", "\(String(describing: named))")
        let pid = try #require(named?["ownerPID"] as? Int)
        #expect(try String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) == "xclip\n")
    }

    /// A second request for the same target into the property an INCR send of ours fills is
    /// answered by that send: opened anew, it wrote a second INCR marker into the property being
    /// read, and the reader took a part for the whole.
    @Test("the same target asked again into the property an INCR transfer fills: the transfer goes on, the reader gets the whole text")
    func askedAgainIntoTheSameProperty() throws {
        let x = try Xvfb()
        let text = Data(String(repeating: "a line of text to paste, over and over\n", count: 200_000).utf8)
        #expect(try xpb(["copy"], x, input: text).status == 0)
        for round in 0 ..< 3 {
            let outcome = try run(try attacker(), ["read-twice", "UTF8_STRING", "XHOSTILE_TWICE"], display: x, timeout: 20)
            #expect(outcome.text == "asked\nread \(text.count)\n", "round \(round): \(outcome.text) \(outcome.error)")
        }
        // The owner serves on: a plain read after.
        let whole = try run("xclip", ["-o", "-selection", "clipboard"], display: x).output == text
        #expect(whole)
    }

    @Test("readers gone while the owner was stopped: after SIGCONT the next reader, with a gone one's window id, gets the whole text")
    func readersGoneWhileOwnerStopped() throws {
        let x = try Xvfb()
        // Large enough for INCR: the owner watches the requestor's window.
        let text = Data(String(repeating: "a line of text to paste, over and over\n", count: 200_000).utf8)
        #expect(try xpb(["copy"], x, input: text).status == 0)
        let info = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        let pid = pid_t(try #require(info?["ownerPID"] as? Int))
        defer { kill(pid, SIGKILL); kill(pid, SIGCONT) }
        // Connected before the gone readers and for good: its round trips through the owner
        // never take their client slot.
        let probe = try Peer(try attacker(), ["probe"], display: x)
        defer { probe.stop() }
        try probe.waitForOutput("ready")
        var probes = 0
        for round in 0 ..< 6 {
            kill(pid, SIGSTOP)
            // A reader asks and is gone (killed by a timeout, say): its request waits at the owner.
            let gone = try run(try attacker(), ["string", "1", "UTF8_STRING"], display: x)
            #expect(gone.status == 0, "\(gone.error)")
            if round % 2 == 0 {
                // The next reader of the same program (with the gone one's client slot, so its
                // window id, and its property) asks before the owner goes on.
                let reader = try Peer(try attacker(), ["read", "UTF8_STRING", "XHOSTILE_P0"], display: x)
                try reader.waitForOutput("asked")
                kill(pid, SIGCONT)
                let outcome = try reader.finish(timeout: 20)
                #expect(outcome.text == "asked\nread \(text.count)\n", "round \(round): \(outcome.text)")
            } else {
                // It starts once the owner has gone on and answered the gone one (into a window
                // that no longer is). Before that, X11 leaves no way to tell: a window made by
                // the next client with the gone one's id would get the answer, and xclip, which
                // reads its own property whatever the SelectionNotify names, would read nothing.
                kill(pid, SIGCONT)
                probes += 1
                kill(probe.pid, SIGUSR1)
                try probe.waitForOutput("answered \(probes)\n")
                let outcome = try run("xclip", ["-o", "-selection", "clipboard"], display: x, timeout: 20)
                // Compared first, then expected: Swift Testing diffs two unequal Data values of
                // 7.8 MB for its report, which took over 15 minutes at full CPU.
                let whole = outcome.output == text
                #expect(whole, "round \(round): \(outcome.output.count) of \(text.count) bytes, status \(outcome.status): \(outcome.error)")
            }
        }
    }

    @Test("no X display exits 5")
    func noDisplay() throws {
        let x = try Xvfb()
        let unreachable = try xpb(["paste", "--display", ":4093"], x)
        #expect(unreachable.status == 5)
        #expect(unreachable.error.contains("cannot open X display \":4093\""))
        // No display and no headless daemon (a runtime directory of its own, with none in it).
        let runtime = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-nodisplay-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: runtime) }
        let unset = try xpb(["paste"], x, environment: ["DISPLAY": "", "XDG_RUNTIME_DIR": runtime.path])
        #expect(unset.status == 5)
        #expect(unset.error.contains("no display and no headless xpbd: set DISPLAY (or pass --display), or start one with 'xpbd --headless &'"), "\(unset.error)")
    }

    @Test("paste -t prefers the first available type, -o writes a file, type not available exits 3")
    func pasteTypes() throws {
        let x = try Xvfb()
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "text/html", "-quiet"], display: x, input: Data("<p>x</p>".utf8))
        defer { owner.stop() }
        #expect(eventually { (try? xpb(["types"], x).text) == "text/html\n" })
        let target = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-out-\(UUID().uuidString)").path
        #expect(try xpb(["paste", "-t", "png,html", "-o", target], x).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("<p>x</p>".utf8))
        let unavailable = try xpb(["paste", "-t", "png"], x)
        #expect(unavailable.status == 3)
        #expect(unavailable.error.contains("offers text/html"), "\(unavailable.error)")
        let targets = try xpb(["types", "--targets"], x)
        #expect(targets.text == "TARGETS\ntext/html\n", "\(targets.status) \(targets.text.debugDescription) \(targets.error)")
    }

    @Test("paste with no -t skips toolkits' private markers: an image beside Chromium's token, text before an image")
    func pasteSkipsMarkers() throws {
        let x = try Xvfb()
        let png = try Data(contentsOf: packageRoot.appendingPathComponent("Tests/Peers/image.png"))
        let token = try scratchFile("token", Data("0123456789abcdef01234567".utf8))
        let image = packageRoot.appendingPathComponent("Tests/Peers/image.png").path
        let text = try scratchFile("text", Data("caption".utf8))
        for (formats, expected) in [
            (["chromium/x-internal-source-rfh-token=\(token)", "image/png=\(image)"], png),
            (["application/x-qt-windows-mime;value=\"x\"=\(token)", "image/png=\(image)", "text/plain=\(text)"], Data("caption".utf8)),
        ] {
            let owner = try toolkitPeer("qt_clipboard.py", ["set-formats"] + formats, display: x)
            defer { owner.stop() }
            try owner.waitForOutput("ready", timeout: 20)
            let paste = try xpb(["paste"], x)
            #expect(paste.status == 0 && paste.output == expected, "\(formats): \(paste.status) \(paste.error) \(paste.output.prefix(40))")
            // Named, a marker is read as any type.
            #expect(try xpb(["paste", "-t", "chromium/x-internal-source-rfh-token"], x).status == (formats[0].hasPrefix("chromium") ? 0 : 3))
        }
        let only = try toolkitPeer("qt_clipboard.py", ["set-formats", "chromium/x-internal-source-rfh-token=\(token)"], display: x)
        defer { only.stop() }
        try only.waitForOutput("ready", timeout: 20)
        let markers = try xpb(["paste"], x)
        #expect(markers.status == 3 && markers.error.contains("only private markers"), "\(markers.status) \(markers.error)")
    }

    @Test("-p/--find and -n address PRIMARY and named pasteboards")
    func selections() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy", "-p"], x, input: Data("prim".utf8)).status == 0)
        #expect(try run("xclip", ["-o", "-selection", "primary"], display: x).text == "prim")
        #expect(try xpb(["paste", "--find"], x).text == "prim")
        #expect(try xpb(["paste"], x).status == 2)
        #expect(try xpb(["copy", "--pasteboard", "notes"], x, input: Data("named".utf8)).status == 0)
        #expect(try xpb(["copy", "--pasteboard", "other"], x, input: Data("other".utf8)).status == 0)
        #expect(try xpb(["paste", "--pasteboard", "notes"], x).text == "named")
        #expect(try xpb(["paste", "--pasteboard", "other"], x).text == "other")
        #expect(try xpb(["clear", "--pasteboard", "notes"], x).status == 0)
        #expect(try xpb(["paste", "--pasteboard", "notes"], x).status == 2)
        #expect(try xpb(["paste", "--pasteboard", "other"], x).text == "other")
    }

    @Test("info names the owner; --json too")
    func info() throws {
        let x = try Xvfb()
        let empty = try xpb(["info"], x)
        #expect(empty.text.contains("owner: none"))
        #expect(empty.status == 2, "an empty clipboard exits 2, as with every other command")
        #expect(try xpb(["info", "--json"], x).status == 2)
        #expect(try xpb(["copy"], x, input: Data("i".utf8)).status == 0)
        #expect(try xpb(["info"], x).status == 0)
        let text = try xpb(["info"], x).text
        #expect(text.contains("selection: CLIPBOARD"))
        #expect(text.contains("owner name: xpb"))
        #expect(text.contains("owner pid: "))
        #expect(text.contains("items: 1"))
        #expect(text.contains("item 0: public.utf8-plain-text"))
        let object = try JSONSerialization.jsonObject(with: try xpb(["info", "--json"], x).output) as? [String: Any]
        #expect(object?["selection"] as? String == "CLIPBOARD")
        #expect(object?["items"] as? [[String]] == [["public.utf8-plain-text"]])
        #expect((object?["ownerPID"] as? Int ?? 0) > 0)
    }

    @Test("detect reports patterns and values; --json too")
    func detect() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy"], x, input: Data("mail ann@example.org, call +1 555-123-4567, see https://example.org".utf8)).status == 0)
        let text = try xpb(["detect"], x).text
        #expect(text.contains("emails: ann@example.org"))
        #expect(text.contains("links: https://example.org"))
        #expect(text.contains("phone numbers: +1 555-123-4567"))
        #expect(try xpb(["copy"], x, input: Data("https://example.org/path".utf8)).status == 0)
        let object = try JSONSerialization.jsonObject(with: try xpb(["detect", "--json"], x).output) as? [String: Any]
        #expect(object?["patterns"] as? [String] == ["probableWebURL"])
        #expect(try xpb(["clear"], x).status == 0)
        #expect(try xpb(["detect"], x).status == 2)
    }

    @Test("clear empties a clipboard owned by another client")
    func clear() throws {
        let x = try Xvfb()
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("theirs".utf8))
        #expect(eventually { (try? xclipOut(x).text) == "theirs" })
        #expect(try xpb(["clear"], x).status == 0)
        #expect(try xpb(["paste"], x).status == 2)
        // xclip leaves when it loses the selection.
        #expect(try owner.finish(timeout: 10).status == 0)
    }

    @Test("watch --count 3 sees three xclip -i copies; --json and --exec")
    func watch() throws {
        let x = try Xvfb()
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-watch-\(UUID().uuidString)").path
        let watcher = try Peer(try xpbPath(), ["watch", "--count", "3", "--exec", "echo \"$XPB_CHANGE_COUNT $XPB_TYPES\" >> \(marker)"], display: x)
        let jsonWatcher = try Peer(try xpbPath(), ["watch", "--json", "--count", "1"], display: x)
        Thread.sleep(forTimeInterval: 0.5)
        for (index, target) in ["UTF8_STRING", "text/html", "image/png"].enumerated() {
            _ = try run("/bin/sh", ["-c", "printf 'copy \(index)' | xclip -i -selection clipboard -t \(target) >/dev/null 2>&1"], display: x)
            Thread.sleep(forTimeInterval: 0.2)
        }
        let lines = try watcher.finish(timeout: 10).text.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines.first?.hasPrefix("1\tCLIPBOARD\t") == true)
        #expect(lines.last?.hasPrefix("3\tCLIPBOARD\t") == true)
        #expect(lines.last?.contains("image/png") == true)
        let hooks = try String(contentsOfFile: marker, encoding: .utf8).split(separator: "\n")
        #expect(hooks.count == 3)
        #expect(hooks.first?.hasPrefix("1 ") == true)
        let object = try JSONSerialization.jsonObject(with: try jsonWatcher.finish(timeout: 10).output) as? [String: Any]
        #expect(object?["changeCount"] as? Int == 1)
        #expect(object?["selection"] as? String == "CLIPBOARD")
    }

    @Test("paste --follow writes the contents, then what each change adds; a new copy whole; an empty clipboard waits")
    func follow() throws {
        let x = try Xvfb()
        let follower = try Peer(try xpbPath(), ["paste", "--follow"], display: x)
        defer { follower.stop() }
        Thread.sleep(forTimeInterval: 0.5)
        #expect(follower.isRunning, "paste --follow ended on an empty clipboard")
        #expect(try xpb(["copy"], x, input: Data("one".utf8)).status == 0)
        try follower.waitForOutput("one", timeout: 10)
        // xsel -a grows the selection: only the addition is written.
        _ = try run("/bin/sh", ["-c", "printf ' two' | xsel -a -b"], display: x)
        try follower.waitForOutput("one two", timeout: 10)
        #expect(try xpb(["copy"], x, input: Data("|new".utf8)).status == 0)
        try follower.waitForOutput("one two|new", timeout: 10)
        #expect(try xpb(["paste", "--follow", "-o", "/dev/null"], x).status == 64)
    }

    @Test("watch --exec gets the new contents on its standard input; secret data is not handed over")
    func watchInput() throws {
        let x = try Xvfb()
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-watch-\(UUID().uuidString)").path
        let watcher = try Peer(try xpbPath(), ["watch", "--count", "3", "--exec", "{ cat; echo \"|$XPB_TYPES\"; } >> \(marker)"], display: x)
        Thread.sleep(forTimeInterval: 0.5)
        _ = try run("/bin/sh", ["-c", "printf 'from xclip' | xclip -i -selection clipboard >/dev/null 2>&1"], display: x)
        #expect(eventually { ((try? String(contentsOfFile: marker, encoding: .utf8)) ?? "").contains("\n") })
        #expect(try xpb(["copy", "--sensitive"], x, input: Data("hunter2".utf8)).status == 0)
        #expect(eventually { ((try? String(contentsOfFile: marker, encoding: .utf8)) ?? "").split(separator: "\n").count == 2 })
        // Every marker of the one secret rule (SecretMarking), not only KDE's hint: nspasteboard.org's concealed type.
        let text = try scratchFile("concealed.txt", Data("s3cret-concealed".utf8))
        let mark = try scratchFile("mark", Data())
        let concealed = try xpb(["copy", "-t", "text=\(text)", "-t", "org.nspasteboard.ConcealedType=\(mark)"], x)
        #expect(concealed.status == 0, "\(concealed.error)")
        #expect(try watcher.finish(timeout: 10).status == 0)
        let hooks = try String(contentsOfFile: marker, encoding: .utf8)
        #expect(hooks.hasPrefix("from xclip|public.utf8-plain-text\n"))
        #expect(!hooks.contains("hunter2"))
        #expect(!hooks.contains("s3cret-concealed"), "\(hooks)")
        #expect(hooks.split(separator: "\n").count == 3, "\(hooks)")
    }

    @Test("watch lists the types as xpb types does, in the same order")
    func watchOrder() throws {
        let x = try Xvfb()
        let json = try scratchFile("conf.json", Data("{\"a\": 1}".utf8))
        let html = try scratchFile("page.html", Data("<b>x</b>".utf8))
        let text = try scratchFile("page.txt", Data("x".utf8))
        for copy in [["copy", json], ["copy", "-t", "html=\(html)", "-t", "text=\(text)"], ["copy", "-t", "text=\(text)", "-t", "html=\(html)"]] {
            let watcher = try Peer(try xpbPath(), ["watch", "--count", "1"], display: x)
            Thread.sleep(forTimeInterval: 0.4)
            #expect(try xpb(copy, x).status == 0)
            let line = try watcher.finish(timeout: 10).text
            let types = try xpb(["types"], x).text.split(separator: "\n").joined(separator: ",")
            #expect(line.split(separator: "\t").last.map { $0.trimmingCharacters(in: .newlines) } == types, "\(copy)")
        }
    }

    @Test("completions complete values: history and daemon actions, shells, types, displays (bash and fish run them; zsh parses them)")
    func completionValues() throws {
        let x = try Xvfb()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-completions-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for shell in ["bash", "zsh", "fish"] {
            try xpb(["completions", shell], x).output.write(to: directory.appendingPathComponent(shell == "zsh" ? "_xpb" : "xpb.\(shell)"))
            try run(try builtProduct("xpbd"), ["--completions", shell], display: x).output
                .write(to: directory.appendingPathComponent(shell == "zsh" ? "_xpbd" : "xpbd.\(shell)"))
        }
        let display = ":" + x.display.drop { $0 != ":" }.dropFirst().prefix { $0.isNumber }
        // bash: the completion function, as bash calls it for `xpb history <TAB>` and the like.
        let lines = [["xpb", "history", ""], ["xpb", "daemon", ""], ["xpb", "completions", ""], ["xpb", "paste", "-t", "pn"],
                     ["xpb", "copy", "--type", "image/pn"], ["xpb", "history", "--display", display, "cl"], ["xpb", "paste", "--display", display],
                     ["xpb", "history", "list", ""], ["xpbd", "--display", display]]
        let calls = lines.map { words in
            "COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " "))); COMP_CWORD=\(words.count - 1); COMPREPLY=(); _\(words[0]); echo \"${COMPREPLY[*]}\""
        }.joined(separator: "; ")
        let bash = try run("/bin/bash", ["-c", "source \"$0/xpb.bash\"; source \"$0/xpbd.bash\"; " + calls, directory.path], display: x)
        #expect(bash.status == 0, "\(bash.error)")
        let replies = bash.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(replies.count >= 9, "\(bash.text)")
        if replies.count >= 9 {
            #expect(replies[0] == "list search select delete pin unpin clear queue menu")
            #expect(replies[1] == "status link")
            #expect(replies[2] == "bash zsh fish")
            #expect(replies[3] == "png")
            #expect(replies[4] == "image/png")
            #expect(replies[5] == "clear", "the action after --display's value")
            #expect(replies[6].split(separator: " ").contains(Substring(display)), "\(replies[6])")
            #expect(replies[7] == "", "one action only, then no words: \(replies[7])")
            #expect(replies[8].split(separator: " ").contains(Substring(display)), "\(replies[8])")
        }
        // fish: `complete -C` lists what a <TAB> offers.
        let fish = try run("/usr/bin/fish", ["--no-config", "-c", "source $argv[1]/xpb.fish; source $argv[1]/xpbd.fish; complete -C 'xpb history '; echo ==; complete -C 'xpb completions z'; echo ==; complete -C 'xpb paste -t htm'; echo ==; complete -C 'xpbd --display \(display)'", directory.path], display: x)
        #expect(fish.status == 0, "\(fish.error)")
        let parts = fish.text.components(separatedBy: "==\n").map { $0.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) } }
        #expect(parts.count == 4, "\(fish.text)")
        if parts.count == 4 {
            #expect(Set(parts[0]) == ["list", "search", "select", "delete", "pin", "unpin", "clear", "queue", "menu"])
            #expect(parts[1] == ["zsh"])
            #expect(parts[2] == ["html"])
            #expect(parts[3].contains(display), "\(parts[3])")
        }
        // zsh: both scripts parse, and they carry the value lists.
        let zsh = try run("/usr/bin/zsh", ["-f", "-c", "zsh -n $0/_xpb && zsh -n $0/_xpbd && print ok", directory.path], display: x)
        #expect(zsh.text == "ok\n", "\(zsh.error)")
        let zshScript = try String(contentsOf: directory.appendingPathComponent("_xpb"), encoding: .utf8)
        #expect(zshScript.contains("(list search select delete pin unpin clear queue menu)") && zshScript.contains("(bash zsh fish)"))
        #expect(zshScript.contains("/tmp/.X11-unix"))
    }

    @Test("every command has --help")
    func help() throws {
        let x = try Xvfb()
        for command in ["copy", "paste", "types", "watch", "clear", "info", "detect"] {
            let out = try xpb([command, "--help"], x)
            #expect(out.status == 0)
            #expect(out.text.contains("USAGE: xpb \(command)"))
        }
        #expect(try xpb(["--help"], x).text.contains("Exit status"))
    }
}

/// The harness itself: what a test starts runs as from a login shell.
@Suite("The test harness's children")
struct HarnessTests {
    @Test("a shell a test starts reaps its background children: 'cmd & wait' ends (no signal blocked or ignored is inherited)")
    func shellWaitEnds() throws {
        let x = try Xvfb()
        let outcome = try run("/bin/sh", ["-c", "sleep 0.1 & sleep 0.1 & wait; echo waited"], display: x, timeout: 20)
        #expect(outcome.text == "waited\n")
        let bash = try run("/bin/bash", ["-c", "sleep 0.1 & wait; trap - CHLD; echo waited"], display: x, timeout: 20)
        #expect(bash.text == "waited\n")
        // No signal blocked, none of the standard ones ignored (glibc keeps its two internal
        // real-time signals, 32 and 33, as the parent has them).
        let status = try run("/bin/sh", ["-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status"], display: x, timeout: 20).text
        var sets: [String: UInt64] = [:]
        for line in status.split(separator: "\n") {
            let fields = line.split(separator: "\t")
            if fields.count == 2, let value = UInt64(fields[1], radix: 16) { sets[String(fields[0])] = value }
        }
        #expect(sets["SigBlk:"] == 0, "\(status)")
        #expect(sets["SigIgn:"].map { $0 & 0x7fff_ffff } == 0, "\(status)")
    }
}
