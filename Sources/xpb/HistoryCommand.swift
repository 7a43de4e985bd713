import CommandLineTable
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire

struct HistoryCommand: Command {
    /// The options, each declared once: the spec lists them and the look-ups name them, so a
    /// look-up can only name a declared option.
    enum Option {
        static let pinned = OptionSpec.flag(nil, "pinned", "With 'clear': forget the pinned entries too.")
        static let menu = OptionSpec.value(nil, "menu", "command", "The menu program for 'menu', run by /bin/sh: reads one entry per line, prints the chosen line.")
        static let display = OptionSpec.value(nil, "display", "display", "The display whose daemon to ask (default: $DISPLAY).", completion: .displays)
        static let count = OptionSpec.value(nil, "count", "n", "With 'list' or 'search': the newest n entries (default 1000).")
        static let all = OptionSpec.flag(nil, "all", "With 'list' or 'search': every entry, fetched a page at a time.")
    }

    static let name = "history"
    static let spec = CommandSpec(
        name: name,
        abstract: "List, search, select and delete what the clipboard manager (xpbd) kept.",
        discussion: """
            Actions: 'list' (the default): the newest 1000 entries (--count, --all), newest first, with its index, age, size (the content's: \
            a text's bytes, whatever richer forms came with it; an image's pixels, 1920×1080), the app that copied and its \
            pid, the content's types (its own first: a copied JPEG is image/jpeg) and a one-line preview; 'search TEXT': the \
            entries whose text, preview, types or app contain TEXT (ignoring case), exit status 1 when none does (as \
            grep); 'select N': entry N becomes the clipboard again (or the selection it came from) with \
            all its targets, served by xpbd; 'delete N': forget entry N; 'pin N' / 'unpin N': a pinned entry is never \
            evicted by xpbd's caps and survives 'clear' (unless --pinned); 'clear': forget every entry but the pinned; \
            'queue N …': the entries, in the order given, join the paste queue (see xpb queue); 'menu': pipe the \
            entries through a menu program (--menu, $XPB_MENU, else rofi, dmenu or fzf, the first found; rofi gets \
            each image's thumbnail as its row's icon; pinned entries first) and select the chosen one. With --json, an image entry has its \
            pixel size and a thumbnail (a PNG under $XDG_RUNTIME_DIR/xpb/thumbnails; a plain history's under $XDG_CACHE_HOME/xpb/thumbnails). Index 0 is the newest entry. \
            Needs xpbd running for the display; without a display (no --display, no $DISPLAY), this host's headless \
            xpbd (xpbd --headless), whose history holds the copies made on this host and serves an entry selected \
            again from memory.
            """,
        options: [
            CommonOptions.json,
            Option.count,
            Option.all,
            Option.pinned,
            Option.menu,
            Option.display,
            Session.backendOption,
        ],
        positional: PositionalSpec(valueName: "action", help: "list, search TEXT, select N, delete N, pin N, unpin N, clear, queue N… or menu.",
                                   completion: .words(["list", "search", "select", "delete", "pin", "unpin", "clear", "queue", "menu"])))

    enum Action: Equatable {
        case list
        case search(String)
        case select(Int)
        case delete(Int)
        case pin(Int, Bool)
        case clear(includingPinned: Bool)
        case queue([Int])
        case menu
    }

    let action: Action
    let asJSON: Bool
    /// How many entries 'list' and 'search' show (nil: all).
    let count: Int?
    let menu: String?
    let display: String?
    /// Whose xpbd to ask (`--backend`, `--display`, the environment).
    let session: Session

    init(_ arguments: ParsedArguments) throws(UsageError) {
        asJSON = arguments.flag(CommonOptions.json)
        let wanted = try arguments.integer(Option.count)
        if let wanted, wanted <= 0 { throw UsageError("--count takes a positive number") }
        if wanted != nil, arguments.flag(Option.all) { throw UsageError("--count and --all go separately") }
        count = arguments.flag(Option.all) ? nil : wanted ?? ControlRequest.historyPageSize
        menu = arguments.value(Option.menu)
        display = arguments.value(Option.display)
        session = try Session(backend: arguments.value(Session.backendOption), display: display)
        var words = arguments.positionals
        let verb = words.isEmpty ? "list" : words.removeFirst()
        func index() throws(UsageError) -> Int {
            guard words.count == 1, let number = Int(words[0]), number >= 0 else {
                throw UsageError("'history \(verb)' takes one entry index (0 is the newest)")
            }
            return number
        }
        switch verb {
        case "list":
            guard words.isEmpty else { throw UsageError("'history list' takes no argument") }
            action = .list
        case "search":
            guard !words.isEmpty else { throw UsageError("'history search' takes the text to look for") }
            action = .search(words.joined(separator: " "))
        case "select": action = .select(try index())
        case "delete": action = .delete(try index())
        case "pin": action = .pin(try index(), true)
        case "unpin": action = .pin(try index(), false)
        case "clear":
            guard words.isEmpty else { throw UsageError("'history clear' takes no argument") }
            action = .clear(includingPinned: arguments.flag(Option.pinned))
        case "queue":
            let indexes = words.compactMap { Int($0) }.filter { $0 >= 0 }
            guard !words.isEmpty, indexes.count == words.count else {
                throw UsageError("'history queue' takes entry indexes (0 is the newest), in the order to paste them")
            }
            action = .queue(indexes)
        case "menu":
            guard words.isEmpty else { throw UsageError("'history menu' takes no argument") }
            action = .menu
        default:
            throw UsageError("unknown history action '\(verb)' (list, search, select, delete, pin, unpin, clear, queue, menu)")
        }
        if arguments.flag(Option.pinned), verb != "clear" { throw UsageError("--pinned goes with 'history clear'") }
        if menu != nil, action != .menu { throw UsageError("--menu goes with 'history menu'") }
        let listing: Bool = { if case .search = action { return true }; return action == .list }()
        if !listing, wanted != nil || arguments.flag(Option.all) { throw UsageError("--count and --all go with 'history list' and 'history search'") }
    }

