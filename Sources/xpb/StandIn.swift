import CommandLineTable
import Dispatch
import FoundationEssentials
import PasteboardKit
import Glibc
import PasteboardX11

/// xpb run under the name `xclip` or `xsel` (a symbolic link: multi-call, read from argv[0]):
/// that tool's common options with the same meaning, carried out by xpb's own commands. What
/// this does not support is refused with a clear error, never done differently in silence.
enum StandIn: String, CaseIterable {
    case xclip
    case xsel
    case wlCopy = "wl-copy"
    case wlPaste = "wl-paste"

    /// What the man page says about the stand-ins.
    static let manualText = """
        Installed as xclip or xsel (make install LINKS=1, or a symbolic link of that name to xpb), xpb takes that \
        tool's options with the same meaning, so Neovim, tmux-yank, pass and scripts that call them by name get \
        xpb's clipboard: $(…) never hangs, concurrent readers are served, STRING is Latin-1 and the fast path is used.
        xclip: -i, -in, -o, -out, -selection/-sel primary|secondary|clipboard|buffer-cut (CUT_BUFFER0), -t/-target, -l/-loops N (0: no limit), \
        -d/-display, -f/-filter, -rmlastnl, -sensitive (one paste, then given up; never kept in history), -silent, \
        -quiet and -verbose (stay in the foreground), -noutf8 (ask STRING when reading), -version, -h/-help; files \
        to copy as arguments. Options may be shortened while unique, as in xclip. Unsupported, refused with an error: \
        -alt-text, -wait, -debug.
        xsel: -i, -o, -a, -c, -p, -s, -b, -n, -t MS, -l FILE, -v, -h and their long forms (--input, --output, \
        --append, --clear, --primary, --secondary, --clipboard, --nodetach, --selectionTimeout, --logfile, \
        --verbose, --help, --version, --trim, --display, --name/-m and --windowName, which are accepted; the owner's \
        window is named xpb), with xsel's defaults (input when standard input is not a terminal, output when \
        standard output is not one). -x/--exchange and -k/--keep work on the text of PRIMARY and SECONDARY as xsel's \
        do. Unsupported, refused with an error: -f/--follow, -z/--zeroflush, -d/--delete.
        wl-copy: -p, -n, -f, -o, -c, -t TYPE, -v, -h and their long forms (--primary, --trim-newline, --foreground, \
        --paste-once, --clear, --type, --version, --help); text to copy as arguments (joined by spaces), else standard \
        input. wl-paste: -p, -n, -l, -t TYPE, -w COMMAND…, -v, -h and their long forms (--primary, --no-newline, \
        --list-types, --type, --watch, --version, --help); a newline follows text unless -n, as wl-paste writes it. \
        Both on the session's clipboard (Wayland where WAYLAND_DISPLAY is set, else X). Unsupported, refused with \
        an error: -s/--seat (the compositor's first seat is used).
        Exit status: 0 success, 1 failure, as the originals; xsel prints nothing and exits 0 for an empty selection.
        """

    /// Runs the stand-in and returns its exit status.
    func run(_ arguments: [String]) -> Int32 {
        do {
            let plan: [Step]
            switch self {
            case .xclip: plan = try Self.xclip(arguments)
            case .xsel: plan = try Self.xsel(arguments)
            case .wlCopy: plan = try Self.wlCopy(arguments)
            case .wlPaste: plan = try Self.wlPaste(arguments)
            }
            for step in plan {
                switch step {
                case let .message(text):
                    print(text)
                case let .command(words, silent):
                    let result = XPB.run(words, program: rawValue, silencing: silent)
                    // Each tool exits 1 for every failure.
                    if result != 0 && !silent.contains(result) { return 1 }
                case let .commandWithInput(words, input):
                    let result = try withStandardInput(input) { XPB.run(words, program: rawValue) }
                    if result != 0 { return 1 }
                case let .exchange(display):
                    try exchange(display: display)
                case let .keep(display):
                    try keep(display: display)
                case let .cutBuffer(write, display, files, filter, trim):
                    try cutBuffer(write: write, display: display, files: files, filter: filter, trim: trim)
                }
            }
            return 0
        } catch let error as UsageError {
            XPB.printError("\(rawValue): \(error.message)\n  (xpb standing in for \(rawValue); see 'xpb manual', STAND-INS)\n")
            return 1
        } catch let exit as Exit {
            return exit.status
        } catch {
            XPB.printError("\(rawValue): \(Failure(error).message)\n")
            return 1
        }
    }

