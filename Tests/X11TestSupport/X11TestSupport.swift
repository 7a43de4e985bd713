import Dispatch
import CHistorySeal
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Helpers for tests against a private Xvfb with real peers (xclip, xsel, the xpb binary).

/// Where a program lives on PATH; a missing peer fails the test loudly instead of skipping it.
public func which(_ program: String) throws -> String {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(directory)/\(program)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw TestFailure("\(program) is not installed; the X11 tests need it (apt-get install xvfb xclip xsel)")
}

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Starts programs with posix_spawn. Before each start every descriptor of this process is
/// marked close-on-exec (under one lock), so a child inherits only what it is given: a child
/// that outlives its parent (xpb's background owner) can then never hold another test's pipe
/// open. Foundation's Process is not used: on Linux its exit detection proved unreliable here.
///
/// The test process ignores SIGPIPE from the first start on: a child that exits before reading
/// all its input (a usage error) must fail the write, not kill the whole test run (it did, under
/// load, when `xpb copy -t INCR` was refused before the feeding thread wrote its byte). Each
/// child gets SIGPIPE back at its default, so what it inherits never depends on which test ran first.
enum Spawner {
    private static let lock = Mutex(())
    private static let ignoresBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Starts `path` with `arguments`; `files` maps child descriptors to ours.
    static func spawn(_ path: String, _ arguments: [String], environment: [String: String], files: [Int32: Int32]) throws -> pid_t {
        try lock.withLock { _ in
            ignoresBrokenPipes
            if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
                for entry in entries { if let fd = Int32(entry), fd > 2 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) } }
            }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            for (child, ours) in files.sorted(by: { $0.key < $1.key }) {
                posix_spawn_file_actions_adddup2(&actions, ours, child)
            }
            let argv = ([path] + arguments).map { strdup($0) } + [nil]
            let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { (argv + envp).forEach { free($0) } }
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            // Every signal back to its default and none blocked, as from a login shell: the test
            // process ignores SIGPIPE, and its threads block signals that a program's own threads
            // take (a shell that inherited a blocked SIGCHLD never ended its 'wait').
            var defaults = sigset_t()
            sigfillset(&defaults)
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            var mask = sigset_t()
            sigemptyset(&mask)
            posix_spawnattr_setsigmask(&attributes, &mask)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
            var pid: pid_t = 0
            let status = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
            guard status == 0 else { throw TestFailure("cannot start \(path): \(String(cString: strerror(status)))") }
            return pid
        }
    }

    /// A pipe whose two ends are close-on-exec in this process.
    static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard Glibc.pipe(&fds) == 0 else { throw TestFailure("cannot create a pipe") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    /// The descriptor of /dev/null.
    static func devNull(_ flags: Int32) -> Int32 {
        let fd = open("/dev/null", flags)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }
}

/// Where test programs run: a private Xvfb, or a private headless compositor. Its environment
/// points clients at it, and at nothing of the user's.
public protocol TestSession: Sendable {
    var environment: [String: String] { get }
}

/// A private Xvfb for one test: never the user's display. A watchdog shell kills the server
/// when the test process dies, so no server outlives a crashed run.
public final class Xvfb: TestSession {
    public let display: String
    public let serverPID: Int32

    /// - Parameters:
    ///   - number: the display number (default: one this test process has not used before,
    ///     ``freshNumber()``).
    ///   - serverArguments: the server's access options (default: no TCP listener; e.g.
    ///     `-listen tcp -auth FILE` for a server reached over TCP with a cookie).
    public init(number: Int? = nil, serverArguments: [String] = ["-nolisten", "tcp"]) throws {
        guard number == nil else {
            (display, serverPID) = try Self.start(number: number!, serverArguments: serverArguments)
            return
        }
        // Another process may take the number between the look and the start: the next one.
        var attempt = 0
        while true {
            do {
                (display, serverPID) = try Self.start(number: Self.freshNumber(), serverArguments: serverArguments)
                return
            } catch is TestFailure where attempt < 4 {
                attempt += 1
            }
        }
    }

