internal import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWayland
import PasteboardX11
import Synchronization

/// What the background owner tells `xpb copy` over the ready pipe, as one line: it owns the
/// selection, or it failed with an exit status and a message.
enum ReadyMessage: Equatable {
    case ready
    case failed(status: Int32, message: String)

    /// The line written to the pipe.
    var line: String {
        switch self {
        case .ready: return "ready\n"
        case let .failed(status, message): return "error \(status) \(message.replacing("\n", with: " "))\n"
        }
    }

    /// Reads a line (without its newline); nil for anything else (the owner died first).
    init?(line: String) {
        if line == "ready" {
            self = .ready
            return
        }
        let parts = line.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0] == "error", let status = Int32(parts[1]) else { return nil }
        self = .failed(status: status, message: parts.count > 2 ? String(parts[2]) : "the background owner failed")
    }
}

/// The background owner of `xpb copy`: started detached, it owns the selection and serves it;
/// the starting process waits on the ready pipe for it to own the selection or fail.
extension CopyCommand {
    // MARK: Serving

    /// Owns the selection and serves it until another client takes it (or it expires, or, with
    /// --paste-once, after the first paste), then finishes running transfers.
    ///
    /// Everything up to the ready line runs on this thread, with no task or queue between it and
    /// the X thread: that is the time a script waits for. The wait for the end runs as a task.
    func serve(signals: HandOffOnSignal? = nil) throws {
        // Written and closed once: by the success line, else by the failure line.
        var ready = readyFD
        do {
            // Who ran the copy: as the starting process found it, else (in the foreground) now.
            let backend = try selection.connectOwner(copiedBy: copiedBy ?? (readyFD == nil ? CopyCredit.current() : nil))
            // Killed, the owner hands its copy to the clipboard manager first, as GTK and Qt apps do.
            signals?.arm(backend)
            let owned = try own(on: backend, echoes: filter && readyFD == nil)
            // Our own writes: a parent gone (EPIPE) is an error to ignore, never a trap.
            if let fd = ready {
                try? writeAll(Data(utf8Of: ReadyMessage.ready.line), to: fd)
                close(fd)
                ready = nil
            }
            try keepServing(owned, on: backend)
        } catch {
            let failure = Failure(error)
            if let ready {
                try? writeAll(Data(utf8Of: ReadyMessage.failed(status: failure.status.rawValue, message: failure.message).line), to: ready)
                close(ready)
                throw Exit(status: failure.status.rawValue)
            }
            throw failure
        }
    }

    /// What an owner follows once it owns the selection: its changes (made before the selection
    /// was taken, so that the loss is never missed).
    struct Owned {
        let changes: ChangeQueue
    }

    /// Makes the items and takes the selection with them: the copy is made when this returns.
    /// `echoes`: the items' bytes go to standard output first (`--filter` in the foreground).
    func own(on backend: any OwningPasteboardBackend, echoes: Bool) throws -> Owned {
        var items = try makeItems()
        if append { items = try appended(to: items, on: backend) }
        if echoes { try echo(items) }
        // A secret is served only to the readers xpbd's rule lets have it (a round trip to
        // xpbd, for secrets alone).
        if items.contains(where: SecretMarking.isSecret) { backend.refuseSecrets(try SecretRule.asked(session: selection.session)) }
        let board = selection.pasteboard(on: backend)
        let name = selection.name
        let changes = board.changeQueue
        let lifetime = expire ?? (sensitive ? Self.sensitiveExpiry : nil)
        let options = PasteboardOptions(localOnly: localOnly || sensitive, expirationDate: lifetime.map { Date().addingTimeInterval($0) })
        if let loops {
            let served = Mutex(0)
            backend.onServed { _, _ in
                let count = served.withLock { count in
                    count += 1
                    return count
                }
                if count == loops { try? backend.clear(name) }
            }
        }
        // Who pastes it, for xpbd's history (a look for its socket, microseconds, where none runs).
        PasteTeller.start(on: backend, session: selection.session, items: items)
        try board.setItems(items, options: options)
        return Owned(changes: changes)
    }

