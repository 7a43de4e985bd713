import Foundation
import PasteboardKit
import PasteboardX11

#if canImport(Glibc)
import Glibc
#endif

struct CopyCommand: Command {
    static let spec = CommandSpec(
        name: "copy",
        abstract: "Put data on a pasteboard: standard input, files, or several types of one item.",
        discussion: """
            Without files, standard input is copied. Each file makes one item. `-t TYPE=FILE` pairs \
            make one item with several representations (`-t html=page.html -t text=page.txt`); \
            FILE may be `-` for standard input. Without a type, it is inferred from the file name \
            or the content (UTF-8 text, PNG, JPEG, GIF, PDF, HTML …).

            By default xpb returns at once and a background owner (a new session, standard \
            streams on /dev/null) serves the data until another client takes the selection, so \
            `$(xpb copy <<< hi)` and pipes never hang. Files over 1 MiB are served from disk in \
            pieces, never held in memory whole.
            """,
        options: SelectionOptions.specs + [
            .value("t", "type", "type[=file]", "The type of the data (UTI, MIME type, X target or short name); repeat TYPE=FILE for several representations of one item."),
            .flag(nil, "foreground", "Stay attached and serve until another client takes the selection."),
            .flag(nil, "paste-once", "Give the selection up after the first paste."),
            .value(nil, "expire", "seconds", "Give the selection up after this many seconds."),
            .flag(nil, "sensitive", "Mark the data secret (x-kde-passwordManagerHint: never kept in history, synced or handed to a clipboard manager) and give it up after 45 s unless --expire says otherwise."),
            .flag(nil, "local-only", "Never sync the data to another display or machine."),
            .flag("x", "trim-newline", "Remove one trailing newline from text."),
            .value(nil, "ready-fd", "fd", "The background owner's ready pipe.", hidden: true),
            .value(nil, "saved-fd", "input=fd", "An input the parent saved for the background owner.", hidden: true),
        ],
        positional: PositionalSpec(valueName: "file", help: "Files to copy, one item each; none or `-` for standard input."))

