import FoundationEssentials
import Glibc

/// Who made a copy that xpb serves for it: the program that ran `xpb copy` or one of its
/// stand-ins (`xclip`, `xsel`), found by walking up the parent chain past shells that only ran a
/// command (`sh -c`, an interactive shell), `env`, `timeout` and the like. Neovim's copy names `nvim`,
/// tmux's copy-pipe `tmux`, a shell script the script. The owner publishes it beside its
/// selection (``X11PasteboardBackend``'s `_XPB_COPIED_BY_<SELECTION>` window property), so that
/// a clipboard manager's history and `xpb info` name the program, not xpb; a clipboard manager
/// publishes it again for the copies it keeps.
public struct CopyCredit: Sendable, Equatable, Hashable {
    /// The program's name: its executable's, or a script's file name.
    public var name: String
    /// Its process id (the one it had, once it is gone).
    public var pid: Int?

    public init(name: String, pid: Int?) {
        self.name = name
        self.pid = pid
    }

    /// One process of a parent chain, as `/proc` shows it.
    public struct ProcessFacts: Sendable, Equatable {
        public var pid: Int
        /// The executable's file name (`/proc/N/exe`'s, else `comm`).
        public var executable: String
        /// Its arguments (`/proc/N/cmdline`), `argv[0]` first. ``current()`` reads them for
        /// shells alone, the one kind of process whose arguments decide a credit; empty for others.
        public var arguments: [String]

        public init(pid: Int, executable: String, arguments: [String]) {
            self.pid = pid
            self.executable = executable
            self.arguments = arguments
        }
    }

    /// Programs that run a command on another's behalf and are passed over: shells (unless they
    /// run a script), `env` and `timeout`.
    public static let shells: Set<String> = ["sh", "bash", "zsh", "fish", "dash"]
    public static let wrappers: Set<String> = ["env", "timeout", "sudo", "nohup", "setsid", "nice"]
    /// Where a walk ends without a credit: the system's first process, session managers, and a
    /// remote command's sshd (`ssh host xpb copy`: xpb itself made it).
    static let roots: Set<String> = ["init", "systemd", "sshd", "login"]

    /// The credit a parent chain gives (the parent first, then its parent …): the first process
    /// that is neither a wrapper nor a shell running a command (a shell running a script names
    /// the script); nil when the chain ends first, or in the system's first process.
    public static func credit(_ chain: some Sequence<ProcessFacts>) -> CopyCredit? {
        for process in chain {
            guard process.pid > 1, !roots.contains(process.executable) else { return nil }
            if wrappers.contains(process.executable) { continue }
            if shells.contains(process.executable) {
                // A script read from a descriptor (`bash <(…)`) has no name worth showing.
                if let script = script(of: process.arguments), !script.hasPrefix("/dev/fd/"), !script.hasPrefix("/proc/") {
                    let name = script.split(separator: "/").last.map(String.init) ?? script
                    return CopyCredit(name: name, pid: process.pid)
                }
                continue
            }
            return CopyCredit(name: process.executable, pid: process.pid)
        }
        return nil
    }

    /// The script a shell's arguments name: the first that is not an option, unless a command
    /// (`-c`) or standard input (`-s`) is what it runs.
    static func script(of arguments: [String]) -> String? {
        var rest = arguments.dropFirst()
        while let argument = rest.first {
            rest = rest.dropFirst()
            if argument == "--" { return rest.first }
            if argument.hasPrefix("-") || argument.hasPrefix("+") {
                // -c (alone or among other letters: -ec, -xc) runs a command; -s reads standard input.
                let letters = argument.dropFirst()
                if !argument.hasPrefix("--"), letters.contains("c") || letters.contains("s") { return nil }
                // -o OPTION takes the next argument.
                if argument == "-o" || argument == "+o" { rest = rest.dropFirst() }
                continue
            }
            return argument
        }
        return nil
    }

