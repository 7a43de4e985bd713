import FoundationEssentials
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import PasteboardX11
import Synchronization

/// An X display's selections as sync shares them: owned and cleared by compare-and-own on the
/// X thread, offers read once per owner (through the daemon's ``OwnerOffers``, shared with the
/// keeper), fetches served in their turn at the owner's ``OwnerGate`` or from what the keeper kept.
final class X11SyncSurface: SyncSurface {
    let backend: X11PasteboardBackend
    let ourWindow: X11Window
    let offers: OwnerOffers
    private let hooks = Mutex<SyncHooks?>(nil)

    init(backend: X11PasteboardBackend, ourWindow: X11Window, offers: OwnerOffers) {
        self.backend = backend
        self.ourWindow = ourWindow
        self.offers = offers
    }

    /// What the surface asks of its daemon (set once, before the hub starts).
    func setHooks(_ hooks: SyncHooks) {
        self.hooks.withLock { $0 = hooks }
    }

    func kept(_ name: Pasteboard.Name, _ owner: X11Window) -> Snapshot? {
        hooks.withLock { $0 }?.kept(name, owner)
    }

    func keptTarget(_ name: Pasteboard.Name, _ owner: X11Window, target: String) -> CapturedTarget? {
        hooks.withLock { $0 }?.keptTarget(name, owner, target)
    }

    var ourOwner: UInt { ourWindow.rawValue }

    func currentOwner(of name: Pasteboard.Name) -> UInt? {
        (try? backend.ownerWindow(of: name)).flatMap { $0.isNone ? nil : $0.rawValue }
    }

    func own(_ name: Pasteboard.Name, targets: [RemoteTarget], origin: String, if precondition: @escaping @Sendable (UInt) -> Bool) throws -> Bool {
        // Who made it, for `xpb info` here: the node and app the announce names (a peer's words,
        // shown escaped, bounded).
        // What the compositor's own bridge holds on X is that Wayland copy, served only while an
        // X window has the focus: it is taken over like any owner the ledger has seen (its reads
        // of ours are refused, so it never carries ours back to Wayland).
        try backend.managerPort.proxy(name, targets: targets, credit: CopyCredit(name: String(origin.prefix(200)), pid: nil), if: { owner in
            precondition(owner.rawValue)
        })
    }

    func clear(_ name: Pasteboard.Name, if precondition: @escaping @Sendable (UInt) -> Bool) throws -> Bool {
        try backend.managerPort.clear(name, if: { precondition($0.rawValue) })
    }

    func waitUntilFinished(_ name: Pasteboard.Name, owner: UInt, while isCurrent: @escaping @Sendable () -> Bool) -> Bool {
        guard name != .find || backend.managerPort.waitForPointerRelease(while: isCurrent) else { return false }
        hooks.withLock { $0 }?.captured?(name, X11Window(rawValue: owner), isCurrent)
        return true
    }

    func verdict(_ name: Pasteboard.Name, owner rawOwner: UInt, nodeName: String) -> SyncLedger.Verdict {
        let owner = X11Window(rawValue: rawOwner)
        let offer: OwnerOffer
        if owner == ourWindow {
            // Kept contents this daemon serves (a history entry selected again).
            guard let kept = kept(name, owner) else { return .notShared("no longer kept") }
            offer = OwnerOffer(kept: kept, servedBy: ourWindow)
        } else {
            // Read once for the keeper and sync; nil when the owner is no longer the one whose
            // change this is.
            guard let read = offers.offer(name, owner: owner) else { return .replaced }
            offer = read
        }
        if let reason = offer.verdict.notSharedReason { return .notShared(reason) }
        if owner != ourWindow, let reason = hooks.withLock({ $0 })?.heldElsewhere?(name, owner) { return .notShared(reason) }
        let manifest = offer.manifest.flatMap { Manifest.kept($0.data)?.manifest }
        let targets = SyncHub.announcedTargets(offer.keptTargets, sizes: { offer.sizes[$0] }, manifest: manifest)
        guard !targets.isEmpty else { return .notShared("without data targets") }
        // Where the copy was made: this node and the application (the program that ran an xpb
        // owner, else its executable's name or window class, never a path), else the window's name.
        let ownerName = owner == ourWindow ? "history" : offer.owner.copiedBy?.name ?? offer.owner.executableName ?? offer.owner.windowClass
            ?? offer.owner.name ?? "window \(owner)"
        return .shareable(targets: Array(targets), expires: offer.expires, origin: "\(nodeName) (\(ownerName))")
    }

