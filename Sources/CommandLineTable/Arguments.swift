/// The command line grammar of xpb, declared as tables and parsed without reflection.
///
/// A reflective parser (swift-argument-parser) cost ~12 M instructions, half of a whole
/// `xpb paste`, on runtime conformance look-ups at every start; this one costs almost nothing.
/// Grammar: `--name value`, `--name=value`, `-t value`, `-tvalue`, grouped short flags (`-px`),
/// `--` ends the options; `-h`/`--help` anywhere prints the command's help.

/// One option: a flag when `valueName` is nil.
package struct OptionSpec: Sendable {
    package let short: Character?
    package let long: String
    package let valueName: String?
    package let help: String
    /// Internal options (the background owner's) are accepted but not shown.
    package var hidden = false
    /// What the shells complete for the value.
    package var completion: ValueCompletion = .files

    package static func flag(_ short: Character? = nil, _ long: String, _ help: String, hidden: Bool = false) -> OptionSpec {
        OptionSpec(short: short, long: long, valueName: nil, help: help, hidden: hidden)
    }

    package static func value(_ short: Character? = nil, _ long: String, _ valueName: String, _ help: String, hidden: Bool = false,
                             completion: ValueCompletion = .files) -> OptionSpec {
        OptionSpec(short: short, long: long, valueName: valueName, help: help, hidden: hidden, completion: completion)
    }

    /// `-t, --type <type>` as help shows it.
    package var label: String {
        var text = short.map { "-\($0), " } ?? ""
        text += "--" + long
        if let valueName { text += " <\(valueName)>" }
        return text
    }
}

/// The positional arguments a command takes (all of one kind).
package struct PositionalSpec: Sendable {
    package let valueName: String
    package let help: String
    /// What the shells complete for the first one (`.words`: an action or a shell name) or for
    /// each (`.files`).
    package let completion: ValueCompletion

    package init(valueName: String, help: String, completion: ValueCompletion = .files) {
        self.valueName = valueName
        self.help = help
        self.completion = completion
    }
}

/// What a shell completes for a value: file names, fixed words, or the lines a cheap shell
/// command prints when asked.
package enum ValueCompletion: Sendable, Equatable {
    case files
    /// Fixed words (no spaces, quotes or colons).
    case words([String])
    /// Words made only when a completion script is written: a command that runs never pays for
    /// them (the type list walks the whole type registry).
    case computedWords(WordList)
    /// The lines of a POSIX shell command line, run at completion time; it must be cheap.
    case command(String)

    /// What a completion script says: files, words (made now), or a command.
    package enum Resolved {
        case files
        case words([String])
        case command(String)
    }

    /// The completion as a script writes it, its words made.
    package var resolved: Resolved {
        switch self {
        case .files: return .files
        case let .words(words): return .words(words)
        case let .computedWords(list): return .words(list.make())
        case let .command(line): return .command(line)
        }
    }

    /// The X displays of this machine, from the server sockets in `/tmp/.X11-unix` (`X0` is `:0`).
    package static let displays = ValueCompletion.command("ls /tmp/.X11-unix 2>/dev/null | sed -n 's/^X\\([0-9][0-9]*\\)$/:\\1/p'")
}

/// Words made on demand, named so that two lists compare by what they are.
package struct WordList: Sendable, Equatable {
    package let name: String
    package let make: @Sendable () -> [String]

    package init(_ name: String, _ make: @escaping @Sendable () -> [String]) {
        self.name = name
        self.make = make
    }

    package static func == (lhs: WordList, rhs: WordList) -> Bool { lhs.name == rhs.name }
}

/// One command: its name, help texts and grammar.
package struct CommandSpec: Sendable {
    package let name: String
    package let abstract: String
    package var discussion: String = ""
    package var options: [OptionSpec] = []
    package var positional: PositionalSpec?
    /// The program the command belongs to: `xpb <name>`, or the program alone when `name` is empty.
    package var program = "xpb"

    package init(name: String, abstract: String, discussion: String = "", options: [OptionSpec] = [],
                positional: PositionalSpec? = nil, program: String = "xpb") {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.positional = positional
        self.program = program
    }
}

/// A command line that does not follow the grammar: exit status 64.
package struct UsageError: Error, Equatable {
    package let message: String
    package init(_ message: String) { self.message = message }
}

