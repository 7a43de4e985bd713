import Foundation
import Glibc
import Synchronization

/// A private headless Wayland compositor for one test: sway (wlroots: it has data-control),
/// weston (which has none, for the error a user then gets), or GNOME's mutter (none either, with
/// its XWayland, which xpb and xpbd then go through). sway and weston refuse to run as root, so
/// they run as `nobody` (`setpriv`) with a runtime directory of its own, mode 700; clients
/// running as root reach its socket all the same. mutter runs as root, under a session bus of its
/// own (`dbus-run-session`), in a process group of its own. A watchdog shell kills it when the
/// test process dies, as ``Xvfb``'s does.
public final class Compositor: TestSession {
    public enum Kind: Sendable {
        /// sway with its XWayland on (`xwayland force`) or off.
        case sway(xwayland: Bool)
        case weston
        /// GNOME's compositor, headless, with its XWayland (no data-control).
        case mutter
    }

    /// The compositor's runtime directory (its socket is in it).
    public let runtimeDirectory: String
    /// The socket's name (`WAYLAND_DISPLAY`).
    public let socketName: String
    public let serverPID: Int32
    /// XWayland's display, when the compositor runs one.
    public let xDisplay: String?
    /// The X authority file its XWayland wants (mutter's), if any.
    public let xAuthority: String?

    /// Whether the runtime directory goes with this compositor (not when another took it over: ``restarted()``).
    private let ownsDirectory = Mutex(true)
    private let kind: Kind

