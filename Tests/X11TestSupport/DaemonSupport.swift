import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A product built next to the test bundle (`xpb`, `xpbd`); missing is a failure, never a skip.
public func builtProduct(_ name: String) throws -> String {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [directory, directory.deletingLastPathComponent()] {
        let path = candidate.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw TestFailure("the \(name) binary is not built next to the tests (\(directory.path)); run swift build first")
}

/// A private home for a daemon under test: its state and runtime directories, removed at the end.
public final class DaemonHome: Sendable {
    public let root: URL
    public var stateDirectory: URL { root.appendingPathComponent("state") }
    public var runtimeDirectory: URL { root.appendingPathComponent("runtime") }
    /// Where the history lives (`$XDG_STATE_HOME/xpb`).
    public var historyDirectory: URL { stateDirectory.appendingPathComponent("xpb") }
    /// `$XDG_CACHE_HOME` (thumbnails): never the user's own.
    public var cacheDirectory: URL { root.appendingPathComponent("cache") }
    /// `$XDG_CONFIG_HOME`: xpbd reads `xpb/xpbd.conf` there, never the user's own.
    public var configDirectory: URL { root.appendingPathComponent("config") }

    public init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("xpbd-test-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: runtimeDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// XDG_STATE_HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME and XDG_RUNTIME_DIR pointing here: for
    /// xpbd and for xpb's client alike.
    public var environment: [String: String] {
        // No session bus but a test's own (SessionBus): xpbd would take Klipper's name on the user's.
        ["XDG_STATE_HOME": stateDirectory.path, "XDG_CACHE_HOME": cacheDirectory.path, "XDG_CONFIG_HOME": configDirectory.path,
         "XDG_RUNTIME_DIR": runtimeDirectory.path, "DBUS_SESSION_BUS_ADDRESS": ""]
    }

    /// Writes `xpbd.conf` under ``configDirectory``.
    public func writeConfig(_ text: String) throws {
        let directory = configDirectory.appendingPathComponent("xpb")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: directory.appendingPathComponent("xpbd.conf"))
    }

    deinit { try? FileManager.default.removeItem(at: root) }
}

/// xpbd running on a test display, with its own state; started and checked ready (its control
/// socket answers), stopped with SIGTERM.
public final class DaemonProcess: Sendable {
    public let peer: Peer
    public let home: DaemonHome

    /// `launcher`: a command that runs xpbd (its path and arguments follow), such as `unshare`;
    /// `environment`: over the home's (`DISPLAY: ""` for a daemon of a host without a display).
    public init(_ x: any TestSession, home: DaemonHome, arguments: [String] = [], launcher: [String] = [], environment: [String: String] = [:]) throws {
        self.home = home
        let command = launcher + [try builtProduct("xpbd"), "--log-level", "debug"] + arguments
        peer = try Peer(command[0], Array(command.dropFirst()), display: x, environment: home.environment.merging(environment) { $1 })
        // Ready once it listens (a socket file may be left from a daemon killed before).
        let deadline = Date().addingTimeInterval(20)
        while !peer.errorSoFar.contains("listening on") {
            guard peer.isRunning, Date() < deadline else {
                let outcome = try? peer.finish(timeout: 2)
                throw TestFailure("xpbd did not start: \(outcome?.error ?? "timed out")")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    /// What the daemon logged so far.
    public var log: String { peer.errorSoFar }

    /// Waits until the log contains `marker` (at least `count` times).
    public func waitForLog(_ marker: String, count: Int = 1, timeout: Double = 10) throws {
        guard eventually(timeout: timeout, { log.components(separatedBy: marker).count - 1 >= count }) else {
            throw TestFailure("xpbd did not log '\(marker)'\(count > 1 ? " \(count) times" : ""); its log:\n\(log)")
        }
    }

    /// SIGTERM, then waits for the exit.
    @discardableResult
    public func stop() throws -> Outcome {
        peer.signal(SIGTERM)
        do {
            return try peer.finish(timeout: 15)
        } catch {
            // Where it stood: the end of its log says which step of the stop it did not finish.
            throw TestFailure("\(error); the end of xpbd's log:\n\(log.suffix(3000))")
        }
    }
}