    /// Serves what `own` took until another client takes the selection (or it expires, or, with
    /// --paste-once, after the first paste), then finishes running transfers and closes.
    func keepServing(_ owned: Owned, on backend: any OwningPasteboardBackend) throws {
        let name = selection.name
        let changes = owned.changes
        // Keep a secret's pages out of swap where the memory-lock limit allows: the pages in
        // memory now, and the rest of what is mapped as it is touched (MCL_ONFAULT: locking
        // every mapped page at once faulted in 250 MB of thread stacks and heap, 15 ms of an
        // 18 ms copy). After the caller has its answer: the secret was in memory a moment
        // before, no longer.
        if sensitive { _ = mlockall(MCL_CURRENT | MCL_ONFAULT) }
        while changes.next() != nil, backend.isOwner(of: name) {}
        changes.close()
        // Transfers under way go on after ownership ends; they end by themselves or time out.
        while backend.isConnected, (try? backend.activeTransferCount()) ?? 0 > 0 {
            usleep(20_000)
        }
        guard backend.isConnected else { throw Failure(selection.host.lostConnection) }
        backend.close(handOff: false)
    }

    /// Starts a background owner and returns once it owns the selection (or reports why not).
    func detach() throws {
        // The caller's descriptors (its pipes would keep a `$(xpb copy)` waiting): listed before
        // this process opens any of its own; the owner holds none of them.
        let inherited = Self.openDescriptors().filter { $0.fd > 2 }
        // Standard input and pipes cannot be reopened by the owner: saved to unlinked files,
        // once, whichever way the owner starts.
        let saved = try saveInputs()
        if try ownThenFork(saved: saved, inherited: inherited) { return }
        let extraFDs = saved.map(\.fd)
        let savedFDs = saved.enumerated().map { "\($0.element.input)=\(4 + $0.offset)" }
        var readyPipe: [Int32] = [0, 0]
        guard pipe(&readyPipe) == 0 else { throw Failure("cannot create a pipe: \(String(cString: strerror(errno)))") }
        // Only the copies made for the child (3, 4, …) may survive exec: the child must not hold the
        // pipe's write end twice, or the parent would never see it close.
        for fd in readyPipe + extraFDs { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        // The owner's own options go right after the command name: after a `--` they would be
        // taken for file names.
        var arguments = commandLine
        // Who ran the copy is found here: the owner's parents are gone by the time it is asked.
        let credit = copiedBy ?? CopyCredit.current()
        // Attached (`--saved-fd=-=4`): a value starting with `-` would read as an option.
        var ownerOptions = ["--ready-fd", "3"] + savedFDs.map { "--saved-fd=" + $0 }
        if copiedBy == nil, let credit { ownerOptions.append("--copied-by=" + Self.argument(for: credit)) }
        arguments.insert(contentsOf: ownerOptions, at: min(1, arguments.count))
        let owner = forkedOwner(savedFDs: savedFDs, copiedBy: credit)
        let pid = try Detach.startOwner(arguments: arguments, fds: [readyPipe[1]] + extraFDs, log: log) {
            XPB.status { try owner.runOwner() }
        }
        Glibc.close(readyPipe[1])
        defer { extraFDs.forEach { _ = Glibc.close($0) } }
        let reply = readAll(readyPipe[0], timeout: 30)
        Glibc.close(readyPipe[0])
        switch ReadyMessage(line: reply.split(separator: "\n").first.map(String.init) ?? "") {
        case .ready?:
            // --filter: what the owner serves, from the same saved inputs it read.
            if filter { try echoInputs(saved) }
            return
        case let .failed(status, message)?:
            XPB.printError("xpb: \(message)\n")
            throw Exit(status: status)
        case nil:
            break
        }
        kill(pid, SIGKILL)
        throw Failure("the background owner (pid \(pid)) did not start; try --foreground to see why")
    }

    /// The common copy, in xclip's order: this process connects, takes the selection on its one
    /// thread (the backend's loop inline), forks, lets go of the connection and returns; the
    /// child keeps the connection and serves. One program start, one connection, and nothing
    /// between owning the selection and returning but the fork. The child is the same background owner as ``detach()``'s: in a
    /// session of its own, none of the caller's descriptors, standard streams on /dev/null (or
    /// the --log file), named xpb, reaped by init.
    ///
    /// - Returns: false when the copy must take ``detach()``'s way, with nothing done: not a
    ///   display or a compositor, another thread in this process already, or options whose
    ///   work would start one before the fork (--append reads the selection; --expire and
    ///   --sensitive set a timer). Also false, after the selection was given up again, when a
    ///   thread appeared meanwhile.
    private func ownThenFork(saved: [(input: String, fd: Int32)], inherited: [OpenDescriptor]) throws -> Bool {
        guard selection.host != .daemon, !append, expire == nil, !sensitive, clinux_thread_count() == 1 else { return false }
        // The owner's standard error, opened before anything is owned: a log that cannot be
        // written fails the copy with nothing changed.
        let errorFD = try Detach.openLog(log)
        // Back to detach()'s way: what was opened for this one is closed (the saved inputs are
        // detach()'s, read once).
        let release = {
            if errorFD >= 0 { Glibc.close(errorFD) }
        }
        let owner = forkedOwner(savedFDs: saved.map { "\($0.input)=\($0.fd)" }, copiedBy: copiedBy ?? CopyCredit.current(), readyFD: nil)
        guard let backend = try selection.session.connect({ host -> (any InlineOwningBackend)? in
            switch host {
            case let .x11(display):
                return try selection.connectToDisplay(display, copiedBy: owner.copiedBy, followsOwnerChanges: false, ownsBeforeThread: true)
            case .wayland:
                return try Session.compositor(ownsBeforeThread: true)
            case .daemon:
                return nil
            }
        }) else {
            release()
            return false
        }
        let owned = try owner.own(on: backend, echoes: false)
        guard clinux_thread_count() == 1 else {
            // Something started a thread: a fork now could leave a lock held forever in the child.
            backend.close(handOff: false)
            release()
            return false
        }
        // Those of the caller's descriptors still open on the same files: one that another thread
        // closed since (there is none now) may have been given to this copy's connection.
        let closing = inherited.filter(\.isStillOpen).map(\.fd)
        // The owner holds a copy the moment this process returns: a SIGTERM sent right after (a
        // script's `kill`, a session's end) must hand it off, not kill it before the owner takes
        // its signals. They are blocked from before the fork; the child's signal thread takes any
        // that came meanwhile. This process's mask is restored after the fork.
        var handedOff = HandOffOnSignal.set
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &handedOff, &previous)
        let pid = closing.withUnsafeBufferPointer { clinux_fork_keeping($0.baseAddress, Int32($0.count), errorFD, "xpb", &handedOff) }
        if pid == 0 { Detach.continueForked { XPB.status { try owner.serveForked(owned, on: backend) } } }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        guard pid > 0 else {
            let reason = String(cString: strerror(errno))
            backend.close(handOff: false)
            throw Failure("cannot start the background owner: \(reason)")
        }
        // The connection is the child's now: this process lets go of its descriptors with nothing
        // sent, and keeps the backend to its end (a close would send a request on the child's
        // connection). It may go on: a stand-in runs more steps after a copy (xsel -x copies twice).
        backend.leaveToChild()
        _ = Unmanaged.passRetained(backend as AnyObject)
        if errorFD >= 0 { Glibc.close(errorFD) }
        defer { saved.forEach { Glibc.close($0.fd) } }
        // --filter: what the owner serves, from the same saved inputs it read.
        if filter { try echoInputs(saved) }
        return true
    }

