import Foundation
import Synchronization
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `make install` into a scratch prefix: the README's build (fully static executables), the man
/// pages and completions generated from the option tables, the unit, the stand-in links; then
/// `make uninstall` removes all of it.
@Suite("make install", .serialized)
struct InstallTests {
    private static let installed = Mutex<String?>(nil)
    private static let built = Mutex(false)

    /// The README's build (`make`), once per test process; returns the static xpb. Its own
    /// lock: the install test removes what it installed, never the build.
    static func staticBinary() throws -> String {
        try built.withLock { built in
            if !built {
                let outcome = try Peer("/usr/bin/nice", ["-n", "19", "make", "-C", packageRoot.path, "build"],
                                       display: try Xvfb()).finish(timeout: 1500)
                guard outcome.status == 0 else { throw TestFailure("make failed:\n\(outcome.text)\n\(outcome.error)") }
                built = true
            }
            return packageRoot.appendingPathComponent(".build-static/release/xpb").path
        }
    }

    /// Installs once per test process (the static release build takes a few minutes on a new
    /// clone) and returns the prefix.
    static func prefix() throws -> String {
        try installed.withLock { installed in
            if let installed { return installed }
            _ = try staticBinary()
            let prefix = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-install-\(getpid())").path
            let outcome = try Peer("/usr/bin/nice", ["-n", "19", "make", "-C", packageRoot.path, "install", "PREFIX=\(prefix)", "LINKS=1"],
                                   display: try Xvfb()).finish(timeout: 1500)
            guard outcome.status == 0 else { throw TestFailure("make install failed:\n\(outcome.text)\n\(outcome.error)") }
            installed = prefix
            return prefix
        }
    }

    private static let expectedFiles = [
        "bin/xpb", "bin/xpbd", "bin/xpbd-kdeconnect", "bin/xclip", "bin/xsel", "share/man/man1/xpb.1", "share/man/man1/xpbd.1",
        "share/man/man1/xpbd-kdeconnect.1", "share/bash-completion/completions/xpb", "share/bash-completion/completions/xpbd",
        "share/zsh/site-functions/_xpb", "share/zsh/site-functions/_xpbd",
        "share/fish/vendor_completions.d/xpb.fish", "share/fish/vendor_completions.d/xpbd.fish",
        "share/systemd/user/xpbd.service", "share/xpb/xpbd.desktop",
    ]

    @Test("the README opens with two commands: the first builds, copies and pastes on a display; the second is make test")
    func readmeFirstCommands() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = readme.range(of: "```sh\n"), let end = readme.range(of: "\n```", range: start.upperBound..<readme.endIndex) else {
            throw TestFailure("README.md has no sh block")
        }
        // Before the block: the title and what xpb is, no other heading and no other command.
        #expect(!readme[..<start.lowerBound].contains("\n#") && !readme[..<start.lowerBound].contains("```"))
        let commands = readme[start.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
        #expect(commands.count == 2 && commands.last == "make test", "\(commands)")
        _ = try Self.staticBinary()
        let x = try Xvfb()
        let outcome = try run("/bin/bash", ["-c", "cd \"$0\" && \(commands[0])", packageRoot.path], display: x, timeout: 600)
        #expect(outcome.status == 0, "\(outcome.text)\n\(outcome.error)")
        #expect(outcome.text.hasSuffix("\nhello from xpb\n"), "\(outcome.text)")
        #expect(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text == "hello from xpb\n")
    }

