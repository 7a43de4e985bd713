import Foundation
import Glibc

/// A private D-Bus session bus for one test (`dbus-daemon --session`): never the user's. Its
/// address goes to clients in ``environment``; the daemon ends with the test.
public final class SessionBus: Sendable {
    public let address: String
    private let peer: Peer

    public init(on session: any TestSession) throws {
        peer = try Peer(try which("dbus-daemon"), ["--session", "--nofork", "--nopidfile", "--print-address=1"], display: session)
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

    deinit { peer.stop() }
}
