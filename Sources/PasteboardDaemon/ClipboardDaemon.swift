import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// xpbd: the history and the record pipeline (content rules, `--on-copy` actions, caps), the
/// control socket, the sync hub, status, SIGHUP reload and the lifecycle, over a host that holds
/// the pasteboards (``ClipboardHost``): the X display (``DisplayHost``), or memory on a host
/// without one (``MemoryHost``, `--headless`). What differs between the two lives in the host
/// alone, so that the two cannot drift apart.
///
/// Threads: the host has its own (the X thread, the keeper's queues); history writes run in order
/// on `storage`; each control client is served on a thread of its own.
package final class ClipboardDaemon: Sendable {
    package let configuration: DaemonConfiguration
    let logger: Logger
    package let host: any ClipboardHost
    /// The history: on disk, and in memory the copies their app may still take back.
    package let store: HistoryLock
    /// History writes, in order, off the hosts' and the clients' threads (the history's own queue).
    var storage: DispatchQueue { store.writes }
    /// Room for copies queued on `storage` and not written yet: past 32 copies or 64 MiB a copy
    /// waits for the disk (a flood of copies is slowed to the disk's pace, not held in memory).
    let backlog = WriteBacklog(maxCopies: 32, maxBytes: 64 << 20)
    /// `--on-copy`.
    let actions: CopyActions
    /// `--ignore-match`, `--min-size` (replaced on SIGHUP).
    let contentRules: Mutex<ContentRules>
    /// `--refuse-secret-to` (replaced on SIGHUP): what xpb owners of a secret ask for, and what
    /// the headless host applies to the secrets it holds.
    let secretRefusal: Mutex<SecretRefusal>
    /// The copies their app may still take back (`--forget-cleared-within`).
    let takenBack: Mutex<TakenBackCopies>
    /// Sync with other displays and machines (links dialed by us or by them).
    package let hub: SyncHub
    package let socketPath: String
    /// More paths the control socket answers on (``ClipboardHost/otherSocketPaths``).
    let otherSocketPaths: [String]
    let startedAt = Date()
    private let control = Mutex<[ControlServer]>([])
    /// The session bus's connection, while xpbd answers there (``KlipperObject``, ``PasteboardObject``).
    let dbus = Mutex<DBusService?>(nil)
    /// What it answers: Klipper's interface (unless `--no-dbus-klipper`) and xpbd's own.
    let dbusObjects = Mutex<(klipper: KlipperObject?, pasteboard: PasteboardObject?)>((nil, nil))
    /// The full history listing's encoded reply and the history version it lists.
    let listing = Mutex<(version: History.ListingVersion, payload: Data)?>(nil)
    /// Counts history writes, so that a burst of them encodes the listing ahead once
    /// (``encodeListingSoon()``).
    let listingWrites = Mutex(0)
    /// Signalled once when the daemon must stop, with the reason (nil: asked to), and whether
    /// it lost its display (xpbd may connect again: ``ReconnectingDaemon``).
    private let stopped = Mutex<(done: Bool, failure: String?, lostDisplay: Bool)>((false, nil, false))
    private let stopSignal = DispatchSemaphore(value: 0)
    /// The clients following pastes (`xpb watch --pastes`).
    let pasteFollowers = Followers<PasteNote>()
    /// When the daemon last had a link, a client or a request (`--idle-exit`).
    private let lastBusy = Mutex(Date())
    /// Wakes the idle clock when the daemon stops.
    private let idleWake = DispatchSemaphore(value: 0)

    /// A daemon over `host` (DaemonTool's ``DaemonSession`` makes the host the configuration asks
    /// for: one port, or a bridge of two), with the state directory's history. Nothing is served
    /// yet: see ``start()``.
    package init(host: any ClipboardHost, configuration: DaemonConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.host = host
        let opened = try Self.openHistory(configuration, logger: logger)
        store = try HistoryLock(History(disk: opened.store, logger: logger), awaitsKeyring: opened.awaitsKeyring)
        socketPath = configuration.socketPath ?? host.defaultSocketPath
        otherSocketPaths = configuration.socketPath == nil ? host.otherSocketPaths : []
        actions = CopyActions(configuration.onCopy, logger: logger)
        contentRules = Mutex(configuration.contentRules)
        secretRefusal = Mutex(SecretRefusal(apps: configuration.appRules.refusedSecretReaders))
        takenBack = Mutex(TakenBackCopies(window: configuration.forgetClearedWithin))
        hub = SyncHub(configuration: configuration.sync, surface: host.surface, displayName: host.nodeName, logger: logger)
    }

    /// The history in the state directory; when that cannot be used (read-only, not a
    /// directory, no permission), one warning naming it, and a history in memory: the daemon
    /// keeps the clipboard all the same, as with a full disk.
    ///
    /// Sealed at rest (the default), the key comes from the keyring or the key file
    /// (``HistoryKeyring``); a keyring that is locked, or a history sealed with another key, keeps
    /// the history in memory, the file left as it is: for this run, or, where the keyring is
    /// locked (`awaitsKeyring`), until it unlocks (``awaitKeyring()``).
    static func openHistory(_ configuration: DaemonConfiguration, logger: Logger) throws -> (store: HistoryStore, awaitsKeyring: Bool) {
        let store: HistoryStore
        let inMemory = { () throws -> HistoryStore in
            try HistoryStore(inMemoryFor: configuration.stateDirectory, maxEntries: configuration.maxEntries,
                             maxBytes: configuration.maxBytes, logger: logger)
        }
        let databasePath = configuration.stateDirectory.appendingPathComponent("history.sqlite").path
        var seals: [HistorySeal] = []
        if configuration.sealsHistory || HistorySeal.isSealedDatabase(databasePath) {
            if !configuration.sealsHistory {
                logger.notice("--plain-history: the history in \(databasePath) is sealed already and stays sealed (a new history would be plain)")
            }
            switch HistoryKeyring.obtain(keyFile: configuration.historyKeyFile, logger: logger) {
            case let .keys(found):
                seals = found
            case let .locked(why):
                logger.warning("\(why): the history in \(databasePath) is left as it is, and copies are kept in memory until the keyring is unlocked; they are written to it then")
                store = try inMemory()
                store.reading.thumbnails = ThumbnailCache.forUser(sealed: true)
                return (store, true)
            case let .unavailable(why):
                logger.warning("\(why): the history in \(databasePath) is left as it is, and this run keeps its history in memory until xpbd stops")
                store = try inMemory()
                store.reading.thumbnails = ThumbnailCache.forUser(sealed: true)
                return (store, false)
            }
        }
        do {
            store = try HistoryStore(directory: configuration.stateDirectory, maxEntries: configuration.maxEntries,
                                     maxBytes: configuration.maxBytes, seals: seals, logger: logger)
        } catch let error as HistorySealError {
            logger.error("\(error): this run keeps its history in memory until xpbd stops")
            store = try inMemory()
        } catch {
            logger.warning("the history cannot be kept in \(configuration.stateDirectory.path) (\(error)): keeping it in memory until xpbd stops")
            store = try inMemory()
        }
        let sealed = store.database.isInMemory ? configuration.sealsHistory : store.database.seal != nil
        store.reading.thumbnails = ThumbnailCache.forUser(sealed: sealed)
        return (store, false)
    }

    // MARK: Lifecycle

    /// Takes the host's selections, starts answering on the control socket, dials the configured
    /// peers and, where the host stops when idle, starts the idle clock.
    ///
    /// - Throws: when another daemon serves the host (another clipboard manager without
    ///   `replace`, another headless daemon of this user), or the socket cannot be made.
    package func start() throws {
        try host.start(self)
        // Queued before the control socket answers: a reader's wait for the writes handed in
        // waits for the first turn (caps a little over are met by it).
        beginHistoryUpkeep()
        if store.beginKeyringWait() { awaitKeyring() }
        let server = try controlServer(on: socketPath)
        control.withLock { $0 = [server] }
        logger.info("listening on \(socketPath)")
        for path in otherSocketPaths {
            do {
                let other = try controlServer(on: path)
                control.withLock { $0.append(other) }
                logger.info("listening on \(path) too")
            } catch {
                logger.warning("cannot listen on \(path) too (\(error)): clients find xpbd on \(socketPath)")
            }
        }
        startDBus()
        host.connect(self)
        hub.onKeep { [weak self] name, app, targets in self?.keep(name, app: app, targets: targets) }
        hub.start()
        startIdleClock()
    }

    /// Blocks until the daemon stops (``stop()``, a replacing manager, a lost X server, the idle
    /// exit), then writes its state and closes. Returns the failure, nil for a clean stop.
    package func run() -> String? {
        stopSignal.wait()
        host.stopping()
        // In order: the sync links, then the control socket and its clients, then the history
        // writes under way; the history is checkpointed. Each step says so at debug level: a
        // stop that hangs shows where.
        logger.debug("stopping: the sync links")
        hub.stop()
        logger.debug("stopping: the session bus")
        dbus.withLock { service in
            service?.stop()
            service = nil
        }
        logger.debug("stopping: the control socket")
        for server in control.withLock({ servers in
            defer { servers = [] }
            return servers
        }) { server.stop() }
        logger.debug("stopping: the history writes under way")
        storage.sync {}
        // The copies their app could still have taken back are kept after all.
        takenBack.withLock { $0.expire(at: .distantFuture) }
        storage.sync { writeReleased(because: "xpbd stops") }
        store.withLock { _ = $0.checkpoint() }
        logger.debug("stopping: the host")
        host.close()
        logger.info("stopped; history written")
        return stopped.withLock { $0.failure }
    }

    /// The control socket on `path`: requests answered, sync links handed to the hub.
    private func controlServer(on path: String) throws -> ControlServer {
        try ControlServer(path: path, logger: logger, handler: { [weak self] request, channel in
            guard let self else { return .failure(ControlFailure("the daemon is stopping")) }
            self.touch()
            defer { self.touch() }
            return self.answer(request, on: &channel)
        }, syncHandler: { [weak self] fd, hello in
            guard let self else {
                close(fd)
                return
            }
            self.touch()
            self.hub.accept(fd: fd, hello: hello)
        })
    }

    /// Asks the daemon to stop (SIGTERM, SIGINT).
    package func stop() {
        finish(failure: nil, reason: "asked to stop")
    }

    /// Takes what can change while running from a reread configuration (SIGHUP): the app
    /// rules, the content rules and the history caps (applied at once, in turns). The rest
    /// (display, sync links, state directory …) takes effect at the next start.
    package func reload(_ fresh: DaemonConfiguration) {
        host.reload(fresh)
        contentRules.withLock { $0 = fresh.contentRules }
        secretRefusal.withLock { $0 = SecretRefusal(apps: fresh.appRules.refusedSecretReaders) }
        takenBack.withLock { $0.window = fresh.forgetClearedWithin }
        store.withLock { store in
            store.maxEntries = fresh.maxEntries
            store.maxBytes = fresh.maxBytes
        }
        // Caps lowered by many entries are met in turns.
        upkeepTurn()
    }

    /// Whether the daemon was asked to stop (or failed).
    var isStopping: Bool { stopped.withLock { $0.done } }

    /// Whether the daemon stopped because its connection to the display ended (``lost(_:)``).
    package var lostItsDisplay: Bool { stopped.withLock { $0.lostDisplay } }

    /// The connection to the display ended (`what`: "the connection to the X server (why)"):
    /// the daemon stops, with a failure, and says it lost it.
    package func lost(_ what: String) {
        finish(failure: "lost \(what)", reason: "lost \(what)", lostDisplay: true)
    }

    /// Stops the daemon once, for `reason` (logged; `failure` makes the run fail).
    package func finish(failure: String?, reason: String, lostDisplay: Bool = false) {
        let first = stopped.withLock { value -> Bool in
            guard !value.done else { return false }
            value = (true, failure, lostDisplay)
            return true
        }
        guard first else { return }
        if failure != nil { logger.error("\(reason)") } else { logger.notice("\(reason)") }
        idleWake.signal()
        stopSignal.signal()
    }

    // MARK: Idle exit

    private func touch() {
        lastBusy.withLock { $0 = Date() }
    }

    /// Looks at links and clients eight times per `--idle-exit` period (at most every 50 ms, at
    /// least every minute): after a whole period with neither, and no request, the daemon stops.
    private func startIdleClock() {
        guard host.stopsWhenIdle, let idle = configuration.idleExit else { return }
        let period = min(max(idle / 8, 0.05), 60)
        let wake = idleWake
        do {
            try DetachedThread.start(name: "xpbd.idle") { [weak self] in
                while true {
                    _ = wake.wait(timeout: .now() + period)
                    guard let self, !stopped.withLock({ $0.done }) else { return }
                    let busy = hub.peerStatuses().contains { $0.state == "connected" } || control.withLock { $0.contains { $0.clientCount > 0 } }
                    if busy {
                        touch()
                    } else if Date().timeIntervalSince(lastBusy.withLock { $0 }) >= idle {
                        return finish(failure: nil, reason: "no link and no client for \(Self.duration(idle)): exiting (--idle-exit)")
                    }
                }
            }
        } catch {
            logger.error("cannot start the idle clock's thread (--idle-exit will not apply): \(error)")
        }
    }

    /// `1 h`, `90 s`, `0.5 s`.
    static func duration(_ seconds: Double) -> String {
        if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600)) h" }
        if seconds >= 60, seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60)) min" }
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    // MARK: The record pipeline

    /// Whether the content rules let a copy be kept. A refused copy is logged (`from` names its
    /// maker) and, unless the rule lets it sync, its announce to other nodes is withdrawn (by
    /// `hub`, the port's own in a bridge; nil: the daemon's).
    package func admits(_ snapshot: Snapshot, from maker: String, owner: UInt, hub: SyncHub? = nil) -> Bool {
        guard let refusal = contentRules.withLock({ $0 }).refusal(snapshot) else { return true }
        logger.info("\(SelectionNames.selection(for: snapshot.selection)) from \(maker) not kept: \(refusal.reason)")
        if !refusal.synced { (hub ?? self.hub).withdrawOwn(snapshot.selection, owner: owner) }
        return false
    }

    /// Keeps an admitted copy: the `--on-copy` actions run, and the history is written on
    /// `storage` (the caller has its answer already). A copy expired before its turn is not
    /// written (it would stay until the next). `written` hears the entry's id. A failed write is
    /// logged and the host goes on serving from memory.
    ///
    /// A copy its app may still take back (``TakenBackCopies``, a host that sees take-backs) is
    /// held in memory (``History``) and written once it can no longer be (``writeReleased(because:)``).
    ///
    /// The record's entrance, for every host and front door: a copy marked secret
    /// (``SecretMarking``, by any of its types) goes no further, to no action, file or signal.
    /// Hosts look before they fetch (a secret's bytes are never even read); this is the rule's
    /// one place for what is kept.
    ///
    /// `port`: the host that kept it, where the daemon's host is a bridge of two (its display
    /// names the entry, and only a port that sees take-backs holds it); nil: the daemon's host.
    package func record(_ snapshot: Snapshot, from port: (any ClipboardHost)? = nil, written: (@Sendable (Int64) -> Void)? = nil) {
        guard let window = entrance(snapshot) else { return }
        let room = roomToWrite(snapshot.size)
        let port = port ?? host
        storage.async { [self] in
            defer { if room { backlog.leave(snapshot.size) } }
            write(snapshot, from: port, window: window, written: written)
        }
    }

    /// Room among the copies waiting to be written for one of `size` bytes (``WriteBacklog``):
    /// waits for it (up to 30 s, then goes on uncounted); whether it was taken, to be left once
    /// the copy is written. On the storage queue itself, which is what frees the room, it never
    /// waits.
    package func roomToWrite(_ size: Int) -> Bool {
        if backlog.tryEnter(size) { return true }
        guard !store.isOnWrites else { return false }
        let load = backlog.load
        logger.debug("\(load.copies) copies (\(ByteCount.format(load.bytes))) wait to be written: this one waits for room")
        return backlog.enter(size, until: .now() + 30)
    }

    /// ``record(_:written:)`` on the storage queue itself, for a host whose copy already went
    /// there (its room taken before: ``roomToWrite(_:)``).
    package func recordOnStorage(_ snapshot: Snapshot, written: (@Sendable (Int64) -> Void)? = nil) {
        dispatchPrecondition(condition: .onQueue(storage))
        guard let window = entrance(snapshot) else { return }
        write(snapshot, from: host, window: window, written: written)
    }

    /// The record's entrance: nil for a secret (said, and nothing else done); else the copy's
    /// `--on-copy` actions start, the taken-back rule notes it, and its window is returned.
    private func entrance(_ snapshot: Snapshot) -> TimeInterval? {
        if SecretMarking.isSecret(snapshot.advertised + snapshot.targets.map(\.target)) {
            logger.info("\(SelectionNames.selection(for: snapshot.selection)) from \(snapshot.app ?? snapshot.source ?? "an unknown app") is marked secret: not kept")
            return nil
        }
        actions.copied(snapshot)
        return takenBack.withLock { rule in
            rule.kept(snapshot.selection, app: snapshot.app, time: snapshot.time)
            return rule.window
        }
    }

    /// Writes a copy that passed the entrance, on the storage queue.
    private func write(_ snapshot: Snapshot, from port: any ClipboardHost, window: TimeInterval, written: (@Sendable (Int64) -> Void)?) {
        let selection = SelectionNames.selection(for: snapshot.selection)
        guard !snapshot.isExpired() else {
            logger.info("\(selection) from \(snapshot.app ?? snapshot.source ?? "?") expired before it was written: not kept")
            return
        }
        do {
            // The copy it replaced can no longer be taken back: written first, so that the
            // caps count this one after it.
            writeReleased(because: "a newer copy replaced it")
            let holding = port.seesTakeBacks && window > 0
                && takenBack.withLock { $0.holding.contains(History.HeldKey(snapshot.selection, time: snapshot.time)) }
            let id = try store.withLock { try $0.add(snapshot, display: port.nodeName, holding: holding) }
            takenBack.withLock { $0.written(snapshot.selection, time: snapshot.time, entry: id) }
            if holding {
                storage.asyncAfter(deadline: .now() + window + 0.05) { [self] in
                    takenBack.withLock { $0.expire(at: Date()) }
                    writeReleased(because: "its app did not take it back within \(Self.duration(window))")
                }
            }
            announceCopy(snapshot)
            encodeListingSoon()
            written?(id)
        } catch {
            logWriteFailure(error)
        }
    }

    /// A history entry that could not be written: the full disk said as such.
    func logWriteFailure(_ error: any Error) {
        switch error {
        case let error as POSIXFailure where error.isDiskFull:
            logger.error("the disk is full: history entry not written (\(error)); still serving the clipboard from memory")
        case let error as SQLiteError where error.isFull:
            logger.error("the disk is full: history entry not written (\(error)); still serving the clipboard from memory")
        default:
            logger.error("history entry not written: \(error); still serving the clipboard from memory")
        }
    }

    /// A copy expired on the host: the history forgets it too (on `storage`), then `done` runs.
    package func expired(then done: (@Sendable () -> Void)? = nil) {
        storage.async { [self] in
            if (try? store.withLock { try $0.prune() }) == true { upkeepTurn() }
            done?()
        }
    }

    /// The version `xpbd --version` prints (xpb's: ``Release/version``).
    package static let version = Release.version
}
