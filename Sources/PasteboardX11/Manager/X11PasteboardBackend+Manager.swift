import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections

/// An ownership change of a watched selection, as a clipboard manager needs it.
package struct SelectionOwnerChange: Sendable, Equatable {
    package let name: Pasteboard.Name
    /// The new owner (None when the selection was cleared or its owner went away).
    package let owner: X11Window
    package let timestamp: UInt
    package let reason: OwnerChangeReason
    /// Whether this process made the change.
    package let isOurs: Bool
}

/// What a clipboard manager (the daemon) needs beyond a pasteboard: raw targets taken from an
/// owner and served back unchanged, the `CLIPBOARD_MANAGER` selection, save requests, and the
/// display-wide change counts. The same owner and reader as every library user, reached by name.
extension X11PasteboardBackend {
    /// Calls `handler` (on a serial queue) for every ownership change of the general, find and
    /// watched named pasteboards, this process's own included, with XFixes' reason.
    package func onOwnerChange(_ handler: (@Sendable (SelectionOwnerChange) -> Void)?) {
        state.withLock { $0.ownerChangeHandler = handler }
    }

    /// How many ownership changes of `name` this backend has read (ours included): the one count
    /// a reading of an owner's offer is checked against. It moves on the X thread before the
    /// change's handlers run.
    package func ownershipEpoch(of name: Pasteboard.Name) -> Int {
        state.withLock { $0.ownershipEpochs[name] ?? 0 }
    }

    /// Calls `handler` (on a worker) once the connection stops: closed, or lost with the X server.
    package func onConnectionStop(_ handler: (@Sendable (X11BackendError) -> Void)?) {
        state.withLock { $0.stopHandler = handler }
    }

    /// Starts watching a named pasteboard's selection (XFixes) without owning it.
    package func watch(_ name: Pasteboard.Name) throws {
        try connection.sync(timeout: timeout) { [self] session, done in
            _ = self.selectionAtom(name, in: session)
            done(.success(()))
        }
    }

    /// Converts the selection to one target and returns the bytes as they came (format 8 only:
    /// targets of 16- or 32-bit values are not data a manager keeps). Nil when the owner refuses.
    ///
    /// - Throws: on a deadline or a reply larger than `limit`.
    package func capture(_ name: Pasteboard.Name, target: String, limit: Int) throws -> CapturedTarget? {
        try connection.sync(timeout: configuration.transferDeadline + 5) { [self] session, done in
            session.reader.convert(self.selectionAtom(name, in: session), to: session.wire.atom(target), limit: limit) { result in
                done(result.map { value in
                    guard let value, value.format == 8, !value.type.isNone, value.type != session.wire.known[.incr] else { return nil }
                    return CapturedTarget(target: target, type: session.wire.name(of: value.type) ?? target, data: value.data)
                })
            }
        }
    }

    /// Converts the selection to several targets with one `MULTIPLE` request (INCR per reply as
    /// needed). Nil when the owner refuses `MULTIPLE`: ask with ``capture(_:target:limit:)`` then.
    /// With `deadline`, replies still streaming that many seconds after the owner answered are
    /// given up (nil).
    package func captureMultiple(_ name: Pasteboard.Name, targets: [String], limit: Int, deadline: Double? = nil) throws -> [CapturedTarget?]? {
        try connection.sync(timeout: configuration.transferDeadline + 5) { [self] session, done in
            let atoms = session.wire.atoms(targets)
            session.reader.convertMultiple(self.selectionAtom(name, in: session), targets: atoms, limit: limit, deadline: deadline) { result in
                done(result.map { values in
                    values.map { values in
                        zip(targets, values).map { target, value in
                            guard let value, value.format == 8, !value.type.isNone else { return nil }
                            return CapturedTarget(target: target, type: session.wire.name(of: value.type) ?? target, data: value.data)
                        }
                    }
                })
            }
        }
    }

    /// The sizes an owner announces through `TARGET_SIZES` (pairs of target and byte count), by
    /// target name; empty when it offers none.
    package func targetSizes(of name: Pasteboard.Name) throws -> [String: Int] {
        try connection.sync(timeout: timeout) { [self] session, done in
            session.reader.convert(self.selectionAtom(name, in: session), to: session.wire.known[.targetSizes],
                            limit: SelectionReader.maxTargets * 8, truncate: true) { result in
                done(result.map { value in
                    guard let value, value.format == 32 else { return [:] }
                    let longs = value.longs
                    let pairs = stride(from: 0, to: longs.count - 1, by: 2).map { (X11Atom(rawValue: longs[$0]), Int(longs[$0 + 1])) }
                    let names = session.wire.names(of: pairs.map(\.0))
                    return Dictionary(zip(names, pairs.map(\.1)).compactMap { name, size in name.map { ($0, size) } },
                                      uniquingKeysWith: { first, _ in first })
                })
            }
        }
    }

