import Dispatch
import FoundationEssentials
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// The driver of ``SyncLedger``: this display's ownership changes (stamped on the X thread),
/// other nodes' announces and withdraws go in; the ledger's effects are performed here: offers
/// read, messages queued on links, and the display's selections owned or cleared by
/// compare-and-own on the X thread.
extension SyncHub {
    /// Now, in the clock's unit (ms since 1970).
    static var wallClock: UInt64 { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) }

    /// The most targets an announce may list, and the longest target name (an owner's TARGETS is
    /// read with the same bound): each becomes an atom of this display.
    static let maxTargets = 256
    /// Target names new to this daemon one link may bring in, and all links together over the
    /// daemon's life: each becomes an X atom, which the X server keeps until it ends.
    static let maxNamesPerLink = 1024
    static let maxForeignNames = 8192
    static let maxTargetName = 1024

    /// A change of a synced selection's owner, in the surface's order of changes: stamped now.
    package func ownerChanged(_ name: Pasteboard.Name, owner: UInt, event: SyncLedger.OwnerEvent) {
        guard synced.contains(name) else { return }
        let selection = SelectionNames.selection(for: name)
        let (effects, senders) = state.withLock { state -> ([SyncLedger.Effect], [ServeTask]) in
            guard !state.isStopped else { return ([], []) }
            return (state.ledger.ownerChanged(selection, owner: owner, event: event, now: Self.wallClock),
                    state.senders.values.filter { $0.selection == selection })
        }
        // Senders of the previous contents waiting for credit end now (with a failure the
        // reading side is told), instead of holding their owner's turn until the credit comes.
        for sender in senders { sender.wake() }
        if event == .cleared { logger.debug("sync: \(selection) was cleared by its owner") }
        perform(effects)
    }

    /// A history entry became the selection (`xpb history select`): announced like a copy.
    /// Takes back this display's copy by `owner` if it was announced (``SyncLedger/withdrawOwn(_:owner:)``).
    func withdrawOwn(_ name: Pasteboard.Name, owner: UInt) {
        guard synced.contains(name) else { return }
        let selection = SelectionNames.selection(for: name)
        let effects = state.withLock { $0.ledger.withdrawOwn(selection, owner: owner) }
        if !effects.isEmpty { logger.info("sync: \(selection) withdrawn: its text matches --ignore-match") }
        perform(effects)
    }

    /// A stream of bytes at hand: begun, whole and ended (an X owner's manifest is `UTF8_STRING`).
    static func finishedStream(_ data: Data) -> ByteStream {
        let stream = ByteStream(sizeHint: data.count)
        stream.begin(type: "UTF8_STRING", size: data.count)
        stream.append(data)
        stream.finish()
        return stream
    }

    /// The targets announced of a copy: its kept targets (``KeepPolicy/keptTargets(_:manifest:)``:
    /// every item's), at most ``maxTargets``; the manifest's bytes with it
    /// (``SyncTarget/inline``) when it is small enough.
    package static func announcedTargets(_ kept: [String], sizes: (String) -> Int?, manifest: Data?) -> [SyncTarget] {
        kept.prefix(maxTargets).map { name in
            if name == SyncTarget.inlineTarget, let manifest, manifest.count <= SyncTarget.maxInline {
                return SyncTarget(target: name, size: manifest.count, inline: manifest)
            }
            return SyncTarget(target: name, size: sizes(name))
        }
    }

    package func selectedFromHistory(_ name: Pasteboard.Name) {
        guard synced.contains(name) else { return }
        let selection = SelectionNames.selection(for: name)
        perform(state.withLock { $0.ledger.selectedAgain(selection, owner: surface.ourOwner, now: Self.wallClock) })
    }

    /// Another bridge took `name` on the display for the newest copy (``SyncLedger/takeBack(_:)``):
    /// the newest copy from elsewhere is owned again. False when the newest is this display's
    /// own (or `name` is not synced): the keeper has its bytes.
    package func takeBack(_ name: Pasteboard.Name) -> Bool {
        guard synced.contains(name) else { return false }
        let selection = SelectionNames.selection(for: name)
        let effects = state.withLock { $0.isStopped ? [] : $0.ledger.takeBack(selection) }
        perform(effects)
        return !effects.isEmpty
    }

    /// Whether this node has read its display's change of `name` to `owner` and that owner's
    /// offer (``SyncLedger/hasRead(_:owner:)``).
    package func hasRead(_ name: Pasteboard.Name, owner: UInt) -> Bool {
        state.withLock { $0.ledger.hasRead(SelectionNames.selection(for: name), owner: owner) }
    }

    func remoteAnnounce(_ announce: SyncAnnounce, from link: SyncLink) {
        if let problem = SyncLedger.malformation(of: announce, maxTargets: Self.maxTargets, maxTargetName: Self.maxTargetName) {
            logger.warning("sync: ignored a malformed announce from \(link.label): \(problem)")
            return
        }
        if announce.stamp.clock > Self.wallClock + SyncLedger.maxClockSkew {
            logger.warning("sync: ignored an announce from \(link.label) stamped more than a day ahead of this machine's clock (\(announce.stamp)); check the clocks")
            return
        }
        // New target names are counted against the link's budget and the daemon's: past them the
        // announce is ignored (told once per link), and no atom is made for it.
        let (ignored, warning) = state.withLock { state -> (Bool, String?) in
            let fresh = Set(announce.targets.map(\.target)).subtracting(state.foreignNames)
            guard !fresh.isEmpty else { return (false, nil) }
            let brought = state.namesBrought[link.id, default: 0]
            let problem: String
            if brought + fresh.count > Self.maxNamesPerLink {
                problem = "it brought \(brought) new target names already (at most \(Self.maxNamesPerLink) a link)"
            } else if state.foreignNames.count + fresh.count > Self.maxForeignNames {
                problem = "the links brought \(state.foreignNames.count) target names already (at most \(Self.maxForeignNames))"
            } else {
                state.foreignNames.formUnion(fresh)
                state.namesBrought[link.id] = brought + fresh.count
                return (false, nil)
            }
            return (true, state.overNameBudget.insert(link.id).inserted ? problem : nil)
        }
        if let warning { logger.warning("sync: ignoring announces from \(link.label) with new target names: \(warning)") }
        if ignored { return }
        perform(state.withLock { state -> [SyncLedger.Effect] in
            guard !state.isStopped else { return [] }
            return state.ledger.announced(announce, from: link.id, now: Self.wallClock, wall: Date())
        }, via: link)
    }

    func remoteWithdraw(selection: String, stamp: SyncStamp, from link: SyncLink) {
        perform(state.withLock { state -> [SyncLedger.Effect] in
            guard !state.isStopped else { return [] }
            return state.ledger.withdrawn(selection, stamp: stamp, from: link.id, now: Self.wallClock)
        }, via: link)
    }

    /// Carries out what the ledger decided. Nothing here waits: X work goes to `queue`, offers are
    /// read on `localQueue`, frames are queued on their links.
    func perform(_ effects: [SyncLedger.Effect], via source: SyncLink? = nil) {
        for effect in effects {
            switch effect {
            case let .send(message, ids):
                let links = state.withLock { state in ids.compactMap { state.links[$0] } }
                for link in links {
                    if case .announce = message { link.stats.withLock { $0.announcesSent += 1 } }
                    link.send(message)
                }
            case let .readOffer(selection, stamp, owner):
                localQueue.async { [self] in readOffer(selection, stamp: stamp, owner: owner) }
            case let .own(announce):
                let app = source.flatMap { Self.app(of: announce, keptFor: $0) }
                queue.async { [self] in own(announce, via: source?.label ?? "a link", keepingAs: app) }
            case let .clear(selection, stamp):
                queue.async { [self] in clear(selection, stamp: stamp) }
            case let .expireAt(date, selection, stamp):
                queue.asyncAfter(deadline: .now() + min(max(0, date.timeIntervalSinceNow), 1e9)) { [self] in
                    perform(state.withLock { $0.ledger.expired(selection, stamp: stamp) })
                }
            }
        }
    }

    /// Compare-and-own: takes the selection for another node's copy only if, on the X thread at
    /// that moment, the ledger still holds that copy as the newest and the selection's owner is
    /// one it has seen (a newer copy whose event is not read yet is never replaced).
    ///
    /// `app`: the copy is made on a node that keeps no history, which sent it itself: once owned,
    /// it is this daemon's to keep, as this app's (``onKeep(_:)``).
    func own(_ announce: SyncAnnounce, via label: String, keepingAs app: String? = nil) {
        guard let name = Self.name(ofSelection: announce.selection) else { return }
        let stamp = announce.stamp
        let ours = surface.ourOwner
        let targets = announce.targets.map { target in
            // A manifest that came with the announce is served from here, never fetched.
            if let inline = target.inline { return RemoteTarget(target: target.target, size: inline.count) { Self.finishedStream(inline) } }
            return RemoteTarget(target: target.target, size: target.size) { [weak self] in
                self?.openRemote(name, stamp: stamp, target: target)
            }
        }
        // An X server too busy to answer in time (a timestamp under load) is asked again: a
        // transient stall must not lose the newest copy. Each attempt is compare-and-own again.
        for attempt in 1...Self.ownAttempts {
            do {
                let owned = try surface.own(name, targets: targets, origin: announce.origin, if: { [weak self] actual in
                    self?.state.withLock { $0.ledger.mayOwn(announce.selection, stamp: stamp, actualOwner: actual, ours: ours) } ?? false
                })
                if owned {
                    logger.info("sync: \(announce.selection) is now the copy from \(announce.origin) (\(announce.targets.count) targets, via \(label))")
                    if let app { keeping.withLock { $0 }?(name, app, targets) }
                } else {
                    logger.debug("sync: \(announce.selection): the copy from \(announce.origin) (\(stamp)) is no longer the newest here: not taken")
                }
                return
            } catch let error as PasteboardError where attempt < Self.ownAttempts && Self.isTimeout(error) {
                guard !state.withLock({ $0.isStopped }) else { return }
                logger.debug("sync: taking \(announce.selection) for the copy from \(announce.origin): \(error); trying again")
            } catch {
                logger.warning("sync: could not take \(announce.selection) for the copy from \(announce.origin): \(error)")
                return
            }
        }
    }

    /// Who made a copy that `link` announced, when this daemon is to keep it: the link's node
    /// keeps no history and made the copy itself (not one it relays). Its origin is the node's
    /// name and, in parentheses, the copy's own (`host KDE Connect (KDE Connect: Pixel 8)`).
    static func app(of announce: SyncAnnounce, keptFor link: SyncLink) -> String? {
        guard link.theirs.keepsHistory == false, announce.stamp.node == link.theirs.node else { return nil }
        let prefix = link.theirs.name + " ("
        let app = announce.origin.hasPrefix(prefix) && announce.origin.hasSuffix(")")
            ? String(announce.origin.dropFirst(prefix.count).dropLast()) : link.theirs.name
        return LogThrottle.printable(String(app.prefix(200)))
    }

    /// Sets what keeps the copies of nodes without a history (the daemon's record), once.
    package func onKeep(_ hook: @escaping KeepHook) {
        keeping.withLock { $0 = hook }
    }

    /// How often a remote copy is tried when the display times out.
    static let ownAttempts = 3

    static func isTimeout(_ error: PasteboardError) -> Bool {
        if case .timedOut = error { return true }
        return false
    }

    /// Compare-and-clear, for a newer clear (or a withdrawn copy) from elsewhere, or a proxy
    /// taken after this display's own clear.
    func clear(_ selection: String, stamp: SyncStamp) {
        guard let name = Self.name(ofSelection: selection) else { return }
        let ours = surface.ourOwner
        do {
            let cleared = try surface.clear(name, if: { [weak self] actual in
                self?.state.withLock { $0.ledger.mayClear(selection, stamp: stamp, actualOwner: actual, ours: ours) } ?? false
            })
            if cleared { logger.info("sync: \(selection) was cleared or withdrawn elsewhere (\(stamp)): dropped") }
        } catch {
            logger.warning("sync: could not clear \(selection): \(error)")
        }
    }

    /// Reads what the owner of this display's change `stamp` offers, and tells the ledger whether
    /// it may leave the machine (secret, local-only and expired contents stay).
    func readOffer(_ selection: String, stamp: SyncStamp, owner: UInt) {
        guard let name = Self.name(ofSelection: selection) else { return }
        let isCurrent = { @Sendable [self] in state.withLock { !$0.isStopped && $0.ledger.isCurrentLocal(selection, stamp: stamp) } }
        guard surface.waitUntilFinished(name, owner: owner, while: isCurrent), isCurrent() else { return }
        let verdict = surface.verdict(name, owner: owner, nodeName: nodeName)
        if verdict == .replaced { logger.debug("sync: \(selection): its owner lost it before its offer was read: not shared") }
        if case let .notShared(reason) = verdict { logger.log(level: reason.hasPrefix("marked") || reason == "local-only" ? .info : .debug, "sync: \(selection) is \(reason): not shared") }
        let effects = state.withLock { $0.ledger.offerRead(selection, stamp: stamp, verdict: verdict) }
        perform(effects)
        if case let .send(.announce(announce), links)? = effects.first {
            logger.debug("sync: announced \(selection) (\(announce.targets.count) targets, stamp \(announce.stamp)) to \(links.count) links")
        }
    }
}
