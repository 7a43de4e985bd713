import CommandLineTable
import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardX11

#if canImport(Glibc)
import Glibc
#endif

struct CopyCommand: Command {
    /// The options, each declared once: the spec lists them and the look-ups name them, so a
    /// look-up can only name a declared option.
    enum Option {
        static let type = OptionSpec.value("t", "type", "type[=file]", "The type of the data (UTI, MIME type, X target or short name); repeat TYPE=FILE for several representations of one item.", completion: SelectionOptions.typeCompletion)
        static let foreground = OptionSpec.flag(nil, "foreground", "Stay attached and serve until another client takes the selection.")
        static let pasteOnce = OptionSpec.flag(nil, "paste-once", "Give the selection up after the first paste (--loops 1).")
        static let loops = OptionSpec.value(nil, "loops", "n", "Give the selection up after n pastes (xclip -loops).")
        static let append = OptionSpec.flag(nil, "append", "Add to the text the pasteboard holds now instead of replacing it (xsel -a).")
        static let filter = OptionSpec.flag(nil, "filter", "Also write the copied data to standard output, as xclip -f does (for pipelines).")
        static let log = OptionSpec.value(nil, "log", "file", "Where the background owner writes its errors (appended; default: nowhere).")
        static let expire = OptionSpec.value(nil, "expire", "seconds", "Give the selection up after this many seconds.")
        static let sensitive = OptionSpec.flag(nil, "sensitive", "Mark the data secret (x-kde-passwordManagerHint: never kept in history, synced or handed to a clipboard manager) and give it up after 45 s unless --expire says otherwise.")
        static let localOnly = OptionSpec.flag(nil, "local-only", "Never sync the data to another display or machine.")
        static let cut = OptionSpec.flag(nil, "cut", "Offer the files as a cut: a file manager that pastes them moves them (GNOME's copied-files list says cut, KDE's x-kde-cutselection is 1). Each item is a file's URL, not its contents.")
        static let queue = OptionSpec.flag(nil, "queue", "Add the items to the paste queue of the display's xpbd instead of owning the clipboard: each file (or standard input) is one item, and each paste takes the next (see xpb queue).")
        static let trimNewline = OptionSpec.flag("n", "trim-newline", "Remove one trailing newline from text (as wl-copy -n).")
        static let maxSize = OptionSpec.value(nil, "max-size", "size", "Refuse standard input or a pipe larger than this (bytes, or with a K, M or G suffix; default \(CommonOptions.defaultMaxSizeText)); the clipboard keeps what it had.")
        static let readyFd = OptionSpec.value(nil, "ready-fd", "fd", "The background owner's ready pipe.", hidden: true)
        static let savedFd = OptionSpec.value(nil, "saved-fd", "input=fd", "An input the parent saved for the background owner.", hidden: true)
        static let copiedBy = OptionSpec.value(nil, "copied-by", "pid:name", "Who ran the copy, as the parent found it for the background owner.", hidden: true)
    }

