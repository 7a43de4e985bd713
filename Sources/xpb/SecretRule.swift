import PasteboardKit
import PasteboardWire

/// The apps a secret is refused to (xpbd's `--refuse-secret-to`), asked of the session's xpbd by
/// an owner of data marked secret when it starts, before it owns anything: the policy is
/// xpbd's, as its other app rules are. Where no xpbd runs there is none, and every reader is served.
enum SecretRule {
    /// How long xpbd has to answer: a stopped or stuck xpbd fails the copy after it, never
    /// serving the secret under a rule it could not read.
    static let timeout: Double = 2

    static func asked(session: Session) throws -> SecretRefusal {
        do {
            guard var client = try DaemonAccess.clientIfRunning(session: session, timeout: timeout) else { return SecretRefusal(apps: []) }
            defer { client.close() }
            guard case let .secretRule(apps) = try client.send(.secretRule) else { throw Failure("it answered out of turn") }
            return SecretRefusal(apps: apps)
        } catch {
            throw Failure("xpbd did not say which apps a secret is refused to (\(Failure(error).message)): the secret is not copied")
        }
    }
}
