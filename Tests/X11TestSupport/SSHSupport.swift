import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real OpenSSH server for one test, on 127.0.0.1 only, with its own host key and one
/// authorized user key, and an ssh client configuration that reaches it as host `xpb-test-peer`
/// (known host pinned, no agent, no other keys). Never the machine's own sshd or the user's
/// ~/.ssh. Stopped (and its files removed) at the end; a watchdog ends it if the test process dies.
public final class LoopbackSSHD: Sendable {
    public static let host = "xpb-test-peer"
    public let directory: URL
    public let port: Int
    private let server: Peer

    /// The client configuration file.
    public var clientConfig: String { directory.appendingPathComponent("ssh_config").path }
    /// The command for `xpbd --ssh`.
    public var sshCommand: String { "ssh -F \(clientConfig)" }

    /// `namespace`: a network namespace (`ip netns`) to run it in, whose loopback its clients use.
    public init(display: Xvfb, namespace: String? = nil) throws {
        let sshd = "/usr/sbin/sshd"
        guard FileManager.default.isExecutableFile(atPath: sshd) else {
            throw TestFailure("\(sshd) is missing: install openssh-server (.ci/run does)")
        }
        _ = try which("ssh")
        _ = try which("ssh-keygen")
        // OpenSSH's privilege separation directory (made by the package's service, which no test starts).
        if !FileManager.default.fileExists(atPath: "/run/sshd") {
            do {
                try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            } catch {
                throw TestFailure("sshd needs /run/sshd, which cannot be made here (\(error)); .ci/run makes it")
            }
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-sshd-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let path = directory.path
        for key in ["host_key", "user_key"] {
            let keygen = try run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "xpb-test", "-f", "\(path)/\(key)"], display: display)
            guard keygen.status == 0 else { throw TestFailure("ssh-keygen failed: \(keygen.error)") }
        }
        try FileManager.default.copyItem(atPath: "\(path)/user_key.pub", toPath: "\(path)/authorized_keys")
        let user = String(cString: getpwuid(getuid()).pointee.pw_name)
        let hostKey = try String(contentsOfFile: "\(path)/host_key.pub", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        var started: (Peer, Int)?
        var lastError = ""
        for _ in 0..<5 {
            let port = Int.random(in: 20000...60000)
            let config = """
                Port \(port)
                ListenAddress 127.0.0.1
                HostKey \(path)/host_key
                AuthorizedKeysFile \(path)/authorized_keys
                PidFile none
                StrictModes no
                UsePAM no
                PasswordAuthentication no
                KbdInteractiveAuthentication no
                PubkeyAuthentication yes
                PermitRootLogin prohibit-password
                AllowUsers \(user)
                X11Forwarding no
                """
            try config.write(toFile: "\(path)/sshd_config", atomically: true, encoding: .utf8)
            // The watchdog ends the server when the test process goes, or when told to stop.
            let launch = namespace.map { "ip netns exec '\($0)' " } ?? ""
            let script = """
                \(launch)"$0" -D -e -f "$2" &
                x=$!
                trap 'kill $x 2>/dev/null; exit 0' TERM INT
                while kill -0 "$1" 2>/dev/null && kill -0 "$x" 2>/dev/null; do sleep 0.3; done
                kill "$x" 2>/dev/null
                """
            let peer = try Peer("/bin/sh", ["-c", script, sshd, String(getpid()), "\(path)/sshd_config"], display: display)
            let listening = eventually(timeout: 10) {
                peer.errorSoFar.contains("Server listening on 127.0.0.1 port \(port)") || !peer.isRunning || peer.errorSoFar.contains("Bind to port")
            }
            if listening, peer.errorSoFar.contains("Server listening on 127.0.0.1 port \(port)") {
                started = (peer, port)
                break
            }
            lastError = peer.errorSoFar
            Self.end(peer)
        }
        guard let (peer, port) = started else { throw TestFailure("sshd did not start: \(lastError)") }
        server = peer
        self.port = port
        try "[127.0.0.1]:\(port) \(hostKey)\n".write(toFile: "\(path)/known_hosts", atomically: true, encoding: .utf8)
        let client = """
            Host \(Self.host)
              HostName 127.0.0.1
              Port \(port)
              User \(user)
              IdentityFile \(path)/user_key
              IdentitiesOnly yes
              IdentityAgent none
              UserKnownHostsFile \(path)/known_hosts
              GlobalKnownHostsFile /dev/null
              StrictHostKeyChecking yes
              LogLevel ERROR
            """
        try client.write(toFile: clientConfig, atomically: true, encoding: .utf8)
    }

    /// A command for `xpbd --ssh` that runs ssh through `tee`, writing every byte sent into
    /// `sent` and every byte received into `received` (the capture of the stream).
    public func capturingCommand(sent: String, received: String) throws -> String {
        let script = directory.appendingPathComponent("capturing-ssh").path
        try """
            #!/bin/sh
            tee -a '\(sent)' | ssh -F '\(clientConfig)' "$@" | tee -a '\(received)'
            """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        return script
    }

    /// The ssh client processes running with this server's client configuration.
    public func clientPIDs() -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), let raw = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            let arguments = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard arguments.first == "ssh", arguments.contains(clientConfig) else { return nil }
            return pid
        }
    }

    public func stop() {
        Self.end(server)
    }

    /// SIGTERM to the watchdog, whose trap ends sshd; SIGKILL would leave sshd running.
    private static func end(_ peer: Peer) {
        peer.signal(SIGTERM)
        _ = try? peer.finish(timeout: 5)
        peer.stop()
    }

    deinit {
        Self.end(server)
        try? FileManager.default.removeItem(at: directory)
    }
}
