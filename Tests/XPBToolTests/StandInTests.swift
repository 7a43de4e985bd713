import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The tools a scenario runs: the real xclip and xsel, or xpb under those names.
struct ClipboardTools: Sendable, CustomStringConvertible {
    let xclip: String
    let xsel: String
    let description: String

    static let real = ClipboardTools(xclip: "/usr/bin/xclip", xsel: "/usr/bin/xsel", description: "real xclip/xsel")

    /// xpb reached through links named xclip and xsel (multi-call by argv[0]).
    static func standIns() throws -> ClipboardTools {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-standins-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Tests running at once ask for them together: each link is made under its own name and
        // renamed into place (atomic), never removed and made again under the shared name.
        for name in ["xclip", "xsel"] {
            let link = directory.appendingPathComponent(name).path
            let fresh = directory.appendingPathComponent(".\(name)-\(UUID().uuidString)").path
            try FileManager.default.createSymbolicLink(atPath: fresh, withDestinationPath: try xpbPath())
            guard rename(fresh, link) == 0 else {
                let code = errno
                unlink(fresh)
                throw TestFailure("cannot link \(link): \(String(cString: strerror(code)))")
            }
        }
        return ClipboardTools(xclip: directory.appendingPathComponent("xclip").path,
                              xsel: directory.appendingPathComponent("xsel").path, description: "xpb as xclip/xsel")
    }
}

/// Runs a shell command line with `$XCLIP` and `$XSEL` set to the tools (stdout captured; a
/// backgrounding tool's stdout is the caller's business, as in real scripts).
private func shell(_ command: String, _ tools: ClipboardTools, _ x: Xvfb, input: Data? = nil, timeout: Double = 20) throws -> Outcome {
    try run("/bin/sh", ["-c", command], display: x, input: input,
            environment: ["XCLIP": tools.xclip, "XSEL": tools.xsel], timeout: timeout)
}