    /// The forked owner of ``ownThenFork(saved:inherited:)``: the signal hand-off, the
    /// backend's thread, then serving.
    private func serveForked(_ owned: Owned, on backend: any InlineOwningBackend) throws {
        // The hand-off signals are blocked since the fork (every thread made here inherits it):
        // one sent meanwhile waits for the signal thread, which starts armed, once the backend
        // serves from a thread of its own (a hand-off needs it).
        try backend.startThread()
        HandOffOnSignal.install(arming: backend)
        try keepServing(owned, on: backend)
    }

    /// Standard input and pipes cannot be reopened by the owner: each is saved to an unlinked
    /// file (or memory), read through its descriptor.
    private func saveInputs() throws -> [(input: String, fd: Int32)] {
        var saved: [(input: String, fd: Int32)] = []
        do {
            for input in Set(inputs) where input == "-" || !isRegularFile(input) {
                if input == "-", StandardDescriptors.wasClosed(STDIN_FILENO) { throw Failure("standard input is closed: nothing to copy") }
                let source = input == "-" ? 0 : open(input, O_RDONLY | O_CLOEXEC)
                guard source >= 0 else { throw Failure("cannot read \(input): \(String(cString: strerror(errno)))") }
                defer { if source != 0 { Glibc.close(source) } }
                saved.append((input, try Inputs.save(source, named: input == "-" ? "standard input" : input, limit: maxSize, secret: sensitive)))
            }
        } catch {
            saved.forEach { Glibc.close($0.fd) }
            throw error
        }
        return saved
    }