    static let name = "copy"
    static let spec = CommandSpec(
        name: name,
        abstract: "Put data on a pasteboard: standard input, files, or several types of one item.",
        discussion: """
            Without files, standard input is copied. Each file makes one item. `-t TYPE=FILE` pairs \
            make one item with several representations (`-t html=page.html -t text=page.txt`); \
            FILE may be `-` for standard input. Without a type, it is inferred from the file name \
            or the content (UTF-8 text, PNG, JPEG, GIF, PDF, HTML …).

            A copied file is what is pasted, even if it changes later: files up to 64 MiB are \
            snapshotted into memory, bigger ones cloned where the file system can; otherwise a \
            file changed since the copy is refused, never served in part. Secret input \
            (--sensitive) is kept in memory only, never in a file on disk.

            By default xpb returns at once and a background owner (a new session, standard \
            streams on /dev/null) serves the data until another client takes the selection, so \
            `$(xpb copy <<< hi)` and pipes never hang. Files over 1 MiB are served from disk in \
            pieces, never held in memory whole. Sent SIGTERM, SIGINT or SIGHUP, the owner (in the \
            background or with --foreground) first hands the clipboard to the clipboard manager, \
            as a GTK or Qt app does when it exits, then dies of the signal. The copy is credited to \
            the program that ran xpb (its parents past shells, env and timeout): a clipboard \
            manager's history and `xpb info` name it.

            Without a display (no $DISPLAY, no --display) the copy goes to this host's headless \
            xpbd (xpbd --headless), which shares it with the desktops linked to it. The fallback \
            of last resort, with neither a display nor a headless xpbd: text is written to the \
            terminal as OSC 52 (wrapped for tmux and screen), at most \(CopyCommand.terminalLimit) \
            bytes; more is an error, never a cut copy.
            """,
        options: SelectionOptions.specs + [
            Option.type,
            Option.foreground,
            Option.pasteOnce,
            Option.loops,
            Option.append,
            Option.filter,
            Option.log,
            Option.expire,
            Option.sensitive,
            Option.localOnly,
            Option.cut,
            Option.queue,
            Option.trimNewline,
            Option.maxSize,
            Option.readyFd,
            Option.savedFd,
            Option.copiedBy,
        ],
        positional: PositionalSpec(valueName: "file", help: "Files to copy, one item each; none or `-` for standard input."))

