import ArgumentParser

@main
struct XPB: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xpb",
        abstract: "Read and write typed data on the X11 clipboard, primary selection and named pasteboards.",
        discussion: """
            Exit status: 0 success, 1 other failure, 2 nothing on that pasteboard, 3 type not \
            available, 4 timed out, 5 no X display, 64 usage error.
            """,
        subcommands: [CopyCommand.self, PasteCommand.self, TypesCommand.self, WatchCommand.self,
                      ClearCommand.self, InfoCommand.self, DetectCommand.self]
    )
}