    /// --filter from `xpb copy`'s own process: every input's bytes, in order.
    private func echoInputs(_ saved: [(input: String, fd: Int32)]) throws {
        try inputs.forEach { input in try echoInput(input, savedFD: saved.first { $0.input == input }?.fd) }
    }

    /// A descriptor and the file it is open on: a number closed and given again to another
    /// file (a stand-in's writer thread closes its pipe while the copy connects) is told apart.
    struct OpenDescriptor: Equatable {
        let fd: Int32
        let device: UInt
        let inode: UInt

        /// `fd` as it is now; nil when it is closed.
        init?(_ fd: Int32) {
            var status = stat()
            guard fstat(fd, &status) == 0 else { return nil }
            self.fd = fd
            device = UInt(status.st_dev)
            inode = UInt(status.st_ino)
        }

        /// Whether the number still holds the same file.
        var isStillOpen: Bool { OpenDescriptor(fd) == self }
    }

    /// The descriptors open in this process.
    static func openDescriptors() -> [OpenDescriptor] {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        var listed: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let fd = Int32(name) { listed.append(fd) }
        }
        closedir(directory)
        // The listing's own descriptor is closed now.
        return listed.compactMap(OpenDescriptor.init)
    }

    /// `--filter` in the foreground: the items' bytes, in order, to standard output.
    func echo(_ items: [PasteboardItem]) throws {
        for item in items {
            guard let type = item.types.first, let representation = item.representation(for: type) else { continue }
            switch representation {
            case let .file(contents): try write(.file(contents), to: STDOUT_FILENO)
            default: try writeAll(try representation.resolve(), to: STDOUT_FILENO)
            }
        }
    }

    /// `--filter` from `xpb copy`'s own process: an input's bytes (its saved copy, or the file).
    func echoInput(_ input: String, savedFD: Int32?) throws {
        // The saved copy by its /proc path, as the owner reads it; written as any file representation.
        try write(.file(FileContents(path: savedFD.map { "/proc/self/fd/\($0)" } ?? input)), to: STDOUT_FILENO)
    }

    /// `--append`: the pasteboard's current text, then the new data, as one text item.
    func appended(to items: [PasteboardItem], on backend: any PasteboardBackend) throws -> [PasteboardItem] {
        guard items.first?.types.first != nil else { return items }
        // Nobody owns it (or nothing is text): the new data alone, as a plain copy would be.
        let old = (try? backend.data(of: selection.name, item: 0, type: .utf8PlainText))
            ?? (try? backend.data(of: selection.name, item: 0, type: .plainText)) ?? nil
        return try Self.joining(old, to: items)
    }

    /// `--append`: `old` text (nil: none) and the new data as one text item; the new items alone
    /// when there is no old text.
    static func joining(_ old: Data?, to items: [PasteboardItem]) throws -> [PasteboardItem] {
        guard let old, let item = items.first, let type = item.types.first else { return items }
        let new = try item.representation(for: type)?.resolve() ?? Data()
        let textType = TypeRegistry.standard.conforms(type, to: .text) ? type : .utf8PlainText
        var joined = PasteboardItem()
        joined.setData(old + new, for: textType)
        return [joined]
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

/// A backend whose loop runs on the calling thread until it owns, then on a thread of its own
/// (``CopyCommand/ownThenFork()``).
protocol InlineOwningBackend: OwningPasteboardBackend {
    func startThread() throws
    func leaveToChild()
}

extension X11PasteboardBackend: InlineOwningBackend {}
extension WaylandPasteboardBackend: InlineOwningBackend {}

/// SIGTERM, SIGINT and SIGHUP make an owner hand `CLIPBOARD` to the clipboard manager
/// (`SAVE_TARGETS`: what a GTK or Qt app does as it exits) before it dies of the signal, so a
/// copy killed right after it was made is not lost. Without a manager, for a copy marked secret,
/// or before the owner is connected, it dies at once. A second signal during the hand-off waits
/// for it (at most the hand-off's timeout, 3 s).
///
/// Made on the owner's thread before it starts any other: the signals are blocked there, so in
/// every thread made after (which inherit the mask), and taken by one thread of ours with
/// `sigwait`; a thread that did not block them would take them first and die, or lose them. (A
/// forked owner's main thread, which only waits, blocks every signal.)
final class HandOffOnSignal: Sendable {
    static let signals = [SIGTERM, SIGINT, SIGHUP]
    private let backend = Mutex<(any OwningPasteboardBackend)?>(nil)

    private init() {}

    /// Blocks the signals and starts the thread that takes them.
    /// `arming`: the owner a signal hands off, set before the thread that takes them starts.
    @discardableResult
    static func install(arming owner: (any OwningPasteboardBackend)? = nil) -> HandOffOnSignal {
        let handOff = HandOffOnSignal()
        if let owner { handOff.arm(owner) }
        var set = Self.set
        pthread_sigmask(SIG_BLOCK, &set, nil)
        do {
            try DetachedThread.start(name: "xpb.signals") { handOff.takeSignals() }
        } catch {
            // No thread to take them: the signals end the process at once, as by default.
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
        }
        return handOff
    }

    /// The signals handed off, as a set.
    static var set: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for number in signals { sigaddset(&set, number) }
        return set
    }

    /// Waits for the first signal, hands the clipboard off and dies of it. The others stay
    /// blocked meanwhile: they wait for the hand-off to end the process.
    private func takeSignals() {
        var set = Self.set
        var number: Int32 = 0
        while sigwait(&set, &number) != 0 {}
        if let owner = backend.withLock({ $0 }) { _ = owner.close(handOff: true) }
        Self.die(of: number)
    }

    /// From now on, a signal hands `owner`'s clipboard off first.
    func arm(_ owner: any OwningPasteboardBackend) {
        backend.withLock { $0 = owner }
    }

    /// Ends the process by `number`, as its default action does (the exit status says so).
    private static func die(of number: Int32) -> Never {
        signal(number, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, number)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(number)
        _exit(128 + number)
    }
}

