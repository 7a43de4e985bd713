import CLinux
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The one way this package starts another program: `posix_spawn`, without Foundation's
/// `Process` (which would link all of Foundation and ICU's data into the binaries). The child's
/// descriptors are exactly the ones `descriptors` names (everything above 2 is closed unless
/// mapped), its signals are reset to their defaults and unblocked (xpb and xpbd ignore SIGPIPE
/// and block others), and it can get a process group or a session of its own.
package struct ChildProcess {
    /// What the child gets as one descriptor.
    package enum Descriptor {
        /// A copy of one of ours.
        case inherit(Int32)
        /// A file opened in the child (`/dev/null`, a log).
        case open(String, flags: Int32, mode: mode_t = 0)
    }

    /// Where the child stands towards the terminal and our signals.
    package enum Grouping {
        /// In our process group: a terminal's ^C reaches it too.
        case ours
        /// In a process group of its own (it can be signalled as a group; ^C does not reach it).
        case newGroup
        /// In a session of its own, away from the terminal (a background program).
        case newSession
    }

    /// The program: a path, run as is (no search of `$PATH`).
    package var executable: String
    /// Its argument vector, `argv[0]` included.
    package var arguments: [String]
    /// Its environment; nil for ours.
    package var environment: [String: String]?
    /// Descriptor number in the child → what it is. 0, 1 and 2 default to /dev/null.
    package var descriptors: [Int32: Descriptor] = [:]
    package var grouping: Grouping = .ours

    /// A program run through `/bin/sh -c command`.
    package static func shell(_ command: String) -> ChildProcess {
        ChildProcess(executable: "/bin/sh", arguments: ["sh", "-c", command])
    }

    package init(executable: String, arguments: [String], environment: [String: String]? = nil) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
    }

    /// Starts the program; its process id.
    ///
    /// - Throws: the errno of the failure (an executable that is missing or not executable, the
    ///   process limit, a descriptor that is not open).
    package func spawn() throws(Errno) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Inherited descriptors are first copied above every target number, so that a source that
        // is itself a target (a saved file that is descriptor 3) is not overwritten before it is
        // copied; the copies are close-on-exec, and closed here once the child has its own.
        let highest = max(2, descriptors.keys.max() ?? 2)
        var staged: [Int32] = []
        defer { staged.forEach { _ = close($0) } }
        var plan: [(target: Int32, descriptor: Descriptor)] = []
        for target in Set(descriptors.keys).union([0, 1, 2]).sorted() {
            let descriptor = descriptors[target] ?? .open("/dev/null", flags: target == 0 ? O_RDONLY : O_WRONLY)
            if case let .inherit(source) = descriptor {
                let copy = fcntl(source, F_DUPFD_CLOEXEC, highest + 1)
                guard copy >= 0 else { throw Errno.current }
                staged.append(copy)
                plan.append((target, .inherit(copy)))
            } else {
                plan.append((target, descriptor))
            }
        }
        for (target, descriptor) in plan {
            switch descriptor {
            case let .inherit(source): posix_spawn_file_actions_adddup2(&actions, source, target)
            case let .open(path, flags, mode): posix_spawn_file_actions_addopen(&actions, target, path, flags, mode)
            }
        }
        // Nothing else of ours: not the X connection, the history or the sockets.
        clinux_spawn_close_from(&actions, highest + 1)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        var flags = Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        switch grouping {
        case .ours: break
        case .newGroup:
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
        case .newSession:
            // POSIX_SPAWN_SETSID (glibc 2.26).
            flags |= 0x80
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = envp.map { posix_spawn(&pid, executable, &actions, &attributes, argv, $0) }
            ?? posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else { throw Errno(rawValue: result) }
        return pid
    }

    /// Waits for a child to end; its status as `waitpid` gives it.
    @discardableResult
    package static func wait(for pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return status
    }

    /// A pipe whose ends are close-on-exec (a child gets an end only through `descriptors`).
    package static func pipe() throws(Errno) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&ends) == 0 else { throw Errno.current }
        return (ends[0], ends[1])
    }
}