    func run() throws {
        var client = try DaemonAccess.client(session: session)
        defer { client.close() }
        switch action {
        case .list, .search:
            var search: String?
            if case let .search(text) = action { search = text }
            let found = try list(search: search, client: &client)
            // As grep: a search that finds nothing exits 1 (its listing, or `[]`, still written).
            if search != nil, found == 0 { throw Exit(status: Status.failure.rawValue) }
        case let .select(index):
            try report(client.send(.select(index: index)))
        case let .delete(index):
            try report(client.send(.delete(index: index)))
        case let .pin(index, pinned):
            try report(client.send(.pin(index: index, pinned: pinned)))
        case let .clear(includingPinned):
            try report(client.send(includingPinned ? .clearAll : .clear))
        case let .queue(indexes):
            guard case let .queue(items) = try client.send(.queue(.history(indexes))) else { throw Failure("xpbd answered out of turn") }
            try QueueCommand.show(items, asJSON: asJSON)
        case .menu:
            let page = ControlRequest.historyPage(search: nil, offset: 0, limit: ControlRequest.historyPageSize, compact: true)
            guard case let .historyPage(entries, _, _) = try client.send(page) else { throw Failure("xpbd answered out of turn") }
            guard !entries.isEmpty else { throw Failure("the history is empty", .empty) }
            guard let chosen = try choose(from: entries) else { throw Exit(status: Status.empty.rawValue) }
            try report(client.send(.select(index: chosen)))
        }
    }

    /// The newest `count` entries (all without it), a page at a time, each written as it comes:
    /// a history of 100,000 entries never makes one reply (a frame holds at most 16 MiB) nor
    /// one string here.
    @discardableResult
    private func list(search: String?, client: inout ControlClient) throws -> Int {
        var offset = 0
        var total = 0
        var partial = false
        let now = Date()
        if asJSON { writeText("[", to: STDOUT_FILENO) }
        while count.map({ offset < $0 }) ?? true {
            let limit = min(ControlRequest.historyPageSize, count.map { $0 - offset } ?? .max)
            guard case let .historyPage(entries, all, more) = try client.send(.historyPage(search: search, offset: offset, limit: limit, compact: true)) else {
                throw Failure("xpbd answered out of turn")
            }
            total = all
            partial = more == true
            if asJSON {
                let array = String(decoding: try ControlCoding.encode(entries), as: UTF8.self)
                let inner = array.dropFirst().dropLast()
                if !inner.isEmpty { writeText((offset > 0 ? "," : "") + jsonSafe(String(inner)), to: STDOUT_FILENO) }
            } else {
                // One write a page, not one per line.
                var text = ""
                text.reserveCapacity(entries.count * 120)
                for entry in entries {
                    text += printable(Self.line(entry, now: now))
                    text += "\n"
                }
                writeText(text, to: STDOUT_FILENO)
            }
            offset += entries.count
            if entries.isEmpty || (offset >= all && !partial) { break }
        }
        if asJSON { writeText("]\n", to: STDOUT_FILENO) }
        if let count, total > offset || partial, offset >= count, !asJSON {
            // A search of many matches counts them only as far as it lists them: more may match.
            let counted = partial && total <= offset
            XPB.printError("xpb: the newest \(offset)\(counted ? "" : " of \(total)") entries\(search == nil ? "" : " found")\(counted ? " (more may match)" : ""); --count N shows more, --all every one\n")
        }
        return total
    }

    private func report(_ reply: ControlReply) throws {
        guard case let .done(message) = reply else { throw Failure("xpbd answered out of turn") }
        if asJSON {
            writeJSONLine(json(["result": message]))
        } else {
            writeLine(message)
        }
    }