    /// The next display number of this process's own run of them, never one it used before (up
    /// to a thousand servers), and not one a server holds now (10000–58999). Xvfb's `-displayfd` gives the
    /// lowest free number, so a test's number went to the next test's server as soon as the
    /// first was gone, and a client of the first that outlived it reached the other test's
    /// server: an xpbd connecting again to its display (DaemonTests' restart test lets one look
    /// for ten seconds) would have become that server's clipboard manager and read its copies.
    ///
    /// A number is held while its lock file names a live process. A socket left in
    /// /tmp/.X11-unix (a server killed with SIGKILL cannot remove it) holds nothing: Xvfb replaces
    /// it. Counting those as held filled a block after a day of test runs on one machine (7,925
    /// sockets, all 1,000 of one block), and this loop then never ended. One pass over the block
    /// at most: a block that is all held is a failure that says so.
    public static func freshNumber() throws -> Int {
        try nextNumber.withLock { next in
            for _ in 0..<blockSize {
                let number = next
                next = next + 1 >= blockStart + blockSize ? blockStart : next + 1
                if !isHeld(number) { return number }
            }
            throw TestFailure("every display number from \(blockStart) to \(blockStart + blockSize - 1) is held by a running X server")
        }
    }

    /// Whether a live process holds display `number`'s lock file (the pid Xvfb writes there, in
    /// text); a lock of a process that is gone is stale, and Xvfb takes it over.
    private static func isHeld(_ number: Int) -> Bool {
        guard let text = try? String(contentsOfFile: "/tmp/.X\(number)-lock", encoding: .utf8) else { return false }
        guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0 else { return true }
        return Glibc.kill(pid, 0) == 0 || errno == EPERM
    }

    /// Each test process's numbers: a block of a thousand of its own by its pid, from 10000 up:
    /// above a person's displays, ``privateNumber(base:)``'s and the numbers tests name as having
    /// no server (`:4093`), below 59536 (6000 + n stays a TCP port).
    private static let blockSize = 1000
    private static let blockStart = 10_000 + Int(getpid() % 49) * blockSize
    private static let nextNumber = Mutex(blockStart)

    private static func start(number: Int, serverArguments: [String]) throws -> (display: String, pid: Int32) {
        let path = try which("Xvfb")
        // Xvfb writes the display number it picked to fd 3, here our pipe; the shell reports the
        // server's pid and then watches both the test process and the server.
        let script = """
            "$0" $XVFB_DISPLAY -displayfd 3 -screen 0 320x240x24 $XVFB_ACCESS -noreset 3>&1 >/dev/null 2>&1 &
            x=$!
            echo "pid $x"
            while kill -0 "$1" 2>/dev/null && kill -0 "$x" 2>/dev/null; do sleep 0.3; done
            kill -9 "$x" 2>/dev/null
            """
        let output = try Spawner.pipe()
        let null = Spawner.devNull(O_RDWR)
        defer { close(null) }
        let shell = try Spawner.spawn("/bin/sh", ["-c", script, path, String(getpid())],
                                      environment: ProcessInfo.processInfo.environment.merging(
                                          ["XVFB_DISPLAY": ":\(number)", "XVFB_ACCESS": serverArguments.joined(separator: " ")]) { $1 },
                                      files: [0: null, 1: output.write, 2: null])
        close(output.write)
        defer { close(output.read) }
        var collected = ""
        var display: String?
        var pid: Int32?
        let deadline = Date().addingTimeInterval(20)
        var buffer = [UInt8](repeating: 0, count: 256)
        while display == nil || pid == nil {
            var descriptor = pollfd(fd: output.read, events: Int16(POLLIN), revents: 0)
            guard Date() < deadline else {
                if let pid { Glibc.kill(pid, SIGKILL) }
                Glibc.kill(shell, SIGKILL)
                throw TestFailure("Xvfb did not start")
            }
            guard poll(&descriptor, 1, 100) > 0 else { continue }
            let count = read(output.read, &buffer, buffer.count)
            guard count > 0 else { throw TestFailure("Xvfb did not start") }
            collected += String(decoding: buffer[0..<count], as: UTF8.self)
            // Complete lines only: "10\n" may arrive as "1" and then "0\n".
            for line in collected.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
                if line.hasPrefix("pid ") { pid = Int32(line.dropFirst(4)) } else if let number = Int(line) { display = ":\(number)" }
            }
        }
        // The watchdog shell is reaped whenever it ends.
        Thread.detachNewThread { var status: Int32 = 0; waitpid(shell, &status, 0) }
        return (display!, pid!)
    }

    public var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = display
        // Run from a Wayland session, the tests' X clients must not go to its compositor.
        environment["WAYLAND_DISPLAY"] = nil
        environment["XPB_BACKEND"] = nil
        return environment
    }

    /// A display number for a server a test starts (and may start again) on a number of its
    /// own: from `base` up, one no server holds. Numbers chosen by `-displayfd` start at 0, so
    /// in a parallel run the other tests' servers do not take it between a kill and a restart.
    public static func privateNumber(base: Int) -> Int {
        var number = base + Int(getpid() % 300)
        while isHeld(number) { number += 1 }
        return number
    }

    /// Kills the server and returns once it is gone: reaped by its watchdog shell, which the
    /// display's next server needs (the lock file names the pid, and until the shell reaps it a
    /// killed server still answers `kill(pid, 0)`: "Server is already active for display").
    public func kill() {
        Glibc.kill(serverPID, SIGKILL)
        let deadline = Date().addingTimeInterval(10)
        while Glibc.kill(serverPID, 0) == 0 && Date() < deadline { usleep(10_000) }
    }

    deinit { Glibc.kill(serverPID, SIGKILL) }
}

