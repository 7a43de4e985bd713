import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The host a daemon under test holds its pasteboards on: what one daemon does over either must
/// be the same, so each of these tests runs against both.
enum DaemonHost: String, CaseIterable, CustomStringConvertible, Sendable {
    /// A private Xvfb: `xpbd` keeps what `xpb copy`'s owner serves there.
    case display
    /// No display (`xpbd --headless`): `xpb` writes to the daemon's memory on its socket.
    case memory

    var description: String { rawValue }

    /// What the daemon's and the clients' environment add to the home's.
    var environment: [String: String] {
        switch self {
        case .display: return [:]
        case .memory: return ["DISPLAY": "", "TMUX": "", "STY": ""]
        }
    }

    var daemonArguments: [String] {
        switch self {
        case .display: return []
        case .memory: return ["--headless", "--idle-exit", "0"]
        }
    }

    /// A daemon of this host in `home`, started and answering.
    func start(_ x: Xvfb, _ home: DaemonHome, _ arguments: [String] = []) throws -> DaemonProcess {
        try DaemonProcess(x, home: home, arguments: daemonArguments + arguments, environment: environment)
    }

    /// Runs xpb as a client of this host.
    func xpb(_ arguments: [String], _ x: Xvfb, _ home: DaemonHome, input: Data? = nil) throws -> Outcome {
        try run(try builtProduct("xpb"), arguments, display: x, input: input, environment: home.environment.merging(environment) { $1 })
    }

    /// Copies `text` as a client of this host would.
    func copy(_ text: String, _ x: Xvfb, _ home: DaemonHome, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let outcome = try xpb(["copy"], x, home, input: Data(text.utf8))
        #expect(outcome.status == 0, "\(self): xpb copy: \(outcome.error)", sourceLocation: sourceLocation)
    }

    /// The previews of `xpb history`, newest first.
    func history(_ x: Xvfb, _ home: DaemonHome, _ arguments: [String] = []) throws -> [String] {
        let outcome = try xpb(["history", "--json"] + arguments, x, home)
        guard outcome.status == 0 else { throw TestFailure("\(self): xpb history: \(outcome.error)") }
        let entries = try JSONSerialization.jsonObject(with: outcome.output) as? [[String: Any]] ?? []
        return entries.map { $0["preview"] as? String ?? "" }
    }

    /// Waits until the history lists `expected`, newest first.
    func expectHistory(_ expected: [String], _ x: Xvfb, _ home: DaemonHome, _ daemon: DaemonProcess,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        let matched = eventually(timeout: 10) { (try? history(x, home)) == expected }
        #expect(matched, "\(self): \((try? history(x, home)) ?? []) instead of \(expected)\n\(daemon.log)", sourceLocation: sourceLocation)
    }
}

/// The daemon's work that does not depend on where the pasteboards live (the history, the
/// record pipeline's rules, reload, actions, pins, caps, status), run against both hosts so that
/// neither can drift from the other.
@Suite("one daemon over either host")
struct BothHostsTests {
    @Test("the history: listed newest first, searched, selected again (and pasted), pinned, deleted, cleared with the pinned kept; encoded ahead after a copy", arguments: DaemonHost.allCases)
    func history(host: DaemonHost) throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try host.start(x, home)
        for text in ["alpha one", "beta two", "gamma three"] {
            try host.copy(text, x, home)
            host.expectHistory(Array(["alpha one", "beta two", "gamma three"].prefix { $0 != text } + [text]).reversed(), x, home, daemon)
        }
        try daemon.waitForLog("history listing encoded ahead")
        #expect(try host.history(x, home, ["search", "BETA"]) == ["beta two"])
        let selected = try host.xpb(["history", "select", "2"], x, home)
        #expect(selected.status == 0 && selected.text.contains("entry 2 is now CLIPBOARD"), "\(host): \(selected.error)")
        #expect(eventually(timeout: 10) { (try? host.xpb(["paste"], x, home).text) == "alpha one" })
        host.expectHistory(["alpha one", "gamma three", "beta two"], x, home, daemon)
        #expect(try host.xpb(["history", "pin", "2"], x, home).status == 0)
        #expect(try host.xpb(["history", "delete", "1"], x, home).status == 0)
        host.expectHistory(["alpha one", "beta two"], x, home, daemon)
        #expect(try host.xpb(["history", "clear"], x, home).status == 0)
        host.expectHistory(["beta two"], x, home, daemon)
        let missing = try host.xpb(["history", "select", "5"], x, home)
        #expect(missing.status == 1 && missing.error.contains("no history entry 5"), "\(host): \(missing.status) \(missing.error)")
        try daemon.stop()
    }

    @Test("content rules refuse a copy; SIGHUP rereads them (and the caps) from the configuration file", arguments: DaemonHost.allCases)
    func rulesAndReload(host: DaemonHost) throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        try home.writeConfig("--ignore-match '^secret-\\d+$'\n--min-size 3\n")
        let daemon = try host.start(x, home)
        try host.copy("secret-123", x, home)
        try daemon.waitForLog("matches --ignore-match '^secret-\\d+$'")
        try host.copy("ab", x, home)
        try daemon.waitForLog("under --min-size 3")
        try host.copy("kept first", x, home)
        host.expectHistory(["kept first"], x, home, daemon)

        // New rules and a cap: the old pattern is kept now, the new one refused, two entries at most.
        try home.writeConfig("--ignore-match '^token-\\d+$'\n--max-entries 2\n")
        kill(daemon.peer.pid, SIGHUP)
        try daemon.waitForLog("SIGHUP: reread")
        try host.copy("token-77", x, home)
        try daemon.waitForLog("matches --ignore-match '^token-\\d+$'")
        try host.copy("secret-456", x, home)
        host.expectHistory(["secret-456", "kept first"], x, home, daemon)
        try host.copy("ab", x, home)
        host.expectHistory(["ab", "secret-456"], x, home, daemon)
        let status = try host.xpb(["daemon", "status", "--json"], x, home)
        let object = try #require(try JSONSerialization.jsonObject(with: status.output) as? [String: Any], "\(status.error)")
        let fields = try #require(object["status"] as? [String: Any])
        #expect(fields["maxEntries"] as? Int == 2 && fields["entryCount"] as? Int == 2, "\(host): \(fields)")
        try daemon.stop()
    }

    @Test("--on-copy runs for each copy kept, with its contents and selection, and not for a copy the rules refuse", arguments: DaemonHost.allCases)
    func actions(host: DaemonHost) throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let directory = home.root.path
        let log = "\(directory)/actions.log"
        let action = "{ printf '%s:' \"$XPB_SELECTION\"; cat; echo; } >> '\(log)'"
        let daemon = try host.start(x, home, ["--on-copy", action, "--ignore-match", "^skip"])
        func ran() -> [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        try host.copy("first copy", x, home)
        #expect(eventually(timeout: 10) { ran() == ["CLIPBOARD:first copy"] }, "\(host): \(ran())\n\(daemon.log)")
        try host.copy("skip this", x, home)
        try daemon.waitForLog("matches --ignore-match '^skip'")
        try host.copy("second copy", x, home)
        #expect(eventually(timeout: 10) { ran() == ["CLIPBOARD:first copy", "CLIPBOARD:second copy"] }, "\(host): \(ran())\n\(daemon.log)")
        try daemon.stop()
    }
}