/// What a command line said, by long option name.
package struct ParsedArguments {
    package private(set) var values: [String: [String]] = [:]
    package private(set) var flags: Set<String> = []
    package private(set) var positionals: [String] = []
    package private(set) var helpRequested = false
    /// The arguments as given (after the command name).
    package let raw: [String]
    /// The options the command declares: a lookup of any other name is a programming error
    /// (checked in debug builds only: a release parse builds no set of their names).
    private let declared: [OptionSpec]

    /// Parses `arguments` (after the command name) against `spec`.
    package init(_ arguments: [String], spec: CommandSpec) throws(UsageError) {
        declared = spec.options
        raw = arguments
        var index = 0
        var optionsEnded = false
        func option(long: String) throws(UsageError) -> OptionSpec {
            guard let found = spec.options.first(where: { $0.long == long }) else {
                throw UsageError("unknown option '--\(long)'")
            }
            return found
        }
        func option(short: Character) throws(UsageError) -> OptionSpec {
            guard let found = spec.options.first(where: { $0.short == short }) else {
                throw UsageError("unknown option '-\(short)'")
            }
            return found
        }
        /// The value of an option: attached, else the next argument (whatever it looks like, so
        /// that `--item -1` reaches the range check).
        func value(for option: OptionSpec, attached: String?) throws(UsageError) -> String {
            if let attached { return attached }
            index += 1
            guard index < arguments.count else { throw UsageError("missing value for '--\(option.long) <\(option.valueName ?? "value")>'") }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") {
                positionals.append(argument)
            } else if argument == "--" {
                optionsEnded = true
            } else if argument == "--help" || argument == "-h" {
                helpRequested = true
            } else if argument.hasPrefix("--") {
                let body = argument.dropFirst(2)
                let name = body.firstIndex(of: "=").map { String(body[..<$0]) } ?? String(body)
                let attached = body.firstIndex(of: "=").map { String(body[body.index(after: $0)...]) }
                let spec = try option(long: name)
                if spec.valueName == nil {
                    if attached != nil { throw UsageError("'--\(name)' takes no value") }
                    flags.insert(spec.long)
                } else {
                    values[spec.long, default: []].append(try value(for: spec, attached: attached))
                }
            } else {
                // -abc: flags, or one option whose value is the rest.
                var rest = Substring(argument.dropFirst())
                while let letter = rest.first {
                    rest = rest.dropFirst()
                    if letter == "h" { helpRequested = true; continue }
                    let spec = try option(short: letter)
                    if spec.valueName == nil {
                        flags.insert(spec.long)
                    } else {
                        values[spec.long, default: []].append(try value(for: spec, attached: rest.isEmpty ? nil : String(rest)))
                        break
                    }
                }
            }
            index += 1
        }
        if spec.positional == nil, let first = positionals.first {
            throw UsageError("unexpected argument '\(first)'")
        }
    }

    /// Stops a debug build that looks up an option its command never declared (a typo would
    /// otherwise read as "not given" for ever).
    private func checkDeclared(_ long: String) {
        assert(declared.contains { $0.long == long }, "option '--\(long)' is looked up but not declared by the command")
    }

    func flag(_ long: String) -> Bool {
        checkDeclared(long)
        return flags.contains(long)
    }

    /// The last value given for an option (a repeated option's last one wins).
    func value(_ long: String) -> String? {
        checkDeclared(long)
        return values[long]?.last
    }

    /// Every value given for a repeatable option, in order.
    func all(_ long: String) -> [String] {
        checkDeclared(long)
        return values[long] ?? []
    }

    /// Look-ups by the declared spec itself, the only ones commands have: a command can only name
    /// an option it declared (the look-ups by name are this module's own).
    package func flag(_ option: OptionSpec) -> Bool { flag(option.long) }
    package func value(_ option: OptionSpec) -> String? { value(option.long) }
    package func all(_ option: OptionSpec) -> [String] { all(option.long) }
    package func integer(_ option: OptionSpec) throws(UsageError) -> Int? { try integer(option.long) }
    package func seconds(_ option: OptionSpec, allowingZero: Bool = false) throws(UsageError) -> Double? {
        try seconds(option.long, allowingZero: allowingZero)
    }
    package func size(_ option: OptionSpec) throws(UsageError) -> Int? { try size(option.long) }

    /// An integer option's value, nil when absent.
    func integer(_ long: String) throws(UsageError) -> Int? {
        guard let text = value(long) else { return nil }
        guard let number = Int(text) else { throw UsageError("'\(text)' is not a whole number (--\(long))") }
        return number
    }

    /// A duration in seconds, nil when absent; 0 only `allowingZero` (an option whose 0 means "never").
    func seconds(_ long: String, allowingZero: Bool = false) throws(UsageError) -> Double? {
        guard let text = value(long) else { return nil }
        guard let number = Double(text), number.isFinite, number > 0 || (allowingZero && number == 0) else {
            throw UsageError("'\(text)' is not a \(allowingZero ? "number of seconds (0 or more)" : "positive number of seconds") (--\(long))")
        }
        guard number <= Self.maxSeconds else {
            throw UsageError("'\(text)' seconds is too long (--\(long) takes at most \(Int(Self.maxSeconds)), over 30 years)")
        }
        return number
    }

    /// The longest duration an option takes.
    package static let maxSeconds: Double = 1_000_000_000

    /// A size in bytes (`4096`, `512K`, `10M`, `2G`: powers of 1024), nil when absent.
    func size(_ long: String) throws(UsageError) -> Int? {
        guard let text = value(long) else { return nil }
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = Substring(text)
        var unit = 1
        if let last = digits.last?.uppercased().first, let factor = units[last] {
            unit = factor
            digits = digits.dropLast()
        }
        guard let number = Int(digits), number > 0 else {
            throw UsageError("'\(text)' is not a size (--\(long) takes bytes, or a number with K, M, G or T)")
        }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: unit)
        guard !overflow else { throw UsageError("'\(text)' is too large (--\(long))") }
        return bytes
    }
}

