import FoundationEssentials
import PasteboardKit

/// What `xpbd` keeps and where.
package struct DaemonConfiguration: Sendable {
    /// Where the pasteboards live (``SessionPlan``, as `xpb` and the library decide it): an X
    /// display, a Wayland session, or, on a Wayland session with XWayland, both, bridged
    /// (``DaemonSession``). Not read with `--headless`.
    package var session = SessionPlan(hosts: [.x11(display: nil)])
    /// The X display of the plan (nil: `$DISPLAY`).
    package var display: String? {
        for case let .x11(display) in session.hosts { return display }
        return nil
    }
    /// Take over from a running clipboard manager (ICCCM manager replacement).
    package var replace = false
    /// Also keep `PRIMARY` (off by default: it changes with every selection made with the mouse).
    package var keepsPrimary = false
    /// Named pasteboards kept too (`XPB_PASTEBOARD:<name>`).
    package var keptNames: [Pasteboard.Name] = []
    /// History caps: entries, and bytes in all.
    package var maxEntries = 200
    package var maxBytes = 256 << 20
    /// The most bytes kept of one target, and of one clipboard's contents in all.
    package var maxTargetBytes = 128 << 20
    package var maxSnapshotBytes = 256 << 20
    /// How long the owner must stay the same before its contents are fetched, in seconds.
    package var debounce = 0.15
    /// How long after the last history write the listing is encoded ahead, in seconds.
    package var listingDelay = 0.2
    /// How long a fetch of one target may go without progress, and in all, in seconds.
    package var targetTimeout = 2.0
    package var targetDeadline = 30.0
    /// How long a save request (an app exiting) may take before the daemon replies with what it
    /// has, in seconds: Qt waits 5 s, GTK 10 s.
    package var saveBudget = 3.0
    /// Where the history lives (`$XDG_STATE_HOME/xpb`).
    package var stateDirectory: URL
    /// Seal the history at rest (``HistorySeal``): its key from the keyring, else ``keyFile``.
    /// Off (`--plain-history`), a new history is plain; one sealed already stays sealed.
    package var sealsHistory = true
    /// The history's key where no keyring answers (nil: `$XDG_CONFIG_HOME/xpb/history.key`).
    package var keyFile: String?
    /// ``keyFile`` or its default.
    package var historyKeyFile: String {
        keyFile ?? Self.xdgDirectory("XDG_CONFIG_HOME", else: ".config").appendingPathComponent("xpb/history.key").path
    }
    /// The control socket (nil: the display's, under `$XDG_RUNTIME_DIR/xpb`).
    package var socketPath: String?
    /// At start, when nobody owns a kept selection, serve its last history entry.
    package var restoresAtStart = true
    /// Sync with other displays and machines.
    package var sync = SyncConfiguration()
    /// What is done with a copy by the app that made it (secret, ignored, not synced).
    package var appRules = AppRules()
    /// A copy its app takes back within this many seconds (an empty copy of its own, or a
    /// clear) was a secret, and is forgotten (``TakenBackCopies``); 0: never.
    package var forgetClearedWithin: Double = 120
    /// What a copy must not hold to be kept (`--ignore-match`, `--min-size`).
    package var contentRules = ContentRules()
    /// A finished PRIMARY selection becomes CLIPBOARD too, and the other way round (lazily).
    package var primaryToClipboard = false
    package var clipboardToPrimary = false
    /// `--on-copy`: a command run for each new copy kept.
    package var onCopy = CopyActionConfiguration()
    /// `--headless`: no display; the pasteboards are held in memory (``MemoryHost``).
    package var isHeadless = false
    /// Offer Klipper's D-Bus interface on the session bus where the name is free.
    package var offersKlipper = true
    /// `--klipper-clear-all`: Klipper's `clearClipboardHistory` clears the whole history whoever
    /// calls it; by default a password manager's call forgets only what it can have copied.
    package var klipperClearsAll = false
    /// The X side of a bridge: the Wayland compositor's process. Its own X client (its XWayland
    /// window manager) is the compositor's bridge: it takes an X selection for every new Wayland
    /// copy and answers for it only while an X window has the focus. A selection it takes holds
    /// the newest copy already, which the X side takes back to serve it itself; its reads of what
    /// the X side owns are refused (``DisplayHost/compositorTook(_:window:)``).
    package var compositorPID: Int?

    /// The selections whose copies the X side captures: the kept ones, and in a bridge PRIMARY too
    /// (kept in memory, so that the compositor's take of it loses nothing, and in the history
    /// only with `--primary`).
    package var capturedSelections: [Pasteboard.Name] {
        keptSelections + (compositorPID != nil && !keepsPrimary ? [.find] : [])
    }
    /// A headless daemon with no link and no client for this long exits, in seconds (nil: never).
    package var idleExit: Double? = 3600

    package init(stateDirectory: URL) {
        self.stateDirectory = stateDirectory
    }

    /// `$XDG_STATE_HOME/xpb`, else `~/.local/state/xpb`.
    package static func defaultStateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        xdgDirectory("XDG_STATE_HOME", else: ".local/state", environment: environment).appendingPathComponent("xpb")
    }

    /// An XDG base directory: `$variable` when it is an absolute path, else `$HOME/fallback`
    /// (the user database's home without `$HOME`).
    package static func xdgDirectory(_ variable: String, else fallback: String,
                                    environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let directory = environment[variable], directory.hasPrefix("/") { return URL(fileURLWithPath: directory) }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        return URL(fileURLWithPath: home).appendingPathComponent(fallback)
    }

    /// The selections kept, in order: CLIPBOARD, then PRIMARY and named ones when asked.
    package var keptSelections: [Pasteboard.Name] {
        [.general] + (keepsPrimary ? [.find] : []) + keptNames
    }
}
