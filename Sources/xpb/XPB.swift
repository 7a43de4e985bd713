internal import CLinux
import CommandLineTable
import DaemonTool
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire

@main
enum XPB {
    static let version = Release.version

    /// The release date the man page carries.
    static let releaseDate = Release.date

    static let commands: [any Command.Type] = [
        CopyCommand.self, PasteCommand.self, TypesCommand.self, WatchCommand.self,
        ClearCommand.self, InfoCommand.self, DetectCommand.self, HistoryCommand.self, QueueCommand.self, DaemonCommand.self, DevicesCommand.self,
        CompletionsCommand.self, ManualCommand.self,
    ]

    static let abstract = "Read and write typed data on the X11 clipboard, primary selection and named pasteboards."

    /// The whole program as the man page and the completions describe it.
    static let program = ProgramSpec(
        name: "xpb", version: version, abstract: abstract,
        discussion: "xpb copies and pastes typed data through X11 selections: the clipboard (CLIPBOARD), the primary selection (PRIMARY), the secondary selection (SECONDARY) and named pasteboards. A copy returns at once while a background owner serves the data; a paste never hangs. Installed under the name xclip or xsel (a symbolic link), it takes that tool's options instead; see 'xpb help copy' for the rest.",
        commands: commands.map { $0.spec },
        exitStatuses: Status.allCases.map { ($0.rawValue, $0.meaning) },
        sections: [
            ("Environment", "DISPLAY: the X display (or --display); unset or empty: this host's headless xpbd (xpbd --headless). XAUTHORITY: the X authority file (default ~/.Xauthority). XDG_RUNTIME_DIR: where the daemons' sockets are. TMUX, STY: without a display or a headless xpbd, xpb copy's OSC 52 is wrapped for tmux or screen."),
            ("Stand-ins", StandIn.manualText),
        ],
        seeAlso: ["xpbd(1)", "xclip(1)", "xsel(1)"])

    static var discussion: String { program.exitStatusSentence }

    static func main() {
        // Before any thread starts (CLinux.h says why).
        clinux_retain_transfer_memory()
        // Multi-call: the name it was run by (a link's, without its directory) picks the program.
        let programName = CommandLine.arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 }
        // The installed xpbd is a link to xpb (see the Makefile).
        if programName == "xpbd" { XPBD.runAndExit() }
        StandardDescriptors.ensureOpen()
        let arguments = Array(CommandLine.arguments.dropFirst())
        // Run as `xclip` or `xsel`: that tool's options.
        if let standIn = programName.flatMap(StandIn.init(rawValue:)) {
            exit(standIn.run(arguments))
        }
        exit(run(arguments))
    }

    /// Runs one command line and returns the exit status.
    /// `program` names the program in messages (a stand-in's own name); statuses in `silencing`
    /// end the command without a message.
    static func run(_ arguments: [String], program: String = "xpb", silencing: Set<Int32> = []) -> Int32 {
        let rootHelp = { HelpText.root(commands.map { $0.spec }, abstract: abstract, discussion: discussion) }
        guard let name = arguments.first else {
            printError(rootHelp())
            return Status.usage.rawValue
        }
        switch name {
        case "-h", "--help":
            print(rootHelp(), terminator: "")
            return 0
        case "--version":
            print(version)
            return 0
        case "help":
            guard arguments.count > 1 else {
                print(rootHelp(), terminator: "")
                return 0
            }
            guard let command = commands.first(where: { $0.name == arguments[1] }) else {
                printError("xpb: unknown command '\(arguments[1])'; see 'xpb --help'\n")
                return Status.usage.rawValue
            }
            print(HelpText.command(command.spec), terminator: "")
            return 0
        default:
            break
        }
        guard let command = commands.first(where: { $0.name == name }) else {
            printError("xpb: unknown command '\(name)'; see 'xpb --help'\n")
            return Status.usage.rawValue
        }
        let instance: any Command
        do {
            let spec = command.spec
            let parsed = try ParsedArguments(Array(arguments.dropFirst()), spec: spec)
            if parsed.helpRequested {
                print(HelpText.command(spec), terminator: "")
                return 0
            }
            instance = try command.init(parsed)
        } catch {
            printError("xpb \(name): \(error.message)\nUsage: \(HelpText.usage(command.spec))\n  See 'xpb \(name) --help' for more information.\n")
            return Status.usage.rawValue
        }
        return status(program: program, silencing: silencing) { try instance.run() }
    }

    /// The exit status of a command's run: 0, or its failure's (said, unless in `silencing`).
    static func status(program: String = "xpb", silencing: Set<Int32> = [], of run: () throws -> Void) -> Int32 {
        do {
            try run()
            return 0
        } catch let exit as Exit {
            return exit.status
        } catch {
            let failure = Failure(error)
            if !silencing.contains(failure.status.rawValue) { printError("\(program): \(failure.message)\n") }
            return failure.status.rawValue
        }
    }

    static func printError(_ text: String) {
        writeText(printable(text, keepNewlines: true), to: STDERR_FILENO)
    }
}
