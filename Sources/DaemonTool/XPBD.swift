import CommandLineTable
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardDaemon
import PasteboardKit
import PasteboardWire
import PasteboardX11

/// xpbd: the clipboard manager of one X display. Thin: parses, sets up logging and signals,
/// runs ``ClipboardDaemon``. A library, so that one binary can be both programs: the installed
/// `xpbd` is a link to `xpb`, which calls ``main()`` when it runs under that name (the `xpbd`
/// executable target is the same call, for development builds and the tests).
package enum XPBD {
    /// The options, each declared once: the spec lists them and the look-ups name them, so a
    /// look-up can only name a declared option.
    enum Option {
        static let display = OptionSpec.value(nil, "display", "display", "The X display (default: $DISPLAY).", completion: .displays)
        static let noDBusKlipper = OptionSpec.flag(nil, "no-dbus-klipper", "Do not offer Klipper's D-Bus interface (org.kde.klipper /klipper) on the session bus; by default xpbd offers it where no real Klipper has the name, so that pass, gopass and scripts that call Klipper reach xpbd.")
        static let klipperClearAll = OptionSpec.flag(nil, "klipper-clear-all", "Klipper's clearClipboardHistory clears the whole history (pinned entries kept) whoever calls it, as Klipper does. By default a call from a password manager (pass, gopass, keepassxc-cli … and what they run) forgets only the copies it can have made since it started, not the user's history.")
        static let backend = OptionSpec.value(nil, "backend", "name",
                                              "x11 or wayland: keep only that clipboard (default: $XPB_BACKEND; else with both WAYLAND_DISPLAY and DISPLAY set, both, bridged: each one's copies reach the other, or XWayland's alone where the compositor offers no data-control (GNOME, Weston: it carries XWayland's selections to its Wayland clients itself); else the one that is set).",
                                              completion: .words(SessionHost.Name.allCases.map(\.rawValue)))
        static let replace = OptionSpec.flag(nil, "replace", "Take over from a running clipboard manager (ICCCM manager replacement).")
        static let primary = OptionSpec.flag(nil, "primary", "Also keep PRIMARY (off by default); not fetched while a selection is still being dragged.")
        static let keep = OptionSpec.value(nil, "keep", "name", "Also keep the named pasteboard <name> (repeatable).")
        static let maxEntries = OptionSpec.value(nil, "max-entries", "n", "History entries kept (default \(defaults.maxEntries)).")
        static let maxSize = OptionSpec.value(nil, "max-size", "size", "History bytes kept in all (default \(SizeText.suffixed(defaults.maxBytes)); K, M, G suffixes).")
        static let maxTargetSize = OptionSpec.value(nil, "max-target-size", "size", "The most bytes kept of one target (default \(SizeText.suffixed(defaults.maxTargetBytes))).")
        static let stateDir = OptionSpec.value(nil, "state-dir", "dir", "Where the history lives (default $XDG_STATE_HOME/xpb).")
        static let plainHistory = OptionSpec.flag(nil, "plain-history", "Do not seal a new history at rest. By default everything the history keeps (the database, its log, payload files) is sealed with AES-256-GCM under a key kept in the user's keyring (Secret Service), else in $XDG_CONFIG_HOME/xpb/history.key (mode 600), and thumbnails are made under $XDG_RUNTIME_DIR only; a plain history is sealed at the first start. A history sealed already stays sealed.")
        static let noRestore = OptionSpec.flag(nil, "no-restore", "Do not serve the last history entry at start when nobody owns the clipboard.")
        static let syncDisplay = OptionSpec.value(nil, "sync-display", "display[,opts]", "Keep the clipboard in step with the xpbd of another display on this machine (repeatable).", completion: .displays)
        static let peer = OptionSpec.value(nil, "peer", "host[,opts]", "Keep the clipboard in step with the xpbd of HOST, reached over ssh (repeatable).")
        static let kdeconnect = OptionSpec.flag(nil, "kdeconnect", "Be a KDE Connect device on the local network, so that paired phones and desktops share the clipboard (text only; secrets never leave): run xpbd-kdeconnect beside xpbd, and pair with 'xpb devices'. Its key and the paired devices' certificates live in $XDG_CONFIG_HOME/xpb/kdeconnect.")
        static let kdeconnectName = OptionSpec.value(nil, "kdeconnect-name", "name", "The name KDE Connect devices show for this one (default: the host name).")
        static let syncPrimary = OptionSpec.flag(nil, "sync-primary", "Sync PRIMARY too (links with clipboard-only excepted).")
        static let ssh = OptionSpec.value(nil, "ssh", "command", "How to run ssh for --peer (default: ssh; run by sh, e.g. 'ssh -F ~/.ssh/work_config').")
        static let remoteXpb = OptionSpec.value(nil, "remote-xpb", "command", "How the peer's shell runs xpb (default: xpb; e.g. ~/.local/bin/xpb).")
        static let syncMaxTransfer = OptionSpec.value(nil, "sync-max-transfer", "size", "The most bytes one synced target may move (default \(SizeText.suffixed(defaults.sync.maxTransferBytes))).")
        static let syncMaxTotal = OptionSpec.value(nil, "sync-max-total", "size", "The most bytes all synced transfers to this display may hold under way (default \(SizeText.suffixed(defaults.sync.maxTotalBytes))).")
        static let secretApp = OptionSpec.value(nil, "secret-app", "name", "Treat copies by this app as data marked secret: served while it runs, never kept, synced or brought back (repeatable; matched against the executable's name and WM_CLASS, ignoring case).")
        static let ignoreApp = OptionSpec.value(nil, "ignore-app", "name", "Neither keep nor sync copies by this app (repeatable; matched as --secret-app).")
        static let noSyncApp = OptionSpec.value(nil, "no-sync-app", "name", "Keep copies by this app, never sync them (repeatable; matched as --secret-app).")
        static let refuseSecretTo = OptionSpec.value(nil, "refuse-secret-to", "name", "Refuse data marked secret to this app when it pastes, where xpb serves the secret (xpb copy --sensitive, the xclip stand-in's -sensitive, a headless xpbd), on X and Wayland; while any app is named, a reader that cannot be named is refused too (repeatable; matched against the names of the reader, its parent and its job (executable, command, script), ignoring case; each xpb copy of a secret asks xpbd when it starts).")
        static let noDefaultSecretApps = OptionSpec.flag(nil, "no-default-secret-apps", "Do not treat password managers (\(AppRules.defaultSecretApps.filter { $0 == $0.lowercased() }.joined(separator: ", "))) as secret unless named with --secret-app.")
        static let forgetClearedWithin = OptionSpec.value(nil, "forget-cleared-within", "seconds", "A copy that its app replaces with an empty copy, or that is cleared, within this many seconds was a secret (a password manager that marks nothing clears it itself): it is forgotten, from the history and peers. Until then a copy is held in memory, not written (default 120; 0: never; X displays only).")
        static let ignoreMatch = OptionSpec.value(nil, "ignore-match", "regex", "Neither keep nor sync a copy whose text matches this regular expression (Swift Regex syntax; repeatable; a copy announced before its text was read is withdrawn).")
        static let minSize = OptionSpec.value(nil, "min-size", "size", "Do not keep copies smaller than this (a text's bytes, else every target's; K, M, G suffixes).")
        static let maxCopySize = OptionSpec.value(nil, "max-copy-size", "size", "Do not keep copies larger than this (counted as for --min-size; --max-size caps the whole history).")
        static let primaryToClipboard = OptionSpec.flag(nil, "primary-to-clipboard", "A finished selection (PRIMARY, no pointer button held) becomes CLIPBOARD too, lazily: no bytes move until someone pastes. Never for secrets.")
        static let clipboardToPrimary = OptionSpec.flag(nil, "clipboard-to-primary", "A copy to CLIPBOARD becomes PRIMARY too, lazily. Never for secrets.")
        static let onCopy = OptionSpec.value(nil, "on-copy", "command", "Run this command through sh for each new copy kept: the contents on its standard input (text, else an image, else the first target), XPB_SELECTION, XPB_TYPES, XPB_OWNER_APP and XPB_OWNER_PID in its environment. Never for secrets or ignored apps; at most 4 at once.")
        static let onCopyType = OptionSpec.value(nil, "on-copy-type", "type", "Run --on-copy only for copies with this type (a name as xpb paste -t takes it, or an X target; repeatable).")
        static let onCopyApp = OptionSpec.value(nil, "on-copy-app", "name", "Run --on-copy only for copies by this app (its executable's name; repeatable).")
        static let onCopyTimeout = OptionSpec.value(nil, "on-copy-timeout", "seconds", "Kill an --on-copy action (and what it started) after this many seconds (default 10).")
        static let headless = OptionSpec.flag(nil, "headless", "Run without a display (a server reached over ssh): hold the pasteboards in memory for xpb on this host (the copies made here go to the history in the state directory), and sync them with the desktops that link here (xpbd --peer THIS-HOST there). 'xpb daemon link' starts one when the host has no display and no daemon.")
        static let idleExit = OptionSpec.value(nil, "idle-exit", "seconds", "With --headless: exit after this long with no sync link and no client (default 3600; 0: never).")
        static let config = OptionSpec.value(nil, "config", "file", "Read options from this file first (default $XDG_CONFIG_HOME/xpb/xpbd.conf, when it exists; see FILES).")
        static let noConfig = OptionSpec.flag(nil, "no-config", "Read no configuration file.")
        static let logLevel = OptionSpec.value(nil, "log-level", "level", "trace, debug, info (default), notice, warning, error or critical.")
        static let version = OptionSpec.flag(nil, "version", "Show the version.")
        static let manual = OptionSpec.flag(nil, "manual", "Print the man page (roff; read it with: xpbd --manual | man -l -).")
        static let markdown = OptionSpec.flag(nil, "markdown", "With --manual: the reference in Markdown instead (the generated part of docs/xpbd.md).")
        static let completions = OptionSpec.value(nil, "completions", "shell", "Print the completion script for bash, zsh or fish.")
    }

    /// The defaults, which the help texts quote.
    static let defaults = DaemonConfiguration(stateDirectory: URL(fileURLWithPath: "/"))

    static let spec = CommandSpec(
        name: "",
        abstract: "The xpb clipboard manager: keeps the clipboard when the app that owned it exits, keeps a history, and publishes one change count per display.",
        discussion: """
            Runs in the foreground on $DISPLAY until SIGTERM or SIGINT, then writes its state and exits 0. It holds \
            CLIPBOARD_MANAGER, so one runs per display; if another manager holds it, xpbd names it and exits 1 (--replace \
            takes over). When the display's connection ends it connects again; a display gone for 10 s makes it exit 1 (systemd's Restart=on-failure starts it again). History: \
            $XDG_STATE_HOME/xpb (default ~/.local/state/xpb). Control socket for 'xpb history' and 'xpb daemon status': \
            $XDG_RUNTIME_DIR/xpb/xpbd-<display>.socket.\nSync: --sync-display and --peer keep CLIPBOARD (and PRIMARY with \
            --sync-primary) the same on other displays and machines; a copy is announced at once and its bytes move only \
            when someone pastes. Every xpbd also accepts links from its own user on its socket. Secret and local-only \
            copies never leave this machine. Who copied is known from the X server (the owner's process and executable, \
            and WM_CLASS): copies by password managers are secret by default, and --secret-app, --ignore-app and \
            --no-sync-app name more apps. A link is TARGET[,OPTION...] with options send-only, receive-only, \
            clipboard-only, and for --peer display=D (the remote display; default: the only xpbd running there). A peer \
            is reached with '<ssh> -T -x -o BatchMode=yes HOST <remote-xpb> daemon link [--display D]': xpb must be on the \
            remote PATH (or name it with --remote-xpb) and xpbd must run there.
            """,
        options: [
            Option.display,
            Option.backend,
            Option.noDBusKlipper,
            Option.klipperClearAll,
            Option.replace,
            Option.primary,
            Option.keep,
            Option.maxEntries,
            Option.maxSize,
            Option.maxTargetSize,
            Option.stateDir,
            Option.noRestore,
            Option.plainHistory,
            Option.syncDisplay,
            Option.peer,
            Option.kdeconnect,
            Option.kdeconnectName,
            Option.syncPrimary,
            Option.ssh,
            Option.remoteXpb,
            Option.syncMaxTransfer,
            Option.syncMaxTotal,
            Option.secretApp,
            Option.refuseSecretTo,
            Option.ignoreApp,
            Option.noSyncApp,
            Option.noDefaultSecretApps,
            Option.forgetClearedWithin,
            Option.ignoreMatch,
            Option.minSize,
            Option.maxCopySize,
            Option.primaryToClipboard,
            Option.clipboardToPrimary,
            Option.onCopy,
            Option.onCopyType,
            Option.onCopyApp,
            Option.onCopyTimeout,
            Option.headless,
            Option.idleExit,
            Option.config,
            Option.noConfig,
            Option.logLevel,
            Option.version,
            Option.manual,
            Option.markdown,
            Option.completions,
        ],
        program: "xpbd")

    /// The exit statuses, as help and the man page give them.
    static let exitStatuses: [(status: Int32, meaning: String)] = [
        (0, "stopped cleanly"), (1, "failure (another manager, no display, a display gone for more than 10 s)"), (64, "usage error"),
    ]

    /// The daemon as its man page and completions describe it.
    static var program: ProgramSpec {
        ProgramSpec(name: "xpbd", version: ClipboardDaemon.version, abstract: spec.abstract, discussion: spec.discussion,
                    commands: [spec], exitStatuses: exitStatuses,
                    sections: [("Files", "$XDG_CONFIG_HOME/xpb/xpbd.conf (default ~/.config/xpb/xpbd.conf): options, one or more a line as on the command line (quotes as in the shell; # begins a comment), read before the command line's, which override them; a bad line is an error naming the file and the line; reread on SIGHUP (the app and content rules and the history caps take effect at once, the rest at the next start). $XDG_STATE_HOME/xpb (default ~/.local/state/xpb): the history. $XDG_RUNTIME_DIR/xpb/xpbd-<display>.socket: the control socket.")],
                    seeAlso: ["xpb(1)"])
    }

    /// Options a configuration file cannot give.
    static let commandLineOnly = [Option.config, Option.noConfig, Option.version, Option.manual, Option.markdown, Option.completions]

    /// `$XDG_CONFIG_HOME/xpb/xpbd.conf`, else `~/.config/xpb/xpbd.conf`.
    static func defaultConfigPath() -> String {
        DaemonConfiguration.xdgDirectory("XDG_CONFIG_HOME", else: ".config").appendingPathComponent("xpb/xpbd.conf").path
    }

    /// The configuration file's arguments followed by the command line's (which win: a single
    /// value's last mention counts), the file checked line by line. The file is the one
    /// `--config` names (missing: an error), else the default one if it exists; none with
    /// `--no-config`.
    static func arguments(commandLine: [String], given: ParsedArguments) throws(UsageError) -> (ParsedArguments, path: String?) {
        guard !given.flag(Option.noConfig) else { return (given, nil) }
        let path = given.value(Option.config) ?? defaultConfigPath()
        guard let file = try ConfigFile.load(path) else {
            if given.value(Option.config) != nil { throw UsageError("\(path): no such file (--config)") }
            return (given, nil)
        }
        try file.validate(spec, refusing: commandLineOnly)
        let combined = try ParsedArguments(file.arguments + commandLine, spec: spec)
        do {
            _ = try configuration(combined)
        } catch {
            // A value the file gives that does not hold: named by the first line up to which
            // the file alone is refused (a line may need a later one, as --sync-max-total does).
            var words: [String] = []
            for (number, line) in file.lines {
                words += line
                do {
                    _ = try configuration(try ParsedArguments(words, spec: spec))
                } catch let failure as UsageError {
                    throw UsageError("\(path):\(number): \(failure.message)")
                } catch {
                    throw UsageError("\(path):\(number): \(error)")
                }
            }
            // The file alone holds: the command line's values do not.
        }
        return (combined, path)
    }

    /// The daemon's configuration and log level from parsed arguments.
    static func configuration(_ arguments: ParsedArguments) throws -> (DaemonConfiguration, Logger.Level) {
        var configuration: DaemonConfiguration
        let level: Logger.Level
        configuration = DaemonConfiguration(stateDirectory: arguments.value(Option.stateDir).map { URL(fileURLWithPath: $0) }
                                            ?? DaemonConfiguration.defaultStateDirectory())
        configuration.replace = arguments.flag(Option.replace)
        configuration.keepsPrimary = arguments.flag(Option.primary)
        configuration.keptNames = try arguments.all(Option.keep).map { name throws(UsageError) in
            guard !name.isEmpty, name != "general", name != "find" else { throw UsageError("'\(name)' is not a named pasteboard (--keep)") }
            return Pasteboard.Name(rawValue: name)
        }
        if let entries = try arguments.integer(Option.maxEntries) {
            guard entries > 0 else { throw UsageError("--max-entries takes a positive number") }
            configuration.maxEntries = entries
        }
        if let size = try arguments.size(Option.maxSize) { configuration.maxBytes = size }
        if let size = try arguments.size(Option.maxTargetSize) {
            configuration.maxTargetBytes = size
            configuration.maxSnapshotBytes = max(configuration.maxSnapshotBytes, size)
        }
        configuration.restoresAtStart = !arguments.flag(Option.noRestore)
        configuration.sealsHistory = !arguments.flag(Option.plainHistory)
        do {
            configuration.sync.links = try arguments.all(Option.syncDisplay).map { try SyncLinkSpec.parse($0, ssh: false) }
                + arguments.all(Option.peer).map { try SyncLinkSpec.parse($0, ssh: true) }
        } catch let error as SyncSpecError {
            throw UsageError(error.description)
        }
        if arguments.flag(Option.kdeconnect) {
            configuration.sync.links.append(try KDEConnectHelper.link(name: arguments.value(Option.kdeconnectName)))
        } else if arguments.value(Option.kdeconnectName) != nil {
            throw UsageError("--kdeconnect-name names the device --kdeconnect makes, which is not given")
        }
        configuration.sync.syncsPrimary = arguments.flag(Option.syncPrimary)
        if let command = arguments.value(Option.ssh) {
            guard !command.allSatisfy(\.isWhitespace) else { throw UsageError("--ssh takes a command") }
            configuration.sync.sshCommand = command
        }
        if let command = arguments.value(Option.remoteXpb) {
            guard !command.allSatisfy(\.isWhitespace) else { throw UsageError("--remote-xpb takes a command") }
            configuration.sync.remoteXPB = command
        }
        if let size = try arguments.size(Option.syncMaxTransfer) { configuration.sync.maxTransferBytes = size }
        if let size = try arguments.size(Option.syncMaxTotal) { configuration.sync.maxTotalBytes = size }
        guard configuration.sync.maxTotalBytes >= configuration.sync.maxTransferBytes else {
            throw UsageError("--sync-max-total must be at least --sync-max-transfer")
        }
        for (option, keyPath) in [(Option.secretApp, \AppRules.secretApps), (Option.ignoreApp, \AppRules.ignoredApps),
                                  (Option.noSyncApp, \AppRules.noSyncApps), (Option.refuseSecretTo, \AppRules.refusedSecretReaders)] {
            let names = arguments.all(option)
            if let empty = names.first(where: { $0.allSatisfy(\.isWhitespace) }) {
                throw UsageError("--\(option.long) takes an app name, not '\(empty)'")
            }
            configuration.appRules[keyPath: keyPath] = names
        }
        configuration.appRules.usesDefaultSecretApps = !arguments.flag(Option.noDefaultSecretApps)
        for pattern in arguments.all(Option.ignoreMatch) {
            do {
                try configuration.contentRules.ignore(matching: pattern)
            } catch {
                throw UsageError("--ignore-match: \(error.description)")
            }
        }
        if let size = try arguments.size(Option.minSize) { configuration.contentRules.minimumSize = size }
        if let size = try arguments.size(Option.maxCopySize) { configuration.contentRules.maximumSize = size }
        configuration.primaryToClipboard = arguments.flag(Option.primaryToClipboard)
        configuration.clipboardToPrimary = arguments.flag(Option.clipboardToPrimary)
        if let command = arguments.value(Option.onCopy) {
            guard !command.allSatisfy(\.isWhitespace) else { throw UsageError("--on-copy takes a command") }
            configuration.onCopy.command = command
        }
        configuration.onCopy.types = arguments.all(Option.onCopyType)
        configuration.onCopy.apps = arguments.all(Option.onCopyApp)
        if let seconds = try arguments.seconds(Option.onCopyTimeout) {
            guard seconds > 0 else { throw UsageError("--on-copy-timeout takes a positive number of seconds") }
            configuration.onCopy.timeout = seconds
        }
        if configuration.onCopy.command == nil, !configuration.onCopy.types.isEmpty || !configuration.onCopy.apps.isEmpty {
            throw UsageError("--on-copy-type and --on-copy-app filter --on-copy, which is not given")
        }
        configuration.isHeadless = arguments.flag(Option.headless)
        configuration.offersKlipper = !arguments.flag(Option.noDBusKlipper)
        configuration.klipperClearsAll = arguments.flag(Option.klipperClearAll)
        do throws(SessionPlan.Refusal) {
            let named = try arguments.value(Option.backend).map { name throws(SessionPlan.Refusal) in
                try SessionHost.Name(naming: name, from: "--backend")
            }
            configuration.session = try SessionPlan(backend: named, display: arguments.value(Option.display))
        } catch {
            throw UsageError(error.description)
        }
        if configuration.isHeadless, configuration.session.first == .wayland, arguments.value(Option.backend) != nil {
            throw UsageError("--headless runs without a session: it takes no --backend")
        }
        if let seconds = try arguments.seconds(Option.forgetClearedWithin, allowingZero: true) {
            configuration.forgetClearedWithin = seconds
        }
        if let seconds = try arguments.seconds(Option.idleExit, allowingZero: true) {
            guard configuration.isHeadless else { throw UsageError("--idle-exit applies to --headless only") }
            configuration.idleExit = seconds == 0 ? nil : seconds
        }
        if configuration.isHeadless {
            if arguments.value(Option.display) != nil { throw UsageError("--headless runs without a display: it takes no --display") }
            if configuration.replace { throw UsageError("--headless manages no display's clipboard: it takes no --replace") }
        }
        let name = arguments.value(Option.logLevel) ?? "info"
        guard let parsed = Logger.Level(rawValue: name) else {
            throw UsageError("'\(name)' is not a log level (trace, debug, info, notice, warning, error, critical)")
        }
        level = parsed
        return (configuration, level)
    }

    /// Runs xpbd and ends the process with its status. Through `_exit` once the daemon has
    /// written its state: `exit` runs the libraries' destructors (Xlib's among them) while the
    /// daemon's other threads may still be letting their last objects go (one that closed a
    /// display mid-destructor crashed the process, 1 in some hundred stops after a lost X server).
    package static func runAndExit() -> Never {
        let status = main()
        fflush(nil)
        _exit(status)
    }

    package static func main() -> Int32 {
        let commandLine = Array(CommandLine.arguments.dropFirst())
        var configuration: DaemonConfiguration
        let level: Logger.Level
        let configPath: String?
        do {
            let given = try ParsedArguments(commandLine, spec: spec)
            if given.helpRequested {
                print(HelpText.command(spec) + "\n" + HelpText.wrap(ProgramSpec.exitSentence(exitStatuses), indent: 0))
                return 0
            }
            if given.flag(Option.manual) {
                print(given.flag(Option.markdown) ? MarkdownReference.render(program) : ManualPage.render(program, date: Release.date), terminator: "")
                return 0
            }
            if let shell = given.value(Option.completions) {
                guard let script = Completions.script(for: shell, program) else {
                    throw UsageError("no completions for '\(shell)': \(Completions.shells.joined(separator: ", ")) are supported")
                }
                print(script, terminator: "")
                return 0
            }
            if given.flag(Option.version) {
                print(ClipboardDaemon.version)
                return 0
            }
            let arguments: ParsedArguments
            (arguments, configPath) = try Self.arguments(commandLine: commandLine, given: given)
            (configuration, level) = try Self.configuration(arguments)
        } catch let error as UsageError {
            printError("xpbd: \(error.message)\nUsage: \(HelpText.usage(spec))\n  See 'xpbd --help'.\n")
            return 64
        } catch {
            printError("xpbd: \(error)\n")
            return 64
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "xpbd")
        // Everything the daemon writes (history, sockets) is the user's alone.
        umask(0o077)
        signal(SIGPIPE, SIG_IGN)
        Self.blockHandledSignals()
        let daemon: any RunningDaemon
        do {
            // Made again on a fresh connection when the display's ends (the compositor dropped
            // xpbd, or came back).
            daemon = try ReconnectingDaemon(configuration: configuration, logger: logger) { configuration in
                try DaemonSession.make(configuration: configuration, logger: logger)
            }
        } catch {
            logger.critical("\(error)")
            return 1
        }
        // Signals stop the daemon through its own path: state is written before exit. Set up
        // before it starts serving, so that no signal finds the default action.
        var sources = signalSources([SIGTERM, SIGINT]) { daemon.stop() }
        // SIGHUP rereads the configuration file (and the command line over it): what can change
        // while running takes effect; a bad file changes nothing. A headless daemon started by
        // ssh gets one when that session ends: it rereads its settings and stays for the next.
        signal(SIGHUP, SIG_IGN)
        let reload = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "xpbd.reload"))
        reload.setEventHandler {
            let path = configPath ?? defaultConfigPath()
            do {
                let given = try ParsedArguments(commandLine, spec: spec)
                let (arguments, read) = try Self.arguments(commandLine: commandLine, given: given)
                let (fresh, _) = try Self.configuration(arguments)
                daemon.reload(fresh)
                logger.info("SIGHUP: \(read.map { "reread \($0)" } ?? "no configuration file (\(path))"): app rules, content rules and history caps applied")
            } catch let error as UsageError {
                logger.error("SIGHUP: \(error.message); the settings stay as they were")
            } catch {
                logger.error("SIGHUP: \(error); the settings stay as they were")
            }
        }
        reload.resume()
        sources.append(reload)
        return runToEnd(start: daemon.start, run: daemon.run, sources: sources, logger: logger)
    }

    /// The signals xpbd handles through its signal sources (SIGTERM, SIGINT: stop; SIGHUP:
    /// reload), blocked in this thread before any other is made, so that every thread inherits
    /// the mask: a signal then waits, pending for the whole process, until the source's
    /// descriptor takes it (libdispatch reads a signalfd, which any thread can read a process's
    /// pending signal from). A thread that did not block one would take it itself: libdispatch's
    /// stand-in handler then passes it to the one thread that registered the first source, and a
    /// drain of the descriptor on another thread may never see it. Without this block the main,
    /// X, control socket and sync hub threads had them unblocked, and one loaded test run saw a
    /// SIGTERM leave xpbd running, not a line logged. Children get every signal unblocked again
    /// (``ChildProcess``).
    static func blockHandledSignals() {
        var handled = sigset_t()
        sigemptyset(&handled)
        for number in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&handled, number) }
        pthread_sigmask(SIG_BLOCK, &handled, nil)
    }

    /// Signal sources for `numbers` (their default action ignored) that call `handler`.
    static func signalSources(_ numbers: [Int32], _ handler: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
        numbers.map { number in
            signal(number, SIG_IGN)
            // A serial queue: its work runs on libdispatch's overcommit threads (``Background``).
            let source = DispatchSource.makeSignalSource(signal: number, queue: DispatchQueue(label: "xpbd.signal.\(number)"))
            source.setEventHandler(handler: handler)
            source.resume()
            return source
        }
    }

    /// Starts a daemon and runs it to its end, then ends the signal sources: 0 for a clean stop,
    /// 1 for a failure (a failure to start is logged here).
    static func runToEnd(start: () throws -> Void, run: () -> String?, sources: [any DispatchSourceSignal], logger: Logger) -> Int32 {
        do {
            try start()
        } catch {
            logger.critical("\(error)")
            return 1
        }
        let failure = run()
        sources.forEach { $0.cancel() }
        return failure == nil ? 0 : 1
    }
}

/// Writes to standard error, whatever it is (best effort): FileHandle.write traps when it is closed.
private func printError(_ text: String) {
    var text = text
    text.withUTF8 { _ = writeAll(STDERR_FILENO, UnsafeRawBufferPointer($0)) }
}
