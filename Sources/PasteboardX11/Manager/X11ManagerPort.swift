internal import CX11
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

/// What a clipboard manager (the daemon) needs of a display beyond a pasteboard: every ownership
/// change as it is read, raw targets taken from an owner and served back unchanged (or from a
/// sync peer), the `CLIPBOARD_MANAGER` selection and its save requests, and the display-wide
/// change counts. The same connection, owner and reader as every library user
/// (``X11PasteboardBackend/managerPort``).
package struct X11ManagerPort: Sendable {
    let backend: X11PasteboardBackend

    /// Calls `handler` (on a serial queue) for every ownership change of the general, find and
    /// watched named pasteboards, this process's own included, with XFixes' reason.
    package func onOwnerChange(_ handler: (@Sendable (SelectionOwnerChange) -> Void)?) {
        backend.state.withLock { $0.ownerChangeHandler = handler }
    }

    /// How many ownership changes of `name` this backend has read (ours included): the one count
    /// a reading of an owner's offer is checked against. It moves on the X thread before the
    /// change's handlers run.
    package func ownershipEpoch(of name: Pasteboard.Name) -> Int {
        backend.state.withLock { $0.ownershipEpochs[name] ?? 0 }
    }

    /// Calls `handler` (on a worker) once the connection stops: closed, or lost with the X server.
    package func onConnectionStop(_ handler: (@Sendable (X11BackendError) -> Void)?) {
        backend.state.withLock { $0.stopHandler = handler }
    }

    /// Starts watching a named pasteboard's selection (XFixes) without owning it.
    package func watch(_ name: Pasteboard.Name) throws {
        try backend.connection.sync(timeout: backend.timeout) { session, done in
            _ = backend.selectionAtom(name, in: session)
            done(.success(()))
        }
    }

    /// Converts the selection to one target and returns the bytes as they came (format 8 only:
    /// targets of 16- or 32-bit values are not data a manager keeps). Nil when the owner refuses.
    ///
    /// - Throws: on a deadline or a reply larger than `limit`.
    package func capture(_ name: Pasteboard.Name, target: String, limit: Int) throws -> CapturedTarget? {
        try backend.connection.sync(timeout: backend.configuration.transferDeadline + 5) { session, done in
            session.reader.convert(backend.selectionAtom(name, in: session), to: session.wire.atom(target), limit: limit) { result in
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
        try backend.connection.sync(timeout: backend.configuration.transferDeadline + 5) { session, done in
            let atoms = session.wire.atoms(targets)
            session.reader.convertMultiple(backend.selectionAtom(name, in: session), targets: atoms, limit: limit, deadline: deadline) { result in
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
        try backend.connection.sync(timeout: backend.timeout) { session, done in
            session.reader.convert(backend.selectionAtom(name, in: session), to: session.wire.known[.targetSizes],
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
            let _: X11Timestamp = try backend.connection.sync(timeout: backend.timeout) { session, done in
                session.owner.own(backend.selectionAtom(name, in: session), at: timestamp.map(X11Timestamp.init(rawValue:)), if: precondition,
                                  making: { session, time in
                                session.owner.makeCapturedSelection(advertised: advertised, targets: targets, timestamp: time, credit: credit)
                            }) { done($0) }
            }
        } catch is OwnDeclined {
            return false
        }
        // The kept contents are not items of this process: reads go through the X server like
        // anybody's, and the change is counted from its XFixes event.
        backend.state.withLock { _ = $0.owned.removeValue(forKey: name) }
        return true
    }

    /// Serves a paste queue on `name` (`xpb queue`): each item, given as its advertised and
    /// captured targets, goes to one paste, in order (``PasteTurns``); the last stays served.
    /// `onPaste` hears (on a worker) each item pasted, by its index. A later ownership of ours
    /// (``keep(_:advertised:targets:timestamp:credit:if:)``, a new queue) or of another client
    /// ends the queue.
    package func keepQueue(_ name: Pasteboard.Name, items: [(advertised: [String], targets: [CapturedTarget])], credit: CopyCredit? = nil,
                           onPaste: @escaping @Sendable (Int) -> Void) throws {
        guard !items.isEmpty else { return }
        let _: X11Timestamp = try backend.connection.sync(timeout: backend.timeout) { session, done in
            session.owner.ownQueue(backend.selectionAtom(name, in: session), making: { session, time in
                items.map { session.owner.makeCapturedSelection(advertised: $0.advertised, targets: $0.targets, timestamp: time, credit: credit) }
            }, onPaste: onPaste) { done($0) }
        }
        backend.state.withLock { _ = $0.owned.removeValue(forKey: name) }
    }

    /// Takes `CLIPBOARD_MANAGER` and announces it (``ClipboardManagerRole/becomeClipboardManager(replace:replaceWait:completion:)``).
    /// `onSave` is called (on a worker) with the targets a client asks to save (empty: ask the
    /// owner) and its request's timestamp; reply with ``answerSave(saved:)``. `onLost` runs when
    /// another manager takes over.
    ///
    /// `yielding`: the process id of a compositor whose XWayland window manager may hold
    /// `CLIPBOARD_MANAGER` (wlroots' does, to hand X copies of exiting apps to Wayland). It is
    /// taken over from it at once, without waiting for its window to go (it never goes: the
    /// window manager's window outlives the role).
    ///
    /// - Returns: the window of the compositor's client that held the role, when it was taken
    ///   from it.
    /// - Throws: ``ClipboardManagerError``.
    @discardableResult
    package func becomeClipboardManager(replace: Bool, yielding compositorPID: Int? = nil,
                                        onSave: @escaping @Sendable ([String], UInt) -> Void,
                                        onLost: @escaping @Sendable () -> Void) throws -> X11Window? {
        backend.state.withLock {
            $0.saveHandler = onSave
            $0.managerLostHandler = onLost
        }
        func become(replace: Bool, wait: Double) throws {
            try backend.connection.sync(timeout: backend.timeout + 5) { session, done in
                session.manager.becomeClipboardManager(replace: replace, replaceWait: wait) { result in
                    done(result.mapError { $0 as any Error })
                }
            }
        }
        do {
            try become(replace: replace, wait: 3)
            return nil
        } catch let ClipboardManagerError.alreadyRunning(window) {
            // Named off the X thread (``AttributionLink``).
            let owner = try? backend.attribution.ownerInfo(ofSelection: WellKnown.clipboardManager.rawValue)
            if let compositorPID, let owner, owner.processID == compositorPID {
                try become(replace: true, wait: 0)
                return owner.window
            }
            throw ClipboardManagerError.alreadyRunning(owner ?? window)
        }
    }

    /// A window of the compositor's own X client (its XWayland window manager), known by the
    /// compositor's process id: the window that holds `CLIPBOARD_MANAGER` if that client holds
    /// it, else the window manager's check window (`_NET_SUPPORTING_WM_CHECK`). Nil when neither
    /// belongs to that process.
    package func compositorClient(pid: Int) -> X11Window? {
        if let manager = try? backend.attribution.ownerInfo(ofSelection: WellKnown.clipboardManager.rawValue), manager.processID == pid {
            return manager.window
        }
        if let manager = try? backend.attribution.windowManager(), manager.processID == pid { return manager.window }
        return nil
    }

    /// Refuses every conversion request from the client of `window` to what this process owns
    /// (nil: none refused). A bridge between XWayland and its compositor refuses the
    /// compositor's window manager: it reads each new X owner to carry its copy to Wayland,
    /// where the bridge has carried it already.
    package func refuseRequests(fromClientOf window: X11Window?) {
        _ = backend.connection.submit { session in session.owner.refusedClient = window }
    }

    /// Replies to the `SAVE_TARGETS` request being handled.
    package func answerSave(saved: Bool) {
        _ = backend.connection.submit { session in session.manager.answerSave(saved: saved) }
    }

    /// Publishes the display's change counts (CLIPBOARD, PRIMARY) for every library process.
    package func publishChangeCounts(_ counts: [Int]) {
        _ = backend.connection.submit { session in session.manager.publishChangeCounts(counts) }
    }

    /// Whether a pointer button is held (a selection may still be being dragged).
    package func isPointerButtonHeld() -> Bool {
        (try? backend.connection.sync(timeout: backend.timeout) { session, done in done(.success(session.wire.isPointerButtonHeld())) }) ?? false
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

    // MARK: Sync

    /// Owns the pasteboard's selection listing `targets` (after `TARGETS` and `TIMESTAMP`), each
    /// served from the stream its `open` starts when a requestor converts it.
    ///
    /// Compare-and-own: `precondition` is asked on the X thread, after the server timestamp is
    /// taken, with the selection's owner at that moment; false leaves the selection alone and
    /// returns false.
    package func proxy(_ name: Pasteboard.Name, targets: [RemoteTarget], credit: CopyCredit? = nil,
                       if precondition: @escaping @Sendable (X11Window) -> Bool) throws -> Bool {
        do {
            let _: X11Timestamp = try backend.connection.sync(timeout: backend.timeout) { session, done in
                session.owner.own(backend.selectionAtom(name, in: session), at: nil, if: precondition, making: { session, time in
                    var state = session.owner.makeRemoteSelection(targets, timestamp: time)
                    state.credit = credit
                    return state
                }) { done($0) }
            }
        } catch is OwnDeclined {
            return false
        }
        // Not items of this process: the change is counted from its XFixes event.
        backend.state.withLock { _ = $0.owned.removeValue(forKey: name) }
        return true
    }

    /// Compare-and-clear: empties the pasteboard's selection if `precondition` holds for its
    /// owner on the X thread at that moment. Returns whether it is empty now by this call.
    package func clear(_ name: Pasteboard.Name, if precondition: @escaping @Sendable (X11Window) -> Bool) throws -> Bool {
        let cleared: Bool = try backend.connection.sync(timeout: backend.timeout) { session, done in
            session.owner.clear(backend.selectionAtom(name, in: session), if: precondition) { done($0) }
        }
        if cleared { backend.state.withLock { _ = $0.owned.removeValue(forKey: name) } }
        return cleared
    }

    /// Calls `handler` on the X thread itself for every ownership change of a watched selection,
    /// as its XFixes event is read, before any other work: what it decides is ordered against
    /// everything the X thread does after. It must be quick and never wait on the connection.
    package func onOwnerChangeRead(_ handler: (@Sendable (SelectionOwnerChange) -> Void)?) {
        backend.state.withLock { $0.ownerChangeReadHandler = handler }
    }

    /// Returns once the X thread has read and handled the events the server sent before this
    /// call (a round trip, then the events it brought, a few turns' worth at most): an ownership
    /// change made before it has reached ``onOwnerChangeRead(_:)``'s handler. For a decision
    /// that must not run ahead of the X side (a Wayland copy the compositor made of an X copy).
    package func catchUp() throws {
        try backend.connection.sync(timeout: backend.timeout) { (session, done: @escaping @Sendable (Result<Void, any Error>) -> Void) in
            XSync(session.wire.display, 0)
            // Bounded: a client flooding us with events cannot keep this job here.
            for _ in 0..<8 where session.hasQueuedEvents() { session.pump() }
            done(.success(()))
        }
    }

    /// Converts the selection to `target` and hands its bytes to `chunk` as they arrive (INCR
    /// read with at most `highWater` bytes waiting), after `begin` got the reply's type.
    /// Returns false when the owner refuses. A throwing callback stops the transfer.
    ///
    /// - Throws: on a deadline, a reply over `limit`, a lost connection, or a callback's error.
    package func stream(_ name: Pasteboard.Name, target: String, limit: Int, highWater: Int = 2 << 20,
                        begin: (String, Int?) throws -> Void, chunk: (Data) throws -> Void) throws -> Bool {
        let sink = StreamSink(highWater: highWater, pump: backend.connection.pump)
        let converted = Rendezvous(pump: backend.connection.pump)
        guard backend.connection.submit({ session in
            session.reader.convert(backend.selectionAtom(name, in: session), to: session.wire.atom(target), limit: limit, sink: sink) { result in
                converted.fulfil(result.map { $0 != nil })
            }
        }) else { throw backend.connection.stopReason ?? X11BackendError.connectionLost }
        var begun = false
        func start() throws {
            guard !begun else { return }
            begun = true
            let atom = sink.replyType ?? .none
            let type = atom.isNone ? target : (try backend.connection.sync(timeout: backend.timeout) { session, done in
                done(.success(session.wire.name(of: atom) ?? target))
            })
            try begin(type, sink.size)
        }
        try sink.drain { data in
            try start()
            try chunk(data)
        }
        let ok: Bool = try converted.wait(timeout: backend.configuration.transferDeadline + 5, stopped: { [connection = backend.connection] in connection.stopReason })
        if ok { try start() }
        return ok
    }
}

extension X11PasteboardBackend {
    /// The clipboard manager's side of this connection (``X11ManagerPort``).
    package var managerPort: X11ManagerPort { X11ManagerPort(backend: self) }

    /// The id of this process's window on the display (owner of what it serves).
    package var window: X11Window {
        (try? connection.sync(timeout: timeout) { session, done in done(.success(session.wire.window)) }) ?? .none
    }

    /// The count a clipboard manager publishes for `name`, nil without one (or for named pasteboards).
    func sharedChangeCount(of name: Pasteboard.Name) -> Int? {
        guard let index = SelectionNames.sharedCountIndex(of: name), connection.stopReason == nil,
              let counts = try? connection.sync(timeout: timeout, { session, done in done(.success(session.manager.sharedChangeCounts())) }),
              counts.indices.contains(index) else { return nil }
        return counts[index]
    }
}