    /// One thing the stand-in does, in order.
    enum Step: Equatable {
        case message(String)
        /// An xpb command line; statuses in `silent` end it quietly and count as success.
        case command([String], silent: Set<Int32>)
        /// An xpb command line reading `input` as its standard input (wl-copy's text arguments).
        case commandWithInput([String], input: Data)
        /// Swap the text of PRIMARY and SECONDARY (xsel -x) on a display (nil: $DISPLAY).
        case exchange(display: String?)
        /// Re-own the text of PRIMARY and SECONDARY so that it outlives their owners (xsel -k).
        case keep(display: String?)
        /// xclip -selection buffer-cut: write the input to `CUT_BUFFER0` (echoing it with
        /// `filter`), or print the buffer; `trim` leaves out one final newline.
        case cutBuffer(write: Bool, display: String?, files: [String], filter: Bool, trim: Bool)
    }

    static let version = "xpb \(XPB.version), standing in for"

    // MARK: xclip

    static let xclipOptions = ["loops", "display", "selection", "filter", "in", "out", "version", "help", "silent",
                               "quiet", "verbose", "debug", "noutf8", "target", "alt-text", "rmlastnl", "sensitive", "wait"]
    static let xclipValued: Set<String> = ["loops", "display", "selection", "target", "alt-text", "wait"]

