import CLinux
import Dispatch
import FoundationEssentials
import ImageCodecs
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `--on-copy`: a shell command run for every new copy the daemon keeps.
package struct CopyActionConfiguration: Sendable, Equatable {
    /// Run through `/bin/sh -c` (nil: no action).
    package var command: String?
    /// Only for copies with one of these types (a name as `xpb paste -t` takes it, or an X target);
    /// empty: every copy.
    package var types: [String] = []
    /// Only for copies by these apps (executable name, ignoring case); empty: every app.
    package var apps: [String] = []
    /// A run still going after this many seconds is killed, with its process group.
    package var timeout = 10.0
    /// The most runs at once; a copy made while that many run gets none (and a log line).
    package static let maxRunning = 4

    package init() {}
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
        Background.run("xpbd.on-copy") { [self] in
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
        let selection = SelectionNames.selection(for: snapshot.selection)
        var environment = ProcessInfo.processInfo.environment
        environment["XPB_SELECTION"] = selection
        // Names other clients chose (targets, the executable's name): escaped, as for a terminal.
        environment["XPB_TYPES"] = printable(EntryDescription.describe(snapshot.targets.map { .init(name: $0.target, size: $0.data.count) }) { _ in nil }
            .types.joined(separator: ","))
        environment["XPB_OWNER_APP"] = snapshot.app.map { printable($0) }
        environment["XPB_OWNER_PID"] = snapshot.pid.map(String.init)
        let pid: pid_t
        do {
            // In a process group of its own (killed with what it started), default signal
            // dispositions (the daemon ignores SIGTERM, SIGINT, SIGHUP and SIGPIPE for its own
            // handlers), the copy on standard input, the daemon's standard error, nothing else.
            var child = ChildProcess.shell(command)
            child.environment = environment
            child.descriptors = [0: .inherit(input), 2: .inherit(2)]
            child.grouping = .newGroup
            pid = try child.spawn()
        } catch {
            logger.error("on-copy: cannot run /bin/sh: \(error)")
            return
        }
        // The action is its whole process group, what the shell put in the background too: it
        // runs (and counts against the cap) until the last of them ends, and past the timeout the
        // group is killed. The shell is left unreaped until then, so that its pid, the group's id,
        // cannot pass to another process meanwhile.
        let deadline = Date().addingTimeInterval(configuration.timeout)
        var shellEnded = false
        var killed = false
        while true {
            if !shellEnded {
                var info = siginfo_t()
                shellEnded = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info._sifields._sigchld.si_pid == pid
            }
            if shellEnded, !Self.groupRuns(pid) { break }
            if Date() >= deadline {
                kill(-pid, SIGKILL)
                killed = true
                logger.warning("on-copy: the action for \(selection) ran \(configuration.timeout) s and was killed")
                break
            }
            usleep(shellEnded ? 100_000 : 20_000)
        }
        let status = ChildProcess.wait(for: pid)
        let exited = status & 0x7F == 0
        if exited, (status >> 8) & 0xFF != 0 {
            logger.warning("on-copy: the action for \(selection) exited with status \((status >> 8) & 0xFF)")
        } else if !exited, !killed {
            logger.warning("on-copy: the action for \(selection) ended by signal \(status & 0x7F)")
        }
    }

    /// Whether a process of group `group` other than a zombie runs.
    static func groupRuns(_ group: pid_t) -> Bool {
        LocalProcess.processIDs().contains { LocalProcess.status(of: $0).map { $0.isRunning && $0.processGroup == Int(group) } ?? false }
    }

    /// The first item as `xpb paste` writes it: the text, else the best image, else the first
    /// data target.
    static func contents(of snapshot: Snapshot) -> Data {
        if let text = snapshot.text(limit: .max) { return Data(text.utf8) }
        let images = snapshot.targets.filter { ImageFormat(mimeType: $0.target)?.isReadable ?? false }
        if let best = KeptTargets.keptImageTarget(images.map(\.target)), let image = images.first(where: { $0.target == best }) {
            return image.data
        }
        return snapshot.targets.first { KeepPolicy.isKept($0.target) && !$0.target.hasPrefix("XPB_") }?.data ?? Data()
    }
}
