import CommandLineTable
import Foundation

@main
enum XPB {
    static let version = "0.2.0"

    static let commands: [any Command.Type] = [
        CopyCommand.self, PasteCommand.self, TypesCommand.self, WatchCommand.self,
        ClearCommand.self, InfoCommand.self, DetectCommand.self, HistoryCommand.self, DaemonCommand.self,
    ]

    static let abstract = "Read and write typed data on the X11 clipboard, primary selection and named pasteboards."
    static let discussion = """
        Exit status: 0 success, 1 other failure, 2 nothing on that pasteboard, 3 type not \
        available, 4 timed out, 5 no X display, 64 usage error.
        """

    static func main() {
        StandardDescriptors.ensureOpen()
        exit(run(Array(CommandLine.arguments.dropFirst())))
    }

    /// Runs one command line and returns the exit status.
    static func run(_ arguments: [String]) -> Int32 {
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
            guard let command = commands.first(where: { $0.spec.name == arguments[1] }) else {
                printError("xpb: unknown command '\(arguments[1])'; see 'xpb --help'\n")
                return Status.usage.rawValue
            }
            print(HelpText.command(command.spec), terminator: "")
            return 0
        default:
            break
        }
        guard let command = commands.first(where: { $0.spec.name == name }) else {
            printError("xpb: unknown command '\(name)'; see 'xpb --help'\n")
            return Status.usage.rawValue
        }
        let instance: any Command
        do {
            let parsed = try ParsedArguments(Array(arguments.dropFirst()), spec: command.spec)
            if parsed.helpRequested {
                print(HelpText.command(command.spec), terminator: "")
                return 0
            }
            instance = try command.init(parsed)
        } catch {
            printError("xpb \(name): \(error.message)\nUsage: \(HelpText.usage(command.spec))\n  See 'xpb \(name) --help' for more information.\n")
            return Status.usage.rawValue
        }
        do {
            try instance.run()
            return 0
        } catch let exit as Exit {
            return exit.status
        } catch {
            let failure = Failure(error)
            printError("xpb: \(failure.message)\n")
            return failure.status.rawValue
        }
    }

    static func printError(_ text: String) {
        FileHandle.standardError.write(Data(printable(text, keepNewlines: true).utf8))
    }
}
