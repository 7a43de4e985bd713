internal import CX11
internal import CXEvents
import FoundationEssentials
import PasteboardKit

/// Why a selection's owner changed, as XFixes reports it.
package enum OwnerChangeReason: Sendable, Equatable {
    /// A client set the owner (a new owner, or None: the selection was cleared on purpose).
    case setOwner
    /// The owner's window was destroyed.
    case ownerWindowDestroyed
    /// The owner's connection closed (it exited or crashed).
    case ownerClientClosed

    init(subtype: Int32) {
        switch subtype {
        case Int32(XFixesSelectionWindowDestroyNotify): self = .ownerWindowDestroyed
        case Int32(XFixesSelectionClientCloseNotify): self = .ownerClientClosed
        default: self = .setOwner
        }
    }
}


/// The clipboard manager's side of the freedesktop ClipboardManager protocol (the daemon's):
/// `CLIPBOARD_MANAGER` and the `SAVE_TARGETS` request being answered, and the writes of this
/// process waiting for the manager to count them (the change counts it publishes).
final class ClipboardManagerRole {
    private unowned let session: X11Session
    private let wire: X11Wire
    /// Whether we hold `CLIPBOARD_MANAGER` as the clipboard manager.
    private(set) var isClipboardManager = false
    /// The `SAVE_TARGETS` request being handled; `abandoned` once its requestor window is gone.
    private var pendingSave: (request: ConversionRequest, abandoned: Bool)?
    /// What to do when a window (watched for StructureNotify) is destroyed.
    private var windowGoneWaiters: [X11Window: [() -> Void]] = [:]
    /// Writes waiting for the clipboard manager to count them (``waitForSharedCount(index:toPass:within:done:)``).
    private var sharedCountWaiters: [SharedCountWaiter] = []

    init(session: X11Session) {
        self.session = session
        wire = session.wire
    }

    /// Whether a write waits for the manager's counts (its window's property changes matter).
    var isWaitingForCounts: Bool { !sharedCountWaiters.isEmpty }

    /// A window went: the waits for it end, and a save it asked for is abandoned.
    func requestorGone(_ requestor: X11Window) {
        for waiter in windowGoneWaiters.removeValue(forKey: requestor) ?? [] { waiter() }
        if pendingSave?.request.requestor == requestor { pendingSave?.abandoned = true }
    }

    /// Another client took `CLIPBOARD_MANAGER` from us: a save being answered fails, and the
    /// delegate hears of it.
    func managerSelectionLost() {
        guard isClipboardManager else { return }
        isClipboardManager = false
        if let save = pendingSave {
            pendingSave = nil
            if !save.abandoned { session.owner.notify(save.request, succeeded: false) }
        }
        session.delegate?.clipboardManagerLost()
    }

    /// Takes `CLIPBOARD_MANAGER` (ICCCM 2.8 manager selection): refuses when another client holds
    /// it unless `replace`, in which case it waits at most `replaceWait` seconds for the old
    /// owner's window to go, then announces itself with the `MANAGER` client message.
    ///
    /// - Returns (through `completion`): the previous owner when it was not replaced.
    func becomeClipboardManager(replace: Bool, replaceWait: Double,
                                completion: @escaping (Result<Void, ClipboardManagerError>) -> Void) {
        let manager = wire.known[.clipboardManager]
        let previous = wire.selectionOwner(manager)
        if !previous.isNone {
            guard replace else {
                // Who it is, the caller looks up off the X thread.
                return completion(.failure(.alreadyRunning(SelectionOwnerInfo(window: previous, name: nil, processID: nil))))
            }
            // Its DestroyNotify tells when the old manager has gone.
            wire.selectInput(previous, StructureNotifyMask)
        }
        let answered = [WellKnown.targets, .timestamp, .saveTargets].map(\.rawValue)
        session.owner.own(manager, at: nil, making: { session, time in
            session.owner.makeCapturedSelection(advertised: answered, targets: [], timestamp: time)
        }) { [weak self] result in
            guard let self else { return }
            switch result {
            case let .failure(error):
                completion(.failure(.cannotAcquire(String(describing: error))))
            case let .success(time):
                self.isClipboardManager = true
                var message = cx11_manager_message(self.wire.display, self.wire.root.rawValue, self.wire.known[.manager].rawValue, time.rawValue,
                                                   manager.rawValue, self.wire.window.rawValue)
                _ = XSendEvent(self.wire.display, self.wire.root.rawValue, 0, StructureNotifyMask, &message)
                self.wire.flush()
                guard !previous.isNone, self.wire.windowExists(previous) else { return completion(.success(())) }
                var finished = false
                let finish = {
                    if !finished { finished = true; completion(.success(())) }
                }
                self.windowGoneWaiters[previous, default: []].append(finish)
                self.session.after(replaceWait) { [weak self] in
                    self?.windowGoneWaiters.removeValue(forKey: previous)
                    finish()
                }
            }
        }
    }