    @Test("installs static binaries, pages, completions, unit and links; they work; uninstall removes them")
    func installAndUninstall() throws {
        let prefix = try Self.prefix()
        for file in Self.expectedFiles {
            #expect(FileManager.default.fileExists(atPath: "\(prefix)/\(file)"), "\(file) not installed")
        }
        // One binary: xpbd is a link to xpb, which runs the daemon under that name.
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: "\(prefix)/bin/xpbd")) == "xpb", "xpbd is not a link to xpb")
        let daemonHelp = try run("\(prefix)/bin/xpbd", ["--help"], display: try Xvfb())
        #expect(daemonHelp.status == 0 && daemonHelp.text.contains("--max-entries"), "xpbd --help: \(daemonHelp.text) \(daemonHelp.error)")
        let daemonUsage = try run("\(prefix)/bin/xpbd", ["--no-such-option"], display: try Xvfb())
        #expect(daemonUsage.status == 64 && daemonUsage.error.hasPrefix("xpbd: "), "\(daemonUsage.status) \(daemonUsage.error)")
        // Fully static: no program interpreter (dynamic loader) in the program headers.
        for binary in ["xpb", "xpbd", "xpbd-kdeconnect"] {
            let headers = try run("/usr/bin/readelf", ["-lW", "\(prefix)/bin/\(binary)"], display: try Xvfb())
            #expect(headers.status == 0)
            #expect(!headers.text.contains("INTERP"), "\(binary) is dynamically linked")
            let sections = try run("/usr/bin/readelf", ["-SW", "\(prefix)/bin/\(binary)"], display: try Xvfb())
            #expect(sections.status == 0 && !sections.text.contains(".symtab"), "\(binary) is not stripped")
        }
        let unit = try String(contentsOfFile: "\(prefix)/share/systemd/user/xpbd.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=\(prefix)/bin/xpbd\n"))

        let x = try Xvfb()
        // The stand-in links and the binary itself, on a display.
        #expect(try run("\(prefix)/bin/xpb", ["copy"], display: x, input: Data("installed".utf8)).status == 0)
        #expect(try run("\(prefix)/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text == "installed")
        #expect(try run("\(prefix)/bin/xsel", ["-o", "-b"], display: x).text == "installed")
        // The installed daemon, run through its link: a copy it keeps after its app exits is
        // named xpbd's, not xpb's.
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, launcher: ["/bin/sh", "-c", "shift; exec \"$0\" \"$@\"", "\(prefix)/bin/xpbd"])
        defer { _ = try? daemon.stop() }
        // It keeps the copy the display holds already (xpb's, above), then the app's.
        try daemon.waitForLog("kept CLIPBOARD")
        let app = try toolkitPeer("gtk_clipboard.py", ["set-text", "from an app"], display: x)
        try app.waitForOutput("ready")
        try daemon.waitForLog("kept CLIPBOARD", count: 2)
        app.stop()
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        let info = try run("\(prefix)/bin/xpb", ["info", "--json"], display: x, environment: home.environment)
        let owner = try JSONSerialization.jsonObject(with: info.output) as? [String: Any]
        #expect(owner?["ownerApp"] as? String == "xpbd" && (owner?["ownerExecutable"] as? String)?.hasSuffix("/bin/xpbd") == true, "\(info.text)")

        // man -l renders both pages; their option lists are the help's.
        for page in ["xpb", "xpbd"] {
            let rendered = try run("/usr/bin/man", ["-l", "\(prefix)/share/man/man1/\(page).1"], display: x, environment: ["MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "100"])
            #expect(rendered.status == 0, "\(rendered.error)")
            #expect(rendered.text.contains("EXIT STATUS"))
            #expect(rendered.error.isEmpty, "man -l \(page).1 warned: \(rendered.error)")
        }
        let page = try run("/usr/bin/man", ["-l", "\(prefix)/share/man/man1/xpb.1"], display: x, environment: ["MANPAGER": "cat", "MANWIDTH": "200"]).text
        for option in ["--trim-newline", "--loops", "--secondary", "--max-size", "--foreground"] {
            #expect(page.contains(option), "the man page lacks \(option)")
        }

        // Each shell loads its completion script and completes from it.
        let bash = try run("/bin/bash", ["-c", "source \"$0\"; COMP_WORDS=(xpb co); COMP_CWORD=1; _xpb; echo \"${COMPREPLY[*]}\"; COMP_WORDS=(xpb paste --tr); COMP_CWORD=2; _xpb; echo \"${COMPREPLY[*]}\"",
                                            "\(prefix)/share/bash-completion/completions/xpb"], display: x)
        #expect(bash.text == "copy completions\n--trim-newline\n", "\(bash.text) \(bash.error)")
        let fish = try run("/usr/bin/fish", ["--no-config", "-c", "source $argv[1]; complete -C 'xpb cop'; complete -C 'xpb paste --tri'",
                                             "\(prefix)/share/fish/vendor_completions.d/xpb.fish"], display: x)
        #expect(fish.status == 0, "\(fish.error)")
        let fishXpbd = try run("/usr/bin/fish", ["--no-config", "-c", "source $argv[1]; complete -C 'xpbd --sync-pri'",
                                                 "\(prefix)/share/fish/vendor_completions.d/xpbd.fish"], display: x)
        #expect(fish.text.hasPrefix("copy\t"), "\(fish.text)")
        #expect(fish.text.contains("--trim-newline\t"), "\(fish.text)")
        #expect(fishXpbd.text.hasPrefix("--sync-primary\t"), "\(fishXpbd.text)")
        // zsh: compinit takes the function from $fpath; the function is registered for xpb and
        // xpbd, and a syntax error would fail here.
        let zsh = try run("/usr/bin/zsh", ["-f", "-c", "fpath=($0 $fpath); autoload -U compinit && compinit -u -d $1/xpb-test-zcompdump-$$; print -r -- ${_comps[xpb]} ${_comps[xpbd]}; zsh -n $0/_xpb && zsh -n $0/_xpbd && print ok; rm -f $1/xpb-test-zcompdump-$$",
                                           "\(prefix)/share/zsh/site-functions", FileManager.default.temporaryDirectory.path], display: x)
        #expect(zsh.text == "_xpb _xpbd\nok\n", "\(zsh.text) \(zsh.error)")

        let uninstall = try run("/usr/bin/make", ["-C", packageRoot.path, "uninstall", "PREFIX=\(prefix)"], display: x, timeout: 60)
        #expect(uninstall.status == 0, "\(uninstall.error)")
        for file in Self.expectedFiles {
            #expect(!FileManager.default.fileExists(atPath: "\(prefix)/\(file)"), "\(file) left after uninstall")
        }
        // Every directory install made is gone again, the prefix (made by install) too.
        let left = FileManager.default.enumerator(atPath: prefix)?.allObjects as? [String] ?? []
        #expect(!FileManager.default.fileExists(atPath: prefix), "left after uninstall: \(left)")
        Self.installed.withLock { $0 = nil }
    }
}

