import CLinux
import Foundation
import ImageCodecs
import Logging
import PasteboardKit
import PasteboardWire
import PasteboardX11
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `--on-copy`: a shell command run for every new copy the daemon keeps.
public struct CopyActionConfiguration: Sendable, Equatable {
    /// Run through `/bin/sh -c` (nil: no action).
    public var command: String?
    /// Only for copies with one of these types (a name as `xpb paste -t` takes it, or an X target);
    /// empty: every copy.
    public var types: [String] = []
    /// Only for copies by these apps (executable name, ignoring case); empty: every app.
    public var apps: [String] = []
    /// A run still going after this many seconds is killed, with its process group.
    public var timeout = 10.0
    /// The most runs at once; a copy made while that many run gets none (and a log line).
    public static let maxRunning = 4

    public init() {}
}

/// Runs the `--on-copy` command for new copies: with the contents on standard input (the first
/// item as `xpb paste` writes it: text, else an image, else the first target), and
/// `XPB_SELECTION`, `XPB_TYPES`, `XPB_OWNER_APP`, `XPB_OWNER_PID` in its environment. Never for
/// secrets or ignored apps (the daemon keeps none of them, and only kept copies get here). A
/// run that fails is logged and changes nothing.
final class CopyActions: Sendable {
    let configuration: CopyActionConfiguration
    private let logger: Logger
    private let running = Mutex(0)

    init(_ configuration: CopyActionConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Whether `snapshot` passes the type and app filters.
    func applies(to snapshot: Snapshot, registry: TypeRegistry = .standard) -> Bool {
        guard configuration.command != nil else { return false }
        if !configuration.apps.isEmpty {
            guard let app = snapshot.app?.lowercased(), configuration.apps.contains(where: { $0.lowercased() == app }) else { return false }
        }
        if !configuration.types.isEmpty {
            let targets = Set(snapshot.targets.map(\.target))
            let matches = configuration.types.contains { name in
                if targets.contains(name) { return true }
                guard let type = try? registry.resolve(name) else { return false }
                return snapshot.targets.contains { target in
                    registry.type(forTarget: target.target).map { registry.conforms($0.type, to: type) } ?? false
                }
            }
            guard matches else { return false }
        }
        return true
    }

    /// Starts the command for `snapshot` when it applies and fewer than four run.
    func copied(_ snapshot: Snapshot) {
        guard let command = configuration.command, applies(to: snapshot) else { return }
        let started = running.withLock { count -> Bool in
            guard count < CopyActionConfiguration.maxRunning else { return false }
            count += 1
            return true
        }
        guard started else {
            logger.warning("on-copy: \(CopyActionConfiguration.maxRunning) actions still run; none for this copy")
            return
        }
        DispatchQueue.global().async { [self] in
            defer { running.withLock { $0 -= 1 } }
            run(command, for: snapshot)
        }
    }

    private func run(_ command: String, for snapshot: Snapshot) {
        let input = clinux_memfd("xpbd-on-copy")
        guard input >= 0 else {
            logger.error("on-copy: no memory file for the contents: \(String(cString: strerror(errno)))")
            return
        }
        defer { close(input) }
        let contents = Self.contents(of: snapshot)
        _ = contents.withUnsafeBytes { writeAll(input, $0) }
        lseek(input, 0, SEEK_SET)
        let selection = X11PasteboardBackend.selectionName(for: snapshot.selection)
        var environment = ProcessInfo.processInfo.environment
        environment["XPB_SELECTION"] = selection
        environment["XPB_TYPES"] = EntryDescription.describe(snapshot.targets.map { .init(name: $0.target, size: $0.data.count) }) { _ in nil }
            .types.joined(separator: ",")
        environment["XPB_OWNER_APP"] = snapshot.app
        environment["XPB_OWNER_PID"] = snapshot.pid.map(String.init)
        let pid: pid_t
        do {
            pid = try Self.spawn(["/bin/sh", "-c", command], stdin: input, environment: environment)
        } catch {
            logger.error("on-copy: cannot run /bin/sh: \(error)")
            return
        }
        // Killed with its process group (what it started too) past the timeout.
        let finished = Mutex(false)
        let timeout = configuration.timeout
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [logger] in
            guard !finished.withLock({ $0 }) else { return }
            kill(-pid, SIGKILL)
            logger.warning("on-copy: the action for \(selection) ran \(timeout) s and was killed")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        finished.withLock { $0 = true }
        let exited = status & 0x7F == 0
        if exited, (status >> 8) & 0xFF != 0 {
            logger.warning("on-copy: the action for \(selection) exited with status \((status >> 8) & 0xFF)")
        } else if !exited, status & 0x7F != SIGKILL {
            logger.warning("on-copy: the action for \(selection) ended by signal \(status & 0x7F)")
        }
    }

    /// The first item as `xpb paste` writes it: the text, else the best image, else the first
    /// data target.
    static func contents(of snapshot: Snapshot) -> Data {
        if let text = snapshot.text(limit: .max) { return Data(text.utf8) }
        let images = snapshot.targets.filter { ImageFormat(mimeType: $0.target)?.isReadable ?? false }
        if let best = X11PasteboardBackend.keptImageTarget(images.map(\.target)), let image = images.first(where: { $0.target == best }) {
            return image.data
        }
        return snapshot.targets.first { KeepPolicy.isKept($0.target) && !$0.target.hasPrefix("XPB_") }?.data ?? Data()
    }

    /// posix_spawn in a process group of its own, with default signal dispositions and an empty
    /// signal mask (the daemon ignores SIGTERM, SIGINT and SIGHUP for its own handlers; an
    /// action must not inherit that), `stdin` as its standard input, the daemon's standard
    /// error, and nothing else open.
    static func spawn(_ arguments: [String], stdin: Int32, environment: [String: String]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        // Not the X connection, the history or the sockets.
        clinux_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else { throw POSIXFailure("posix_spawn \(arguments[0])", result) }
        return pid
    }
}