    let selection: SelectionOptions
    let files: [String]
    let types: [String]
    let foreground: Bool
    /// Pastes served before the selection is given up (nil: no limit).
    let loops: Int?
    let append: Bool
    let filter: Bool
    let log: String?
    /// This command line (`copy` and its arguments), which the background owner runs again.
    let commandLine: [String]
    let expire: Double?
    let sensitive: Bool
    let localOnly: Bool
    /// The files are offered as a cut (their URLs, marked to be moved).
    let cut: Bool
    let trimNewline: Bool
    /// The items go to xpbd's paste queue (`--queue`).
    let queue: Bool
    let maxSize: Int
    /// The background owner's ready pipe (set in a forked owner, else by `--ready-fd`).
    private(set) var readyFD: Int32?
    /// Inputs the parent saved for the background owner, as `INPUT=FD`: standard input and
    /// anything that is not a regular file (a pipe like `<(cmd)` cannot be reopened by a child).
    private(set) var savedFDs: [String]
    /// Who ran the copy (``CopyCredit``), as the starting process found it; nil: look now.
    private(set) var copiedBy: CopyCredit?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        files = arguments.positionals
        types = arguments.all(Option.type)
        foreground = arguments.flag(Option.foreground)
        let loops = try arguments.integer(Option.loops)
        if let loops, loops < 1 { throw UsageError("--loops takes 1 or more") }
        if loops != nil && arguments.flag(Option.pasteOnce) { throw UsageError("--paste-once is --loops 1: give one of them") }
        self.loops = arguments.flag(Option.pasteOnce) ? 1 : loops
        append = arguments.flag(Option.append)
        filter = arguments.flag(Option.filter)
        log = arguments.value(Option.log)
        commandLine = ["copy"] + arguments.raw
        expire = try arguments.seconds(Option.expire)
        sensitive = arguments.flag(Option.sensitive)
        localOnly = arguments.flag(Option.localOnly)
        cut = arguments.flag(Option.cut)
        trimNewline = arguments.flag(Option.trimNewline)
        queue = arguments.flag(Option.queue)
        maxSize = try arguments.size(Option.maxSize) ?? CommonOptions.defaultMaxSize
        readyFD = try arguments.integer(Option.readyFd).map { Int32(clamping: $0) }
        savedFDs = arguments.all(Option.savedFd)
        copiedBy = arguments.value(Option.copiedBy).flatMap(Self.credit(from:))
        try validate()
    }

    static let sensitiveExpiry: Double = 45

    /// `--copied-by`'s value for a credit: `PID:NAME` (the pid empty when unknown).
    static func argument(for credit: CopyCredit) -> String {
        "\(credit.pid.map(String.init) ?? ""):\(credit.name)"
    }

    /// The credit `--copied-by` gives; nil for a malformed value.
    static func credit(from argument: String) -> CopyCredit? {
        guard let colon = argument.firstIndex(of: ":") else { return nil }
        let name = String(argument[argument.index(after: colon)...])
        let pid = Int(argument[..<colon])
        guard !name.isEmpty, pid != nil || argument[..<colon].isEmpty else { return nil }
        return CopyCredit(name: name, pid: pid)
    }

    /// Files up to this size are held in memory by the owner; bigger ones are served from disk.
    static let inMemoryLimit = 1 << 20

    /// `-t` values split into plain types and TYPE=FILE pairs.
    private var pairs: [(type: String, file: String)] {
        types.compactMap { value in
            guard let equals = value.firstIndex(of: "=") else { return nil }
            return (String(value[..<equals]), String(value[value.index(after: equals)...]))
        }
    }

    private var plainTypes: [String] { types.filter { !$0.contains("=") } }

    private func validate() throws(UsageError) {
        if let readyFD, readyFD < 0 || fcntl(readyFD, F_GETFD) == -1 {
            throw UsageError("--ready-fd \(readyFD) is not an open descriptor (it is the background owner's, given by xpb itself)")
        }
        if !pairs.isEmpty {
            if !plainTypes.isEmpty { throw UsageError("mix of -t TYPE and -t TYPE=FILE: use TYPE=FILE for every representation") }
            if !files.isEmpty { throw UsageError("files cannot be given with -t TYPE=FILE pairs; put each file in a pair") }
            if pairs.contains(where: { $0.type.isEmpty || $0.file.isEmpty }) { throw UsageError("-t needs TYPE=FILE with both parts") }
        }
        if append && (!pairs.isEmpty || files.count > 1) {
            throw UsageError("--append adds text to the pasteboard's text: give standard input or one file")
        }
        if plainTypes.count > 1 { throw UsageError("give one -t TYPE, or TYPE=FILE pairs for several representations") }
        for type in plainTypes + pairs.map(\.type) {
            if type.contains(",") {
                throw UsageError("'\(type)': a type cannot contain a comma (paste -t takes comma-separated lists)")
            }
            let resolved: PasteboardType
            do { resolved = try TypeRegistry.standard.resolve(type) } catch { throw UsageError(String(describing: error)) }
            warnIfUnknownType(type)
            for alias in TypeRegistry.standard.targets(for: resolved) where SelectionNames.isReservedTarget(alias.name) {
                throw UsageError("'\(type)' is a name the X selection protocol reserves (\(alias.name)); choose another type")
            }
        }
        if queue {
            if selection.name != .general { throw UsageError("--queue queues for the clipboard: it takes no --primary, --secondary or --pasteboard") }
            if foreground || loops != nil || append || filter || expire != nil || sensitive || cut || readyFD != nil {
                throw UsageError("--queue hands the items to xpbd: it takes no --foreground, --paste-once, --loops, --append, --filter, --expire, --sensitive or --cut")
            }
        }
        if cut {
            if files.isEmpty || files.contains("-") { throw UsageError("--cut offers files to move: name them (standard input cannot be cut)") }
            if !types.isEmpty || append || trimNewline || sensitive {
                throw UsageError("--cut offers files, not data: it takes no -t, --append, --trim-newline or --sensitive")
            }
        }
        if (files.filter { $0 == "-" }.count + pairs.filter { $0.file == "-" }.count) > 1 {
            throw UsageError("standard input (-) can be used once")
        }
    }

    /// The inputs named on the command line, `-` for standard input.
    var inputs: [String] {
        // A cut names files; their contents are not read.
        if cut { return [] }
        return pairs.isEmpty ? (files.isEmpty ? ["-"] : files) : pairs.map(\.file)
    }

    /// The saved inputs: input name to descriptor.
    var saved: [String: Int32] {
        Dictionary(savedFDs.compactMap { entry in
            guard let equals = entry.lastIndex(of: "="), let fd = Int32(entry[entry.index(after: equals)...]) else { return nil }
            return (String(entry[..<equals]), fd)
        }, uniquingKeysWith: { first, _ in first })
    }

    func run() throws {
        if queue { return try copyToQueue() }
        if let readyFD {
            // Spawned: the descriptors let through by accident go (a forked owner's went at the fork).
            closeInheritedDescriptors(keeping: [readyFD] + Array(saved.values))
        }
        if readyFD == nil, selection.host.keepsContents {
            try copyToKeepingHost()
        } else if foreground || readyFD != nil {
            try runOwner()
        } else {
            try detach()
        }
    }

    /// Owns the selection and serves it (in the foreground, or as the background owner).
    func runOwner() throws {
        // Before the first thread but this one starts (``HandOffOnSignal``).
        try serve(signals: HandOffOnSignal.install())
    }

    /// This command as the background owner forked from it runs it: the ready pipe (none when
    /// the owner is this process until it forks) and the saved inputs at the descriptors the
    /// fork gives them, and who ran the copy as found here.
    func forkedOwner(savedFDs: [String], copiedBy: CopyCredit?, readyFD: Int32? = 3) -> CopyCommand {
        var owner = self
        owner.readyFD = readyFD
        owner.savedFDs = savedFDs
        owner.copiedBy = copiedBy
        return owner
    }

    /// The background owner outlives whoever started it: it must not hold any descriptor it
    /// inherited by accident (a pipe of the caller's caller would keep `$(…)` waiting forever).
    private func closeInheritedDescriptors(keeping kept: [Int32]) {
        for fd in Self.openDescriptors().map(\.fd) where fd > 2 && !kept.contains(fd) {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var status = stat()
            // Pipes and sockets only: leave the runtime's own files (if any) alone.
            if fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFIFO || (status.st_mode & S_IFMT) == S_IFSOCK {
                close(fd)
            }
        }
    }

    // MARK: Building the items

    /// Where the bytes of `file` can be read: the copy the parent saved, else its path; nil for
    /// standard input read here (`--foreground`).
    private func path(of file: String) -> String? {
        if let fd = saved[file] { return "/proc/self/fd/\(fd)" }
        return file == "-" ? nil : file
    }

    /// One representation of `file`: a regular file over 1 MiB is served in pieces straight from
    /// disk (no copy of it in memory) unless its text must be trimmed; anything else is read whole,
    /// now, and answered from memory, as any clipboard owner does.
    private func representation(of file: String, as given: PasteboardType?) throws -> (PasteboardType, Representation) {
        let data: Data
        if let path = path(of: file), isRegularFile(path) {
            var contents = try FileContents(path: path)
            if contents.size > Self.inMemoryLimit {
                // A saved input (standard input, a pipe) is already a private copy.
                if saved[file] == nil { contents = Inputs.snapshot(contents, path: path) }
                let head = try contents.read(offset: 0, length: ContentSniffer.window)
                let type = given ?? inferType(file: file, head: head, size: contents.size)
                let isLatin1 = Self.isLatin1(head, type, isWhole: head.count == contents.size)
                guard (trimNewline && TypeRegistry.standard.conforms(type, to: .text)) || isLatin1 else { return (type, .file(contents)) }
                let whole = try contents.read(offset: 0, length: contents.size)
                return (type, .data(trimmed(isLatin1 ? TargetCodec.latin1.decode(whole) : whole, type)))
            }
            // Read once: the type is inferred from the same bytes.
            data = try contents.read(offset: 0, length: contents.size)
        } else if let path = path(of: file) {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw Failure("cannot read \(file): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            data = try Inputs.read(fd, named: file, limit: maxSize)
        } else {
            if StandardDescriptors.wasClosed(STDIN_FILENO) { throw Failure("standard input is closed: nothing to copy") }
            data = try Inputs.read(STDIN_FILENO, named: "standard input", limit: maxSize)
        }
        let type = given ?? inferType(file: file, head: data, size: data.count)
        return (type, .data(trimmed(Self.isLatin1(data, type, isWhole: true) ? TargetCodec.latin1.decode(data) : data, type)))
    }

    func isRegularFile(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    private func inferType(file: String, head: Data, size: Int) -> PasteboardType {
        let registry = TypeRegistry.standard
        if file != "-", let type = registry.type(forFileExtension: Self.fileExtension(of: file)) { return type }
        if let type = ContentSniffer.sniff(head, totalSize: size) { return type }
        return ContentSniffer.isLatin1Text(head) ? .utf8PlainText : ((try? PasteboardType("application/octet-stream")) ?? .data)
    }

    /// What follows the last dot of a path's last component, as URL's pathExtension says it
    /// ("" for none, and for a name that only starts with a dot). Without URL: its path parsing
    /// makes a first run-time conformance look-up (a scan of the binary's records, about 100 µs)
    /// in every copy of a file.
    static func fileExtension(of path: String) -> String {
        guard let name = path.split(separator: "/").last, let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
        return String(name[name.index(after: dot)...])
    }

    /// Whether text bytes are Latin-1, not UTF-8 (`printf 'caf\xe9'`, an old file): they are
    /// converted to UTF-8, the model's text, and served as text (as Latin-1 again under STRING).
    private static func isLatin1(_ head: Data, _ type: PasteboardType, isWhole: Bool) -> Bool {
        type == .utf8PlainText && ContentSniffer.validUTF8Prefix(head, isWhole: isWhole) == nil && ContentSniffer.isLatin1Text(head)
    }

    private func trimmed(_ data: Data, _ type: PasteboardType) -> Data {
        guard trimNewline, TypeRegistry.standard.conforms(type, to: .text) else { return data }
        if data.last == UInt8(ascii: "\n") {
            let end = data.count >= 2 && data[data.endIndex - 2] == UInt8(ascii: "\r") ? 2 : 1
            return data.prefix(data.count - end)
        }
        return data
    }

    func makeItems() throws -> [PasteboardItem] {
        if cut { return try cutItems() }
        let registry = TypeRegistry.standard
        var items: [PasteboardItem] = []
        if !pairs.isEmpty {
            var item = PasteboardItem()
            for (typeName, file) in pairs {
                let (type, representation) = try self.representation(of: file, as: registry.resolve(typeName))
                item.set(representation, for: type)
            }
            items = [item]
        } else {
            for file in files.isEmpty ? ["-"] : files {
                let (type, representation) = try self.representation(of: file, as: plainTypes.first.map(registry.resolve))
                var item = PasteboardItem()
                item.set(representation, for: type)
                items.append(item)
            }
            // Several files: each item also carries its file's URL, so that the first item's
            // targets include text/uri-list and x-special/gnome-copied-files listing every file
            // (served from all items at once), and a file manager pastes them all, as it pastes
            // files another file manager copied. Text readers still get the first file's text.
            // Queued files are not: each is its own paste, of its contents (a file's URL beside
            // text makes a browser paste a File, not the text).
            let named = files.filter { $0 != "-" && saved[$0] == nil }
            if !queue, named.count >= 2, named.count == files.count {
                for (index, file) in files.enumerated() {
                    items[index].setData(Data(utf8Of: URL(fileURLWithPath: file).standardizedFileURL.absoluteString), for: .fileURL)
                }
            }
        }
        if sensitive {
            for index in items.indices { items[index].setData(Data(utf8Of: "secret"), for: .passwordManagerHint) }
        }
        return items
    }
}

extension CopyCommand {
    /// `--cut`: one item per file, its absolute URL, the first marked as a cut (KDE's mark; the
    /// owner's GNOME list then says `cut`).
    func cutItems() throws -> [PasteboardItem] {
        var items: [PasteboardItem] = []
        for file in files {
            var info = stat()
            guard lstat(file, &info) == 0 else {
                throw Failure("\(file): \(String(cString: strerror(errno))): there is nothing to cut")
            }
            let url = URL(fileURLWithPath: file).standardizedFileURL
            var item = PasteboardItem()
            item.setData(Data(utf8Of: url.absoluteString), for: .fileURL)
            items.append(item)
        }
        items[0].setData(Data(utf8Of: "1"), for: .cutSelection)
        return items
    }
}
