import Dispatch
import FoundationEssentials
import Logging
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import PasteboardX11

/// The keeper's capture: after an ownership change and its debounce, what the new owner offers
/// is read once (``OwnerOffer``) and its kept targets fetched, one conversion per turn at the
/// owner's ``OwnerGate``.
extension DisplayHost {
    /// Fetches a selection's contents after the debounce, unless its owner changes meanwhile.
    func schedule(_ name: Pasteboard.Name) {
        let generation = state.withLock { state -> Int in
            state.generations[name, default: 0] += 1
            return state.generations[name]!
        }
        captures(name).asyncAfter(deadline: .now() + configuration.debounce) { [self] in
            guard isCurrent(name, generation) else {
                logger.debug("\(SelectionNames.selection(for: name)) changed again within the debounce")
                return
            }
            let epoch = state.withLock { $0.epochs[name, default: 0] }
            capture(name, generation: generation)
            // Kept or not (secret, ignored, unreadable), the capture of this ownership is over.
            state.withLock { state in
                if state.epochs[name, default: 0] == epoch { state.settled[name] = epoch }
            }
            settling.signal()
        }
    }

    func isCurrent(_ name: Pasteboard.Name, _ generation: Int) -> Bool {
        state.withLock { !$0.isStopped && $0.generations[name] == generation }
    }

    /// Fetches what the owner of `name` offers (on `captures`) and keeps it, unless its offer
    /// says it must not be (secret, expired, unreadable).
    func capture(_ name: Pasteboard.Name, generation: Int) {
        let selection = SelectionNames.selection(for: name)
        if name == .find, !backend.managerPort.waitForPointerRelease(while: { self.isCurrent(name, generation) }) { return }
        let owner = try? backend.accountedOwner(of: name)
        let recorded = state.withLock { $0.owners[name] }
        guard let owner, owner.window != ourWindow, recorded == owner.window else {
            logger.debug("\(selection): its owner changed before the capture began (now \(owner?.window ?? .none), last change \(recorded ?? .none))")
            return
        }
        // The ownership this capture is of: after the owner read, every event before it was read.
        let epoch = state.withLock { $0.epochs[name, default: 0] }
        // From here a save request of this owner waits for this fetch instead of starting its own.
        gate.capturing(name, owner.window) {
            state.withLock { $0.inProgress[name] = (owner.window, epoch, []) }
            defer {
                state.withLock { state in
                    if state.inProgress[name]?.epoch == epoch { state.inProgress.removeValue(forKey: name) }
                }
            }
            let started = Date()
            guard let offer = offers.offer(name, owner: owner.window) else {
                logger.debug("\(selection): its owner changed while its offer was read")
                return
            }
            // The offer's reading may have told which process serves it (of several that hold
            // connections handed down from gone ones).
            let owner = owner.processID == nil && offer.owner.processID != nil ? offer.owner : owner
            switch offer.verdict {
            case .secret:
                state.withLock { _ = $0.current.drop(name) }
                logger.info("\(selection) holds data marked secret (\(describe(owner))): not fetched, not kept")
                daemon?.copyRead(name, app: owner.creditedApp, isEmpty: false)
                return
            case let .unreadable(why):
                logger.debug("\(selection): could not read what \(describe(owner)) offers: \(why)")
                return
            case .expired:
                logger.debug("\(selection): the copy of \(describe(owner)) has expired already: not kept")
                return
            case .ignored:
                state.withLock { _ = $0.current.drop(name) }
                logger.info("\(selection) holds a copy from an ignored app (\(describe(owner))): not kept")
                daemon?.copyRead(name, app: owner.creditedApp, isEmpty: false)
                return
            case .shareable, .localOnly:
                break
            }
            var fetched = fetch(name, offer: offer, isCurrent: { self.isCurrent(name, generation) },
                                progress: { target in
                                    self.state.withLock { state in
                                        if state.inProgress[name]?.epoch == epoch { state.inProgress[name]?.targets.append(target) }
                                    }
                                })
            // The offer's owner was looked at first: an owner that forked (xclip) may have been
            // its parent then, gone before its executable was read. The owner looked at now names it.
            if fetched?.app == nil, let app = owner.creditedApp {
                fetched?.app = app
                fetched?.pid = owner.creditedPID
            }
            if let fetched, isCurrent(name, generation) {
                daemon?.copyRead(name, app: fetched.app, isEmpty: fetched.isEmpty)
                if fetched.isEmpty {
                    // How some apps clear the clipboard: nothing to keep, nor to bring back.
                    state.withLock { _ = $0.current.drop(name) }
                    logger.info("\(selection) holds an empty copy (\(describe(owner))): not kept")
                    return
                }
            }
            guard let snapshot = fetched, isCurrent(name, generation), !snapshot.isExpired() else {
                logger.debug("\(selection): nothing kept of \(describe(owner)) (nothing fetched, a newer change, or expired)")
                return
            }
            guard daemon?.admits(snapshot, from: describe(owner), owner: owner.window.rawValue) == true else {
                state.withLock { _ = $0.current.drop(name) }
                return
            }
            // Kept only if no other ownership began meanwhile (checked where the X thread moves it).
            guard state.withLock({ state -> Bool in
                guard state.epochs[name, default: 0] == epoch else { return false }
                state.current[name] = snapshot
                return true
            }) else {
                logger.debug("\(selection): not kept: another ownership began during the capture of \(describe(owner))")
                return
            }
            let elapsed = Int(Date().timeIntervalSince(started) * 1000)
            // PRIMARY captured for a bridge alone (no --primary) stays in memory. Handed to the
            // history's writes before it is said: a history request after the line lists it (the
            // control socket's reads wait for the writes handed in before them).
            if configuration.keptSelections.contains(name) { record(snapshot) } else { scheduleExpiry(snapshot) }
            logger.info("kept \(selection) from \(describe(owner)): \(snapshot.targets.count) targets, \(ByteCount.format(snapshot.size)) in \(elapsed) ms\(snapshot.isComplete ? "" : " (some targets left out: caps, timeouts or refusals)")")
        }
    }