    /// xclip's grammar (Xrm: one dash, any unique prefix of a name, values as the next word;
    /// everything else is a file) turned into xpb steps.
    static func xclip(_ arguments: [String]) throws(UsageError) -> [Step] {
        var given: [String: String] = [:]
        var flags: Set<String> = []
        var files: [String] = []
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            guard word.count > 1, word.hasPrefix("-") else {
                files.append(word)
                continue
            }
            let name = String(word.dropFirst())
            let matches = xclipOptions.contains(name) ? [name] : xclipOptions.filter { $0.hasPrefix(name) }
            guard matches.count == 1, let option = matches.first else {
                throw UsageError(matches.isEmpty ? "unknown option '\(word)'"
                                 : "'\(word)' is ambiguous: \(matches.map { "-" + $0 }.joined(separator: ", "))")
            }
            if xclipValued.contains(option) {
                guard index < arguments.count else { throw UsageError("'-\(option)' needs a value") }
                given[option] = arguments[index]
                index += 1
            } else {
                flags.insert(option)
            }
        }
        if flags.contains("help") { return [.message(xclipHelp)] }
        if flags.contains("version") { return [.message("\(version) xclip (xclip 0.13 options)")] }
        for unsupported in ["alt-text", "wait", "debug"] where given[unsupported] != nil || flags.contains(unsupported) {
            throw UsageError("-\(unsupported) is not supported by xpb's xclip")
        }
        var common: [String] = []
        switch given["selection"]?.lowercased().first {
        case nil, "p": common.append("--primary")
        case "s": common.append("--secondary")
        case "c": break
        case "b":
            // As xclip: no owner, no loops, no target; the bytes go to the root window at once.
            let output = flags.contains("out") && !flags.contains("in")
            if output, !files.isEmpty { throw UsageError("files are read only when copying (-i), not with -o") }
            return [.cutBuffer(write: !output, display: given["display"], files: files, filter: flags.contains("filter"),
                               trim: flags.contains("rmlastnl"))]
        default: throw UsageError("unknown selection '\(given["selection"]!)': primary, secondary or clipboard")
        }
        if let display = given["display"] { common += ["--display", display] }
        let output = flags.contains("out") && !flags.contains("in")
        if output {
            if !files.isEmpty { throw UsageError("files are read only when copying (-i), not with -o") }
            if given["target"] == "TARGETS" { return [.command(["types", "--targets"] + common, silent: [])] }
            var words = ["paste"] + common
            // xclip -o asks UTF8_STRING (STRING with -noutf8): text, never another type.
            words += ["--type", given["target"] ?? (flags.contains("noutf8") ? "STRING" : "text")]
            if flags.contains("rmlastnl") { words.append("--trim-newline") }
            return [.command(words, silent: [])]
        }
        var words = ["copy"] + common
        // xclip serves what it reads as text unless -t names the target.
        words += ["--type", given["target"] ?? "text"]
        if let loops = given["loops"] {
            guard let count = Int(loops), count >= 0 else { throw UsageError("-loops takes a whole number (0: no limit)") }
            if count > 0 { words += ["--loops", String(count)] }
        }
        if flags.contains("sensitive") {
            words.append("--sensitive")
            if given["loops"] == nil { words += ["--loops", "1"] }
        }
        if flags.contains("filter") { words.append("--filter") }
        if flags.contains("rmlastnl") { words.append("--trim-newline") }
        if flags.contains("quiet") || flags.contains("verbose") { words.append("--foreground") }
        if !files.isEmpty { words += ["--"] + files }
        return [.command(words, silent: [])]
    }

    static let xclipHelp = """
        Usage: xclip [OPTION] [FILE]...   (xpb \(XPB.version) standing in for xclip)
        Access an X server selection for reading or writing.

          -i, -in          read text into X selection from standard input or files (default)
          -o, -out         print the selection to standard out
          -l, -loops       number of selection requests to wait for before exiting (0: no limit)
          -d, -display     X display to connect to (eg localhost:0")
          -f, -filter      text piped in is printed back to standard out
          -sel, -selection selection to access ("primary", "secondary" or "clipboard")
          -t, -target      the target (type) to read or serve; TARGETS lists them
          -rmlastnl        remove the last newline character if present
          -sensitive       serve once, never keep in history
          -noutf8          read STRING (Latin-1) instead of UTF8_STRING
          -quiet, -verbose stay in the foreground
          -silent          run in the background (default)
          -version         version information
          -h, -help        usage information

        Not supported (an error): -alt-text, -wait, -debug. See 'xpb manual'.
        """

    // MARK: xsel

    /// xsel's grammar (long options, short ones grouped as `-bo`) and defaults turned into xpb steps.
    static func xsel(_ arguments: [String], stdinIsTerminal: Bool = isatty(0) != 0, stdoutIsTerminal: Bool = isatty(1) != 0) throws(UsageError) -> [Step] {
        var words: [String] = []
        for argument in arguments {
            if argument.hasPrefix("-"), !argument.hasPrefix("--"), argument.count > 2 {
                words += argument.dropFirst().map { "-\($0)" }
            } else {
                words.append(argument)
            }
        }
        var input: Bool
        var output: Bool
        if stdinIsTerminal && stdoutIsTerminal {
            (input, output) = (false, true)
        } else {
            (input, output) = (!stdinIsTerminal, !stdoutIsTerminal)
        }
        var forceInput = false, forceOutput = false, append = false, clear = false, help = false, showVersion = false
        var keep = false, exchange = false, nodetach = false, trim = false
        var selection: String? = "--primary"
        var display: String?
        var timeout: String?
        var log: String?
        var index = 0
        func value(_ option: String) throws(UsageError) -> String {
            index += 1
            guard index < words.count else { throw UsageError("'\(option)' needs a value") }
            return words[index]
        }
        while index < words.count {
            let word = words[index]
            switch word {
            case "-h", "--help": help = true
            case "--version": showVersion = true
            case "-v", "--verbose": break
            case "-a", "--append": (forceInput, output, append) = (true, false, true)
            case "-i", "--input": (forceInput, output) = (true, false)
            case "-c", "--clear": (output, clear) = (false, true)
            case "-o", "--output": (input, forceOutput) = (false, true)
            case "-p", "--primary": selection = "--primary"
            case "-s", "--secondary": selection = "--secondary"
            case "-b", "--clipboard": selection = nil
            case "--trim": trim = true
            case "-k", "--keep": keep = true
            case "-x", "--exchange": exchange = true
            case "-n", "--nodetach": nodetach = true
            case "--display": display = try value(word)
            case "-t", "--selectionTimeout": timeout = try value(word)
            case "-l", "--logfile": log = try value(word)
            case "-m", "--name", "--windowName": _ = try value(word)
            case "-f", "--follow", "-z", "--zeroflush":
                throw UsageError("\(word) (grow the selection as standard input grows) is not supported by xpb's xsel; copy the whole input instead")
            case "-d", "--delete":
                throw UsageError("\(word) (ask the owner to delete the selection) is not supported by xpb's xsel; 'xpb clear' gives it up if you own it")
            default:
                throw UsageError("unknown option '\(word)'")
            }
            index += 1
        }
        if help { return [.message(xselHelp)] }
        if showVersion { return [.message("\(version) xsel (xsel 1.2.0 options)")] }
        var common: [String] = selection.map { [$0] } ?? []
        if let display { common += ["--display", display] }
        if keep { return [.keep(display: display)] }
        if exchange { return [.exchange(display: display)] }
        var steps: [Step] = []
        if output || forceOutput {
            var paste = ["paste", "--type", "text"] + common
            if let timeout {
                guard let milliseconds = Int(timeout), milliseconds >= 0 else { throw UsageError("-t takes milliseconds") }
                if milliseconds > 0 { paste += ["--timeout", String(Double(milliseconds) / 1000)] }
            }
            if trim { paste.append("--trim-newline") }
            // xsel prints nothing for an empty selection or one without text, and succeeds.
            steps.append(.command(paste, silent: [Status.empty.rawValue, Status.typeUnavailable.rawValue]))
        }
        if clear {
            steps.append(.command(["clear"] + common, silent: [Status.empty.rawValue]))
        } else if input || forceInput {
            var copy = ["copy", "--type", "text"] + common
            if append { copy.append("--append") }
            if nodetach { copy.append("--foreground") }
            if trim { copy.append("--trim-newline") }
            if let log { copy += ["--log", log] }
            steps.append(.command(copy, silent: []))
        }
        return steps
    }

    static let xselHelp = """
        Usage: xsel [options]   (xpb \(XPB.version) standing in for xsel)
        Manipulate the X selection. By default the current selection is output and not modified if both standard
        input and standard output are terminals (ttys). Otherwise, the current selection is output if standard
        output is not a terminal, and the selection is set from standard input if standard input is not a terminal.

          -a, --append          Append standard input to the selection
          -i, --input           Read standard input into the selection
          -o, --output          Write the selection to standard output
          -c, --clear           Clear the selection
          -p, --primary         Operate on the PRIMARY selection (default)
          -s, --secondary       Operate on the SECONDARY selection
          -b, --clipboard       Operate on the CLIPBOARD selection
          -k, --keep            Make the PRIMARY and SECONDARY selections outlive their owners
          -x, --exchange        Exchange the PRIMARY and SECONDARY selections
          --display DISPLAY     X display to use
          -t, --selectionTimeout MS  Timeout for reading the selection (0: the default)
          --trim                Remove the last newline character if present
          -l, --logfile FILE    Where the background owner writes its errors
          -n, --nodetach        Do not detach from the controlling terminal
          -v, --verbose         Accepted
          -h, --help            Display this help and exit
          --version             Output version information and exit

        Not supported (an error): -f/--follow, -z/--zeroflush, -d/--delete. See 'xpb manual'.
        """

    // MARK: xsel -x and -k

    /// The text of a selection (`--primary`, `--secondary`), nil when it has none.
    private func text(of selection: String, display: [String]) -> Data? {
        readText(["paste", "--type", "text", selection] + display)
    }

    /// xsel -x: PRIMARY's text goes to SECONDARY and SECONDARY's to PRIMARY.
    private func exchange(display name: String?) throws {
        let display = name.map { ["--display", $0] } ?? []
        let primary = text(of: "--primary", display: display)
        let secondary = text(of: "--secondary", display: display)
        try copyText(primary, to: "--secondary", display: display)
        try copyText(secondary, to: "--primary", display: display)
    }

    /// xsel -k: each selection's text, owned again by a background owner of ours.
    private func keep(display name: String?) throws {
        let display = name.map { ["--display", $0] } ?? []
        for selection in ["--primary", "--secondary"] {
            guard let data = text(of: selection, display: display) else { continue }
            try copyText(data, to: selection, display: display)
        }
    }

    /// xclip -selection buffer-cut: `CUT_BUFFER0` written from the input, or printed.
    private func cutBuffer(write: Bool, display: String?, files: [String], filter: Bool, trim: Bool) throws {
        let backend = try X11PasteboardBackend(display: display)
        defer { backend.close(handOff: false) }
        let trimmed = { (data: Data) in trim && data.last == UInt8(ascii: "\n") ? data.dropLast() : data }
        guard write else {
            // An unset buffer prints nothing and succeeds, as xclip.
            try writeAll(trimmed(try backend.cutBuffer() ?? Data()), to: STDOUT_FILENO)
            return
        }
        var data = Data()
        for file in files.isEmpty ? ["-"] : files {
            let fd = file == "-" ? STDIN_FILENO : open(file, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw Failure("cannot read \(file): \(String(cString: strerror(errno)))") }
            defer { if fd != STDIN_FILENO { close(fd) } }
            data += try Inputs.read(fd, named: file == "-" ? "standard input" : file, limit: CommonOptions.defaultMaxSize - data.count)
        }
        if filter { try writeAll(data, to: STDOUT_FILENO) }
        try backend.setCutBuffer(Data(trimmed(data)))
    }

    /// Copies `data` as text (nil: gives the selection up).
    private func copyText(_ data: Data?, to selection: String, display: [String]) throws {
        guard let data else {
            _ = XPB.run(["clear", selection] + display, program: rawValue, silencing: [Status.empty.rawValue])
            return
        }
        let status = try withStandardInput(data) { XPB.run(["copy", "--type", "text", selection] + display, program: rawValue) }
        if status != 0 { throw Exit(status: 1) }
    }

    /// Runs an xpb paste into memory.
    private func readText(_ words: [String]) -> Data? {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { return nil }
        let saved = dup(STDOUT_FILENO)
        defer { close(saved) }
        let reader = pipeFDs[0]
        // Read while the paste writes: a pipe holds only 64 KiB.
        final class Collected: @unchecked Sendable { var data = Data() }
        let collected = Collected()
        let done = DispatchSemaphore(value: 0)
        do {
            try DetachedThread.start(name: "xpb.paste.read") {
                collected.data = (try? Inputs.read(reader, named: "the paste", limit: .max)) ?? Data()
                done.signal()
            }
        } catch {
            close(pipeFDs[1])
            close(reader)
            return nil
        }
        dup2(pipeFDs[1], STDOUT_FILENO)
        close(pipeFDs[1])
        let status = XPB.run(words, program: rawValue, silencing: [Status.empty.rawValue, Status.typeUnavailable.rawValue])
        dup2(saved, STDOUT_FILENO)
        done.wait()
        close(reader)
        return status == 0 ? collected.data : nil
    }

    /// Runs `body` with standard input reading `data`.
    private func withStandardInput(_ data: Data, _ body: () -> Int32) throws -> Int32 {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw Failure("cannot create a pipe: \(String(cString: strerror(errno)))") }
        let saved = dup(STDIN_FILENO)
        defer {
            dup2(saved, STDIN_FILENO)
            close(saved)
        }
        let writer = pipeFDs[1]
        let done = DispatchSemaphore(value: 0)
        do {
            try DetachedThread.start(name: "xpb.copy.write") {
                try? writeAll(data, to: writer)
                close(writer)
                done.signal()
            }
        } catch {
            close(writer)
            close(pipeFDs[0])
            throw Failure("cannot start a thread: \(error)")
        }
        dup2(pipeFDs[0], STDIN_FILENO)
        close(pipeFDs[0])
        let status = body()
        done.wait()
        return status
    }
}
