import Dispatch
import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import Glibc
import Logging
import PasteboardWire
import Synchronization

/// Keeps one configured link up: dials (another display's daemon socket, or `ssh HOST xpb
/// daemon link`), says hello, runs the link until it drops, then waits and dials again, the wait
/// doubling up to a cap. State changes are logged once each, not every retry.
final class PeerDialer: Sendable {
    struct State {
        var status: PeerStatus
        var link: SyncLink?
        var transport: SyncTransport?
        var stopped = false
        /// The last state logged, and its error: a retry failing the same way is not logged again.
        var logged: String?
    }

    let spec: SyncLinkSpec
    private let hubReference: HubReference
    private let logger: Logger
    private let state: Mutex<State>
    private let wake = DispatchSemaphore(value: 0)

    init(spec: SyncLinkSpec, hub: SyncHub, logger: Logger) {
        self.spec = spec
        hubReference = HubReference(hub)
        self.logger = logger
        state = Mutex(State(status: PeerStatus(name: spec.name, state: "connecting", direction: spec.direction,
                                               selections: hub.configuration.selections(for: spec).map(SelectionNames.selection(for:)),
                                               since: Date())))
    }

    func start() {
        do {
            try DetachedThread.start(name: "xpbd.sync.dial") { [self] in run() }
        } catch {
            logger.error("sync with \(spec.name): cannot start the dialer's thread: \(error)")
        }
    }

    func stop() {
        let (link, transport) = state.withLock { state -> (SyncLink?, SyncTransport?) in
            state.stopped = true
            state.status.state = "stopped"
            return (state.link, state.transport)
        }
        link?.close("the daemon is stopping")
        transport?.interrupt()
        // Its process (ssh, a helper) ends before the daemon does.
        transport?.process?.awaitExit(within: 1)
        wake.signal()
    }

    func status() -> PeerStatus {
        let (status, link) = state.withLock { ($0.status, $0.link) }
        var result = status
        if let link { SyncHub.merge(link, into: &result) }
        return result
    }

    private func clearTransport() {
        state.withLock { state in
            state.transport = nil
            state.status.transportPID = nil
        }
    }

    private var hub: SyncHub? { hubReference.hub }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func run() {
        guard let configuration = hub?.configuration else { return }
        var backoff = configuration.firstBackoff
        while !isStopped {
            let outcome = connectOnce()
            guard !isStopped else { break }
            switch outcome {
            case .ranThenDropped:
                backoff = configuration.firstBackoff
            case .failed:
                break
            case .refused:
                // A version or setup mismatch does not fix itself soon: retry rarely.
                backoff = max(backoff, 60)
            }
            let wait = backoff
            _ = wake.wait(timeout: .now() + wait)
            backoff = min(backoff * 2, max(configuration.lastBackoff, configuration.firstBackoff))
        }
    }

    private enum Outcome { case ranThenDropped, failed, refused }

    private func set(_ newState: String, error: String? = nil, level: Logger.Level, _ message: String) {
        let key = newState + "|" + (error ?? "")
        let log = state.withLock { state -> Bool in
            if state.status.state != newState { state.status.since = Date() }
            state.status.state = newState
            state.status.lastError = error ?? state.status.lastError
            guard state.logged != key else { return false }
            state.logged = key
            return true
        }
        let text = "sync with \(spec.name): \(message)"
        if log { logger.log(level: level, "\(text)") } else { logger.debug("\(text)") }
    }

