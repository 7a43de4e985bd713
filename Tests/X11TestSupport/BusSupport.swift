import Foundation
import Glibc

/// A private D-Bus session bus for one test: never the user's. Its address goes to clients in
/// ``environment``; the daemon ends with the test. A session bus's rules and limits (Debian's
/// session.conf), but no service is started on demand: an activated service (gnome-keyring-daemon's Secret Service, say) would run
/// in the machine's own home, and the tests start every peer they want themselves.
public final class SessionBus: Sendable {
    public let address: String
    private let peer: Peer
    private let directory: URL

    /// `path`: the bus's socket (a bus started again at the same address); else one of its own.
    public init(on session: any TestSession, path: String? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-bus-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let configuration = directory.appendingPathComponent("bus.conf")
        try Data("""
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>\(path.map { "unix:path=\($0)" } ?? "unix:dir=\(directory.path)")</listen>
              <auth>EXTERNAL</auth>
              <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
              <limit name="max_incoming_bytes">1000000000</limit>
              <limit name="max_outgoing_bytes">1000000000</limit>
              <limit name="max_message_size">1000000000</limit>
              <limit name="auth_timeout">240000</limit>
              <limit name="max_completed_connections">100000</limit>
              <limit name="max_incomplete_connections">10000</limit>
              <limit name="max_connections_per_user">100000</limit>
              <limit name="max_names_per_connection">50000</limit>
              <limit name="max_match_rules_per_connection">50000</limit>
              <limit name="max_replies_per_connection">50000</limit>
            </busconfig>
            """.utf8).write(to: configuration)
        peer = try Peer(try which("dbus-daemon"), ["--config-file=\(configuration.path)", "--nofork", "--nopidfile", "--print-address=1"], display: session)
        let deadline = Date().addingTimeInterval(20)
        while !peer.outputSoFar.contains("\n") {
            guard peer.isRunning, Date() < deadline else { throw TestFailure("dbus-daemon did not start: \(peer.errorSoFar)") }
            usleep(5_000)
        }
        address = peer.outputSoFar.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The bus daemon's process.
    public var pid: pid_t { peer.pid }

    /// What a client of this bus needs.
    public var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address] }

    /// Stops the bus daemon (as a session's bus going away).
    public func stop() { peer.stop() }

    deinit {
        peer.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