    /// - Parameter directory: a runtime directory to use again (``restarted()``); nil: a new one.
    public init(_ kind: Kind = .sway(xwayland: false), in reused: String? = nil) throws {
        self.kind = kind
        let directory = reused ?? "/tmp/xpb-wayland-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let asNobody = kind != .mutter
        guard reused != nil || (mkdir(directory, 0o700) == 0 && (!asNobody || chown(directory, 65534, 65534) == 0)) else {
            throw TestFailure("cannot make the compositor's runtime directory \(directory)")
        }
        runtimeDirectory = directory
        var program: String
        var arguments: [String]
        var environment = ["XDG_RUNTIME_DIR": directory, "HOME": directory, "PATH": "/usr/bin:/bin"]
        switch kind {
        case let .sway(xwayland):
            program = try which("sway")
            let config = directory + "/config"
            // The test's X clients (root) may use XWayland's display: sway's user allows them.
            // sway sets DISPLAY for what it runs: written where the test reads it.
            let lines = xwayland
                ? ["xwayland force", "exec xhost +si:localuser:root", "exec echo $DISPLAY > \(directory)/display"]
                : ["xwayland disable"]
            try (lines.joined(separator: "\n") + "\n").write(toFile: config, atomically: true, encoding: .utf8)
            _ = chown(config, 65534, 65534)
            // XPB_TEST_SWAY_DEBUG=1: sway logs its XWayland window manager's selection work too.
            arguments = ["-c", config] + (ProcessInfo.processInfo.environment["XPB_TEST_SWAY_DEBUG"] == "1" ? ["-d"] : [])
            environment["WLR_BACKENDS"] = "headless"
            environment["WLR_LIBINPUT_NO_DEVICES"] = "1"
            environment["WLR_RENDERER"] = "pixman"
        case .weston:
            program = try which("weston")
            arguments = ["--backend=headless-backend.so", "--socket=wayland-weston", "--idle-time=0"]
        case .mutter:
            // Its session bus (dbus-run-session) and XWayland are its children: setsid makes them
            // one process group, which the watchdog and kill() end whole.
            arguments = [try which("dbus-run-session"), "--", try which("mutter"), "--headless", "--wayland",
                         "--virtual-monitor", "800x600", "--wayland-display", "wayland-0"]
            program = try which("setsid")
        }
        let launch = asNobody ? [try which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", program] : [program]
        let script = """
            "$0" "$@" >"$XPB_COMPOSITOR_LOG" 2>&1 &
            x=$!
            echo "pid $x"
            while kill -0 "$XPB_TEST_PID" 2>/dev/null && kill -0 "$x" 2>/dev/null; do sleep 0.3; done
            kill -9 \(asNobody ? "" : "-- -")"$x" 2>/dev/null
            """
        let output = try Spawner.pipe()
        let null = Spawner.devNull(O_RDWR)
        defer { close(null) }
        environment["XPB_TEST_PID"] = String(getpid())
        environment["XPB_COMPOSITOR_LOG"] = directory + "/log"
        let shell = try Spawner.spawn("/bin/sh", ["-c", script] + launch + arguments, environment: environment,
                                      files: [0: null, 1: output.write, 2: null])
        close(output.write)
        defer { close(output.read) }
        var line = ""
        var buffer = [UInt8](repeating: 0, count: 64)
        let deadline = Date().addingTimeInterval(20)
        while !line.hasSuffix("\n") {
            var descriptor = pollfd(fd: output.read, events: Int16(POLLIN), revents: 0)
            guard Date() < deadline else { throw TestFailure("the compositor did not start") }
            guard poll(&descriptor, 1, 100) > 0 else { continue }
            let count = read(output.read, &buffer, buffer.count)
            guard count > 0 else { throw TestFailure("the compositor did not start") }
            line += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        Thread.detachNewThread { var status: Int32 = 0; waitpid(shell, &status, 0) }
        guard line.hasPrefix("pid "), let pid = Int32(line.dropFirst(4).dropLast()) else { throw TestFailure("the compositor did not start: \(line)") }
        serverPID = pid
        // Its socket is there once it listens (sway names the first free wayland-N).
        var socket: String?
        var display: String?
        var authority: String?
        while socket == nil || (kind.hasXWayland && display == nil) {
            guard Date() < deadline, Glibc.kill(pid, 0) == 0 else {
                let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
                Glibc.kill(pid, SIGKILL)
                throw TestFailure("the compositor did not start: \(log.suffix(2000))")
            }
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            // Named once it listens: the file is there from its bind, a moment before its listen,
            // and a client that connects in between is refused ("Connection refused" under load).
            socket = entries.first { $0.hasPrefix("wayland-") && !$0.hasSuffix(".lock") && Self.listens(directory + "/" + $0) }
            if kind == .mutter, display == nil {
                // "Using public X11 display :1, (using :2 for managed services)"; its cookie in
                // .mutter-Xwaylandauth.*.
                let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
                authority = entries.first { $0.hasPrefix(".mutter-Xwaylandauth.") }.map { directory + "/" + $0 }
                if let range = log.range(of: "Using public X11 display "), let authority {
                    let number = String(log[range.upperBound...].prefix { $0 != "," && !$0.isWhitespace })
                    if number.hasPrefix(":"), Self.answers(number, authority: authority) { display = number }
                }
            } else if kind.hasXWayland, display == nil,
               let number = (try? String(contentsOfFile: directory + "/display", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines),
               number.hasPrefix(":"), Self.answers(number) {
                display = number
            }
            if socket == nil || (kind.hasXWayland && display == nil) { usleep(10_000) }
        }
        socketName = socket!
        xDisplay = display
        xAuthority = authority
    }

    /// Whether a Unix socket at `path` takes a connection (which is closed at once: the compositor
    /// sees a client come and go).
    private static func listens(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    /// Whether an X client gets an answer from the display (Xwayland listens before it is ready).
    private static func answers(_ display: String, authority: String? = nil) -> Bool {
        let null = Spawner.devNull(O_RDWR)
        defer { close(null) }
        var environment = ["PATH": "/usr/bin:/bin"]
        environment["XAUTHORITY"] = authority
        guard let xprop = try? which("xprop"),
              let peer = try? Spawner.spawn(xprop, ["-display", display, "-root", "_NET_SUPPORTED"], environment: environment,
                                            files: [0: null, 1: null, 2: null]) else { return false }
        var status: Int32 = 0
        waitpid(peer, &status, 0)
        return status == 0
    }

    /// Clients reach the compositor, and no X display (unless sway runs XWayland).
    public var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = xDisplay
        if let xAuthority { environment["XAUTHORITY"] = xAuthority }
        // Absolute: clients find it whatever XDG_RUNTIME_DIR a test gives them (a daemon's home).
        environment["WAYLAND_DISPLAY"] = runtimeDirectory + "/" + socketName
        environment["XDG_RUNTIME_DIR"] = runtimeDirectory
        environment["XPB_BACKEND"] = nil
        return environment
    }

    /// Runs swaymsg against this sway (its IPC socket is in the runtime directory).
    public func swaymsg(_ arguments: [String]) throws -> Outcome {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: runtimeDirectory)) ?? []
        guard let socket = entries.first(where: { $0.hasPrefix("sway-ipc.") && $0.hasSuffix(".sock") }) else {
            throw TestFailure("sway's IPC socket is not in \(runtimeDirectory)")
        }
        let outcome = try run(try which("swaymsg"), ["-s", runtimeDirectory + "/" + socket] + arguments, display: self)
        guard outcome.status == 0 else { throw TestFailure("swaymsg \(arguments.joined(separator: " ")): \(outcome.error)\(outcome.text)") }
        return outcome
    }

    /// The windows sway shows, from its tree: each one's process id, whether it has the focus, and
    /// whether it is an X window (XWayland) or a Wayland client's.
    public func windows() throws -> [(pid: Int, isFocused: Bool, isX: Bool)] {
        let tree = try JSONSerialization.jsonObject(with: try swaymsg(["-t", "get_tree"]).output)
        var found: [(pid: Int, isFocused: Bool, isX: Bool)] = []
        func walk(_ node: Any) {
            guard let node = node as? [String: Any] else { return }
            if let pid = node["pid"] as? Int, node["type"] as? String == "con" || node["type"] as? String == "floating_con" {
                found.append((pid, node["focused"] as? Bool ?? false, node["shell"] as? String == "xwayland"))
            }
            for key in ["nodes", "floating_nodes"] { (node[key] as? [Any])?.forEach(walk) }
        }
        walk(tree)
        return found
    }

    /// Gives the focus to the window of process `pid`, and waits until sway says it has it.
    public func focus(pid: Int32) throws {
        _ = try swaymsg(["[pid=\(pid)] focus"])
        guard eventually(timeout: 10, { (try? windows())?.contains { $0.pid == Int(pid) && $0.isFocused } == true }) else {
            throw TestFailure("sway did not focus the window of pid \(pid): \((try? windows()).map { "\($0)" } ?? "?")")
        }
    }

    /// The compositor's log so far.
    public var log: String {
        (try? String(contentsOfFile: runtimeDirectory + "/log", encoding: .utf8)) ?? ""
    }

    public func kill() {
        // mutter leads a process group (its bus and XWayland).
        Glibc.kill(kind == .mutter ? -serverPID : serverPID, SIGKILL)
    }

    /// Ends this compositor as a crash does (SIGKILL), and starts the same kind again in its
    /// runtime directory, where it takes the same socket name: what a client sees when its
    /// compositor crashes and comes back. This one gives the directory to the new one.
    public func restarted() throws -> Compositor {
        kill()
        guard eventually(timeout: 10, { Self.hasEnded(serverPID) }) else { throw TestFailure("the compositor did not end") }
        // A crashed compositor leaves its socket; the next one takes the name once it is gone.
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: runtimeDirectory)) ?? [] where entry.hasPrefix("wayland-") {
            unlink(runtimeDirectory + "/" + entry)
        }
        ownsDirectory.withLock { $0 = false }
        let next = try Compositor(kind, in: runtimeDirectory)
        guard next.socketName == socketName else { throw TestFailure("the new compositor took \(next.socketName), not \(socketName)") }
        return next
    }

    /// Whether a process is gone or a zombie (its watchdog shell reaps it only at its own end).
    private static func hasEnded(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return true }
        let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).prefix(1)
        return state == "Z" || state == "X"
    }

    deinit {
        kill()
        if ownsDirectory.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: runtimeDirectory) }
    }
}

extension Compositor.Kind: Equatable {
    var hasXWayland: Bool {
        switch self {
        case .sway(true), .mutter: return true
        default: return false
        }
    }
}