/// What a fully static glibc binary must still do at run time: reach X over TCP (as `ssh -X`
/// sets DISPLAY=localhost:N) and find the X authority cookie through $XAUTHORITY or ~.
@Suite("the static build's run time")
struct StaticRuntimeTests {
    @Test("DISPLAY=127.0.0.1:N and localhost:N over TCP, cookie from $XAUTHORITY and from ~/.Xauthority; a wrong cookie is refused")
    func tcpAndAuthority() throws {
        let xpb = try InstallTests.staticBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-auth-\(getpid())")
        let home = directory.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let authority = directory.appendingPathComponent("authority").path
        // A display number of our own: the cookie must name it before the server starts.
        let number = Xvfb.privateNumber(base: 300)
        let cookie = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let helper = try Xvfb()
        for name in [":\(number)", "127.0.0.1:\(number)", "localhost:\(number)"] {
            let added = try run("/usr/bin/xauth", ["-f", authority, "add", name, ".", cookie], display: helper)
            #expect(added.status == 0, "\(added.error)")
        }
        let x = try Xvfb(number: number, serverArguments: ["-listen", "tcp", "-auth", authority])
        #expect(x.display == ":\(number)")

        for display in ["127.0.0.1:\(number)", "localhost:\(number)"] {
            let environment = ["DISPLAY": display, "XAUTHORITY": authority, "HOME": home.path]
            #expect(try run(xpb, ["copy"], display: x, input: Data("over tcp".utf8), environment: environment).status == 0)
            let pasted = try run(xpb, ["paste"], display: x, environment: environment)
            #expect(pasted.text == "over tcp", "\(display): \(pasted.error)")
        }
        // Without $XAUTHORITY the cookie is read from ~/.Xauthority.
        try FileManager.default.copyItem(atPath: authority, toPath: home.appendingPathComponent(".Xauthority").path)
        let fromHome = try run("/usr/bin/env", ["-u", "XAUTHORITY", "DISPLAY=127.0.0.1:\(number)", "HOME=\(home.path)", xpb, "paste"], display: x)
        #expect(fromHome.text == "over tcp", "\(fromHome.error)")
        // The control: no cookie, no connection (so the two above really used theirs).
        let refused = try run(xpb, ["paste"], display: x, environment: ["DISPLAY": "127.0.0.1:\(number)", "XAUTHORITY": "/nonexistent", "HOME": "/nonexistent"])
        #expect(refused.status == 5, "\(refused.status) \(refused.error)")
    }
}