/// Runs `scenario` with the real tools and with the stand-ins, each on its own display, and
/// expects the same observations.
private func compare(_ scenario: (ClipboardTools, Xvfb) throws -> [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
    let real = try scenario(.real, try Xvfb())
    let standIn = try scenario(try .standIns(), try Xvfb())
    #expect(standIn == real, "stand-ins differ from the real tools", sourceLocation: sourceLocation)
}

@Suite("xclip and xsel stand-ins")
struct StandInTests {
    @Test("Neovim's provider: xclip -quiet -i -selection clipboard stays in the foreground, xclip -o reads")
    func neovimXclip() throws {
        try compare { tools, x in
            let owner = try Peer(tools.xclip, ["-quiet", "-i", "-selection", "clipboard"], display: x, input: Data("from nvim\nline 2\n".utf8))
            defer { owner.stop() }
            var seen: [String] = []
            #expect(eventually(timeout: 10) { (try? run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text) == "from nvim\nline 2\n" })
            seen.append(try shell("$XCLIP -o -selection clipboard", tools, x).text)
            seen.append(try run("/usr/bin/xsel", ["-o", "-b"], display: x).text)
            seen.append("running: \(owner.isRunning)")
            // The foreground owner leaves when another client takes the clipboard.
            _ = try shell("printf other | /usr/bin/xclip -i -selection clipboard >/dev/null", tools, x)
            seen.append("left: \(eventually(timeout: 10) { !owner.isRunning })")
            return seen
        }
    }

    @Test("Neovim's provider: xsel --nodetach -i -b and xsel -o -b")
    func neovimXsel() throws {
        try compare { tools, x in
            let owner = try Peer(tools.xsel, ["--nodetach", "-i", "-b"], display: x, input: Data("héllo ✓".utf8))
            defer { owner.stop() }
            #expect(eventually(timeout: 10) { (try? run("/usr/bin/xsel", ["-o", "-b"], display: x).text) == "héllo ✓" })
            return [try shell("$XSEL -o -b", tools, x).text,
                    try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text,
                    "running: \(owner.isRunning)"]
        }
    }

    @Test("tmux-yank: xsel -i --clipboard and xclip -selection clipboard return and serve; reads of the other's")
    func tmuxYank() throws {
        try compare { tools, x in
            var seen: [String] = []
            let first = try shell("printf 'yanked' | $XSEL -i --clipboard >/dev/null 2>&1; echo $?", tools, x)
            seen.append(first.text)
            // The real xsel returns before its background child owns the clipboard: wait until
            // it serves (an X round trip), for either tool, before comparing what reads see.
            seen.append("serves: \(eventually(timeout: 10) { (try? run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text) == "yanked" })")
            seen.append(try shell("$XCLIP -o -selection clipboard", tools, x).text)
            seen.append(try run("/usr/bin/xsel", ["-o", "--clipboard"], display: x).text)
            let second = try shell("printf 'second\\n' | $XCLIP -selection clipboard >/dev/null 2>&1; echo $?", tools, x)
            seen.append(second.text)
            seen.append("serves: \(eventually(timeout: 10) { (try? run("/usr/bin/xsel", ["-o", "--clipboard"], display: x).text) == "second\n" })")
            seen.append(try shell("$XSEL -o --clipboard", tools, x).text)
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text)
            // PRIMARY is xsel's and xclip's default.
            _ = try shell("printf 'prime' | $XCLIP >/dev/null 2>&1", tools, x)
            seen.append("serves: \(eventually(timeout: 10) { (try? run("/usr/bin/xclip", ["-o"], display: x).text) == "prime" })")
            seen.append(try shell("$XSEL", tools, x, input: Data()).text)
            seen.append(try run("/usr/bin/xclip", ["-o"], display: x).text)
            return seen
        }
    }

    @Test("pass: xclip -selection clipboard -l 2 serves two pastes, then gives the clipboard up")
    func passLoops() throws {
        try compare { tools, x in
            var seen: [String] = []
            _ = try shell("printf 'hunter2' | $XCLIP -selection clipboard -l 2 >/dev/null 2>&1", tools, x)
            // The real xclip takes the clipboard in its forked child, after the command returned: a
            // paste at once found no owner under load. Wait until one owns it; `xpb info` asks it
            // for nothing that xclip counts against -l (its TARGETS are not a paste).
            seen.append("owned: \(eventually(timeout: 10) { (try? ownerPID(x)) != nil })")
            for _ in 0..<2 {
                seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text)
            }
            // After its two pastes the owner is gone: nothing is left to read.
            let gone = eventually(timeout: 10) {
                (try? run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).status) == 1
            }
            seen.append("gone: \(gone)")
            return seen
        }
    }

    @Test("xclip -f echoes, -rmlastnl trims, -t TARGETS lists, -o of an empty selection fails")
    func xclipOptions() throws {
        try compare { tools, x in
            var seen: [String] = []
            // The real xclip returns before its background child owns the clipboard: each read
            // after a copy waits until the copy is served (one that never is shows as a difference).
            let served = { (text: String) in
                _ = eventually(timeout: 10) { (try? run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text) == text }
            }
            seen.append(try shell("printf 'tee me\\n' | $XCLIP -f -selection clipboard", tools, x).text)
            served("tee me\n")
            seen.append(try shell("$XCLIP -o -sel clip", tools, x).text)
            _ = try shell("printf 'trim me\\n' | $XCLIP -rmlastnl -selection clipboard >/dev/null", tools, x)
            served("trim me")
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text)
            _ = try shell("printf 'keep\\n' | /usr/bin/xclip -selection clipboard >/dev/null", tools, x)
            served("keep\n")
            seen.append(try shell("$XCLIP -o -rmlastnl -selection clipboard", tools, x).text)
            // The same owner's targets, as each reader lists them.
            let targets = try shell("$XCLIP -o -selection clipboard -t TARGETS", tools, x).text
            seen.append("UTF8_STRING listed: \(targets.split(separator: "\n").contains("UTF8_STRING"))")
            let empty = try shell("$XCLIP -o -selection secondary >/dev/null 2>&1; echo $?", tools, x)
            seen.append(empty.text)
            // A file argument is what is copied.
            let file = try scratchFile("note.txt", Data("from a file".utf8))
            _ = try run("/bin/sh", ["-c", "\"$0\" -selection clipboard \"$1\" >/dev/null 2>&1", tools.xclip, file], display: x)
            served("from a file")
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text)
            return seen
        }
    }

    @Test("xsel -a appends, -c clears, -o of an empty selection prints nothing and succeeds, -s is SECONDARY")
    func xselOptions() throws {
        try compare { tools, x in
            var seen: [String] = []
            // The real xsel returns before its background child owns the selection: each read
            // after a copy waits until the copy is served (one that never is shows as a difference).
            let served = { (selection: String, text: String) in
                _ = eventually(timeout: 10) { (try? run("/usr/bin/xclip", ["-o", "-selection", selection], display: x).text) == text }
            }
            _ = try shell("printf 'one\\n' | $XSEL -i -b", tools, x)
            served("clipboard", "one\n")
            _ = try shell("printf 'two' | $XSEL -a -b", tools, x)
            served("clipboard", "one\ntwo")
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text)
            seen.append(try shell("$XSEL -ob", tools, x).text)
            _ = try shell("printf 'three\\n' | $XSEL -b -i", tools, x)
            served("clipboard", "three\n")
            seen.append(try shell("$XSEL -o -b", tools, x).text)
            _ = try shell("$XSEL -c -b", tools, x)
            let afterClear = try shell("$XSEL -o -b; echo \"[$?]\"", tools, x)
            seen.append(afterClear.text)
            _ = try shell("printf 'second sel' | $XSEL -s -i", tools, x)
            served("secondary", "second sel")
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "secondary"], display: x).text)
            seen.append(try shell("$XSEL -s -o", tools, x).text)
            return seen
        }
    }

    @Test("xsel -x exchanges PRIMARY and SECONDARY; -k keeps them after their owners leave")
    func xselExchangeAndKeep() throws {
        try compare { tools, x in
            var seen: [String] = []
            let primary = try Peer("/usr/bin/xclip", ["-quiet", "-i", "-selection", "primary"], display: x, input: Data("P".utf8))
            let secondary = try Peer("/usr/bin/xclip", ["-quiet", "-i", "-selection", "secondary"], display: x, input: Data("S".utf8))
            #expect(eventually(timeout: 10) {
                (try? run("/usr/bin/xclip", ["-o", "-selection", "secondary"], display: x).text) == "S"
                    && (try? run("/usr/bin/xclip", ["-o", "-selection", "primary"], display: x).text) == "P"
            })
            _ = try shell("$XSEL -k </dev/null >/dev/null 2>&1", tools, x)
            // The real xsel returns before its background child has read both selections and
            // taken them: the owners are stopped only once they lost them (xclip exits then).
            // Stopped earlier, as a loaded run once did, the child read nothing from PRIMARY.
            // (A loop, not eventually { }: that closure crashes Swift 6.3.1's SendNonSendable pass here.)
            for _ in 0..<1000 where primary.isRunning || secondary.isRunning { usleep(10_000) }
            primary.stop()
            secondary.stop()
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "primary"], display: x).text)
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "secondary"], display: x).text)
            _ = try shell("$XSEL -x </dev/null >/dev/null 2>&1", tools, x)
            #expect(eventually(timeout: 10) { (try? run("/usr/bin/xclip", ["-o", "-selection", "primary"], display: x).text) == "S" })
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "primary"], display: x).text)
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "secondary"], display: x).text)
            return seen
        }
    }

    @Test("the stand-ins never hang $(…), unlike the originals' background child holding the pipe")
    func neverHangs() throws {
        let x = try Xvfb()
        let tools = try ClipboardTools.standIns()
        let started = Date()
        let out = try shell("a=$(printf x | $XCLIP -selection clipboard); b=$(printf y | $XSEL -i -p); echo \"[$a$b]\"", tools, x, timeout: 10)
        #expect(out.text == "[]\n")
        #expect(Date().timeIntervalSince(started) < 8)
        #expect(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text == "x")
        #expect(try run("/usr/bin/xsel", ["-o", "-p"], display: x).text == "y")
    }

    @Test("xsel --trim (newer xsel than Debian's 1.2.0) trims the last newline on output and input")
    func xselTrim() throws {
        let x = try Xvfb()
        let tools = try ClipboardTools.standIns()
        _ = try shell("printf 'three\\n' | $XSEL -b -i", tools, x)
        #expect(try shell("$XSEL -o -b --trim", tools, x).text == "three")
        #expect(try shell("$XSEL -o -b", tools, x).text == "three\n")
        _ = try shell("printf 'four\\n' | $XSEL -b -i --trim", tools, x)
        #expect(try run("/usr/bin/xsel", ["-o", "-b"], display: x).text == "four")
    }

    @Test("xterm's cut buffer: xclip -selection buffer-cut writes and reads CUT_BUFFER0, at once, no owner")
    func cutBuffer() throws {
        try compare { tools, x in
            var seen: [String] = []
            let unset = try shell("$XCLIP -o -selection buffer-cut; echo \"status $?\"", tools, x)
            seen.append(unset.text)
            seen.append("written: \(try shell("printf 'cut one\\nline 2\\n' | $XCLIP -i -selection buffer-cut; echo $?", tools, x).text)")
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "buffer-cut"], display: x).text)
            seen.append(try shell("$XCLIP -o -sel buffer-cut -rmlastnl", tools, x).text)
            seen.append(try run("/usr/bin/xprop", ["-root", "CUT_BUFFER0"], display: x).text)
            // No owner: CLIPBOARD and PRIMARY stay empty.
            seen.append("primary: \(try run("/usr/bin/xclip", ["-o"], display: x).status != 0)")
            // Written by the real tool, read by the one under test; a file as input.
            _ = try run("/bin/sh", ["-c", "printf 'ünïcode' | /usr/bin/xclip -i -selection buffer-cut"], display: x)
            seen.append(try shell("$XCLIP -o -selection buffer-cut", tools, x).text)
            let file = try scratchFile("cut.txt", Data("from a file".utf8))
            _ = try run("/bin/sh", ["-c", "\"$0\" -selection buffer-cut -i \"$1\"", tools.xclip, file], display: x)
            seen.append(try run("/usr/bin/xclip", ["-o", "-selection", "buffer-cut"], display: x).text)
            return seen
        }
    }

    @Test("unsupported options are refused with a clear error, never done differently")
    func unsupported() throws {
        let x = try Xvfb()
        let tools = try ClipboardTools.standIns()
        for (command, expected) in [("$XCLIP -i -wait 100 </dev/null", "-wait is not supported"),
                                    ("$XCLIP -s", "ambiguous"),
                                    ("$XSEL --follow </dev/null", "not supported by xpb's xsel"),
                                    ("$XSEL -d -b", "not supported by xpb's xsel"),
                                    ("$XSEL --bogus", "unknown option")] {
            let outcome = try shell(command, tools, x)
            #expect(outcome.status == 1, "\(command)")
            #expect(outcome.error.contains(expected), "\(command): \(outcome.error)")
        }
    }
}
