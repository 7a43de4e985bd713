import CommandLineTable
import FoundationEssentials
import Glibc

/// `xpb completions SHELL`: the completion script, generated from the option tables.
struct CompletionsCommand: Command {
    static let name = "completions"
    static let spec = CommandSpec(
        name: name,
        abstract: "Print the completion script for bash, zsh or fish.",
        discussion: "Generated from the same option tables as --help. Load it for this shell with: source <(xpb completions bash) (bash), xpb completions zsh > ~/.zfunc/_xpb with ~/.zfunc in $fpath (zsh), xpb completions fish | source (fish). 'make install' installs all three.",
        positional: PositionalSpec(valueName: "shell", help: "bash, zsh or fish.", completion: .words(Completions.shells)))

    let script: String

    init(_ arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.count == 1, let shell = arguments.positionals.first else {
            throw UsageError("name one shell: \(Completions.shells.joined(separator: ", "))")
        }
        guard let script = Completions.script(for: shell, XPB.program) else {
            throw UsageError("no completions for '\(shell)': \(Completions.shells.joined(separator: ", ")) are supported")
        }
        self.script = script
    }

    func run() throws {
        try writeAll(Data(utf8Of: script), to: STDOUT_FILENO)
    }
}

/// `xpb manual`: the man page in roff, generated from the option tables.
struct ManualCommand: Command {
    static let name = "manual"
    static let spec = CommandSpec(
        name: name,
        abstract: "Print xpb's man page (roff; read it with: xpb manual | man -l -).",
        discussion: "Generated from the same option tables as --help. 'make install' installs it as xpb.1; 'make docs' writes its Markdown form (--markdown) into docs/xpb.md.",
        options: [markdown])

    static let markdown = OptionSpec.flag(nil, "markdown", "The reference in Markdown instead: the generated part of docs/xpb.md.")

    let isMarkdown: Bool

    init(_ arguments: ParsedArguments) throws(UsageError) {
        isMarkdown = arguments.flag(Self.markdown)
    }

    func run() throws {
        let text = isMarkdown ? MarkdownReference.render(XPB.program) : ManualPage.render(XPB.program, date: XPB.releaseDate)
        try writeAll(Data(utf8Of: text), to: STDOUT_FILENO)
    }
}