extension StaticRuntimeTests {
    @Test("the command line comes from the C library at start (CProcessArguments): arguments arrive as given, and the runtime's constructor that scans /proc/self/maps is not linked")
    func commandLine() throws {
        let xpb = try InstallTests.staticBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-arguments-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let name = directory.appendingPathComponent("a file with  spaces, naïve ✓").path
        try Data("what the odd name holds".utf8).write(to: URL(fileURLWithPath: name))
        let x = try Xvfb()
        let copied = try run(xpb, ["copy", "--", name], display: x)
        #expect(copied.status == 0, "\(copied.error)")
        #expect(try run(xpb, ["paste"], display: x).text == "what the odd name holds")
        // A name that is not there comes back in the error as it was given.
        let missing = directory.appendingPathComponent("not here ✗ -x").path
        let failed = try run(xpb, ["copy", "--", missing], display: x)
        #expect(failed.status != 0 && failed.error.contains(missing), "\(failed.status) \(failed.error)")
        // The runtime's argument finder (CommandLine.cpp's argvGrabber) stayed in its archive.
        let symbols = try run("/usr/bin/nm", [xpb], display: x, timeout: 120)
        #expect(symbols.status == 0 && symbols.text.contains(" _swift_stdlib_getUnsafeArgvArgc"), "\(symbols.error)")
        #expect(!symbols.text.contains("argvGrabber"))
    }
}

/// `make deb`: the two Debian packages, checked by lintian, listed by `dpkg -c`, installed into a
/// scratch root with `dpkg --root`, run from there, and removed again without a trace.
@Suite("make deb")
struct DebianPackageTests {
    private static let mainFiles = [
        "./usr/bin/xpb", "./usr/bin/xpbd -> xpb", "./usr/bin/xpbd-kdeconnect", "./usr/share/man/man1/xpb.1.gz", "./usr/share/man/man1/xpbd.1.gz",
        "./usr/share/man/man1/xpbd-kdeconnect.1.gz",
        "./usr/share/bash-completion/completions/xpb", "./usr/share/bash-completion/completions/xpbd",
        "./usr/share/zsh/vendor-completions/_xpb", "./usr/share/zsh/vendor-completions/_xpbd",
        "./usr/share/fish/vendor_completions.d/xpb.fish", "./usr/share/fish/vendor_completions.d/xpbd.fish",
        "./usr/lib/systemd/user/xpbd.service", "./usr/share/xpb/xpbd.desktop",
        "./usr/share/doc/xpb/copyright", "./usr/share/doc/xpb/changelog.gz", "./usr/share/lintian/overrides/xpb",
    ]
    private static let standInFiles = [
        "./usr/bin/xclip -> xpb", "./usr/bin/xsel -> xpb", "./usr/share/man/man1/xclip.1.gz -> xpb.1.gz",
        "./usr/share/man/man1/xsel.1.gz -> xpb.1.gz", "./usr/share/doc/xpb-standins/copyright",
    ]

    /// The paths `dpkg -c` lists, a link as "path -> target"; every entry must be root's.
    private static func contents(_ package: String, display: Xvfb) throws -> [String] {
        let listed = try run("/usr/bin/dpkg-deb", ["-c", package], display: display)
        #expect(listed.status == 0, "\(listed.error)")
        return listed.text.split(separator: "\n").map { line in
            // "drwxr-xr-x root/root 0 2026-11-26 07:41 ./usr/": the path is the sixth field on.
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            #expect(fields.count == 6 && fields[1] == "root/root", "\(line)")
            return fields.count == 6 ? String(fields[5]) : String(line)
        }
    }

    @Test("builds xpb and xpb-standins; lintian finds no error or warning; they install into a scratch root, run, and go without a trace")
    func buildCheckInstallRemove() throws {
        _ = try InstallTests.staticBinary()
        let x = try Xvfb()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-deb-\(getpid())")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let built = try Peer("/usr/bin/nice", ["-n", "19", "make", "-C", packageRoot.path, "deb", "DEBDIR=\(scratch.path)/out"],
                             display: x).finish(timeout: 1500)
        #expect(built.status == 0, "make deb failed:\n\(built.text)\n\(built.error)")
        let version = try run(InstallTests.staticBinary(), ["--version"], display: x).text.trimmingCharacters(in: .whitespacesAndNewlines)
        let architecture = try run("/usr/bin/dpkg", ["--print-architecture"], display: x).text.trimmingCharacters(in: .whitespacesAndNewlines)
        let main = "\(scratch.path)/out/xpb_\(version)_\(architecture).deb"
        let standIns = "\(scratch.path)/out/xpb-standins_\(version)_\(architecture).deb"
        #expect(FileManager.default.fileExists(atPath: main) && FileManager.default.fileExists(atPath: standIns), "\(built.text)")