    /// The credit for this process's copy: its parent chain, as `/proc` shows it now (at most
    /// 64 steps up), read one process at a time and only as far as the credit is decided (a
    /// copy run by a program reads its parent alone; every copy pays for what is read here).
    public static func current() -> CopyCredit? {
        // Lazy: ``credit(_:)`` stops reading where it decides.
        let chain = sequence(state: (pid: Int(getppid()), steps: 0)) { walk -> ProcessFacts? in
            guard walk.pid > 0, walk.steps < 64, let facts = facts(of: walk.pid) else { return nil }
            walk.pid = facts.parent
            walk.steps += 1
            return facts.process
        }
        return credit(chain)
    }

    /// What `/proc` tells of a process, and its parent's pid; nil when it is gone. Read as bytes
    /// (every copy pays for it: Character-wise String scans cost a copy's parent half its
    /// instructions).
    static func facts(of pid: Int) -> (process: ProcessFacts, parent: Int)? {
        guard let stat = SystemCall.smallFile("/proc/\(pid)/stat"), let process = ProcessStat(stat) else { return nil }
        var executable = SystemCall.linkBytes("/proc/\(pid)/exe").map(fileName) ?? process.command
        let deleted = Array(" (deleted)".utf8)
        if executable.count > deleted.count, executable.suffix(deleted.count).elementsEqual(deleted) { executable.removeLast(deleted.count) }
        let name = String(decoding: executable, as: UTF8.self)
        // Only a shell's arguments decide a credit (the script it runs): nobody else's are read
        // (a long command line costs a copy's start more than the rest of the walk).
        let arguments = !shells.contains(name) ? [] : (SystemCall.smallFile("/proc/\(pid)/cmdline", limit: 1 << 20) ?? [])
            .split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return (ProcessFacts(pid: pid, executable: name, arguments: arguments), process.parent)
    }

    /// What follows a path's last `/`.
    private static func fileName(_ path: [UInt8]) -> [UInt8] {
        Array(path[(path.lastIndex(of: UInt8(ascii: "/")).map { $0 + 1 } ?? 0)...])
    }

    /// `/proc/N/stat`'s command (between the first `(` and the last `)`: it may hold both) and
    /// parent (the second field after it).
    struct ProcessStat: Equatable {
        let command: [UInt8]
        let parent: Int

        init?(_ stat: [UInt8]) {
            guard let open = stat.firstIndex(of: UInt8(ascii: "(")), let close = stat.lastIndex(of: UInt8(ascii: ")")), open < close else {
                return nil
            }
            // After the command: " STATE PPID ": the state is one field, the parent the next,
            // scanned by hand (a generic split costs more than the file's read).
            var index = close + 1
            func skipSpaces() { while index < stat.count, stat[index] == UInt8(ascii: " ") { index += 1 } }
            skipSpaces()
            while index < stat.count, stat[index] != UInt8(ascii: " "), stat[index] != UInt8(ascii: "\n") { index += 1 }
            skipSpaces()
            var parent = 0
            var digits = 0
            while index < stat.count, stat[index] != UInt8(ascii: " "), stat[index] != UInt8(ascii: "\n") {
                let byte = stat[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 18 else { return nil }
                parent = parent * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            self.parent = parent
            command = Array(stat[(open + 1)..<close])
        }
    }

    /// The property's bytes: `PID<TAB>NAME` (the pid empty when unknown).
    public var encoded: Data {
        Data(utf8Of: "\(pid.map(String.init) ?? "")\t\(name)")
    }

    /// A property's credit; nil for anything else (no tab, an empty or overlong name, a bad pid).
    public init?(decoding data: Data) {
        guard data.count <= 1024, let text = String(validating: data, as: UTF8.self),
              let tab = text.firstIndex(of: "\t") else { return nil }
        let pidText = text[..<tab]
        let name = String(text[text.index(after: tab)...])
        guard !name.isEmpty else { return nil }
        if pidText.isEmpty {
            pid = nil
        } else if let pid = Int(pidText), pid > 0 {
            self.pid = pid
        } else {
            return nil
        }
        self.name = name
    }
}
