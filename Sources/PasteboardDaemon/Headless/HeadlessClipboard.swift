import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization

/// The selections of a host without a display, held in memory: what an X server and its owners
/// are to a desktop daemon. Each pasteboard (named by its X selection) holds either items written
/// by `xpb` on this host, served by target as an X owner of them would serve them
/// (``HeldSelection``), or another node's copy, whose bytes are fetched from it when read.
///
/// Every change is numbered (the change count), reported to the sync hub in the order it was made
/// (under the store's lock, as the X thread reports ownership changes) and to the watchers.
package final class HeadlessClipboard: SyncSurface {
    package enum Contents: Sendable {
        /// A copy made on this host (``HeldSelection``), or a history entry selected again
        /// (``KeptSelection``).
        case local(any HeldTargets)
        /// Another node's copy, its bytes fetched from it when read.
        case remote([RemoteTarget])
    }

    /// The process of this host that wrote a copy (over the control socket: the kernel's account
    /// of the client).
    package struct Writer: Sendable {
        let pid: Int
        let app: String?
        let executable: String?
        /// The program that ran it, as it said (``PasteboardWrite/copiedBy``): what the history
        /// credits.
        var credit: (name: String, pid: Int?)? = nil
    }

    package struct Entry: Sendable {
        /// A number per copy (``HeadlessClipboard/ourOwner`` for other nodes' copies).
        package let owner: UInt
        package let contents: Contents
        let origin: String
        var expires: Date? = nil
        var isLocalOnly = false
        var writer: Writer? = nil
        /// The bytes held in memory for it (a local copy's; another node's are fetched when read).
        var size = 0

        var targets: [String] {
            switch contents {
            case let .local(held): return held.targets
            // xpb's item targets are served, not listed (as their owner lists them).
            case let .remote(targets): return targets.map(\.target).filter { !$0.hasPrefix(Manifest.itemTargetPrefix) }
            }
        }
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var counts: [String: Int] = [:]
        var nextOwner: UInt = 2
        /// The bytes of the writes under way, by reservation (``reserve(_:size:budget:)``).
        var writing: [UInt64: Int] = [:]
        var nextWrite: UInt64 = 0
    }

    /// Told of each change of a synced selection, in order (the hub's ``SyncHub/ownerChanged(_:owner:event:)``).
    package typealias ChangeHook = @Sendable (Pasteboard.Name, UInt, SyncLedger.OwnerEvent) -> Void

    private let state = Mutex(State())
    /// The `watch` clients, told of each change under the state's lock (``change(_:_:)``).
    let watchers = Followers<PasteboardChangeNote>()
    private let hook = Mutex<ChangeHook?>(nil)
    private let expiries = DispatchQueue(label: "xpbd.headless.expiry")
    private let expiryHook = Mutex<(@Sendable () -> Void)?>(nil)

    package let ourOwner: UInt = 1

    package init() {}

    /// Sets the hook that hears of every change (once, before anything is written).
    package func onChange(_ hook: @escaping ChangeHook) {
        self.hook.withLock { $0 = hook }
    }

    /// Whether a name is a selection a client may use.
    static func isValid(_ selection: String) -> Bool {
        SelectionNames.pasteboard(forSelection: selection) != nil
    }

    // MARK: Clients

    /// The contents of a pasteboard and its change count (nil contents: empty).
    package func entry(_ selection: String) -> (Entry?, Int) {
        state.withLock { ($0.entries[selection], $0.counts[selection, default: 0]) }
    }

    /// The change count of every pasteboard changed since the start, and CLIPBOARD's and PRIMARY's.
    func changeCounts() -> [String: Int] {
        state.withLock { ["CLIPBOARD": 0, "PRIMARY": 0].merging($0.counts) { $1 } }
    }

    /// New contents from a client on this host (a copy, or a history entry selected again);
    /// returns the copy's owner number.
    @discardableResult
    package func write(_ selection: String, contents: any HeldTargets, size: Int, origin: String, expires: Date?, isLocalOnly: Bool, writer: Writer?) -> UInt {
        var owner: UInt = 0
        change(selection) { state in
            owner = state.nextOwner
            state.nextOwner += 1
            state.entries[selection] = Entry(owner: owner, contents: .local(contents), origin: origin, expires: expires,
                                             isLocalOnly: isLocalOnly, writer: writer, size: size)
            return (owner, .copied)
        }
        if let expires { scheduleExpiry(selection, owner: owner, at: expires) }
        return owner
    }

    /// The most named pasteboards a headless xpbd holds at once. On X each is a process of its own
    /// (the owner `xpb copy --pasteboard` leaves), which the X server's client limit bounds;
    /// here they are this one process's memory.
    static let maxNamed = 32

    /// Why a new copy of `size` bytes to `selection` is refused, nil when it may be held: no more
    /// than ``maxNamed`` named pasteboards, and no more than `budget` bytes held and being written
    /// in all (what `selection` holds now is replaced, so it does not count). Refused before its
    /// bytes come.
    private static func refusal(of selection: String, size: Int, budget: Int, in state: State) -> String? {
        let others = state.entries.filter { $0.key != selection }
        let isNamed = { (name: String) in !["CLIPBOARD", "PRIMARY", "SECONDARY"].contains(name) }
        if isNamed(selection), others.keys.filter(isNamed).count >= Self.maxNamed {
            return "xpbd holds \(Self.maxNamed) named pasteboards already: clear one first (xpb clear --pasteboard NAME)"
        }
        let held = others.values.reduce(0) { $0 + $1.size }
        let writing = state.writing.values.reduce(0, +)
        if held + writing + size > budget {
            let under = writing > 0 ? " and \(ByteCount.format(writing)) being written" : ""
            return "xpbd holds \(ByteCount.format(held)) in its pasteboards\(under); \(ByteCount.format(size)) more would pass its \(ByteCount.format(budget)) (--max-size): clear a pasteboard first, or write when the others are done"
        }
        return nil
    }

    /// Reserves `size` bytes of `budget` for a write to `selection` while its bytes arrive: writes
    /// under way count against `--max-size` with what is held, so that twenty writers at once
    /// cannot each hold their bytes before any is counted. A refusal says why; a reservation is
    /// given back with ``release(_:)`` when the write is held or fails.
    func reserve(_ selection: String, size: Int, budget: Int) -> Result<UInt64, ReservationRefused> {
        state.withLock { state in
            if let refusal = Self.refusal(of: selection, size: size, budget: budget, in: state) { return .failure(ReservationRefused(reason: refusal)) }
            state.nextWrite += 1
            state.writing[state.nextWrite] = size
            return .success(state.nextWrite)
        }
    }

    struct ReservationRefused: Error {
        let reason: String
    }

    func release(_ reservation: UInt64) {
        state.withLock { _ = $0.writing.removeValue(forKey: reservation) }
    }

    /// Called when a copy expires (after it is dropped): the history forgets it too.
    func onExpiry(_ hook: @escaping @Sendable () -> Void) {
        expiryHook.withLock { $0 = hook }
    }

    /// Empties a pasteboard for a client (`xpb clear`): a clear, as `xsel --clear` is on X.
    func clearForClient(_ selection: String) {
        change(selection) { state in
            state.entries.removeValue(forKey: selection)
            return (0, .cleared)
        }
    }

    /// A copy's expiry: it is dropped, as an xpb owner gives its selection up (unless a newer
    /// copy replaced it).
    private func scheduleExpiry(_ selection: String, owner: UInt, at date: Date) {
        expiries.asyncAfter(deadline: .now() + min(max(0, date.timeIntervalSinceNow), 1e9)) { [self] in
            change(selection) { state in
                guard state.entries[selection]?.owner == owner else { return nil }
                state.entries.removeValue(forKey: selection)
                return (0, .cleared)
            }
            expiryHook.withLock { $0 }?()
        }
    }

    /// Makes a change under the lock (`body` returns the new owner and the event, nil for no
    /// change), counts it and tells the hub and the watchers in the same step, so that both see
    /// the changes in the order they were made: a client's clear and the hub's compare-and-clear
    /// on two threads reached a watcher as 4 then 3 when the watchers were told after the lock
    /// (seen under load). Neither calls back in here: the hub's effects are all queued, and a
    /// watcher's post takes only its own queue's lock and writes a byte to a non-blocking pipe.
    private func change(_ selection: String, _ body: (inout State) -> (UInt, SyncLedger.OwnerEvent)?) {
        let hook = self.hook.withLock { $0 }
        state.withLock { state in
            guard let (owner, event) = body(&state) else { return }
            state.counts[selection, default: 0] += 1
            if let hook, let name = SelectionNames.pasteboard(forSelection: selection) { hook(name, owner, event) }
            let entry = state.entries[selection]
            let note = PasteboardChangeNote(pasteboard: selection, changeCount: state.counts[selection, default: 0],
                                            targets: entry?.targets ?? [], origin: entry?.origin, ownerPID: entry?.writer?.pid)
            watchers.post(note, of: selection)
        }
    }

    // MARK: SyncSurface

    package func currentOwner(of name: Pasteboard.Name) -> UInt? {
        let selection = SelectionNames.selection(for: name)
        return state.withLock { $0.entries[selection]?.owner }
    }

    package func own(_ name: Pasteboard.Name, targets: [RemoteTarget], origin: String, if precondition: @escaping @Sendable (UInt) -> Bool) throws -> Bool {
        let selection = SelectionNames.selection(for: name)
        let owned = Mutex(false)
        change(selection) { state in
            guard precondition(state.entries[selection]?.owner ?? 0) else { return nil }
            state.entries[selection] = Entry(owner: ourOwner, contents: .remote(targets), origin: origin)
            owned.withLock { $0 = true }
            return (ourOwner, .ours)
        }
        return owned.withLock { $0 }
    }

    package func clear(_ name: Pasteboard.Name, if precondition: @escaping @Sendable (UInt) -> Bool) throws -> Bool {
        let selection = SelectionNames.selection(for: name)
        let cleared = Mutex(false)
        change(selection) { state in
            guard precondition(state.entries[selection]?.owner ?? 0) else { return nil }
            state.entries.removeValue(forKey: selection)
            cleared.withLock { $0 = true }
            return (0, .ours)
        }
        return cleared.withLock { $0 }
    }

    package func waitUntilFinished(_ name: Pasteboard.Name, owner: UInt, while isCurrent: @escaping @Sendable () -> Bool) -> Bool { true }

    package func verdict(_ name: Pasteboard.Name, owner: UInt, nodeName: String) -> SyncLedger.Verdict {
        let selection = SelectionNames.selection(for: name)
        guard let entry = state.withLock({ $0.entries[selection] }), entry.owner == owner else { return .replaced }
        guard case let .local(held) = entry.contents else { return .notShared("another node's copy") }
        if SecretMarking.isSecret(held.targets) { return .notShared("marked secret") }
        if entry.isLocalOnly { return .notShared("local-only") }
        if let expires = entry.expires, expires <= Date() { return .notShared("expired") }
        let targets = SyncHub.announcedTargets(KeepPolicy.keptTargets(held.targets, manifest: held.manifest), sizes: { held.size(of: $0) },
                                               manifest: held.manifest)
        guard !targets.isEmpty else { return .notShared("without data targets") }
        return .shareable(targets: Array(targets), expires: entry.expires, origin: "\(nodeName) (\(entry.origin))")
    }

    package func serve(_ name: Pasteboard.Name, owner: UInt, target: String, limit: Int, turnDeadline: Date,
               isCurrent: @escaping @Sendable () -> Bool, begin: (String, Int?) throws -> Void,
               chunk: (Data) throws -> Void) throws -> SyncServeOutcome {
        let selection = SelectionNames.selection(for: name)
        guard let entry = state.withLock({ $0.entries[selection] }), entry.owner == owner, case let .local(held) = entry.contents else {
            return .refused("\(selection) changed since that announce")
        }
        guard let (type, data) = try held.bytes(for: target) else { return .refused("\(target) cannot be made") }
        guard data.count <= limit else {
            return .refused("\(selection) \(target) is \(ByteCount.format(data.count)), over the \(ByteCount.format(limit)) cap per transfer")
        }
        try begin(type, data.count)
        try chunk(data)
        return .served
    }
}