    private func connectOnce() -> Outcome {
        guard let hub else { return .failed }
        let configuration = hub.configuration
        let transport: SyncTransport
        do {
            transport = try makeTransport(configuration)
        } catch {
            set("retrying", error: "\(error)", level: .warning, "\(error); retrying")
            return .failed
        }
        let stderrLines = Mutex<[String]>([])
        // Signalled when ssh's standard error ends (ssh exited, or closed it).
        let stderrEnded = DispatchSemaphore(value: 0)
        if let process = transport.process {
            state.withLock { $0.status.transportPID = Int(process.pid) }
            let readStderr: @Sendable () -> Void = { [logger, spec] in
                defer { stderrEnded.signal() }
                var pending = Data()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(process.stderrFD, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    pending.append(contentsOf: buffer[0..<count])
                    while let newline = pending.firstIndex(of: 10) {
                        let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                        pending.removeSubrange(pending.startIndex...newline)
                        if case .helper = spec.endpoint {
                            // A helper's lines are its log (a device asks to pair, a link refused).
                            logger.info("\(spec.name): \(LogThrottle.printable(line, limit: 1000))")
                        } else {
                            logger.debug("sync with \(spec.name): ssh: \(line)")
                        }
                        stderrLines.withLock { lines in
                            lines.append(line)
                            if lines.count > 5 { lines.removeFirst() }
                        }
                    }
                }
            }
            do {
                try DetachedThread.start(name: "xpbd.sync.stderr", readStderr)
            } catch {
                // ssh's messages go unread; the link itself does not need them.
                logger.warning("sync with \(spec.name): cannot start the thread that reads ssh's messages: \(error)")
            }
        }
        state.withLock { $0.transport = transport }
        defer { clearTransport() }
        if isStopped {
            transport.close()
            return .failed
        }
        let ours = hub.hello(for: spec)
        var reader = FrameReader(fd: transport.readFD)
        let theirs: SyncHello
        switch handshake(ours, transport: transport, reader: &reader) {
        case let .success(hello):
            theirs = hello
        case let .failure(failure):
            transport.close()
            if failure.refused {
                set("refused", error: failure.message, level: .error, "refused: \(failure.message)")
                return .refused
            }
            // What ssh said is the clearest reason (no route, auth, xpb not on the remote PATH):
            // its last line, once its standard error ends (within half a second).
            var reason = failure.message
            if transport.process != nil { _ = stderrEnded.wait(timeout: .now() + 0.5) }
            if let said = stderrLines.withLock({ $0.last }), !said.isEmpty { reason += " (ssh: \(said))" }
            set("retrying", error: reason, level: .warning, "\(reason); retrying")
            return .failed
        }
        if let refusal = hub.refusal(of: theirs, ours: ours) {
            transport.close()
            set("refused", error: refusal, level: .error, "refused: \(refusal)")
            return .refused
        }
        let link = hub.register(transport: transport, reader: reader, label: spec.name, ours: ours, theirs: theirs)
        state.withLock {
            $0.link = link
            $0.status.remote = theirs.name
            $0.status.lastError = nil
        }
        set("connected", level: .info, "connected to \(theirs.name)")
        link.waitUntilFinished()
        let reason = link.closeReason ?? "closed"
        state.withLock { $0.link = nil }
        if !isStopped { set("retrying", error: reason, level: .warning, "link lost (\(reason)); reconnecting") }
        return .ranThenDropped
    }

    private struct HandshakeFailure: Error {
        let message: String
        /// The other side said no (or speaks something else): not a transient failure.
        let refused: Bool
    }

    /// Sends our hello and reads theirs.
    private func handshake(_ ours: SyncHello, transport: SyncTransport, reader: inout FrameReader) -> Result<SyncHello, HandshakeFailure> {
        do {
            try writeFrame(Frame(kind: .hello, payload: try ControlCoding.encode(ours)), to: transport.writeFD)
            guard let frame = try reader.next(timeout: 30) else {
                return .failure(HandshakeFailure(message: "the link closed before the peer said hello", refused: false))
            }
            if frame.kind == .error {
                let message = (try? ControlCoding.decode(ControlFailure.self, from: frame.payload))?.message ?? "(no reason)"
                return .failure(HandshakeFailure(message: message, refused: true))
            }
            guard frame.kind == .hello, let hello = try? ControlCoding.decode(SyncHello.self, from: frame.payload) else {
                return .failure(HandshakeFailure(message: "the other side does not speak xpb-sync", refused: true))
            }
            return .success(hello)
        } catch {
            return .failure(HandshakeFailure(message: "\(error)", refused: false))
        }
    }

    private func makeTransport(_ configuration: SyncConfiguration) throws -> SyncTransport {
        switch spec.endpoint {
        case let .display(display):
            let path = ControlEndpoint.socketPath(display: display, environment: ProcessInfo.processInfo.environment, uid: getuid())
            let connected: Result<Int32, LocalSocketError> = Result { () throws(LocalSocketError) -> Int32 in try LocalSocket.connect(path) }
            switch connected {
            case let .success(fd):
                return SyncTransport(socket: fd)
            case let .failure(error) where error.code == ENOENT || error.code == ECONNREFUSED:
                throw SyncHub.Failure("no xpbd runs for display \(display) (nothing listens on \(path))")
            case let .failure(error):
                throw error
            }
        case let .ssh(host, display):
            var remote = "\(configuration.remoteXPB) daemon link"
            if let display { remote += " --display \(display)" }
            // ssh's own options, config, keys and agent; no terminal, no password prompts (the
            // daemon has nobody to answer them).
            let process = try TransportProcess(["/bin/sh", "-c", "exec \(configuration.sshCommand) -T -x -o BatchMode=yes \"$@\"", "xpbd-ssh", host, remote])
            return SyncTransport(process: process)
        case let .helper(_, command):
            return SyncTransport(process: try TransportProcess(command))
        case let .inProcess(name):
            return try SyncHub.dialInProcess(name)
        }
    }
}

/// The hub a dialer belongs to, not kept alive by it (the hub owns its dialers).
final class HubReference: Sendable {
    private let reference: Mutex<Weak>

    private struct Weak: @unchecked Sendable {
        weak var hub: SyncHub?
    }

    init(_ hub: SyncHub) {
        reference = Mutex(Weak(hub: hub))
    }

    var hub: SyncHub? { reference.withLock { $0.hub } }
}