    func serve(_ name: Pasteboard.Name, owner rawOwner: UInt, target: String, limit: Int, turnDeadline: Date,
               isCurrent: @escaping @Sendable () -> Bool, begin: (String, Int?) throws -> Void,
               chunk: (Data) throws -> Void) throws -> SyncServeOutcome {
        let owner = X11Window(rawValue: rawOwner)
        let selection = SelectionNames.selection(for: name)
        // In its turn at the owner, like the keeper's capture (many owners serve one transfer at
        // a time): a target the keeper took meanwhile is served from memory.
        let outcome: SyncServeOutcome? = try offers.gate.withTurn(name, owner, until: turnDeadline) {
            if let value = keptTarget(name, owner, target: target) {
                // Kept by the daemon (the owner is gone, or a history entry): from memory.
                let data = target == "XPB_MANIFEST" ? (Manifest.kept(value.data)?.manifest ?? value.data) : value.data
                guard data.count <= limit else {
                    return .refused("\(selection) \(target) is \(ByteCount.format(data.count)), over the \(ByteCount.format(limit)) cap per transfer")
                }
                try begin(value.type, data.count)
                try chunk(data)
                return .served
            } else if target == "XPB_MANIFEST" {
                // Without the fast-path field: it names a socket of this display's owner.
                guard let value = try backend.managerPort.capture(name, target: target, limit: 1 << 20),
                      let manifest = Manifest.kept(value.data) else { return .refused("the owner refused \(target)") }
                try begin(value.type, manifest.manifest.count)
                try chunk(manifest.manifest)
                return .served
            }
            guard owner != ourWindow else { return .refused("\(selection) \(target) is no longer kept") }
            // The cap is the sender's to enforce (with a message that names it); the stream holds
            // at most its high-water mark whatever the size.
            let converted = try backend.managerPort.stream(name, target: target, limit: .max, begin: { type, size in
                guard isCurrent() else { throw SyncHub.Failure("\(selection) changed during the transfer") }
                try begin(type, size)
            }, chunk: chunk)
            return converted ? .served : .refused("the owner refused \(target)")
        }
        return outcome ?? .busy
    }
}

/// What the sync hub asks of the clipboard manager it runs in, on a display.
struct SyncHooks: Sendable {
    /// In a bridge: waits (while the copy is current, within a deadline) until the keeper has
    /// finished reading `owner`'s copy, before it is announced.
    let captured: (@Sendable (Pasteboard.Name, X11Window, @escaping @Sendable () -> Bool) -> Void)?
    /// The kept contents of a selection, if they came from `owner` (or are served by us for it).
    let kept: @Sendable (Pasteboard.Name, X11Window) -> Snapshot?
    /// One target of `owner`'s contents, if the keeper has it (kept, or fetched so far).
    let keptTarget: @Sendable (Pasteboard.Name, X11Window, String) -> CapturedTarget?
    /// In a bridge: why `owner`'s copy is not carried to Wayland, which holds it already.
    var heldElsewhere: (@Sendable (Pasteboard.Name, X11Window) -> String?)? = nil
}

extension SyncHub {
    /// On the X thread, as an ownership change's event is read (the daemon's hook calls it):
    /// stamped now, before anything the X thread does next (such as taking the selection for
    /// another node's copy).
    func ownerChangeRead(_ change: SelectionOwnerChange) {
        let event: SyncLedger.OwnerEvent
        if change.isOurs || change.owner.rawValue == surface.ourOwner {
            event = .ours
        } else if change.owner.isNone {
            event = change.reason == .setOwner ? .cleared : .gone
        } else {
            event = .copied
        }
        ownerChanged(change.name, owner: change.owner.rawValue, event: event)
    }
}
