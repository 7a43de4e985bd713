import CommandLineTable
import FoundationEssentials

/// wl-clipboard's two commands (`wl-copy`, `wl-paste`) as stand-ins: their options with the
/// same meaning, carried out by xpb's commands on the session's clipboard.
extension StandIn {
    /// GNU getopt's grammar, as wl-clipboard parses: short options grouped (`-pn`), a value
    /// attached or next (`-ttext/plain`, `-t text/plain`, `--type=…`, `--type …`), options and
    /// operands in any order, `--` ending the options. Returns each option's long name with its
    /// value, and the operands. `stopsAt` names an option after which every word is an operand
    /// (wl-paste's --watch COMMAND…).
    static func getopt(_ arguments: [String], short: [Character: String], valued: Set<String>,
                       stopsAt: String? = nil) throws(UsageError) -> (options: [(String, String?)], operands: [String]) {
        var options: [(String, String?)] = []
        var operands: [String] = []
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if word == "--" {
                operands += arguments[index...]
                break
            }
            if word.hasPrefix("--") {
                let body = word.dropFirst(2)
                let name = String(body.prefix { $0 != "=" })
                let known = Set(short.values)
                let matches = known.contains(name) ? [name] : known.filter { $0.hasPrefix(name) }.sorted()
                guard matches.count == 1, let option = matches.first else {
                    throw UsageError(matches.isEmpty ? "unrecognized option '\(word)'" : "option '\(word)' is ambiguous")
                }
                var value: String?
                if let equals = body.firstIndex(of: "=") {
                    guard valued.contains(option) else { throw UsageError("option '--\(option)' doesn't allow an argument") }
                    value = String(body[body.index(after: equals)...])
                } else if valued.contains(option) {
                    guard index < arguments.count else { throw UsageError("option '--\(option)' requires an argument") }
                    value = arguments[index]
                    index += 1
                }
                options.append((option, value))
                if option == stopsAt {
                    operands += arguments[index...]
                    break
                }
                continue
            }
            guard word.count > 1, word.hasPrefix("-") else {
                operands.append(word)
                continue
            }
            var letters = Substring(word.dropFirst())
            while let letter = letters.first {
                letters = letters.dropFirst()
                guard let option = short[letter] else { throw UsageError("invalid option -- '\(letter)'") }
                var value: String?
                if valued.contains(option) {
                    if !letters.isEmpty {
                        value = String(letters)
                        letters = ""
                    } else {
                        guard index < arguments.count else { throw UsageError("option requires an argument -- '\(letter)'") }
                        value = arguments[index]
                        index += 1
                    }
                }
                options.append((option, value))
                if option == stopsAt {
                    operands += arguments[index...]
                    return (options, operands)
                }
            }
        }
        return (options, operands)
    }

    // MARK: wl-copy

    static func wlCopy(_ arguments: [String]) throws(UsageError) -> [Step] {
        let short: [Character: String] = ["h": "help", "v": "version", "p": "primary", "n": "trim-newline", "f": "foreground",
                                          "o": "paste-once", "c": "clear", "t": "type", "s": "seat"]
        let (options, operands) = try getopt(arguments, short: short, valued: ["type", "seat"])
        let names = Set(options.map(\.0))
        if names.contains("help") { return [.message(wlCopyHelp)] }
        if names.contains("version") { return [.message("\(version) wl-copy (wl-clipboard 2.1 options)")] }
        if names.contains("seat") { throw UsageError("--seat is not supported by xpb's wl-copy: the compositor's first seat is used") }
        let selection = names.contains("primary") ? ["--primary"] : []
        if names.contains("clear") { return [.command(["clear"] + selection, silent: [Status.empty.rawValue])] }
        var words = ["copy"] + selection
        if let type = options.last(where: { $0.0 == "type" })?.1 { words += ["--type", type] }
        for (flag, option) in [("trim-newline", "--trim-newline"), ("foreground", "--foreground"), ("paste-once", "--paste-once")]
        where names.contains(flag) {
            words.append(option)
        }
        // Text given as arguments is copied as it is, joined by spaces (no newline).
        if !operands.isEmpty {
            return [.commandWithInput(words, input: Data(utf8Of: operands.joined(separator: " ")))]
        }
        return [.command(words, silent: [])]
    }

    static let wlCopyHelp = """
        Usage: wl-copy [options] text to copy   (xpb \(XPB.version) standing in for wl-copy)
        Copy content to the Wayland clipboard (the X one where there is no Wayland session).

          -o, --paste-once      Only serve one paste request and then exit.
          -f, --foreground      Stay in the foreground instead of forking.
          -c, --clear           Instead of copying anything, clear the clipboard.
          -p, --primary         Use the "primary" clipboard.
          -n, --trim-newline    Do not copy the trailing newline character if it is present.
          -t, --type mime/type  Override the inferred MIME type for the content.
          -v, --version         Display version info.
          -h, --help            Display this message.

        Not supported (an error): -s/--seat. See 'xpb manual'.
        """

    // MARK: wl-paste

    static func wlPaste(_ arguments: [String]) throws(UsageError) -> [Step] {
        let short: [Character: String] = ["h": "help", "v": "version", "p": "primary", "n": "no-newline", "l": "list-types",
                                          "t": "type", "w": "watch", "s": "seat"]
        let (options, operands) = try getopt(arguments, short: short, valued: ["type", "seat"], stopsAt: "watch")
        let names = Set(options.map(\.0))
        if names.contains("help") { return [.message(wlPasteHelp)] }
        if names.contains("version") { return [.message("\(version) wl-paste (wl-clipboard 2.1 options)")] }
        if names.contains("seat") { throw UsageError("--seat is not supported by xpb's wl-paste: the compositor's first seat is used") }
        let selection = names.contains("primary") ? ["--primary"] : []
        if names.contains("watch") {
            guard !operands.isEmpty else { throw UsageError("--watch needs a command to run") }
            // The command's words, each quoted for the shell that --exec runs.
            let command = operands.map { "'" + $0.replacing("'", with: "'\\''") + "'" }.joined(separator: " ")
            return [.command(["watch", "--exec", command] + selection, silent: [])]
        }
        guard operands.isEmpty else { throw UsageError("unexpected argument '\(operands[0])'") }
        if names.contains("list-types") { return [.command(["types", "--targets"] + selection, silent: [])] }
        var words = ["paste"] + selection
        if let type = options.last(where: { $0.0 == "type" })?.1 { words += ["--type", type] }
        if !names.contains("no-newline") { words.append("--newline-after-text") }
        return [.command(words, silent: [])]
    }

    static let wlPasteHelp = """
        Usage: wl-paste [options]   (xpb \(XPB.version) standing in for wl-paste)
        Paste content from the Wayland clipboard (the X one where there is no Wayland session).

          -n, --no-newline      Do not append a newline character after text.
          -l, --list-types      Instead of pasting, list the offered types.
          -p, --primary         Use the "primary" clipboard.
          -w, --watch command   Run a command each time the selection changes, with the new contents on its input.
          -t, --type mime/type  Override the inferred MIME type for the content.
          -v, --version         Display version info.
          -h, --help            Display this message.

        Not supported (an error): -s/--seat. See 'xpb manual'.
        """
}
