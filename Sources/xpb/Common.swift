import CommandLineTable
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import PasteboardWayland
import PasteboardX11

/// The exit statuses xpb documents.
enum Status: Int32, CaseIterable {
    case success = 0
    case failure = 1
    case empty = 2
    case typeUnavailable = 3
    case timedOut = 4
    case noDisplay = 5
    case usage = 64

    /// What the status means, as help and the man page say it.
    var meaning: String {
        switch self {
        case .success: "success"
        case .failure: "other failure"
        case .empty: "nothing on that pasteboard"
        case .typeUnavailable: "type not available"
        case .timedOut: "timed out"
        case .noDisplay: "no X display"
        case .usage: "usage error"
        }
    }
}

/// A failure with the message to print and the status to exit with.
struct Failure: Error {
    let message: String
    let status: Status

    init(_ message: String, _ status: Status = .failure) {
        self.message = message
        self.status = status
    }

    /// Classifies any error thrown by the library.
    init(_ error: any Error) {
        switch error {
        case let failure as Failure:
            self = failure
        case let error as X11BackendError:
            switch error {
            case .noDisplay, .cannotOpenDisplay: self.init(error.description, .noDisplay)
            default: self.init(error.description)
            }
        case let error as PasteboardError:
            if case .timedOut = error { self.init(error.description, .timedOut) } else { self.init(error.description) }
        case let error as ControlClientError:
            self.init(error.message, error.kind == .noDisplay ? .noDisplay : .failure)
        default:
            self.init(String(describing: error))
        }
    }
}

/// The process ends with this status; its message, if any, was already printed.
struct Exit: Error {
    let status: Int32
}

/// One xpb command: its grammar, how it reads a parsed command line, and what it does.
protocol Command: Sendable {
    /// The word that picks the command (`paste`): found without building any spec, whose option
    /// tables cost a one-shot paste more than its X work (callgrind: 75,000 instructions of 1.2 M).
    static var name: String { get }
    static var spec: CommandSpec { get }
    /// Reads and checks the command line; usage errors exit 64.
    init(_ arguments: ParsedArguments) throws(UsageError)
    func run() throws
}

/// Options several commands take.
enum CommonOptions {
    /// The defaults, which the help texts quote.
    static let defaultTimeout: Double = 5
    static let defaultMaxTime: Double = 300
    static let defaultMaxSize = 1 << 30

    static let timeout = OptionSpec.value(nil, "timeout", "seconds", "Give up after this many seconds without progress (default \(Int(defaultTimeout))).")
    static let json = OptionSpec.flag(nil, "json", "Print one JSON object.")
    static let maxTime = OptionSpec.value(nil, "max-time", "seconds", "Give up after this many seconds in all, however the transfer progresses (default \(Int(defaultMaxTime))).")

    /// How the default of `--max-size` reads in help: `1G`.
    static var defaultMaxSizeText: String { SizeText.suffixed(defaultMaxSize) }

    /// The `--timeout` given, or the default.
    static func timeout(in arguments: ParsedArguments) throws(UsageError) -> Double {
        try arguments.seconds(timeout) ?? defaultTimeout
    }

    /// The `--max-time` given, or the default.
    static func maxTime(in arguments: ParsedArguments) throws(UsageError) -> Double {
        try arguments.seconds(maxTime) ?? defaultMaxTime
    }
}

/// A command whose options are ``ReportOptions`` alone (info, detect): parsed, and its
/// pasteboard chosen, by them.
protocol ReportCommand: Command {
    var options: ReportOptions { get }
    init(options: ReportOptions)
}

extension ReportCommand {
    init(_ arguments: ParsedArguments) throws(UsageError) {
        self.init(options: try ReportOptions(arguments))
    }

    var selection: SelectionOptions { options.selection }
}

/// What the reporting commands (`info`, `detect`) take: the pasteboard, `--json`, `--timeout`.
struct ReportOptions: Sendable {
    static let specs = SelectionOptions.specs + [CommonOptions.json, CommonOptions.timeout]

    let selection: SelectionOptions
    let asJSON: Bool
    let timeout: Double

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        asJSON = arguments.flag(CommonOptions.json)
        timeout = try CommonOptions.timeout(in: arguments)
    }
}