/// What a forked owner runs, carried to its thread.
private final class ForkedOwner {
    let run: () -> Int32
    init(run: @escaping () -> Int32) { self.run = run }
}

/// Starts a copy of this program in the background.
enum Detach {
    /// Starts `xpb copy`'s background owner with `fds` as descriptors 3, 4, … in a session of its
    /// own: forked, while this process has one thread (what `xpb copy` has before its owner
    /// starts), running `forked` and exiting with its status, so a copy pays one program start
    /// and one parse of its command line, as xclip's does; else spawned anew to run `arguments`
    /// (xpb's grammar, ``spawn(arguments:fds:log:program:)``). Either way the owner is named
    /// xpb, holds none of the caller's descriptors, and is reaped by init once this process exits.
    static func startOwner(arguments: [String], fds: [Int32], log: String?, forked: @escaping () -> Int32) throws -> pid_t {
        guard clinux_thread_count() == 1 else { return try spawn(arguments: arguments, fds: fds, log: log) }
        let errorFD = try openLog(log)
        defer { if errorFD >= 0 { Glibc.close(errorFD) } }
        let pid = fds.withUnsafeBufferPointer { clinux_fork_detached($0.baseAddress, Int32($0.count), errorFD, "xpb") }
        // The owner: what the spawned program would run, from here.
        if pid == 0 { continueForked(forked) }
        guard pid > 0 else { throw Failure("cannot start the background owner: \(String(cString: strerror(errno)))") }
        return pid
    }