        // lintian: no error and no warning, with the overrides the package carries (each justified there).
        let lint = try run("/usr/bin/lintian", ["--fail-on", "error,warning", main, standIns], display: x, timeout: 300)
        #expect(lint.status == 0, "lintian:\n\(lint.text)\n\(lint.error)")
        #expect(!lint.text.contains("E: ") && !lint.text.contains("W: "), "lintian:\n\(lint.text)")

        // What each package holds; the stand-ins are not in the main one.
        let mainList = try Self.contents(main, display: x)
        for file in Self.mainFiles { #expect(mainList.contains(file), "xpb lacks \(file): \(mainList)") }
        #expect(!mainList.contains { $0.hasPrefix("./usr/bin/xclip") || $0.hasPrefix("./usr/bin/xsel") }, "\(mainList)")
        #expect(!mainList.contains { $0.contains("created-dirs") }, "\(mainList)")
        let standInList = try Self.contents(standIns, display: x)
        for file in Self.standInFiles { #expect(standInList.contains(file), "xpb-standins lacks \(file): \(standInList)") }
        let fields = try run("/usr/bin/dpkg-deb", ["-f", standIns, "Depends", "Conflicts"], display: x).text
        #expect(fields.contains("Depends: xpb (= \(version))") && fields.contains("Conflicts: xclip, xsel"), "\(fields)")

        // Installed into a scratch root: a dpkg database of its own, nothing of the host's touched.
        let root = scratch.appendingPathComponent("root").path
        for directory in ["var/lib/dpkg/info", "var/lib/dpkg/updates"] {
            try FileManager.default.createDirectory(atPath: "\(root)/\(directory)", withIntermediateDirectories: true)
        }
        #expect(FileManager.default.createFile(atPath: "\(root)/var/lib/dpkg/status", contents: Data()))
        let notRoot = getuid() == 0 ? [] : ["--force-not-root"]
        let installed = try run("/usr/bin/dpkg", notRoot + ["--root=\(root)", "-i", main, standIns], display: x, timeout: 120)
        #expect(installed.status == 0, "dpkg -i: \(installed.text) \(installed.error)")
        let installedVersion = try run("\(root)/usr/bin/xpb", ["--version"], display: x)
        #expect(installedVersion.status == 0 && installedVersion.text == "\(version)\n", "\(installedVersion.text) \(installedVersion.error)")
        #expect(try run("\(root)/usr/bin/xpbd", ["--version"], display: x).status == 0)
        #expect(try run("\(root)/usr/bin/xpbd-kdeconnect", ["--help"], display: x).status == 0)
        let unitText = try String(contentsOfFile: "\(root)/usr/lib/systemd/user/xpbd.service", encoding: .utf8)
        #expect(unitText.contains("ExecStart=/usr/bin/xpbd\n"), "\(unitText)")
        for page in ["xpb", "xpbd", "xpbd-kdeconnect", "xclip"] {
            let rendered = try run("/usr/bin/man", ["-l", "\(root)/usr/share/man/man1/\(page).1.gz"], display: x,
                                   environment: ["MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "100"])
            #expect(rendered.status == 0 && rendered.text.contains("EXIT STATUS") && rendered.error.isEmpty, "man -l \(page).1.gz: \(rendered.error)")
        }
        // The installed binary on a display, through its stand-in link as well.
        #expect(try run("\(root)/usr/bin/xpb", ["copy"], display: x, input: Data("from the package".utf8)).status == 0)
        #expect(try run("\(root)/usr/bin/xclip", ["-o", "-selection", "clipboard"], display: x).text == "from the package")

        // dpkg -r leaves nothing but the scratch root's own dpkg database.
        let removed = try run("/usr/bin/dpkg", notRoot + ["--root=\(root)", "-r", "xpb-standins", "xpb"], display: x, timeout: 120)
        #expect(removed.status == 0, "dpkg -r: \(removed.text) \(removed.error)")
        let left = (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? [])
            .filter { !$0.hasPrefix("var") }
        #expect(left.isEmpty, "left after dpkg -r: \(left)")
    }
}