/// Which pasteboard a command works on, and how to reach the display.
struct SelectionOptions: Sendable {
    /// The options, each declared once: the spec lists them and the look-ups name them, so a
    /// look-up can only name a declared option.
    enum Option {
        static let primary = OptionSpec.flag("p", "primary", "Use the primary selection (PRIMARY) instead of the clipboard.")
        static let find = OptionSpec.flag(nil, "find", "Use the find pasteboard: the same selection as --primary.")
        static let secondary = OptionSpec.flag(nil, "secondary", "Use the secondary selection (SECONDARY).")
        static let pasteboard = OptionSpec.value(nil, "pasteboard", "name", "Use a named pasteboard (the selection XPB_PASTEBOARD:<name>).")
        static let display = OptionSpec.value(nil, "display", "display", "The X display to use (default: $DISPLAY); it chooses the X backend.", completion: .displays)
        static let backend = Session.backendOption
    }

    /// What the shells complete for a type: the registry's short names and MIME types, made
    /// when a completion script is written.
    static let typeCompletion = ValueCompletion.computedWords(WordList("types") {
        var seen: Set<String> = []
        let names = TypeRegistry.standard.descriptors.flatMap { $0.shortNames + $0.mimeTypes }
        // A `;` (MIME parameters) would end the command line where a shell inserts it.
        return names.filter { !$0.contains(";") && !$0.contains(" ") && seen.insert($0).inserted }
    })

    let primary: Bool
    let find: Bool
    let secondary: Bool
    let pasteboard: String?
    let display: String?
    /// Where the pasteboards live (`--backend`, `--display`, the environment).
    let session: Session

    static let specs: [OptionSpec] = [
        Option.primary,
        Option.find,
        Option.secondary,
        // No short form: -n trims the newline in wl-copy, and users carry that habit here.
        Option.pasteboard,
        Option.display,
        Option.backend,
    ]

    init(_ arguments: ParsedArguments) throws(UsageError) {
        primary = arguments.flag(Option.primary)
        find = arguments.flag(Option.find)
        secondary = arguments.flag(Option.secondary)
        pasteboard = arguments.value(Option.pasteboard)
        display = arguments.value(Option.display)
        session = try Session(backend: arguments.value(Option.backend), display: display)
        if [primary || find, secondary, pasteboard != nil].filter({ $0 }).count > 1 {
            throw UsageError("choose one of --primary/--find, --secondary and --pasteboard")
        }
        if let pasteboard {
            do { _ = try Pasteboard.Name.validated(pasteboard) } catch { throw UsageError(String(describing: error)) }
        }
    }

    /// The model's name for the chosen pasteboard.
    var name: Pasteboard.Name {
        if let pasteboard { return Pasteboard.Name(rawValue: pasteboard) }
        if secondary { return .secondary }
        return primary || find ? .find : .general
    }

    /// How messages call the chosen pasteboard.
    var label: String {
        switch name {
        case .general: return "the clipboard"
        case .find: return "the primary selection"
        case .secondary: return "the secondary selection"
        default: return "the pasteboard \"\(name.rawValue)\""
        }
    }

    /// The failure for a pasteboard with nothing on it.
    var emptyFailure: Failure {
        if host == .wayland { return Failure("\(label) is empty", .empty) }
        return Failure("\(label) is empty (no owner for \(selection))", .empty)
    }

    /// The X selection behind it.
    var selection: String { SelectionNames.selection(for: name) }

    /// Where the pasteboards live: the host reached, else the one the session tries first.
    var host: SessionHost { session.host }

    /// Connects to the host of the pasteboards (``host``). `copiedBy` names who makes the copies
    /// written; `observesChanges` is for the change streams (watch, paste --follow).
    ///
    /// - Throws: a ``Failure`` with ``Status/noDisplay`` when there is neither a display nor a
    ///   headless xpbd.
    /// `readsOnce`: the command reads and exits, following no change (no XFixes on a display).
    func connect(readTimeout: Double? = nil, maxTime: Double? = nil, maxSize: Int? = nil, copiedBy: CopyCredit? = nil,
                 observesChanges: Bool = false, readsOnce: Bool = false) throws -> any StreamingPasteboardBackend {
        try session.connect { host -> any StreamingPasteboardBackend in
            switch host {
            case .daemon:
                return try DaemonPasteboardBackend(credit: copiedBy, timeout: readTimeout ?? 10, observesChanges: observesChanges)
            case .wayland:
                return try Session.compositor(readTimeout: readTimeout, maxSize: maxSize, readsOnce: readsOnce && !observesChanges)
            case let .x11(display):
                return try connectToDisplay(display, readTimeout: readTimeout, maxTime: maxTime, maxSize: maxSize, copiedBy: copiedBy,
                                            readsOnce: readsOnce && !observesChanges)
            }
        }
    }

