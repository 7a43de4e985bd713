import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import PasteboardKit

/// A process of this host, as `/proc` shows it.
package enum LocalProcess {
    /// The executable's name and path (`/proc/PID/exe`, which another user's process may not
    /// show: then `comm` alone names it).
    package static func executable(of pid: Int) -> (name: String?, path: String?) {
        guard pid > 0 else { return (nil, nil) }
        var path = SystemCall.linkTarget("/proc/\(pid)/exe")
        // A replaced binary reads "/usr/bin/app (deleted)".
        if let trimmed = path, trimmed.hasSuffix(" (deleted)") { path = String(trimmed.dropLast(10)) }
        let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
            .trimming(while: \.isNewline)
        // A multi-call program run through a link beside it (xpbd, a link to xpb) goes by the
        // link's name, which its command has: the link must resolve to the same file.
        if let target = path, let comm, !comm.isEmpty, target.split(separator: "/").last.map(String.init) != comm,
           let directory = target.lastIndex(of: "/").map({ String(target[..<$0]) }) {
            let link = directory + "/" + comm
            if SystemCall.linkTarget(link) != nil, realPath(link) == realPath(target) { return (comm, link) }
        }
        let name = path.flatMap { $0.split(separator: "/").last.map(String.init) } ?? comm.flatMap { $0.isEmpty ? nil : $0 }
        return (name, path)
    }

    /// A path with every link resolved (nil when it does not exist).
    package static func realPath(_ path: String) -> String? {
        guard let resolved = Glibc.realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Who holds an X connection whose maker is gone. A client that put itself in the
    /// background after connecting (xclip and xsel fork, and their parent exits; so may any
    /// owner) is known to the server by the dead parent's pid. What the kernel still knows: the
    /// client-side end of every connection to the display's socket (socket diagnostics), which
    /// process holds each (`/proc/N/fd` of the processes `/proc` lists: thread ids are not
    /// processes), and which of those connections the server accounts to a living process
    /// (X-Resource's pid of every client). A connection held only by processes the server does
    /// not account it to was handed down; its holders are the successors. Nothing is guessed:
    /// one holder names the process; several that run one executable name the executable alone;
    /// several others are candidates (a desktop has other such holders: dbus-launch's child keeps
    /// the X connection its parent made), one of which the owner's answer to a request tells
    /// (``ran(_:)``); none is unknown.
    package enum Successor: Equatable, Sendable {
        case process(Int)
        case executable(name: String, path: String?)
        case candidates([Int])
        case unknown
    }

    /// `census` keeps what the processes held from one look-up to the next: only the processes
    /// whose holdings may have changed have their descriptors listed again (``HolderCensus``).
    package static func successor(of pid: Int, display number: Int, clientPIDs: [Int], census: inout HolderCensus) -> Successor {
        guard pid > 0, !isRunning(pid) else { return .unknown }
        var peers = [UInt32](repeating: 0, count: 4096)
        let count = clinux_unix_peers_named("/tmp/.X11-unix/X\(number)", &peers, Int32(peers.count))
        guard count > 0 else { return .unknown }
        let clientEnds = Set(peers.prefix(Int(count)))
        let held = census.holdings(processes: processes(), clientEnds: clientEnds, clientPIDs: clientPIDs) { process in
            clientEndsHeld(by: process, among: clientEnds)
        }.held
        let holders = handedDown(held: held, clientPIDs: clientPIDs)
        if holders.count == 1 { return .process(holders[0]) }
        let executables = Set(holders.map { executable(of: $0).path ?? "" })
        if holders.count > 1, executables.count == 1, let path = executables.first, !path.isEmpty,
           let name = path.split(separator: "/").last.map(String.init) {
            return .executable(name: name, path: path)
        }
        return holders.count > 1 ? .candidates(holders) : .unknown
    }

    /// How many times each of a process's threads has been given the processor (the timeslices
    /// of each `/proc/PID/task/TID/schedstat`, up to 1,024 threads; nil for a process gone, or a
    /// kernel without scheduler statistics).
    package static func timeslices(of pid: Int) -> Timeslices? {
        guard pid > 0, let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        var ids: [Int] = []
        var counts: [UInt64] = []
        for thread in threads.prefix(1024) {
            guard let id = Int(thread),
                  let line = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/schedstat", encoding: .utf8) else { continue }
            let fields = line.split(separator: " ")
            guard fields.count >= 3, let slices = UInt64(fields[2].trimming(while: \.isNewline)) else { continue }
            ids.append(id)
            counts.append(slices)
        }
        return ids.isEmpty ? nil : Timeslices(threads: ids, counts: counts)
    }

    /// Of `before` (processes with their timeslices then), those given the processor since (a
    /// process gone, or whose counts are unknown, did not): the owner of a selection must run to
    /// answer a request, the other holders of handed-down connections need not (dbus-launch's
    /// child sleeps).
    package static func ran(_ before: [(pid: Int, timeslices: Timeslices?)]) -> [Int] {
        before.filter { candidate in
            guard let then = candidate.timeslices, let now = timeslices(of: candidate.pid) else { return false }
            return now.ran(since: then)
        }.map(\.pid)
    }

    /// Of `candidates` (the processes that hold connections handed down from gone ones, one of
    /// them an owner's), the one that serves the owner, or nil when that cannot be told (never a
    /// guess). `ask` makes a request of the owner itself: the one candidate that ran to answer it
    /// (``ran(_:)``) is the owner's. An owner that lost its selection runs too, as it exits:
    /// while several ran, the owner is among them, and they are asked again (the owner runs for
    /// every request; one exiting is soon gone or still), with a short wait for exits between,
    /// until one is left or `exitWait` seconds have gone. Where none ran (a kernel without
    /// scheduler statistics), the one left after the others exit is named.
    package static func serving(_ candidates: [Int], exitWait: Double, ask: () -> Void) -> Int? {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(exitWait, 0) * 1e9)
        var running = candidates
        while true {
            let before = running.map { (pid: $0, timeslices: timeslices(of: $0)) }
            ask()
            let ran = ran(before)
            if ran.count == 1 { return ran[0] }
            if !ran.isEmpty { running = ran }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return nil }
            let left = Double(deadline - now) / 1e9
            // Several ran: a short wait, and they are asked again. None ran: the whole wait.
            running = waitForExits(running, leaving: 1, timeout: ran.isEmpty ? left : min(left, serveAgainAfter))
            if running.count <= 1 { return running.first }
            if ran.isEmpty { return nil }
        }
    }

    /// How long candidates that all ran to a request get to exit before they are asked again
    /// (seconds).
    static let serveAgainAfter = 0.02

    /// Waits, at most `timeout` seconds, until no more than `count` of `pids` still run; the ones
    /// that do. Each process is watched through a pidfd (readable once it has exited), all in one
    /// `poll`; one that cannot be (a kernel without pidfds) is looked at every 5 ms.
    package static func waitForExits(_ pids: [Int], leaving count: Int, timeout: Double) -> [Int] {
        var running = pids.filter(isRunning)
        guard running.count > count else { return running }
        var descriptors: [Int: Int32] = [:]
        for pid in running {
            let descriptor = clinux_pidfd_open(Int32(pid))
            if descriptor >= 0 { descriptors[pid] = descriptor }
        }
        defer { for descriptor in descriptors.values { close(descriptor) } }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeout * 1e9)
        while running.count > count {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { break }
            var watches = running.compactMap { descriptors[$0] }.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let unwatched = watches.count < running.count
            let wait = Int32((deadline - now) / 1_000_000) + 1
            if poll(&watches, nfds_t(watches.count), unwatched ? min(wait, 5) : wait) < 0, errno != EINTR { break }
            let exited = Set(watches.filter { $0.revents != 0 }.map(\.fd))
            running = running.filter { pid in
                if let descriptor = descriptors[pid] { return !exited.contains(descriptor) }
                return isRunning(pid)
            }
        }
        return running
    }

    /// The processes that hold a connection the server accounts to no process holding it
    /// (``successor(of:display:clientPIDs:)``): `held` is each process's client-side sockets
    /// to the display, `clientPIDs` the server's pid of each client. A process that holds no more
    /// connections than the server accounts to it explains them all, for every holder; one
    /// that holds more explains none (which of them it made cannot be told).
    package static func handedDown(held: [Int: Set<UInt32>], clientPIDs: [Int]) -> [Int] {
        var accounted: [Int: Int] = [:]
        for pid in clientPIDs where pid > 0 { accounted[pid, default: 0] += 1 }
        var explained = Set<UInt32>()
        for (process, sockets) in held where sockets.count <= accounted[process, default: 0] {
            explained.formUnion(sockets)
        }
        return held.filter { !$0.value.isSubset(of: explained) }.map(\.key).sorted()
    }

    /// The names a process goes by: its executable's, its command's (`comm`), and where it runs
    /// a script (a shell, env, python, node, perl), the script's without its extension (`pass`
    /// is `bash /usr/bin/pass`, Bitwarden's `bw` is node running `bw.js`). Lowercased.
    package static func names(of pid: Int) -> [String] {
        guard pid > 0 else { return [] }
        var names: [String] = []
        func add(_ path: Substring) {
            var name = path.split(separator: "/").last.map(String.init) ?? ""
            for suffix in [".js", ".py", ".sh", ".pl", ".rb"] where name.hasSuffix(suffix) { name = String(name.dropLast(suffix.count)) }
            name = name.lowercased()
            if !name.isEmpty, !names.contains(name) { names.append(name) }
        }
        if let path = executable(of: pid).path { add(Substring(path)) }
        if let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) { add(Substring(comm.trimming(while: \.isNewline))) }
        if let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"), data.count <= 1 << 16 {
            let arguments = data.split(separator: 0, omittingEmptySubsequences: false).prefix(8).map { String(decoding: $0, as: UTF8.self) }
            if let first = arguments.first {
                add(Substring(first))
                let interpreters: Set<String> = ["sh", "bash", "dash", "zsh", "env", "python3", "python", "node", "nodejs", "perl", "ruby"]
                if let base = first.split(separator: "/").last, interpreters.contains(String(base)) || base.hasPrefix("python3."),
                   let script = arguments.dropFirst().first(where: { !$0.hasPrefix("-") && !interpreters.contains($0) }) {
                    // A command line (`sh -c "secret-tool lookup … | xclip"`): its first word.
                    add(script.split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? Substring(script))
                }
            }
        }
        return names
    }

    /// The names (``names(of:)``) of the processes of `pid`'s job (``job(of:)``). A program that
    /// copies through xclip, xsel or wl-copy (keepassxc-cli, pass's shell, gopass) is in the job of
    /// the xclip that serves its copy, whose own parent is gone by then.
    package static func jobNames(of pid: Int) -> [String] {
        names(ofAll: job(of: pid))
    }

    /// The names (``names(of:)``) of each of `processes`, each name once.
    package static func names(ofAll processes: [Int]) -> [String] {
        var names: [String] = []
        for process in processes {
            for name in Self.names(of: process) where !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// When a process started: its age (`/proc/PID/stat`'s start time, in clock ticks since boot,
    /// against CLOCK_BOOTTIME now) before now. Not `/proc/stat`'s boot time, which is whole
    /// seconds and drifts from the wall clock. Nil for a process gone.
    package static func startTime(of pid: Int) -> Date? {
        var line = [UInt8](repeating: 0, count: 1024)
        var boot = timespec()
        guard pid > 0, let ticks = statLine(of: pid, into: &line).flatMap(startTime(inStatLine:)),
              clock_gettime(CLOCK_BOOTTIME, &boot) == 0 else { return nil }
        let hertz = max(Double(sysconf(Int32(_SC_CLK_TCK))), 1)
        let age = Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9 - Double(ticks) / hertz
        return Date().addingTimeInterval(-max(age, 0))
    }

    /// The processes that speak for `pid`'s job (its process group, as a shell with job control
    /// makes one per command line), `pid` first. While the group's leader runs, it alone speaks
    /// for the job: it is the command that was run (keepassxc-cli), or, where nothing made a job
    /// of each command (a script's or a test runner's group), the script or runner, never its
    /// other children. Once the leader is gone (pass exits when its helpers are started), what
    /// is left of the job speaks for it. At most 4,096 processes are looked at.
    package static func job(of pid: Int) -> [Int] {
        guard let group = status(of: pid)?.processGroup, group > 1, group != pid else { return isRunning(pid) ? [pid] : [] }
        if isRunning(group) { return [pid, group] }
        return [pid] + processIDs().prefix(4096).filter { $0 != pid && status(of: $0)?.processGroup == group && isRunning($0) }
    }

    /// The process that reads the pipe we write to through `fd`: the other process that holds
    /// it (its read end has the same inode). A Wayland reader makes the pipe and hands its write
    /// end over, through the compositor, to the source. The compositor (`passer`) may still hold
    /// its copy of the descriptor it passed on (it closes it after the send, later when it is
    /// descheduled in between): it is the reader only when it still holds the pipe, and nobody
    /// else does, after it has had time to let go (its own bridge reading for X). A reader may
    /// also be missed by one look: it hands its end to a child made after the look listed the
    /// processes, and closes its own (wl-paste runs cat to read). So a look that finds no reader
    /// is taken again, at once, then after 1, 2, 4 and 8 ms. Nil when none is found: another
    /// user's process (its descriptors are not ours to see), or a reader that closed its end.
    /// When several hold it (a reader's children inherit it), the first found; a child of ours
    /// between its fork and its exec never is.
    package static func readerOfPipe(_ fd: Int32, passedBy passer: Int? = nil) -> Int? {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFIFO else { return nil }
        let link = "pipe:[\(info.st_ino)]"
        var passerHolds = false
        for look in 0..<6 {
            if look > 1 { usleep(1000 << UInt32(look - 2)) }
            switch holder(of: link, passedBy: passer) {
            case let .reader(pid): return pid
            case .passerOnly: passerHolds = true
            case .nobody: passerHolds = false
            }
        }
        return passerHolds ? passer : nil
    }

    /// Who holds a pipe in one look at every process's descriptors.
    private enum Holder {
        case reader(Int), passerOnly, nobody
    }

    /// The process other than this one and the passer that holds `link` (a descriptor's link
    /// target), else whether the passer does.
    private static func holder(of link: String, passedBy passer: Int?) -> Holder {
        let me = Int(getpid())
        var passerHolds = false
        var reader: Int?
        forEachDescriptor { process, target in
            guard process != me, target == link else { return .next }
            // Our child between its fork and its exec holds a copy of each of our descriptors
            // for that moment (a `posix_spawn` from another thread): it reads nothing of ours.
            guard !isUnexecutedChild(process, of: me) else { return .nextProcess }
            guard process != passer else {
                passerHolds = true
                return .nextProcess
            }
            reader = process
            return .stop
        }
        if let reader { return .reader(reader) }
        return passerHolds ? .passerOnly : .nobody
    }

    /// Whether `process` is a child of `me` that still runs our executable: a fork that has
    /// not exec'd yet (xpb's background owner is a fork that never execs, but it never reads a
    /// pipe its parent writes to).
    private static func isUnexecutedChild(_ process: Int, of me: Int) -> Bool {
        guard status(of: process)?.parent == me else { return false }
        var ours = stat(), its = stat()
        return stat("/proc/self/exe", &ours) == 0 && stat("/proc/\(process)/exe", &its) == 0
            && ours.st_dev == its.st_dev && ours.st_ino == its.st_ino
    }

    /// What a look at a descriptor says next.
    private enum Scan {
        case next, nextProcess, stop
    }

    /// The client ends among `clientEnds` that `process` holds (its descriptors, at most 4,096);
    /// nil when its descriptors cannot be listed (gone, or another user's).
    private static func clientEndsHeld(by process: Int, among clientEnds: Set<UInt32>) -> Set<UInt32>? {
        var held = Set<UInt32>()
        let listed = forEachDescriptor(of: process) { target in
            if target.hasPrefix("socket:["), let inode = UInt32(target.dropFirst(8).dropLast()), clientEnds.contains(inode) { held.insert(inode) }
            return true
        }
        return listed ? held : nil
    }

    /// Every process `/proc` lists (at most 65,536), with its start time; one that ended while
    /// it was read is left out.
    private static func processes() -> [HolderCensus.Process] {
        // Read as bytes into one buffer: hundreds of processes per look-up (as Strings, this took
        // most of a look-up's processor).
        var line = [UInt8](repeating: 0, count: 1024)
        return processIDs().prefix(65536).compactMap { pid in
            statLine(of: pid, into: &line).flatMap(startTime(inStatLine:)).map { HolderCensus.Process(pid: pid, start: $0) }
        }
    }

    /// The pids `/proc` lists (processes, not threads).
    package static func processIDs() -> [Int] {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap(Int.init) ?? []
    }

    /// `pid`'s `/proc/N/stat` line, read into `buffer` (as much as it holds); nil for a process gone.
    private static func statLine(of pid: Int, into buffer: inout [UInt8]) -> ArraySlice<UInt8>? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        close(fd)
        return count > 0 ? buffer.prefix(count) : nil
    }

    /// The start time (clock ticks from boot) in a `/proc/N/stat` line: field 22, counted after
    /// the command's last `)` (the command may hold spaces and parentheses), where the state is
    /// field 3.
    static func startTime(inStatLine line: ArraySlice<UInt8>) -> UInt64? {
        guard let close = line.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        var field = 2, value: UInt64 = 0, digits = 0
        for byte in line[(close + 1)...] {
            if byte == UInt8(ascii: " ") {
                if field == 22 { break }
                field += 1
            } else if field == 22 {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte), digits < 20 else { return nil }
                value = value &* 10 &+ UInt64(byte - UInt8(ascii: "0"))
                digits += 1
            }
        }
        return field == 22 && digits > 0 ? value : nil
    }

    /// Calls `body` with each process `/proc` lists (at most 65,536) and the link target of each
    /// of its descriptors (at most 4,096 a process) that this process may see.
    private static func forEachDescriptor(_ body: (_ process: Int, _ target: String) -> Scan) {
        for process in processIDs().prefix(65536) {
            var stop = false
            _ = forEachDescriptor(of: process) { target in
                switch body(process, target) {
                case .next: return true
                case .nextProcess: return false
                case .stop:
                    stop = true
                    return false
                }
            }
            if stop { return }
        }
    }

    /// Calls `body` with the link target of each of `process`'s descriptors (at most 4,096) that
    /// this process may see, until it returns false. False when they cannot be listed (gone, or
    /// another user's).
    private static func forEachDescriptor(of process: Int, _ body: (_ target: String) -> Bool) -> Bool {
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/fd") else { return false }
        for descriptor in descriptors.prefix(4096) {
            guard let target = SystemCall.linkTarget("/proc/\(process)/fd/\(descriptor)", capacity: 63) else { continue }
            if !body(target) { break }
        }
        return true
    }

    /// Waits, at most `timeout` seconds, for process `pid` to end; whether it did (false also
    /// when it cannot be watched).
    package static func waitForExit(of pid: Int, timeout: Double) -> Bool {
        let descriptor = clinux_pidfd_open(Int32(pid))
        guard descriptor >= 0 else { return !isRunning(pid) }
        defer { close(descriptor) }
        var watch = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeout * 1e9)
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return false }
            let result = poll(&watch, 1, Int32((deadline - now) / 1_000_000) + 1)
            if result > 0 { return true }
            if result < 0, errno == EINTR { continue }
            return false
        }
    }

    /// Whether `pid` is a process that runs: not gone, and not a zombie (an exited process its
    /// parent has not reaped yet still has its `/proc/N`, but no files and no connection).
    package static func isRunning(_ pid: Int) -> Bool {
        status(of: pid)?.isRunning ?? false
    }

    /// A process's state and process group, from `/proc/N/stat` (nil when it is gone). The
    /// fields after the command, which may hold spaces and parentheses itself, are read after
    /// its last `)`: state, parent, process group.
    package static func status(of pid: Int) -> (isRunning: Bool, processGroup: Int, parent: Int)? {
        guard pid > 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 2, let parent = Int(fields[1]), let group = Int(fields[2]) else { return nil }
        return (fields[0] != "Z" && fields[0] != "X", group, parent)
    }

    /// The names a reader goes by (``names(of:)``): its own, its parent's (`wl-paste` hands the
    /// pipe it reads to the `cat` it runs; a script runs `xclip -o`) and its job's
    /// (``jobNames(of:)``), each once.
    package static func readerNames(of pid: Int) -> [String] {
        var processes = job(of: pid)
        if let parent = status(of: pid)?.parent, parent > 1, !processes.contains(parent) { processes.insert(parent, at: min(1, processes.count)) }
        return names(ofAll: processes)
    }

    /// The display number of a local display name (`:0`, `:1.0`, `unix:2`); nil for a display
    /// on another host or over TCP.
    package static func localDisplayNumber(_ name: String) -> Int? {
        guard let colon = name.lastIndex(of: ":") else { return nil }
        let host = name[..<colon]
        guard host.isEmpty || host == "unix" else { return nil }
        return Int(name[name.index(after: colon)...].prefix { $0.isNumber })
    }

    /// This host's name, as X clients put it in `WM_CLIENT_MACHINE` (gethostname, not
    /// ProcessInfo.hostName, which may ask DNS and wait).
    package static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension SecretRefusal {
    /// Whether the reading process `pid` is refused a secret (nil: a reader that could not be
    /// named), by every name it goes by (``LocalProcess/readerNames(of:)``).
    package func refuses(process pid: Int?) -> Bool {
        guard !isEmpty else { return false }
        return refuses(readerNames: pid.map(LocalProcess.readerNames(of:)))
    }
}