    /// A `SAVE_TARGETS` request (freedesktop ClipboardManager): refused at once while another is
    /// being handled; otherwise the requestor is watched (its destruction abandons the reply),
    /// its list of targets read, and the delegate asked to save. ``answerSave(saved:)`` replies.
    func handleSaveTargets(_ request: ConversionRequest) {
        let server = session.owner
        guard pendingSave == nil, let delegate = session.delegate else { return server.notify(request, succeeded: false) }
        // Only the client that owns CLIPBOARD hands it over (its requestor window may be another
        // of its windows, as Qt's is): from anyone else, saving would take CLIPBOARD from its owner.
        let owner = wire.selectionOwner(wire.known[.clipboard])
        guard !owner.isNone, wire.isSameClient(owner, request.requestor) else {
            return server.notify(request, succeeded: false)
        }
        guard server.requestors.watch(request.requestor) else {
            server.requestors.release(request.requestor)
            return server.notify(request, succeeded: false)
        }
        var listed: [String] = []
        if !request.property.isNone,
           let value = try? wire.readProperty(request.requestor, request.property, delete: false, limit: SelectionReader.maxTargets * 4, truncate: true),
           value.format == 32 {
            listed = wire.names(of: value.atoms).compactMap { $0 }
        }
        pendingSave = (request, false)
        delegate.saveRequested(targets: listed, time: request.time)
    }

    /// Replies to the pending `SAVE_TARGETS` request: success is an empty `NULL` property in the
    /// requestor's property and a SelectionNotify naming it; failure a SelectionNotify with None.
    /// Nothing is sent to a requestor that went away meanwhile.
    func answerSave(saved: Bool) {
        guard let save = pendingSave else { return }
        pendingSave = nil
        guard !save.abandoned else { return }
        session.owner.requestors.release(save.request.requestor)
        if saved {
            wire.writeLongs(save.request.requestor, save.request.replyProperty, type: wire.known[.null], [], onError: { _ in })
        }
        session.owner.notify(save.request, succeeded: saved)
        wire.flush()
    }

    /// Publishes the display's change counts on our window, where every library process reads them.
    func publishChangeCounts(_ counts: [Int]) {
        wire.writeLongs(wire.window, wire.known[.changeCounts], type: .cardinal, counts.map { UInt(truncatingIfNeeded: $0) }, onError: { _ in })
        wire.flush()
    }

    /// The change counts a running clipboard manager publishes (CLIPBOARD, PRIMARY), nil without one.
    func sharedChangeCounts() -> [Int]? {
        let manager = wire.selectionOwner(wire.known[.clipboardManager])
        guard !manager.isNone, let value = (try? wire.readProperty(manager, wire.known[.changeCounts], delete: false, limit: 64)) ?? nil,
              value.type == .cardinal, value.format == 32 else { return nil }
        return value.longs.map { Int($0) }
    }

    /// Calls `done(true)` once the clipboard manager's published change count at `index` passes
    /// `before` (it counted a change this process made), `done(false)` when there is no manager,
    /// its window goes, or `seconds` pass first. Each new value of its property comes as a
    /// PropertyNotify from its window, whose property changes are asked for during the wait.
    func waitForSharedCount(index: Int, toPass before: Int, within seconds: Double, done: @escaping (Bool) -> Void) {
        let manager = wire.selectionOwner(wire.known[.clipboardManager])
        guard !manager.isNone, manager != wire.window, wire.selectInput(manager, Int(PropertyChangeMask)) else { return done(false) }
        let id = (sharedCountWaiters.map(\.id).max() ?? 0) + 1
        let timer = session.after(seconds) { [weak self] in self?.finishSharedCountWait(id, passed: false) }
        sharedCountWaiters.append(SharedCountWaiter(id: id, manager: manager, index: index, before: before, timer: timer, done: done))
        // A value written before the events were asked for is read now.
        sharedCountsChanged(on: manager)
    }

    /// A new value of the change counts on `manager`'s window: the waits it satisfies end.
    func sharedCountsChanged(on manager: X11Window) {
        let waiting = sharedCountWaiters.filter { $0.manager == manager }
        guard !waiting.isEmpty else { return }
        let counts = sharedChangeCounts()
        for waiter in waiting {
            guard let counts, counts.indices.contains(waiter.index) else { continue }
            if counts[waiter.index] != waiter.before { finishSharedCountWait(waiter.id, passed: true) }
        }
    }

    private func finishSharedCountWait(_ id: Int, passed: Bool) {
        guard let index = sharedCountWaiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = sharedCountWaiters.remove(at: index)
        session.cancelTimer(waiter.timer)
        // The manager's window is another client's: its events stop when no wait needs them.
        if !sharedCountWaiters.contains(where: { $0.manager == waiter.manager }) { wire.selectInput(waiter.manager, 0) }
        waiter.done(passed)
    }
}

/// Why the clipboard manager selection could not be taken.
package enum ClipboardManagerError: Error, Sendable, CustomStringConvertible {
    /// Another client holds `CLIPBOARD_MANAGER`.
    case alreadyRunning(SelectionOwnerInfo)
    case cannotAcquire(String)

    package var description: String {
        switch self {
        case let .alreadyRunning(owner):
            var who = owner.name.map { "'\($0)'" } ?? "a program"
            if let pid = owner.processID { who += " (pid \(pid))" }
            return "another clipboard manager runs on this display: \(who) owns CLIPBOARD_MANAGER (window 0x\(String(owner.window.rawValue, radix: 16))); stop it, or start with --replace to take over"
        case let .cannotAcquire(reason):
            return "could not take CLIPBOARD_MANAGER: \(reason)"
        }
    }
}

/// A write waiting for the clipboard manager to count it.
struct SharedCountWaiter {
    let id: Int
    let manager: X11Window
    let index: Int
    let before: Int
    let timer: TimerHandle
    let done: (Bool) -> Void
}