    /// Connects to the host that a process must own a selection on (a display or a compositor):
    /// `xpb copy`'s background owner.
    func connectOwner(copiedBy: CopyCredit?) throws -> any OwningPasteboardBackend {
        try session.connect { host -> any OwningPasteboardBackend in
            if host == .wayland { return try Session.compositor() }
            guard case let .x11(display) = host else { throw Failure("no display to own a selection on", .noDisplay) }
            // No XFixes: the owner follows its own selection only, which SelectionClear tells of.
            return try connectToDisplay(display, copiedBy: copiedBy, followsOwnerChanges: false)
        }
    }

    /// Connects to a display. `followsOwnerChanges`: other clients' owner changes are followed
    /// (XFixes, two round trips), for change streams and cached offers. `ownsBeforeThread`: the X loop
    /// runs on this thread until `startThread()` (`xpb copy` owns, then forks).
    func connectToDisplay(_ display: String?, readTimeout: Double? = nil, maxTime: Double? = nil, maxSize: Int? = nil,
                          copiedBy: CopyCredit? = nil, readsOnce: Bool = false, followsOwnerChanges: Bool = true,
                          ownsBeforeThread: Bool = false) throws -> X11PasteboardBackend {
        var configuration = X11Configuration()
        configuration.copiedBy = copiedBy
        configuration.watchesOwnerChanges = !readsOnce && followsOwnerChanges
        configuration.exitsAfterClose = readsOnce
        // Owning first: the loop runs inline until X11PasteboardBackend.startThread().
        configuration.runsOnCallersThread = readsOnce || ownsBeforeThread
        if let readTimeout {
            configuration.readTimeout = readTimeout
            // Each answer of a read that has no data phase (TARGETS, the manifest) is bounded by
            // the read timeout; the whole command by the larger of it and --max-time.
            configuration.transferDeadline = max(readTimeout, maxTime ?? configuration.transferDeadline)
        }
        if let maxSize { configuration.maxReadSize = maxSize }
        // A transfer whose bytes disagree with its owner's announcement is read whole, and said.
        configuration.warning = { XPB.printError("xpb: warning: \($0)\n") }
        // XPB_FAST_PATH=0: everything through the X server (for measuring it, or to rule the fast
        // path out when something goes wrong).
        if getenv("XPB_FAST_PATH").map({ String(cString: $0) }) == "0" { configuration.fastPath = false }
        return try X11PasteboardBackend(display: display, changeCenter: ChangeCenter(), configuration: configuration)
    }

    /// The chosen pasteboard on a backend.
    func pasteboard(on backend: any PasteboardBackend) -> Pasteboard {
        switch name {
        case .general: return .general(of: backend)
        case .find: return .find(of: backend)
        default: return Pasteboard(name: name, create: true, backend: backend) ?? .general(of: backend)
        }
    }
}

/// Writes a line to standard output, unbuffered (so pipes see each line at once). What other
/// clients named (targets, window names) is in it: control characters are escaped
/// (``printable(_:)``) so that none reaches a terminal.
func writeLine(_ line: String) {
    writeText(printable(line) + "\n", to: STDOUT_FILENO)
}

/// Writes one line of JSON, safe for a terminal: the encoder escapes C0 controls already; DEL
/// and the C1 controls, which JSON allows raw, become `\u007F`-style escapes (the same string to
/// a JSON reader). ``writeLine`` would make them `\x7F`, which is not JSON.
func writeJSONLine(_ json: String) {
    writeText(jsonSafe(json) + "\n", to: STDOUT_FILENO)
}

/// JSON with DEL and the C1 controls as `\u007F`-style escapes (``writeJSONLine(_:)``).
func jsonSafe(_ json: String) -> String {
    var result = ""
    result.unicodeScalars.reserveCapacity(json.unicodeScalars.count)
    for scalar in json.unicodeScalars {
        if scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
            result += "\\u00" + String(scalar.value, radix: 16, uppercase: true)
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}

/// JSON text of an encodable value, keys sorted.
func json<T: Encodable>(_ value: T) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: (try? encoder.encode(value)) ?? Data(utf8Of: "null"), as: UTF8.self)
}


/// Writes a representation to a descriptor in full: a file through the kernel (`sendfile`, no
/// copy through this process), anything else as bytes.
func write(_ contents: Representation, to fd: Int32) throws {
    if case let .file(file) = contents {
        try file.withDescriptor { source in
            var offset = off_t(0)
            while Int(offset) < file.size {
                let sent: Int
                do throws(Errno) {
                    sent = try SystemCall.retrying { sendfile(fd, source, &offset, min(file.size - Int(offset), 1 << 30)) }
                } catch .wouldBlock {
                    waitWritable(fd)
                    continue
                } catch .invalidArgument, .notImplemented {
                    // A destination sendfile cannot write to: copy in pieces instead.
                    while Int(offset) < file.size {
                        let length = min(file.size - Int(offset), 1 << 20)
                        try writeAll(file.read(offset: Int(offset), length: length), to: fd)
                        offset += off_t(length)
                    }
                    return
                } catch {
                    throw Failure("cannot write the data: \(error)")
                }
                if sent == 0 { throw Failure("\(file.path) ended early") }
            }
        }
        return
    }
    try writeAll(contents.resolve(), to: fd)
}

