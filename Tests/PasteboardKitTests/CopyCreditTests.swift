import Foundation
@testable import PasteboardKit
import Testing

/// A process of a made-up parent chain.
private func process(_ pid: Int, _ executable: String, _ arguments: String...) -> CopyCredit.ProcessFacts {
    CopyCredit.ProcessFacts(pid: pid, executable: executable, arguments: [executable] + arguments)
}

@Suite("who made a copy: the parent chain past shells, env and timeout")
struct CopyCreditTests {
    @Test("a program that runs xclip itself is credited (Neovim's provider)")
    func program() {
        #expect(CopyCredit.credit([process(40, "nvim", "--embed"), process(30, "bash"), process(20, "xterm")])
            == CopyCredit(name: "nvim", pid: 40))
    }

    @Test("sh -c, env and timeout are passed over (tmux's copy-pipe and run-shell)")
    func wrappers() {
        let chain = [process(52, "timeout", "20", "xclip"), process(51, "env", "timeout", "20", "xclip"),
                     process(50, "sh", "-c", "printf x | env timeout 20 xclip"), process(10, "tmux", "new-session", "-d")]
        #expect(CopyCredit.credit(chain) == CopyCredit(name: "tmux", pid: 10))
        // Options before the command: -ec is still a command.
        #expect(CopyCredit.credit([process(50, "bash", "-ec", "xclip"), process(9, "tmux")])?.name == "tmux")
    }

    @Test("a shell running a script names the script, by its file name; an interactive shell is passed over")
    func scripts() {
        #expect(CopyCredit.credit([process(60, "bash", "/home/u/bin/copy-note.sh", "arg"), process(5, "xterm")])
            == CopyCredit(name: "copy-note.sh", pid: 60))
        // A shebang line's interpreter with options, then the script.
        #expect(CopyCredit.credit([process(61, "sh", "-e", "-o", "pipefail", "./pass"), process(5, "xterm")])?.name == "pass")
        #expect(CopyCredit.credit([process(62, "zsh", "--", "tool.zsh"), process(5, "xterm")])?.name == "tool.zsh")
        // Interactive, a login shell, one reading standard input: the terminal that runs it.
        #expect(CopyCredit.credit([process(63, "bash"), process(5, "xterm")])?.name == "xterm")
        #expect(CopyCredit.credit([CopyCredit.ProcessFacts(pid: 64, executable: "bash", arguments: ["-bash"]), process(5, "tmux")])?.name == "tmux")
        // A remote command (`ssh host xpb copy`): nobody but xpb made it.
        #expect(CopyCredit.credit([CopyCredit.ProcessFacts(pid: 64, executable: "bash", arguments: ["bash", "-c", "xpb copy"]), process(5, "sshd")]) == nil)
        #expect(CopyCredit.credit([process(65, "dash", "-s"), process(5, "foot")])?.name == "foot")
        // A script read from a descriptor (`bash <(curl …)`) has no name worth showing.
        #expect(CopyCredit.credit([process(66, "bash", "/dev/fd/63"), process(5, "kitty")])?.name == "kitty")
    }

    @Test("the chain's end, or the system's first process, credits nobody")
    func nobody() {
        #expect(CopyCredit.credit([]) == nil)
        #expect(CopyCredit.credit([process(70, "sh", "-c", "xclip"), process(1, "systemd")]) == nil)
        #expect(CopyCredit.credit([process(70, "bash"), process(2, "systemd", "--user")]) == nil)
        #expect(CopyCredit.credit([process(70, "env"), process(1, "init")]) == nil)
    }

    @Test("this process's own chain: the test runner's parent is found, no shell or wrapper named")
    func current() throws {
        let credit = try #require(CopyCredit.current())
        #expect(!CopyCredit.shells.contains(credit.name) && !CopyCredit.wrappers.contains(credit.name))
        #expect(credit.pid.map { $0 > 1 } == true)
    }

    @Test("facts from /proc: a shell's arguments are read, a program's are not (only a shell's decide a credit)")
    func facts() throws {
        let mine = try #require(CopyCredit.facts(of: Int(getpid())))
        #expect(mine.parent == Int(getppid()))
        #expect(mine.process.arguments.isEmpty, "the test runner is no shell: its command line is not read")
        // A shell running a command (`; :` keeps it from exec'ing sleep).
        var pid: pid_t = 0
        let argv = ["/bin/sh", "-c", "sleep 30; :"]
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        // Required: a failed spawn leaves pid 0, and kill(0, …) would signal this whole group.
        try #require(posix_spawn(&pid, "/bin/sh", nil, nil, &cArguments, environ) == 0 && pid > 0)
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        // Until its shell runs: before exec it is this runner's copy, and while exec sets it up
        // its exe link names the shell already but its command line is still empty.
        let deadline = Date().addingTimeInterval(20)
        var shell = CopyCredit.facts(of: Int(pid))
        while shell.map({ !CopyCredit.shells.contains($0.process.executable) || $0.process.arguments.isEmpty }) ?? true, Date() < deadline {
            usleep(1000)
            shell = CopyCredit.facts(of: Int(pid))
        }
        let facts = try #require(shell)
        #expect(CopyCredit.shells.contains(facts.process.executable))
        #expect(facts.process.arguments == argv)
        #expect(facts.parent == Int(getpid()))
    }

    @Test("/proc/N/stat read as bytes: a command holding spaces and parentheses, the parent after it; junk is nothing")
    func stat() throws {
        func parsed(_ text: String) -> CopyCredit.ProcessStat? { CopyCredit.ProcessStat(Array(text.utf8)) }
        #expect(parsed("4242 (nvim) S 4100 4242 4100 34817")?.parent == 4100)
        #expect(parsed("4242 (nvim) S 4100 4242 4100 34817")?.command == Array("nvim".utf8))
        let odd = try #require(parsed("77 (a) b (c) ) R 1 77 77 0"))
        #expect(odd.command == Array("a) b (c) ".utf8))
        #expect(odd.parent == 1)
        #expect(parsed("77 (été) S 12\n")?.command == Array("été".utf8))
        for junk in ["", "77 nvim S 1", "77 )x( S 1", "77 (x) S", "77 (x) S -1", "77 (x) S 1a", "77 (x) S 99999999999999999999"] {
            #expect(parsed(junk) == nil, "\(junk.debugDescription)")
        }
        // This process's own, as /proc shows it.
        let mine = try #require(SystemCall.smallFile("/proc/self/stat").flatMap(CopyCredit.ProcessStat.init))
        #expect(mine.parent == Int(getppid()))
    }

    @Test("the window property: PID<TAB>NAME both ways; anything else is no credit")
    func property() {
        let credit = CopyCredit(name: "nvim", pid: 4242)
        #expect(CopyCredit(decoding: credit.encoded) == credit)
        #expect(CopyCredit(decoding: CopyCredit(name: "tmux", pid: nil).encoded) == CopyCredit(name: "tmux", pid: nil))
        for junk in ["", "nvim", "\t", "12\t", "-3\tx", "abc\tx", "0\tx"] {
            #expect(CopyCredit(decoding: Data(junk.utf8)) == nil, "\(junk.debugDescription)")
        }
        #expect(CopyCredit(decoding: Data([0xFF, 0x09, 0x41])) == nil, "not UTF-8")
        #expect(CopyCredit(decoding: Data(("1\t" + String(repeating: "a", count: 2000)).utf8)) == nil, "too long")
    }
}
