import Dispatch
import FoundationEssentials
import Logging
import PasteboardDaemon
import PasteboardKit
import PasteboardWire
import PasteboardX11

/// `SAVE_TARGETS`: an app about to exit asks the clipboard manager to take its clipboard.
extension DisplayHost {
    /// A client asks us to save the clipboard (it is about to exit): fetch what it listed (or
    /// what it offers), take CLIPBOARD with its request's timestamp, then reply.
    func save(listed: [String], time: UInt) {
        let started = Date()
        guard let owner = try? backend.accountedOwner(of: .general), owner.window != ourWindow else {
            // Nothing to save, or we hold it already: nothing is lost either way.
            backend.managerPort.answerSave(saved: true)
            return
        }
        let deadline = started.addingTimeInterval(configuration.saveBudget)
        // The keeper is fetching this owner already: wait for it (within the budget) rather than
        // make the owner send everything twice, then take what it has.
        gate.waitForCapture(.general, owner.window, until: deadline)
        var read = offers.offer(.general, owner: owner.window)
        // An owner about to exit may leave unanswered a request that came while it shut down (Qt 5
        // answers requests only inside its wait for the manager): the keeper's reading of its offer
        // then failed on the read timeout. Waiting for us now, the owner answers a new request.
        if case .unreadable? = read?.verdict, Date() < deadline {
            read = offers.offer(.general, owner: owner.window, rereadingUnreadable: true)
        }
        let offer = read
            ?? OwnerOffer(owner: owner, advertised: [], sizes: [:], manifest: nil, expires: nil, verdict: .unreadable("replaced"))
        let advertised = offer.advertised.isEmpty ? listed : offer.advertised
        let requested = listed.isEmpty ? advertised : listed
        if offer.verdict == .secret || SecretMarking.isSecret(advertised + requested) {
            backend.managerPort.answerSave(saved: false)
            logger.info("\(describe(owner)) asked to save CLIPBOARD, which holds data marked secret: refused")
            return
        }
        if offer.verdict == .ignored {
            backend.managerPort.answerSave(saved: false)
            logger.info("\(describe(owner)) asked to save CLIPBOARD; its app is ignored: refused")
            return
        }
        let wanted = Set(KeepPolicy.fetchedTargets(requested, manifest: offer.manifest?.data))
        var snapshot = state.withLock { state -> Snapshot? in
            if let current = state.current[.general], current.ownerWindow == owner.window, current.isComplete,
               wanted.isSubset(of: Set(current.targets.map(\.target))) {
                return current
            }
            return nil
        }
        if snapshot == nil, let partial = state.withLock({ $0.inProgress[.general] }), partial.owner == owner.window, !partial.targets.isEmpty {
            snapshot = makeSnapshot(.general, advertised: advertised, owner: owner, captured: partial.targets, complete: false)
        }
        if snapshot == nil {
            // The keeper's own fetch of this owner stops after its current target: the owner's
            // bytes move once, for the save. The app waits (Qt 5 s, GTK 10 s): what is not fetched
            // within the budget is left out rather than the reply late.
            state.withLock { $0.generations[.general, default: 0] += 1 }
            snapshot = fetch(.general, offer: offer, extra: requested, isCurrent: { true }, useMultiple: true, deadline: deadline)
        }
        guard let snapshot, !snapshot.isExpired() else {
            backend.managerPort.answerSave(saved: false)
            logger.warning("\(describe(owner)) asked to save CLIPBOARD; nothing could be fetched")
            return
        }
        do {
            try serve(snapshot, timestamp: time)
            backend.managerPort.answerSave(saved: true)
            // A keeper fetch still under way would now ask us.
            state.withLock { $0.generations[.general, default: 0] += 1 }
        } catch {
            backend.managerPort.answerSave(saved: false)
            logger.warning("\(describe(owner)) asked to save CLIPBOARD; could not take it: \(error)")
            return
        }
        let elapsed = Int(Date().timeIntervalSince(started) * 1000)
        logger.info("saved CLIPBOARD for \(describe(owner)) as it exits: \(snapshot.targets.count) targets, \(ByteCount.format(snapshot.size)), answered in \(elapsed) ms")
        if snapshot.id == nil { record(snapshot) }
    }
}