    /// Owns the pasteboard's selection serving exactly `targets` (as captured), listing those of
    /// `advertised` that are served or answered by the protocol, in that order. `timestamp` is a
    /// client's (a `SAVE_TARGETS` request's), or nil for a fresh server timestamp.
    /// With `precondition` (compare-and-own), the selection is taken only if it holds for the
    /// owner at that moment; false is returned otherwise. `credit` names who made the copy
    /// (published beside the selection, ``CopyCredit``).
    @discardableResult
    package func keep(_ name: Pasteboard.Name, advertised: [String], targets: [CapturedTarget], timestamp: UInt? = nil,
                      credit: CopyCredit? = nil, if precondition: (@Sendable (X11Window) -> Bool)? = nil) throws -> Bool {
        do {
            let _: X11Timestamp = try connection.sync(timeout: timeout) { [self] session, done in
                session.owner.own(self.selectionAtom(name, in: session), at: timestamp.map(X11Timestamp.init(rawValue:)), if: precondition,
                            making: { session, time in
                                session.owner.makeCapturedSelection(advertised: advertised, targets: targets, timestamp: time, credit: credit)
                            }) { done($0) }
            }
        } catch is OwnDeclined {
            return false
        }
        // The kept contents are not items of this process: reads go through the X server like
        // anybody's, and the change is counted from its XFixes event.
        state.withLock { _ = $0.owned.removeValue(forKey: name) }
        return true
    }

    /// Takes `CLIPBOARD_MANAGER` and announces it (``X11Session/becomeClipboardManager``).
    /// `onSave` is called (on a worker) with the targets a client asks to save (empty: ask the
    /// owner) and its request's timestamp; reply with ``answerSave(saved:)``. `onLost` runs when
    /// another manager takes over.
    ///
    /// - Throws: ``ClipboardManagerError``.
    package func becomeClipboardManager(replace: Bool, onSave: @escaping @Sendable ([String], UInt) -> Void,
                                        onLost: @escaping @Sendable () -> Void) throws {
        state.withLock {
            $0.saveHandler = onSave
            $0.managerLostHandler = onLost
        }
        try connection.sync(timeout: timeout + 5) { session, done in
            session.manager.becomeClipboardManager(replace: replace, replaceWait: 3) { result in
                done(result.mapError { $0 as any Error })
            }
        }
    }

    /// Replies to the `SAVE_TARGETS` request being handled.
    package func answerSave(saved: Bool) {
        _ = connection.submit { session in session.manager.answerSave(saved: saved) }
    }

    /// Publishes the display's change counts (CLIPBOARD, PRIMARY) for every library process.
    package func publishChangeCounts(_ counts: [Int]) {
        _ = connection.submit { session in session.manager.publishChangeCounts(counts) }
    }

    /// Whether a pointer button is held (a selection may still be being dragged).
    package func isPointerButtonHeld() -> Bool {
        (try? connection.sync(timeout: timeout) { session, done in done(.success(session.wire.isPointerButtonHeld())) }) ?? false
    }

    /// A PRIMARY still being dragged changes with every pointer motion: waits (at most a minute)
    /// until no button is held. False when `isCurrent` stopped holding meanwhile.
    ///
    /// Polled, every 50 ms: core X sends no event for the release of a button pressed in another
    /// client's window (the press grabs the pointer for that client, which gets the release).
    /// XInput 2's raw button events would say it, at the cost of libXi and of generic events in
    /// the event loop; a selection is seldom dragged for long.
    package func waitForPointerRelease(while isCurrent: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(60)
        while isPointerButtonHeld(), Date() < deadline {
            usleep(50_000)
            guard isCurrent() else { return false }
        }
        return true
    }

    /// The id of this process's window on the display (owner of what it serves).
    package var window: X11Window {
        (try? connection.sync(timeout: timeout) { session, done in done(.success(session.wire.window)) }) ?? .none
    }

    /// Where a clipboard manager's published counts hold `name`'s (CLIPBOARD, then PRIMARY); nil
    /// for a named pasteboard, which has none.
    package static func sharedCountIndex(of name: Pasteboard.Name) -> Int? {
        [Pasteboard.Name.general, .find].firstIndex(of: name)
    }

    /// The count a clipboard manager publishes for `name`, nil without one (or for named pasteboards).
    func sharedChangeCount(of name: Pasteboard.Name) -> Int? {
        guard let index = Self.sharedCountIndex(of: name), connection.stopReason == nil,
              let counts = try? connection.sync(timeout: timeout, { session, done in done(.success(session.manager.sharedChangeCounts())) }),
              counts.indices.contains(index) else { return nil }
        return counts[index]
    }
}

extension X11PasteboardBackend {
    /// The options an xpb manifest (`XPB_MANIFEST`) carries, and the manifest without its
    /// fast-path field (which names the departed owner's socket); nil for a malformed one.
    package static func keptManifest(_ data: Data) -> (options: PasteboardOptions, manifest: Data)? {
        guard var manifest = Manifest(decoding: data) else { return nil }
        manifest.fastPath = nil
        return (manifest.options, manifest.encoded())
    }


    /// The image targets (MIME names) of the first item's own images, as an xpb manifest names
    /// them: `xpb copy photo.jpg` has `image/jpeg`, whatever other formats its owner converts to.
    package static func ownImageTargets(_ data: Data) -> [String] {
        guard let manifest = Manifest(decoding: data) else { return [] }
        let registry = TypeRegistry.standard
        return manifest.entries.compactMap { entry in
            guard entry.item == 0, registry.imageFormat(of: entry.type) != nil else { return nil }
            return registry.preferredMIMEType(for: entry.type)
        }
    }

    /// The targets an xpb manifest names, in its order; empty for a malformed one.
    package static func manifestTargets(_ data: Data) -> [String] {
        Manifest(decoding: data)?.entries.map(\.target) ?? []
    }
}
