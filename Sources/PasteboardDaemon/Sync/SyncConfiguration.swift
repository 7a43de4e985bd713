import FoundationEssentials
import PasteboardKit
import PasteboardWire

/// One sync link this daemon dials: another display's daemon on this machine, or a daemon on
/// another machine reached with `ssh`, each optionally one-way or limited to CLIPBOARD.
///
/// Written `TARGET[,OPTION…]`: `xpbd --sync-display ':2,send-only'`, `xpbd --peer 'me@box,display=:0,clipboard-only'`.
package struct SyncLinkSpec: Sendable, Equatable {
    package enum Endpoint: Sendable, Equatable {
        /// A display on this machine (its daemon's socket).
        case display(String)
        /// `ssh HOST`, and the remote display whose daemon to join (nil: the only one running there).
        case ssh(host: String, display: String?)
        /// A helper process of this machine that speaks xpb-sync on its standard input and
        /// output (`xpbd-kdeconnect`, started by `--kdeconnect`), and its name in logs and status.
        case helper(name: String, command: [String])
        /// Another hub of this process, by its display's name (``SyncHub/serveInProcess(as:)``): the
        /// Wayland port of a bridge. The link is a socket pair, and speaks xpb-sync as any other.
        case inProcess(String)
    }

    package var endpoint: Endpoint
    /// This side sends its changes on the link.
    package var sends = true
    /// This side takes the other side's changes.
    package var receives = true
    /// Only CLIPBOARD on this link, even when PRIMARY is synced.
    package var clipboardOnly = false

    package init(endpoint: Endpoint) {
        self.endpoint = endpoint
    }

    /// For logs and status: `display :2`, `ssh me@box`.
    package var name: String {
        switch endpoint {
        case let .display(display), let .inProcess(display): return "display \(display)"
        case let .ssh(host, display): return "ssh \(host)" + (display.map { " (display \($0))" } ?? "")
        case let .helper(name, _): return name
        }
    }

    /// `both`, `send-only` or `receive-only`.
    package var direction: String { PeerStatus.direction(sends: sends, receives: receives) }

    /// Parses `TARGET[,OPTION…]` for `--sync-display` (`ssh: false`) or `--peer` (`ssh: true`).
    /// Options: `send-only`, `receive-only`, `clipboard-only`, and for peers `display=D`.
    package static func parse(_ text: String, ssh: Bool) throws(SyncSpecError) -> SyncLinkSpec {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let option = ssh ? "--peer" : "--sync-display"
        guard let target = parts.first, !target.isEmpty, !target.hasPrefix("-"),
              !target.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw SyncSpecError("\(option) '\(text)': expected \(ssh ? "HOST" : "a display such as :1") first")
        }
        var display: String?
        var spec = SyncLinkSpec(endpoint: .display(target))
        for part in parts.dropFirst() {
            switch part {
            case "send-only":
                spec.receives = false
            case "receive-only":
                spec.sends = false
            case "clipboard-only":
                spec.clipboardOnly = true
            case _ where ssh && part.hasPrefix("display="):
                let value = String(part.dropFirst("display=".count))
                guard !value.isEmpty, value.allSatisfy({ $0.isLetter || $0.isNumber || ":._-".contains($0) }) else {
                    throw SyncSpecError("\(option) '\(text)': '\(value)' is not a display name")
                }
                display = value
            default:
                let known = ssh ? "display=D, send-only, receive-only, clipboard-only" : "send-only, receive-only, clipboard-only"
                throw SyncSpecError("\(option) '\(text)': unknown option '\(part)' (\(known))")
            }
        }
        guard spec.sends || spec.receives else { throw SyncSpecError("\(option) '\(text)': send-only and receive-only together leave nothing to do") }
        if ssh { spec.endpoint = .ssh(host: target, display: display) }
        return spec
    }
}

/// A `--peer` or `--sync-display` value that cannot be used.
package struct SyncSpecError: Error, Sendable, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// How this daemon syncs with others.
package struct SyncConfiguration: Sendable {
    /// The links this daemon dials (others may dial it: every daemon accepts links from its own
    /// user on its socket).
    package var links: [SyncLinkSpec] = []
    /// Sync PRIMARY too (CLIPBOARD always).
    package var syncsPrimary = false
    /// The command that reaches a peer (`ssh`, or e.g. `ssh -F ~/.ssh/other_config`), run by `sh`.
    package var sshCommand = "ssh"
    /// How the peer's shell runs xpb (`xpb`, or a path, or `env VAR=… /path/xpb`).
    package var remoteXPB = "xpb"
    /// The most bytes one transfer may move, and all transfers under way at once.
    package var maxTransferBytes = 256 << 20
    package var maxTotalBytes = 512 << 20
    /// Bytes a transfer may have in flight before the reading side grants more.
    package var window = 4 << 20
    /// A ping goes out this often; a link silent for `deadAfter` seconds is dropped.
    package var heartbeat = 2.0
    package var deadAfter = 10.0
    /// A transfer that gets no bytes for this long (while its reader waits) fails.
    package var fetchTimeout = 3.0
    /// Waits between reconnection attempts: doubles from the first to the last.
    package var firstBackoff = 0.5
    package var lastBackoff = 30.0

    package init() {}

    /// The selections a link syncs.
    func selections(for spec: SyncLinkSpec?) -> [Pasteboard.Name] {
        [.general] + (syncsPrimary && spec?.clipboardOnly != true ? [.find] : [])
    }
}
