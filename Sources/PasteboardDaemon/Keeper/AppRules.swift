import FoundationEssentials
import PasteboardSelections

/// Who made a copy, as far as its host can tell (an X owner's process and window; a Wayland copy
/// says nothing of its app): what ``AppRules`` match.
package struct CopyOwner: Sendable {
    package var processID: Int?
    /// The process's executable name, when it runs on this host.
    package var executableName: String?
    /// The other names it goes by: an X window's `WM_CLASS` instance and class, the program an
    /// xpb owner names as the copy's maker.
    package var otherNames: [String]
    /// Its window's title.
    package var title: String?

    package init(processID: Int? = nil, executableName: String? = nil, otherNames: [String] = [], title: String? = nil) {
        self.processID = processID
        self.executableName = executableName
        self.otherNames = otherNames
        self.title = title
    }
}

/// What xpbd does with a copy by the application that made it (``CopyOwner``): a name matches
/// the owner's executable name, or another name it goes by (an X window's `WM_CLASS` instance or
/// class), ignoring case.
package struct AppRules: Sendable, Equatable {
    /// Treated as data marked secret: served while its owner lives, never kept, synced or brought back.
    package var secretApps: [String] = []
    /// Neither kept nor synced.
    package var ignoredApps: [String] = []
    /// Kept, never synced.
    package var noSyncApps: [String] = []
    /// Whether ``defaultSecretApps`` are secret too (`--no-default-secret-apps` turns it off).
    package var usesDefaultSecretApps = true
    /// Processes whose copies are another bridge's (a Wayland compositor's XWayland window
    /// manager, which owns an X selection for every Wayland copy): neither kept nor synced.
    package var bridgeProcesses: Set<Int> = []
    /// The apps a copy marked secret is refused to when they paste it (`--refuse-secret-to`): the
    /// xpb owner that serves a secret asks the daemon for them when it starts
    /// (``PasteboardKit/SecretRefusal``).
    package var refusedSecretReaders: [String] = []

    /// Password managers, secret without any marker on their data: KeePassXC, KeePass (2, and
    /// KeeWeb), Bitwarden, 1Password, QtPass and gopass's UI, Enpass, and the password-fill
    /// helpers of browsers that run as their own executable; and the command-line ones, which
    /// copy through xclip, xsel or wl-copy and are known by the job that runs it
    /// (``LocalProcess/jobNames(of:)``): keepassxc-cli, pass and passage, gopass, rbw,
    /// Bitwarden's bw, 1Password's op, and secret-tool in a pipe.
    package static let defaultSecretApps = [
        "keepassxc", "KeePassXC", "keepass", "keepass2", "KeePass2", "keeweb", "bitwarden", "Bitwarden", "1password", "1Password",
        "qtpass", "QtPass", "gopass", "gopass-ui", "enpass", "Enpass", "kwalletmanager5", "seahorse",
        "keepassxc-cli", "pass", "passage", "rbw", "rbw-agent", "bw", "op", "secret-tool",
    ]

    package init() {}

    /// The secret apps' names, lowercased (the given ones and, unless turned off, the defaults).
    var secretAppNames: Set<String> {
        Set((secretApps + (usesDefaultSecretApps ? Self.defaultSecretApps : [])).map { $0.lowercased() })
    }

    /// What applies to a copy by `owner`, strongest first: secret, ignored, not synced. When the
    /// owner's process is unknown, a secret app named by a word of the window's title counts
    /// too ("Passwords.kdbx - KeePassXC"): an owner that cannot be known is not taken as safe.
    package func rule(for owner: CopyOwner) -> Rule? {
        if let pid = owner.processID, bridgeProcesses.contains(pid) { return .ignored }
        // The program an xpb owner names as the copy's maker too: `pass` through the xclip stand-in.
        let names = ([owner.executableName].compactMap { $0 } + owner.otherNames).map { $0.lowercased() }
        func matches(_ list: some Sequence<String>) -> Bool { list.contains { names.contains($0.lowercased()) } }
        let secret = secretAppNames
        if owner.executableName == nil, let title = owner.title?.lowercased() {
            let words = Set(title.split { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }.map(String.init))
            if secret.contains(where: { words.contains($0.lowercased()) }) { return .secret }
        }
        guard !names.isEmpty else { return nil }
        if matches(secret) { return .secret }
        // A password manager that copies through xclip, xsel or wl-copy: secret by its job
        // (only for secrets: a job is not the app, so it never makes a copy ignored). Looked at
        // only here, for a process of this host (its executable is known), and only when its own
        // names said nothing: the look may read /proc.
        if owner.executableName != nil, let pid = owner.processID, LocalProcess.jobNames(of: pid).contains(where: secret.contains) { return .secret }
        if matches(ignoredApps) { return .ignored }
        if matches(noSyncApps) { return .noSync }
        return nil
    }

    package enum Rule: Sendable, Equatable {
        case secret, ignored, noSync
    }
}