    /// Fetches the kept targets of an offer, one at a time (each in its turn at the owner's gate),
    /// within the caps and the sizes the owner announced; identical bytes are kept once. Nil when
    /// nothing could be fetched or the owner changed.
    ///
    /// With `deadline` (a save request, whose app waits), targets not fetched by then are left out,
    /// and `useMultiple` asks for all of them with one MULTIPLE request where the owner has it.
    func fetch(_ name: Pasteboard.Name, offer: OwnerOffer, extra: [String] = [], isCurrent: () -> Bool,
               useMultiple: Bool = false, deadline: Date? = nil, progress: ((CapturedTarget) -> Void)? = nil) -> Snapshot? {
        let owner = offer.owner
        let advertised = offer.advertised.isEmpty ? ["TARGETS"] + extra : offer.advertised
        let wanted = KeepPolicy.fetchedTargets(offer.advertised.isEmpty ? extra : offer.keptTargets, manifest: offer.manifest?.data)
        var complete = true
        var planned: [String] = []
        var announced = 0
        for target in wanted {
            if let size = offer.sizes[target], size > configuration.maxTargetBytes || announced + size > configuration.maxSnapshotBytes {
                complete = false
                continue
            }
            announced += offer.sizes[target] ?? 0
            planned.append(target)
        }
        // What the offer's reading took already (the manifest) is not asked for again.
        let prefetched = offer.manifest.map { [$0.target: $0] } ?? [:]
        /// One conversion in its turn at the gate, within `until`; nil when refused, failed or
        /// the turn did not come.
        func read(_ target: String, until: Date) -> CapturedTarget? {
            do {
                let value = try gate.withTurn(name, owner.window, until: until, while: isCurrent) {
                    try backend.managerPort.capture(name, target: target, limit: configuration.maxTargetBytes)
                }
                guard let value else {
                    logger.debug("\(SelectionNames.selection(for: name)): \(target) not kept: the owner was busy with another transfer, or changed")
                    return nil
                }
                return value
            } catch {
                logger.debug("\(SelectionNames.selection(for: name)): \(target) not kept: \(error)")
                return nil
            }
        }
        var captured: [CapturedTarget?] = []
        let remaining = planned.filter { prefetched[$0] == nil }
        if useMultiple, advertised.contains("MULTIPLE"), let deadline, !remaining.isEmpty,
           let values = (try? gate.withTurn(name, owner.window, until: deadline, while: isCurrent, {
               try backend.managerPort.captureMultiple(name, targets: remaining, limit: configuration.maxTargetBytes,
                                                       deadline: max(0.1, deadline.timeIntervalSinceNow / 2))
           })) ?? nil {
            var byTarget: [String: CapturedTarget] = prefetched
            // Replies that did not finish in half the budget (all of them streaming at once from
            // an owner of huge data): one at a time, in the owner's order, with what is left.
            for (target, value) in zip(remaining, values) {
                if let value {
                    byTarget[target] = value
                } else if Date() < deadline, let value = read(target, until: deadline) {
                    byTarget[target] = value
                }
            }
            captured = planned.map { byTarget[$0] }
            logger.debug("\(SelectionNames.selection(for: name)): fetched \(remaining.count) targets with one MULTIPLE request")
        } else {
            for target in planned {
                guard isCurrent() else { return nil }
                if let value = prefetched[target] {
                    progress?(value)
                    captured.append(value)
                    continue
                }
                if let deadline, Date() >= deadline {
                    captured.append(nil)
                    continue
                }
                // A peer's fetch reading from this owner has its turn first (one INCR at a time,
                // for many owners); past the target deadline this target is left out.
                let value = read(target, until: min(deadline ?? .distantFuture, Date().addingTimeInterval(configuration.targetDeadline)))
                if let value { progress?(value) }
                captured.append(value)
            }
        }
        return makeSnapshot(name, advertised: advertised, owner: owner, captured: captured, complete: complete)
    }

    /// A snapshot of fetched targets (nil entries: not fetched): identical bytes shared, the
    /// per-clipboard cap applied, the xpb manifest's options read and its fast-path field dropped.
    func makeSnapshot(_ name: Pasteboard.Name, advertised: [String], owner: SelectionOwnerInfo, captured: [CapturedTarget?],
                              complete: Bool) -> Snapshot? {
        guard var snapshot = Snapshot(name, advertised: advertised, captured: captured, complete: complete, cap: configuration.maxSnapshotBytes) else {
            return nil
        }
        snapshot.source = owner.name
        snapshot.pid = owner.creditedPID
        snapshot.app = owner.creditedApp
        snapshot.ownerWindow = owner.window
        snapshot.capturedFromWindow = owner.window
        return snapshot
    }
}