/// Writes a message or line of text to a descriptor, best effort (a closed stream loses it).
/// Straight from the string's UTF-8 storage: `Data(text.utf8)` costs a first run-time
/// conformance look-up (about 200,000 instructions, a tenth of a short command's run).
func writeText(_ text: String, to fd: Int32) {
    var text = text
    text.withUTF8 { bytes in _ = try? writeAll(UnsafeRawBufferPointer(bytes), to: fd) }
}

/// Writes all of `data` to a descriptor.
func writeAll(_ data: Data, to fd: Int32) throws {
    try data.withUnsafeBytes { try writeAll($0, to: fd) }
}

/// Writes all of `buffer` to a descriptor.
func writeAll(_ buffer: UnsafeRawBufferPointer, to fd: Int32) throws {
    var offset = 0
    while offset < buffer.count {
        let written: Int
        do throws(Errno) {
            written = try SystemCall.retrying { Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset) }
        } catch .wouldBlock {
            waitWritable(fd)
            continue
        } catch {
            throw Failure("cannot write the data: \(error)")
        }
        guard written > 0 else { throw Failure("cannot write the data: nothing was written") }
        offset += written
    }
}

/// Waits until a non-blocking descriptor (a pipe its reader made so) takes more.
private func waitWritable(_ fd: Int32) {
    var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    _ = poll(&descriptor, 1, -1)
}

/// Where `paste -o` writes.
enum OutputFile {
    /// Opens `path` for writing as a shell's `>` does: created (mode 0666 less the umask) when
    /// missing, else truncated in place, so that symlinks lead to their target and the file's
    /// mode, owner and hard links stay.
    static func open(_ path: String) throws -> Int32 {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw Failure("cannot write \(path): \(String(cString: strerror(errno)))") }
        return fd
    }
}

/// Standard input, output and error as the process found them. A closed one is opened on
/// /dev/null before anything else opens a descriptor: otherwise the X connection or a
/// temporary file would take its number, and data meant for standard output would go to the X
/// server (which runs it as requests).
enum StandardDescriptors {
    nonisolated(unsafe) private static var closed: Set<Int32> = []

    /// Called first thing in main, on the only thread there is.
    static func ensureOpen() {
        for fd in Int32(0)...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            let opened = Glibc.open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY)
            if opened >= 0, opened != fd {
                dup2(opened, fd)
                close(opened)
            }
            closed.insert(fd)
        }
    }

    /// Whether `fd` (0, 1 or 2) was closed when the process started.
    static func wasClosed(_ fd: Int32) -> Bool { closed.contains(fd) }
}

/// Warns (on standard error) about a type name that is neither registered nor shaped like a MIME
/// type or UTI, naming the nearest known names: `-t pgn` is used as given, but most likely meant png.
func warnIfUnknownType(_ name: String, registry: TypeRegistry = .standard) {
    guard !registry.isKnownName(name) else { return }
    let nearest = registry.nearestNames(to: name).prefix(3)
    let hint = nearest.isEmpty ? "a MIME type such as image/png, or a UTI, is always understood" : "did you mean \(nearest.map { "'\($0)'" }.joined(separator: " or "))?"
    XPB.printError("xpb: warning: '\(name)' is not a type name xpb knows; using it as an X target as given (\(hint))\n")
}

/// How xpb names types to people: by the MIME names other tools take (`xpb types`, `xpb watch`).
enum TypeNames {
    /// The names of an item's types, each once: the MIME names it is served under (plain text of
    /// any encoding is text/plain, which reads as UTF-8), or with --uti the identifiers.
    static func listed(_ types: [PasteboardType], uti: Bool = false) -> [String] {
        guard !uti else { return types.map(\.identifier) }
        let registry = TypeRegistry.standard
        var seen = Set<String>()
        return types.compactMap { type in
            let name: String
            if registry.conforms(type, to: .plainText) {
                name = "text/plain"
            } else if let mime = registry.targets(for: type).map(\.name).first(where: { $0.contains("/") }) ?? registry.preferredMIMEType(for: type) {
                // The first MIME name it is served under (file URLs: text/uri-list).
                name = String(mime.prefix { $0 != ";" }).trimmingSpaces()
            } else {
                name = type.identifier
            }
            return seen.insert(name).inserted ? name : nil
        }
    }
}