    /// In a forked child: runs `run` on a thread born in this process (``clinux_run_on_thread``
    /// says why not on this one) and exits with its status.
    static func continueForked(_ run: @escaping () -> Int32) -> Never {
        let body = Unmanaged.passRetained(ForkedOwner(run: run)).toOpaque()
        _ = clinux_run_on_thread({ context in
            let owner = Unmanaged<ForkedOwner>.fromOpaque(context!).takeRetainedValue()
            exit(owner.run())
        }, body)
        XPB.printError("xpb: cannot start the background owner's thread: \(String(cString: strerror(errno)))\n")
        _exit(127)
    }

    /// The background owner's standard error: `log` opened for appending (mode 600), or -1
    /// without one.
    static func openLog(_ log: String?) throws -> Int32 {
        guard let log else { return -1 }
        let fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure("cannot open the log \(log): \(String(cString: strerror(errno)))") }
        return fd
    }

    /// Runs this program's binary with `arguments` in a new session, standard streams on /dev/null,
    /// and `fds` as descriptors 3, 4, …
    static func spawn(arguments: [String], fds: [Int32], log: String? = nil, program: String = "xpb") throws -> pid_t {
        // The binary by its own path, so that ps, top and pgrep show the owner as `xpb` (the kernel
        // names a process after the file it executed: `/proc/self/exe` would make it `exe`).
        // /proc/self/exe itself when the file was replaced or removed since we started.
        var executable = "/proc/self/exe"
        if let path = SystemCall.linkTarget("/proc/self/exe"), !path.hasSuffix(" (deleted)"), access(path, X_OK) == 0 {
            executable = path
        }
        // argv[0] is xpb's own name even when run as a stand-in (`xclip`): the owner runs xpb's
        // grammar (`xpbd`'s for a daemon started here).
        var child = ChildProcess(executable: executable, arguments: [program] + arguments)
        // --log FILE: the owner's errors are appended there instead of lost.
        if let log { child.descriptors[2] = .open(log, flags: O_WRONLY | O_CREAT | O_APPEND, mode: 0o600) }
        for (index, fd) in fds.enumerated() { child.descriptors[Int32(3 + index)] = .inherit(fd) }
        // Away from the terminal's session and process group.
        child.grouping = .newSession
        do {
            return try child.spawn()
        } catch {
            throw Failure("cannot start \(program == "xpb" ? "the background owner" : program): \(error)")
        }
    }
}