    /// `3    2m    12 B       xclip (4711)  text/html,text/plain  the first line … (+2 lines)`
    static func line(_ entry: HistoryEntrySummary, now: Date) -> String {
        // The application that copied where xpbd could tell (its executable), else the window's name.
        var source = entry.app ?? entry.source ?? "?"
        if let pid = entry.pid { source += " (\(pid))" }
        let shown = entry.types.isEmpty ? entry.targets.filter { !$0.hasPrefix("XPB_") } : entry.types
        var types = shown.prefix(3).joined(separator: ",")
        if shown.count > 3 { types += ",+\(shown.count - 3)" }
        let selection = (entry.pinned == true ? "[pinned] " : "") + (entry.selection == "CLIPBOARD" ? "" : "[\(entry.selection)] ")
        // An image's size is its pixels (`1920×1080`), not its bytes.
        let size = pixelSize(entry) ?? ByteCount.format(entry.size)
        return "\(String(entry.index).leftAligned(3))  \(age(now.timeIntervalSince(entry.time)).leftAligned(4))  \(size.leftAligned(9))  \(source)  \(types.isEmpty ? "-" : types)  \(selection)\(preview(entry))"
    }

    static func pixelSize(_ entry: HistoryEntrySummary) -> String? {
        guard let width = entry.pixelWidth, let height = entry.pixelHeight else { return nil }
        return "\(width)×\(height)"
    }

    /// The preview with the number of lines it leaves out: `first line … (+2 lines)`.
    static func preview(_ entry: HistoryEntrySummary) -> String {
        guard entry.moreLines > 0 else { return entry.preview }
        return "\(entry.preview) … (+\(entry.moreLines) line\(entry.moreLines == 1 ? "" : "s"))"
    }

    static func age(_ seconds: TimeInterval) -> String {
        let value = max(0, Int(seconds))
        if value < 60 { return "\(value)s" }
        if value < 3600 { return "\(value / 60)m" }
        if value < 86400 { return "\(value / 3600)h" }
        return "\(value / 86400)d"
    }

    /// Runs the menu program with one `index<TAB>preview` line per entry; the index of the line
    /// it prints, nil when it printed nothing (the user cancelled).
    private func choose(from entries: [HistoryEntrySummary]) throws -> Int? {
        let command = try menu ?? ProcessInfo.processInfo.environment["XPB_MENU"] ?? Self.defaultMenu()
        let pid: pid_t
        let input, output: (read: Int32, write: Int32)
        do {
            input = try ChildProcess.pipe()
            output = try ChildProcess.pipe()
            var child = ChildProcess.shell(command)
            child.descriptors = [0: .inherit(input.read), 1: .inherit(output.write), 2: .inherit(2)]
            defer {
                close(input.read)
                close(output.write)
            }
            pid = try child.spawn()
        } catch {
            throw Failure("cannot run the menu '\(command)': \(error)")
        }
        // The later lines follow the preview, so that typing any line's words finds the entry.
        // rofi shows an image entry's thumbnail as the row's icon (its `\0icon\x1f` row option;
        // with -show-icons); other menus get plain rows.
        let icons = Self.isRofi(command)
        // Pinned entries first, marked.
        let ordered = entries.filter { $0.pinned == true } + entries.filter { $0.pinned != true }
        let lines = ordered.map { entry in
            let shown = (entry.pinned == true ? "[pinned] " : "") + (entry.preview.isEmpty ? entry.types.joined(separator: ",") : Self.preview(entry))
            // The app that copied ends the row: typing "chromium" finds Chromium's copies.
            let app = (entry.app ?? entry.source).map { "  · " + $0 } ?? ""
            let row = "\(entry.index)\t\(printable(shown + (entry.rest.isEmpty ? "" : "  ⏎ " + entry.rest) + app))"
            guard icons, let thumbnail = entry.thumbnail, !thumbnail.contains("\n"), !thumbnail.contains("\u{1F}") else { return row }
            return row + "\0icon\u{1F}" + thumbnail
        }
        // A menu that exits without reading its input (cancelled) must not kill us with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        try? writeAll(Data(utf8Of: lines.joined(separator: "\n") + "\n"), to: input.write)
        close(input.write)
        let chosen = (try? Inputs.read(output.read, named: "the menu's output", limit: 1 << 20)) ?? Data()
        close(output.read)
        ChildProcess.wait(for: pid)
        let line = String(decoding: chosen, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        guard !line.isEmpty else { return nil }
        guard let index = Int(line.prefix { $0.isNumber }), entries.contains(where: { $0.index == index }) else {
            throw Failure("the menu printed '\(printable(line))', which is not one of its lines")
        }
        return index
    }

    /// Whether a menu command runs rofi (its first word, or the program after `exec` or `env`).
    static func isRofi(_ command: String) -> Bool {
        let words = command.split(whereSeparator: \.isWhitespace).map(String.init)
        let program = words.first { !["exec", "env"].contains($0) && !$0.contains("=") } ?? ""
        return program.split(separator: "/").last == "rofi"
    }

    /// rofi, dmenu or fzf, the first on PATH.
    static func defaultMenu() throws -> String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        for (program, command) in [("rofi", "rofi -dmenu -i -p clipboard -show-icons"), ("dmenu", "dmenu -l 20 -i"), ("fzf", "fzf --no-sort")] {
            if path.contains(where: { FileManager.default.isExecutableFile(atPath: "\($0)/\(program)") }) { return command }
        }
        throw Failure("no menu program: install rofi, dmenu or fzf, or pass --menu COMMAND (or set XPB_MENU)")
    }
}

extension String {
    func leftAligned(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}
