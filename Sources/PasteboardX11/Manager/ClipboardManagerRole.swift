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
    /// Writes of ours the clipboard manager is to count (``watchSharedCount(index:)``).
    private var sharedCountWaiters: [SharedCountWaiter] = []
    /// The last count watch's id (never given twice: a late wait never finds another's watch).
    private var lastCountWatch = 0
    /// The counts we last published (as the clipboard manager), nil before the first.
    private var publishedCounts: [Int]?

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

    /// Publishes the display's change counts on our window, where every library process reads
    /// them: first each count that changed under its selection's own property (whose notify
    /// alone passes a watch, ``sharedCountChanged(on:index:sequence:)``), then the pair.
    func publishChangeCounts(_ counts: [Int]) {
        for (index, count) in counts.enumerated() where index < Self.countProperties.count {
            if let published = publishedCounts, published.indices.contains(index), published[index] == count { continue }
            wire.writeLongs(wire.window, wire.known[Self.countProperties[index]], type: .cardinal, [UInt(truncatingIfNeeded: count)], onError: { _ in })
        }
        publishedCounts = counts
        wire.writeLongs(wire.window, wire.known[.changeCounts], type: .cardinal, counts.map { UInt(truncatingIfNeeded: $0) }, onError: { _ in })
        wire.flush()
    }

    /// The properties of each count alone, in the pair's order (CLIPBOARD, PRIMARY).
    private static let countProperties: [WellKnown] = [.clipboardChangeCount, .primaryChangeCount]

    /// The count index whose own property `property` is; nil for any other.
    func countIndex(ofProperty property: X11Atom) -> Int? {
        Self.countProperties.firstIndex { wire.known[$0] == property }
    }

    /// The change counts a running clipboard manager publishes (CLIPBOARD, PRIMARY), nil without one.
    func sharedChangeCounts() -> [Int]? {
        let manager = wire.selectionOwner(wire.known[.clipboardManager])
        guard !manager.isNone else { return nil }
        return sharedCounts(on: manager)
    }

    /// The change counts published on `manager`'s window (one round trip), nil if it has none.
    private func sharedCounts(on manager: X11Window) -> [Int]? {
        wire.takeCardinals(wire.requestCardinals(manager, wire.known[.changeCounts], maxValues: Self.maxCounts))
    }

    /// The most change counts read from a manager's window.
    private static let maxCounts = 16

    /// Before a change of ours: begins following the clipboard manager's published count at
    /// `index`, from its value now. Returns the watch's id, nil when no other client is the
    /// manager. The manager's property changes are asked for before its count is read, and both
    /// requests go before our change: none of its new values can come unseen. The count's answer
    /// is not waited for here: it comes before the change's own (the server answers in order) and
    /// is taken when first needed; a manager that publishes no such count ends the watch then.
    /// ``awaitSharedCount(_:within:done:)`` waits for the count to pass.
    func watchSharedCount(index: Int) -> Int? {
        let manager = session.managerAtStart() ?? wire.selectionOwner(wire.known[.clipboardManager])
        guard !manager.isNone, manager != wire.window, wire.selectInput(manager, Int(PropertyChangeMask)) else { return nil }
        lastCountWatch += 1
        let id = lastCountWatch
        let read = wire.requestCardinals(manager, wire.known[.changeCounts], maxValues: Self.maxCounts)
        // Ended by its wait; else (the change never completed) by this deadline.
        let timer = session.after(Self.unawaitedWatchLifetime) { [weak self] in self?.finishSharedCountWait(id, passed: false) }
        sharedCountWaiters.append(SharedCountWaiter(id: id, manager: manager, index: index, readSequence: read.sequence, before: .asked(read), timer: timer))
        return id
    }

    /// Takes the count a watch began with, if its answer is still to be taken: a manager that
    /// publishes no such count ends the watch (its write waits for nothing).
    private func takeCountBefore(_ id: Int) {
        guard let index = sharedCountWaiters.firstIndex(where: { $0.id == id }),
              case let .asked(read) = sharedCountWaiters[index].before else { return }
        let waiter = sharedCountWaiters[index]
        guard let counts = wire.takeCardinals(read), counts.indices.contains(waiter.index) else {
            sharedCountWaiters[index].before = .none
            return finishSharedCountWait(id, passed: false)
        }
        sharedCountWaiters[index].before = .value(counts[waiter.index])
    }

    /// Calls `done(true)` once the count watch `id` follows has passed the value it began with
    /// (the manager counted our change; at once if it has already), `done(false)` when `seconds`
    /// pass first or there is no such watch.
    func awaitSharedCount(_ id: Int, within seconds: Double, done: @escaping (Bool) -> Void) {
        takeCountBefore(id)
        guard let index = sharedCountWaiters.firstIndex(where: { $0.id == id }) else { return done(false) }
        sharedCountWaiters[index].done = done
        if sharedCountWaiters[index].passed { return finishSharedCountWait(id, passed: true) }
        if let timer = sharedCountWaiters[index].timer { session.cancelTimer(timer) }
        sharedCountWaiters[index].timer = session.after(seconds) { [weak self] in self?.finishSharedCountWait(id, passed: false) }
    }

    /// How long a count watch lasts that nothing awaits (its change never completed), in seconds.
    static let unawaitedWatchLifetime = 30.0

    /// Ends the count watch `id` with nothing waiting for it (the change it was for failed).
    func endSharedCountWatch(_ id: Int) {
        finishSharedCountWait(id, passed: false)
    }

    /// A new value of the change counts on `manager`'s window (read from it: one round trip):
    /// the watches it passes are done, or marked so for their wait.
    func sharedCountsChanged(on manager: X11Window) {
        // The counts the watches began with first: their reads went out before this one.
        for waiter in sharedCountWaiters where waiter.manager == manager { takeCountBefore(waiter.id) }
        guard sharedCountWaiters.contains(where: { $0.manager == manager && !$0.passed }),
              let counts = sharedCounts(on: manager) else { return }
        for waiter in sharedCountWaiters where waiter.manager == manager && !waiter.passed {
            guard case let .value(before) = waiter.before, counts.indices.contains(waiter.index), counts[waiter.index] != before else { continue }
            pass(waiter)
        }
    }

    /// The count at `index` alone changed on `manager`'s window (its own property, which the
    /// manager writes only when the count changes), in an event the server sent after its
    /// request `sequence`: the watches of that count whose read it had answered by then are
    /// passed, with no read of their own (the pair's notify that follows finds none left).
    func sharedCountChanged(on manager: X11Window, index: Int, sequence: UInt32) {
        for waiter in sharedCountWaiters where waiter.manager == manager { takeCountBefore(waiter.id) }
        for waiter in sharedCountWaiters where waiter.manager == manager && waiter.index == index && !waiter.passed {
            // After the read: the event's sequence is the last request the server had handled (mod 2^32).
            guard case .value = waiter.before, Int32(bitPattern: sequence &- waiter.readSequence) >= 0 else { continue }
            pass(waiter)
        }
    }

    /// The count `waiter` follows has passed: its wait is done, or (not waited for yet) will be at once.
    private func pass(_ waiter: SharedCountWaiter) {
        if waiter.done != nil {
            finishSharedCountWait(waiter.id, passed: true)
        } else if let index = sharedCountWaiters.firstIndex(where: { $0.id == waiter.id }) {
            sharedCountWaiters[index].passed = true
        }
    }

    /// The manager's window is another client's: its events stop when no watch needs them.
    private func deselectUnwatched(_ manager: X11Window) {
        if !sharedCountWaiters.contains(where: { $0.manager == manager }) { wire.selectInput(manager, 0) }
    }

    private func finishSharedCountWait(_ id: Int, passed: Bool) {
        guard let index = sharedCountWaiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = sharedCountWaiters.remove(at: index)
        if case let .asked(read) = waiter.before { wire.discard(read) }
        if let timer = waiter.timer { session.cancelTimer(timer) }
        deselectUnwatched(waiter.manager)
        waiter.done?(passed)
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

/// The count a watch began with.
enum CountBefore {
    /// Asked for before the write; the answer is still to be taken.
    case asked(PendingRead)
    case value(Int)
    /// The manager published no such count (the watch is ending).
    case none
}

/// A write of ours that the clipboard manager is to count: followed from before the write, waited
/// for after it.
struct SharedCountWaiter {
    let id: Int
    let manager: X11Window
    let index: Int
    /// The sequence number of the read of `before`: a change of the count's own property in an
    /// event after it is a change since.
    let readSequence: UInt32
    /// The count before the write: asked for (its answer not taken yet), or read.
    var before: CountBefore
    /// The count has passed `before` (before anything waited for it).
    var passed = false
    /// Its deadline: the wait's, once the write is made and waited for (else a long one, for a
    /// write that never completed).
    var timer: TimerHandle?
    /// The wait's answer.
    var done: ((Bool) -> Void)?
}