    let selection: SelectionOptions
    let files: [String]
    let types: [String]
    let foreground: Bool
    let pasteOnce: Bool
    let expire: Double?
    let sensitive: Bool
    let localOnly: Bool
    let trimNewline: Bool
    let readyFD: Int32?
    /// Inputs the parent saved for the background owner, as `INPUT=FD`: standard input and
    /// anything that is not a regular file (a pipe like `<(cmd)` cannot be reopened by a child).
    let savedFDs: [String]

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        files = arguments.positionals
        types = arguments.all("type")
        foreground = arguments.flag("foreground")
        pasteOnce = arguments.flag("paste-once")
        expire = try arguments.seconds("expire")
        sensitive = arguments.flag("sensitive")
        localOnly = arguments.flag("local-only")
        trimNewline = arguments.flag("trim-newline")
        readyFD = try arguments.integer("ready-fd").map { Int32(clamping: $0) }
        savedFDs = arguments.all("saved-fd")
        try validate()
    }

    static let sensitiveExpiry: Double = 45

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
        if !pairs.isEmpty {
            if !plainTypes.isEmpty { throw UsageError("mix of -t TYPE and -t TYPE=FILE: use TYPE=FILE for every representation") }
            if !files.isEmpty { throw UsageError("files cannot be given with -t TYPE=FILE pairs; put each file in a pair") }
            if pairs.contains(where: { $0.type.isEmpty || $0.file.isEmpty }) { throw UsageError("-t needs TYPE=FILE with both parts") }
        }
        if plainTypes.count > 1 { throw UsageError("give one -t TYPE, or TYPE=FILE pairs for several representations") }
        for type in plainTypes + pairs.map(\.type) {
            do { _ = try TypeRegistry.standard.resolve(type) } catch { throw UsageError(String(describing: error)) }
        }
        if (files.filter { $0 == "-" }.count + pairs.filter { $0.file == "-" }.count) > 1 {
            throw UsageError("standard input (-) can be used once")
        }
    }

    /// The inputs named on the command line, `-` for standard input.
    private var inputs: [String] {
        pairs.isEmpty ? (files.isEmpty ? ["-"] : files) : pairs.map(\.file)
    }

    /// The saved inputs: input name to descriptor.
    private var saved: [String: Int32] {
        Dictionary(savedFDs.compactMap { entry in
            guard let equals = entry.lastIndex(of: "="), let fd = Int32(entry[entry.index(after: equals)...]) else { return nil }
            return (String(entry[..<equals]), fd)
        }, uniquingKeysWith: { first, _ in first })
    }

    func run() throws {
        if let readyFD {
            closeInheritedDescriptors(keeping: [readyFD] + Array(saved.values))
        }
        if foreground || readyFD != nil {
            try blocking { try await self.serve() }
        } else {
            try detach()
        }
    }

    /// The background owner outlives whoever started it: it must not hold any descriptor it
    /// inherited by accident (a pipe of the caller's caller would keep `$(…)` waiting forever).
    private func closeInheritedDescriptors(keeping kept: [Int32]) {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
        for fd in entries.compactMap({ Int32($0) }) where fd > 2 && !kept.contains(fd) {
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
            let contents = try FileContents(path: path)
            if contents.size > Self.inMemoryLimit {
                let type = try given ?? inferType(file: file, head: contents.read(offset: 0, length: ContentSniffer.window), size: contents.size)
                guard trimNewline && TypeRegistry.standard.conforms(type, to: .text) else { return (type, .file(contents)) }
                return (type, .data(trimmed(try contents.read(offset: 0, length: contents.size), type)))
            }
            // Read once: the type is inferred from the same bytes.
            data = try contents.read(offset: 0, length: contents.size)
        } else if let path = path(of: file) {
            guard let handle = FileHandle(forReadingAtPath: path) else { throw Failure("cannot read \(file): \(String(cString: strerror(errno)))") }
            data = handle.readDataToEndOfFile()
        } else {
            data = FileHandle.standardInput.readDataToEndOfFile()
        }
        let type = given ?? inferType(file: file, head: data, size: data.count)
        return (type, .data(trimmed(data, type)))
    }

    private func isRegularFile(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    private func inferType(file: String, head: Data, size: Int) -> PasteboardType {
        let registry = TypeRegistry.standard
        if file != "-", let type = registry.type(forFileExtension: URL(fileURLWithPath: file).pathExtension) { return type }
        return ContentSniffer.sniff(head, totalSize: size) ?? (try! PasteboardType("application/octet-stream"))
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
        }
        if sensitive {
            for index in items.indices { items[index].setData(Data("secret".utf8), for: .passwordManagerHint) }
        }
        return items
    }

    // MARK: Serving

    /// Owns the selection and serves it until another client takes it (or it expires, or, with
    /// --paste-once, after the first paste), then finishes running transfers.
    private func serve() async throws {
        let ready = readyFD.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        do {
            let items = try makeItems()
            let backend = try selection.connect()
            let board = selection.pasteboard(on: backend)
            let changes = board.changes
            let lifetime = expire ?? (sensitive ? Self.sensitiveExpiry : nil)
            let options = PasteboardOptions(localOnly: localOnly || sensitive, expirationDate: lifetime.map { Date().addingTimeInterval($0) })
            if pasteOnce {
                let name = selection.name
                backend.onServed { _, _ in try? backend.clear(name) }
            }
            try await board.setItems(items, options: options)
            ready?.write(Data("ready\n".utf8))
            try? ready?.close()
            for await _ in changes where !backend.isOwner(of: selection.name) { break }
            guard backend.isConnected else { throw X11BackendError.connectionLost }
            // Transfers under way go on after ownership ends; they end by themselves or time out.
            while (try? backend.activeTransferCount()) ?? 0 > 0 {
                try await Task.sleep(for: .milliseconds(20))
            }
            backend.close(handOff: false)
        } catch {
            let failure = Failure(error)
            if let ready {
                ready.write(Data("error \(failure.status.rawValue) \(failure.message)\n".utf8))
                try? ready.close()
                throw Exit(status: failure.status.rawValue)
            }
            throw failure
        }
    }

    /// Starts a background owner and returns once it owns the selection (or reports why not).
    private func detach() throws {
        // Standard input and pipes cannot be reopened by the child: save them to unlinked files.
        var extraFDs: [Int32] = []
        var savedArguments: [String] = []
        for input in Set(inputs) where input == "-" || !isRegularFile(input) {
            let source = input == "-" ? 0 : open(input, O_RDONLY | O_CLOEXEC)
            guard source >= 0 else { throw Failure("cannot read \(input): \(String(cString: strerror(errno)))") }
            defer { if source != 0 { Glibc.close(source) } }
            extraFDs.append(try save(source, named: input == "-" ? "standard input" : input))
            // Attached (`--saved-fd=-=4`): a value starting with `-` would read as an option.
            savedArguments.append("--saved-fd=\(input)=\(3 + extraFDs.count)")
        }
        var readyPipe: [Int32] = [0, 0]
        guard pipe(&readyPipe) == 0 else { throw Failure("cannot create a pipe: \(String(cString: strerror(errno)))") }
        // Only the copies made for the child (3, 4, …) may survive exec: the child must not hold the
        // pipe's write end twice, or the parent would never see it close.
        for fd in readyPipe + extraFDs { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var arguments = Array(CommandLine.arguments.dropFirst())
        arguments += ["--ready-fd", "3"] + savedArguments
        let pid = try Detach.spawn(arguments: arguments, fds: [readyPipe[1]] + extraFDs)
        Glibc.close(readyPipe[1])
        extraFDs.forEach { _ = Glibc.close($0) }
        let reply = readAll(readyPipe[0], timeout: 30)
        Glibc.close(readyPipe[0])
        let line = reply.split(separator: "\n").first.map(String.init) ?? ""
        if line == "ready" { return }
        if line.hasPrefix("error ") {
            let parts = line.split(separator: " ", maxSplits: 2)
            let status = parts.count > 1 ? Int32(parts[1]) ?? 1 : 1
            FileHandle.standardError.write(Data("xpb: \(parts.count > 2 ? String(parts[2]) : "the background owner failed")\n".utf8))
            throw Exit(status: status)
        }
        kill(pid, SIGKILL)
        throw Failure("the background owner (pid \(pid)) did not start; try --foreground to see why")
    }

    /// Copies everything `source` yields into an unlinked temporary file and returns its
    /// descriptor, which the background owner reads from.
    private func save(_ source: Int32, named name: String) throws -> Int32 {
        var template = Array((NSTemporaryDirectory() + "/xpb-copy-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw Failure("cannot create a temporary file: \(String(cString: strerror(errno)))") }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = read(source, &buffer, buffer.count)
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure("cannot read \(name): \(String(cString: strerror(errno)))")
            }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + offset, count - offset) }
                guard written > 0 else { throw Failure("cannot save \(name): \(String(cString: strerror(errno)))") }
                offset += written
            }
        }
        return fd
    }

    /// What a descriptor yields up to the first newline or end of file, or until `timeout` seconds pass.
    private func readAll(_ fd: Int32, timeout: Double) -> String {
        var collected = Data()
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let remaining = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
            guard poll(&descriptor, 1, remaining) > 0 else { continue }
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            collected.append(contentsOf: buffer[0..<count])
            if collected.contains(UInt8(ascii: "\n")) { break }
        }
        return String(decoding: collected, as: UTF8.self)
    }
}

/// Starts a copy of this program in the background.
enum Detach {
    /// Runs `/proc/self/exe` with `arguments` in a new session, standard streams on /dev/null,
    /// and `fds` as descriptors 3, 4, …
    static func spawn(arguments: [String], fds: [Int32]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Staged above the targets first: a source that is itself 3 or 4 (a saved file opened
        // early) would otherwise be overwritten by an earlier dup2 before it is copied.
        let staged = fds.map { fcntl($0, F_DUPFD_CLOEXEC, Int32(3 + fds.count)) }
        defer { staged.forEach { _ = close($0) } }
        guard !staged.contains(where: { $0 < 0 }) else {
            throw Failure("cannot pass descriptors to the background owner: \(String(cString: strerror(errno)))")
        }
        for (index, fd) in staged.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, fd, Int32(3 + index))
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc): the owner leaves the terminal's session and process group.
        posix_spawnattr_setflags(&attributes, Int16(0x80))
        let executable = "/proc/self/exe"
        let argv = ([CommandLine.arguments.first ?? "xpb"] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard status == 0 else {
            throw Failure("cannot start the background owner: \(String(cString: strerror(status)))")
        }
        return pid
    }
}
