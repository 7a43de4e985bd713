import Dispatch
import FoundationEssentials
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardX11

/// `--primary-to-clipboard` and `--clipboard-to-primary` (Klipper's "synchronize contents",
/// CopyQ's options): a new copy in one selection becomes the other too, lazily. The daemon owns
/// the other selection listing the copy's targets, and a paste of one of them streams it from
/// the copy's owner at that moment: no byte moves until someone pastes. A PRIMARY still being
/// dragged (a pointer button held) is taken once it is finished. Secrets, ignored apps and
/// expired copies are never carried across (the offer's one verdict); neither is a copy the
/// daemon made itself, so the two directions together do not loop; nor is a copy another syncer
/// made of what the daemon carried (``BridgeEchoes``), so the daemon and it do not loop either.
extension DisplayHost {
    /// The selection a new copy in `name` is carried to, if one is asked for.
    func bridgeTarget(of name: Pasteboard.Name) -> Pasteboard.Name? {
        if name == .find, configuration.primaryToClipboard { return .general }
        if name == .general, configuration.clipboardToPrimary { return .find }
        return nil
    }

    /// On `events`, for every ownership change.
    func bridge(_ change: SelectionOwnerChange) {
        let isOthers = !change.isOurs && change.owner != ourWindow
        // Another client's copy (or a clear) in a selection we carried to: it is no longer ours to empty.
        if isOthers { _ = bridged.withLock { $0.removeValue(forKey: change.name) } }
        guard let destination = bridgeTarget(of: change.name), isOthers, !change.owner.isNone else { return }
        let source = change.name
        let from = SelectionNames.selection(for: source)
        let to = SelectionNames.selection(for: destination)
        bridges.async { [self] in
            let isCurrent = { (try? self.backend.ownerWindow(of: source)) == change.owner }
            if source == .find {
                guard backend.managerPort.waitForPointerRelease(while: isCurrent) else { return }
            }
            guard let offer = offers.offer(source, owner: change.owner) else { return }
            if let reason = offer.verdict.notCarriedReason {
                logger.info("\(from) not carried to \(to): \(reason)")
                // What we carried before was the copy this one replaced, which is gone: the other
                // selection is emptied rather than left naming bytes nobody can give.
                if bridged.withLock({ $0.removeValue(forKey: destination) }) != nil,
                   (try? backend.managerPort.clear(destination, if: { [ourWindow] in $0 == ourWindow })) == true {
                    logger.info("\(to), which carried the earlier \(from), is empty now")
                }
                return
            }
            // Another syncer's copy of what we carry: served from its owner from now on, without
            // taking the destination again (which would be its next trigger).
            let destinationIsOurs = bridged.withLock { $0[destination] != nil } && (try? backend.ownerWindow(of: destination)) == ourWindow
            let decision = echoes.withLock {
                $0.changed(source, carriedTo: destination, destinationIsOurs: destinationIsOurs, at: Date().timeIntervalSince1970)
            }
            if case let .echo(first) = decision {
                bridged.withLock { $0[destination] = change.owner }
                if first {
                    logger.notice("\(from) was copied from \(to) by the program that just read it (another syncer, such as autocutsel): not carried back; \(to) serves it as it is, while this goes on")
                } else {
                    logger.debug("\(from): another echo of \(to), not carried back")
                }
                return
            }
            let targets = offer.dataTargets.map { target in
                RemoteTarget(target: target, size: offer.sizes[target]) { [self] in
                    self.openBridged(source, to: destination, target: target)
                }
            }
            guard !targets.isEmpty else { return }
            // Only if the copy is still the newest: its owner still owns the source.
            guard isCurrent() else { return }
            // Said before the destination is taken: a paste of it may come the moment it is ours
            // (a syncer reacts at once), and must find this copy's owner, and its read must count
            // towards an echo. Set after, a read in between failed ("changed since") and the
            // syncer copied nothing over the user's copy, or its read was forgotten and its copy
            // carried back.
            let earlier = bridged.withLock { carried in
                defer { carried[destination] = change.owner }
                return carried[destination]
            }
            echoes.withLock { $0.carried(destination) }
            do {
                guard try backend.managerPort.proxy(destination, targets: targets, if: { _ in true }) else {
                    bridged.withLock { $0[destination] = earlier }
                    return
                }
                logger.info("\(from) also serves \(to) (\(targets.count) targets; bytes move when someone pastes)")
            } catch {
                bridged.withLock { $0[destination] = earlier }
                logger.warning("\(from) not carried to \(to): \(error)")
            }
        }
    }

    /// The bytes of `target` as the copy's owner gives them now, for a paste of the other
    /// selection (`destination`); refused when that owner no longer owns the source.
    func openBridged(_ source: Pasteboard.Name, to destination: Pasteboard.Name, target: String) -> ByteStream? {
        let stream = ByteStream()
        let owner = bridged.withLock { $0[destination] }
        echoes.withLock { $0.read(destination, at: Date().timeIntervalSince1970) }
        Background.run("xpbd.bridge.read") { [self] in
            guard let owner, (try? backend.ownerWindow(of: source)) == owner else {
                return stream.fail("\(SelectionNames.selection(for: source)) changed since")
            }
            do {
                let ok = try backend.managerPort.stream(source, target: target, limit: configuration.maxTargetBytes,
                                                        begin: { type, size in stream.begin(type: type, size: size) },
                                                        chunk: { stream.append($0) })
                if ok { stream.finish() } else { stream.fail("the owner refused \(target)") }
            } catch {
                stream.fail("\(error)")
            }
        }
        return stream
    }
}

extension OwnerOffer.Verdict {
    /// Why a copy is not carried to the other selection, or nil when it may be.
    var notCarriedReason: String? {
        switch self {
        case .shareable, .localOnly: return nil
        default: return notSharedReason
        }
    }
}