/// How many of a peer's output pipes were read to their end.
private final class ClosedPipes: Sendable {
    let count = Mutex(0)
}

/// The outcome of a finished program.
public struct Outcome: Sendable {
    public let status: Int32
    public let output: Data
    public let error: String
    public var text: String { String(decoding: output, as: UTF8.self) }
}

/// A program running on the test display; its output is collected on background threads so a
/// large paste cannot block on a full pipe.
public final class Peer: Sendable {
    public let pid: pid_t
    private let name: String
    private let exit = Mutex<Int32?>(nil)
    private let collected = Collector()
    private let collectedError = Collector()
    private let done = DispatchSemaphore(value: 0)
    /// How many of the two output pipes have been read to their end (a second ``finish(timeout:)``
    /// waits for none again).
    private let pipesClosed = ClosedPipes()

    public init(_ program: String, _ arguments: [String], display: any TestSession, input: Data? = nil, environment: [String: String] = [:]) throws {
        let path = program.hasPrefix("/") ? program : try which(program)
        name = ([URL(fileURLWithPath: path).lastPathComponent] + arguments).joined(separator: " ")
        let output = try Spawner.pipe()
        let error = try Spawner.pipe()
        let stdin = input == nil ? nil : try Spawner.pipe()
        let null = Spawner.devNull(O_RDONLY)
        defer { close(null) }
        pid = try Spawner.spawn(path, arguments, environment: display.environment.merging(environment) { $1 },
                                files: [0: stdin?.read ?? null, 1: output.write, 2: error.write])
        close(output.write)
        close(error.write)
        if let stdin, let input {
            close(stdin.read)
            Thread.detachNewThread {
                input.withUnsafeBytes { buffer in
                    var offset = 0
                    while offset < buffer.count {
                        let written = write(stdin.write, buffer.baseAddress! + offset, buffer.count - offset)
                        if written <= 0 { break }
                        offset += written
                    }
                }
                close(stdin.write)
            }
        }
        for (fd, collector) in [(output.read, collected), (error.read, collectedError)] {
            let (done, pipesClosed) = (self.done, self.pipesClosed)
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let count = read(fd, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    collector.append(Data(buffer[0..<count]))
                }
                close(fd)
                pipesClosed.count.withLock { $0 += 1 }
                done.signal()
            }
        }
    }

    /// Whether the program is still running (reaps it once it has ended).
    public var isRunning: Bool {
        exit.withLock { status in
            if status != nil { return false }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            if result == pid {
                status = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
                return false
            }
            return result == 0
        }
    }

    /// How the program ended, as ``Outcome/status`` says it (128 + the signal that ended it); nil
    /// while it runs.
    public var exitStatus: Int32? {
        _ = isRunning
        return exit.withLock { $0 }
    }

    /// Waits for the program to end (killing it after `timeout` seconds).
    public func finish(timeout: Double = 30) throws -> Outcome {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning {
            if Date() > deadline {
                stop()
                throw TestFailure("\(name) did not finish within \(timeout) s")
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        // Output may stay open in a child the program left behind: wait a little, not forever.
        if pipesClosed.count.withLock({ $0 }) < 2 { _ = done.wait(timeout: .now() + 5) }
        if pipesClosed.count.withLock({ $0 }) < 2 { _ = done.wait(timeout: .now() + 1) }
        return Outcome(status: exit.withLock { $0 } ?? -1, output: collected.data,
                       error: String(decoding: collectedError.data, as: UTF8.self))
    }

    /// What the program wrote to standard output so far.
    public var outputSoFar: String { String(decoding: collected.data, as: UTF8.self) }

    /// What the program wrote to standard error so far.
    public var errorSoFar: String { String(decoding: collectedError.data, as: UTF8.self) }

    /// Waits until the program's output contains `marker` (a peer that says "ready" once it
    /// owns the selection); fails with its error output if it ends or takes longer than `timeout`.
    public func waitForOutput(_ marker: String, timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !outputSoFar.contains(marker) {
            guard isRunning, Date() < deadline else {
                // It may have printed the marker and exited before its output was read from the
                // pipe (seen under the full suite: "sent" of a flooder that had just ended).
                if !isRunning, eventually(timeout: 2, { outputSoFar.contains(marker) }) { return }
                throw TestFailure("\(name) did not print \(marker): \(String(decoding: collectedError.data, as: UTF8.self))")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    public func signal(_ signal: Int32) {
        if isRunning { Glibc.kill(pid, signal) }
    }

    /// Kills the program and reaps it.
    public func stop() {
        guard isRunning else { return }
        Glibc.kill(pid, SIGKILL)
        exit.withLock { status in
            var raw: Int32 = 0
            if waitpid(pid, &raw, 0) == pid { status = 128 + SIGKILL }
        }
    }

    deinit { stop() }
}

/// Bytes collected from another thread.
public final class Collector: Sendable {
    private let storage = Mutex(Data())
    public init() {}
    public func append(_ chunk: Data) { storage.withLock { $0.append(chunk) } }
    public var data: Data { storage.withLock { $0 } }
}

/// The directory of this package (for the test peers and the client package under Tests/).
public let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Runs one of the toolkit peers in Tests/Peers (`gtk_clipboard.py`, `qt_clipboard.py`) with
/// Debian's python3, which carries python3-gi and python3-pyqt5 (not a python3 earlier on PATH).
public func toolkitPeer(_ script: String, _ arguments: [String], display: any TestSession, environment: [String: String] = [:]) throws -> Peer {
    let python = "/usr/bin/python3"
    guard FileManager.default.isExecutableFile(atPath: python) else {
        throw TestFailure("\(python) is missing; the toolkit tests need Debian's python3 with python3-gi, gir1.2-gtk-3.0 and python3-pyqt5")
    }
    let path = packageRoot.appendingPathComponent("Tests/Peers/\(script)").path
    return try Peer(python, [path] + arguments, display: display,
                    environment: ["QT_QPA_PLATFORM": "xcb", "NO_AT_BRIDGE": "1"].merging(environment) { $1 })
}

/// Runs a program to the end.
@discardableResult
public func run(_ program: String, _ arguments: [String], display: any TestSession, input: Data? = nil, environment: [String: String] = [:], timeout: Double = 30) throws -> Outcome {
    try Peer(program, arguments, display: display, input: input, environment: environment).finish(timeout: timeout)
}

/// Polls `condition` until it holds or `timeout` passes.
public func eventually(timeout: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return try condition()
}

/// Deterministic bytes of a given size (every byte value occurs, so encodings would show).
public func payload(_ size: Int, seed: UInt8 = 7) -> Data {
    var data = Data(count: size)
    data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
        var state = UInt32(seed) &* 2_654_435_761
        for index in 0..<size {
            state = state &* 1_664_525 &+ 1_013_904_223
            buffer[index] = UInt8(truncatingIfNeeded: state >> 24)
        }
    }
    return data
}

/// The SHA-256 digest of `data` in hexadecimal: what a transfer test compares and reports.
public func sha256Hex(_ data: Data) -> String {
    var digest = [UInt8](repeating: 0, count: 32)
    data.withUnsafeBytes { bytes in xpbseal_sha256(bytes.baseAddress, bytes.count, &digest) }
    return digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

/// Owners that serve a file's bytes as UTF8_STRING by INCR past their chunk size, as users run
/// them: xclip and xsel fork into the background; the seeded hostile owner (xhostile
/// owner-incr-seeded) plays random chunks and delays with xclip's habits.
public enum IncrOwner: String, CaseIterable, Sendable, CustomStringConvertible {
    case xclip, xsel, seeded

    public var description: String { rawValue }

    /// Its chunk size: where the transfer changes shape (the seeded owner's vary; 1 MiB is where
    /// xpb's own owner changes shape).
    public var chunk: Int {
        switch self {
        case .xclip: return 1_048_575  // XExtendedMaxRequestSize / 4 on Xvfb
        case .xsel: return 4000
        case .seeded: return 1 << 20
        }
    }

    /// Takes CLIPBOARD on `x` with `file`'s bytes; the peer to stop when it stays ours (xclip and
    /// xsel take the selection in their forked child, after this returns).
    public func start(_ file: String, on x: Xvfb, seed: UInt64) throws -> Peer? {
        switch self {
        case .xclip:
            try run("/bin/sh", ["-c", "xclip -selection clipboard -i \"$0\" >/dev/null 2>&1", file], display: x)
            return nil
        case .xsel:
            try run("/bin/sh", ["-c", "xsel -b -i < \"$0\" >/dev/null 2>&1", file], display: x)
            return nil
        case .seeded:
            let peer = try Peer(try attacker(), ["owner-incr-seeded", String(seed), file, "UTF8_STRING"], display: x)
            try peer.waitForOutput("ready")
            return peer
        }
    }
}

/// The sizes around the places where an INCR transfer of `chunk`-byte chunks changes shape: one
/// chunk, two and three chunks, each less one, exactly, and plus one.
public func chunkBoundaries(_ chunk: Int) -> [Int] {
    [1, 2, 3].flatMap { count in [count * chunk - 1, count * chunk, count * chunk + 1] }
}

/// UTF-8 text of exactly `size` bytes with non-ASCII characters.
public func utf8Text(_ size: Int) -> Data {
    let unit = Array("héllo wörld ✓ ".utf8)
    var bytes = [UInt8]()
    bytes.reserveCapacity(size)
    while bytes.count < size {
        let remaining = size - bytes.count
        if remaining >= unit.count { bytes += unit } else { bytes += Array(repeating: UInt8(ascii: "x"), count: remaining) }
    }
    return Data(bytes)
}

/// Latin-1 text of exactly `size` bytes (bytes above 0x7F included).
public func latin1Text(_ size: Int) -> Data {
    Data((0..<size).map { index in
        let value = UInt8(truncatingIfNeeded: index % 190 + 32)
        return value == 127 ? 0xE9 : (value < 127 ? value : value + 33)
    })
}

/// The hostile X client of Tests/Attackers (xhostile.c), compiled once per test process with
/// the system's C compiler against Xlib (libx11-dev, which the build needs anyway).
public func attacker() throws -> String {
    try compiledAttacker("xhostile", flags: ["-lX11"])
}

/// The hostile session-bus client of Tests/Attackers (dbushostile.c), compiled once per test
/// process against libdbus-1 (libdbus-1-dev, which the build needs anyway).
public func busAttacker(on session: any TestSession) throws -> String {
    let flags = try run("pkg-config", ["--cflags", "--libs", "dbus-1"], display: session)
    guard flags.status == 0 else { throw TestFailure("pkg-config knows no dbus-1: is libdbus-1-dev installed?") }
    return try compiledAttacker("dbushostile", flags: flags.text.split(whereSeparator: \.isWhitespace).map(String.init))
}

/// Tests/Attackers/`name`.c, compiled with the system's C compiler into the temporary directory,
/// named by a digest of its source and flags: every test process (and every run) of the same
/// source uses the one binary, and none is left behind per process. Compiled under another name
/// and renamed into place, so that processes compiling it at once never run half a file.
private func compiledAttacker(_ name: String, flags: [String]) throws -> String {
    try attackerBuilds.withLock { paths in
        if let path = paths[name] { return path }
        let source = packageRoot.appendingPathComponent("Tests/Attackers/\(name).c").path
        guard let code = FileManager.default.contents(atPath: source) else { throw TestFailure("cannot read \(source)") }
        let digest = sha256Hex(code + Data(flags.joined(separator: " ").utf8)).prefix(16)
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(digest)").path
        if FileManager.default.isExecutableFile(atPath: output) {
            paths[name] = output
            return output
        }
        let building = output + ".\(getpid()).building"
        let compiler = try which("cc")
        let null = Spawner.devNull(O_RDWR)
        defer { close(null) }
        let pid = try Spawner.spawn(compiler, ["-O1", "-o", building, source] + flags, environment: ProcessInfo.processInfo.environment,
                                    files: [0: null, 1: null, 2: null])
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard status == 0, FileManager.default.isExecutableFile(atPath: building), rename(building, output) == 0 else {
            unlink(building)
            throw TestFailure("cannot compile \(source) (cc \(source) \(flags.joined(separator: " ")))")
        }
        paths[name] = output
        return output
    }
}

private let attackerBuilds = Mutex<[String: String]>([:])

/// The peak resident memory of a process (VmHWM), in bytes.
public func peakMemory(_ pid: Int32) -> Int? {
    memoryField(pid, "VmHWM")
}

/// The resident memory of a process now (VmRSS), in bytes.
public func residentMemory(_ pid: Int32) -> Int? {
    memoryField(pid, "VmRSS")
}

private func memoryField(_ pid: Int32, _ field: String) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
          let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else { return nil }
    return kilobytes * 1024
}

/// CPU time a process used so far (user and system), in seconds.
public func cpuSeconds(_ pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // Fields after the name: state is the first; utime and stime are the 12th and 13th.
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Seconds a block took.
public func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now()
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
}

/// A PNG chunk with its CRC.
public func pngChunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
    let typed = Array(type.utf8) + body
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in typed {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    crc ^= 0xFFFF_FFFF
    func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    return be(UInt32(body.count)) + typed + be(crc)
}

/// A small PNG that declares `width`×`height` (a decompression bomb when large).
public func bombPNG(width: UInt32, height: UInt32) -> Data {
    func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    let header = be(width) + be(height) + [8, 6, 0, 0, 0]
    // A zlib stream of a few zero bytes; the rest of the declared rows are missing.
    let idat: [UInt8] = [0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01]
    return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + pngChunk("IHDR", header) + pngChunk("IDAT", idat) + pngChunk("IEND", []))
}

/// The xclip binary on this machine.
public func xclipPath() throws -> String {
    guard let path = ["/usr/bin/xclip", "/bin/xclip"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw TestFailure("xclip is missing")
    }
    return path
}

/// A copy of xclip named `name` in `directory` (made once): an app that xpb tells by its
/// executable's name, such as a password manager's.
public func renamedXclip(_ name: String, in directory: URL) throws -> String {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let path = directory.appendingPathComponent(name).path
    if !FileManager.default.fileExists(atPath: path) { try copyExecutable(try xclipPath(), to: path) }
    return path
}

/// Copies a program to `path` (under another name) with a `cp` of its own, not in this process:
/// while this process held the copy open for writing, a child another test was starting could
/// inherit that descriptor, and the copy's own start then failed with "Text file busy" (the
/// probable cause of a renamed xclip's copy failing once in an unloaded run).
public func copyExecutable(_ program: String, to path: String) throws {
    let partial = path + ".partial"
    let pid = try Spawner.spawn("/bin/cp", [program, partial], environment: [:], files: [:])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    guard status == 0, rename(partial, path) == 0 else { throw TestFailure("cannot copy \(program) to \(path) (cp status \(status))") }
}

/// Copies `text` to `selection` with `program` (xclip, or a renamed copy), which forks and serves
/// in the background. Its output goes to /dev/null: the forked child would otherwise hold the
/// pipes and keep this call waiting.
@discardableResult
public func xclipCopy(_ text: String, program: String = "xclip", selection: String = "clipboard", display: Xvfb) throws -> Outcome {
    try run("/bin/sh", ["-c", "\"$0\" -selection \"$1\" >/dev/null 2>&1", program, selection], display: display, input: Data(text.utf8))
}

/// A deterministic random source (SplitMix64): a seed replays a whole run of a seeded simulation.
public struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