/// Sizes as the size options take them: `1G`, `256M`, `4096`.
package enum SizeText {
    /// `bytes` with the largest of T, G, M and K that divides it (powers of 1024).
    package static func suffixed(_ bytes: Int) -> String {
        for (suffix, unit) in [("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] where bytes > 0 && bytes % unit == 0 {
            return "\(bytes / unit)\(suffix)"
        }
        return String(bytes)
    }
}

/// Help texts, wrapped to 80 columns.
package enum HelpText {
    package static let width = 80

    /// Each line indented by `indent` spaces; a `\n` starts a paragraph.
    package static func wrap(_ text: String, indent: Int) -> String {
        var lines: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = String(repeating: " ", count: indent)
            var lineHasWord = false
            for word in paragraph.split(separator: " ") {
                if lineHasWord && line.count + 1 + word.count > width {
                    lines.append(line)
                    line = String(repeating: " ", count: indent)
                    lineHasWord = false
                }
                line += (lineHasWord ? " " : "") + word
                lineHasWord = true
            }
            lines.append(line)
        }
        return lines.map { $0.allSatisfy { $0 == " " } ? "" : $0 }.joined(separator: "\n")
    }

    package static func usage(_ spec: CommandSpec) -> String {
        var text = spec.name.isEmpty ? spec.program : "\(spec.program) \(spec.name)"
        if spec.options.contains(where: { !$0.hidden }) { text += " [<options>]" }
        if let positional = spec.positional { text += " [<\(positional.valueName)> ...]" }
        return text
    }

    /// The help of one command.
    package static func command(_ spec: CommandSpec) -> String {
        var text = wrap("OVERVIEW: " + spec.abstract, indent: 0) + "\n\n"
        if !spec.discussion.isEmpty { text += wrap(spec.discussion, indent: 0) + "\n\n" }
        text += "USAGE: \(usage(spec))\n\n"
        if let positional = spec.positional {
            text += "ARGUMENTS:\n" + row("<\(positional.valueName)>", positional.help) + "\n"
        }
        text += "OPTIONS:\n"
        for option in spec.options where !option.hidden { text += row(option.label, option.help) }
        text += row("-h, --help", "Show help information.")
        return text
    }

    /// The help of the whole tool.
    package static func root(_ commands: [CommandSpec], abstract: String, discussion: String) -> String {
        var text = wrap("OVERVIEW: " + abstract, indent: 0) + "\n\n" + wrap(discussion, indent: 0) + "\n\n"
        text += "USAGE: xpb <command> [<options>]\n\n"
        text += "OPTIONS:\n" + row("--version", "Show the version.") + row("-h, --help", "Show help information.") + "\n"
        text += "COMMANDS:\n"
        for command in commands { text += row(command.name, command.abstract) }
        text += "\n  See 'xpb help <command>' for detailed help.\n"
        return text
    }

    /// `  label    help`, the help wrapped in a column of its own.
    static func row(_ label: String, _ help: String) -> String {
        let column = 28
        if label.count + 4 > column {
            return "  \(label)\n" + wrap(help, indent: column) + "\n"
        }
        let padded = "  " + label + String(repeating: " ", count: column - 2 - label.count)
        return padded + wrap(help, indent: column).dropFirst(column) + "\n"
    }
}
