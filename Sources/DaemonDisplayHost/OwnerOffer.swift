import FoundationEssentials
import Logging
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import PasteboardX11

/// What a new owner of a selection offers, read once per ownership change: its targets, the
/// sizes it announces, xpb's manifest, and one verdict on what may be done with it. The keeper
/// (what may be kept) and sync (what may leave the machine) both decide from it, so the secret,
/// local-only and expiry rules live here alone.
struct OwnerOffer: Sendable {
    typealias Verdict = CopyVerdict

    let owner: SelectionOwnerInfo
    /// TARGETS as the owner listed them.
    let advertised: [String]
    /// What the owner's `TARGET_SIZES` announced, by target.
    let sizes: [String: Int]
    /// xpb's manifest as read (fast-path field still in), with its options; nil when none.
    let manifest: CapturedTarget?
    let expires: Date?
    let verdict: Verdict

    /// The targets a peer may ask for, in the owner's order.
    var dataTargets: [String] { KeepPolicy.keptTargets(advertised) }

    /// The targets a manager fetches: the data targets, then the item targets xpb's manifest
    /// names (an xpb owner serves them without listing them), so that the manifest kept with
    /// them is served with every target it names.
    var keptTargets: [String] {
        KeepPolicy.keptTargets(advertised, manifest: manifest?.data)
    }

    /// Reads what `owner` offers on `name` (TARGETS, then TARGET_SIZES and XPB_MANIFEST when
    /// listed), each conversion in its turn at `gate`.
    static func read(_ name: Pasteboard.Name, owner: SelectionOwnerInfo, backend: X11PasteboardBackend, gate: OwnerGate,
                     turnDeadline: Double, rules: AppRules = AppRules()) -> OwnerOffer {
        func turn<T>(_ body: () throws -> T) throws -> T {
            guard let value = try gate.withTurn(name, owner.window, until: Date().addingTimeInterval(turnDeadline), body) else {
                throw OfferError("the owner was busy with another transfer for \(Int(turnDeadline)) s")
            }
            return value
        }
        let unreadable = { (why: String) in
            OwnerOffer(owner: owner, advertised: [], sizes: [:], manifest: nil, expires: nil, verdict: .unreadable(why))
        }
        let advertised: [String]
        do {
            advertised = try turn { try backend.targets(of: name) }
        } catch {
            return unreadable("\(error)")
        }
        // Several processes may hold connections handed down from gone ones, one of them the
        // owner's: the library's rule tells which, with a request of ours in the owner's turn
        // (asked of the owner itself, not of what the backend read of it before).
        let owner = owner.resolved { _ = try? turn { try backend.managerPort.capture(name, target: "TARGETS", limit: 1 << 16) } }
        let rule = rules.rule(for: CopyOwner(owner))
        if SecretMarking.isSecret(advertised) || rule == .secret {
            return OwnerOffer(owner: owner, advertised: advertised, sizes: [:], manifest: nil, expires: nil, verdict: .secret)
        }
        if rule == .ignored {
            return OwnerOffer(owner: owner, advertised: advertised, sizes: [:], manifest: nil, expires: nil, verdict: .ignored)
        }
        var sizes: [String: Int] = [:]
        if advertised.contains("TARGET_SIZES") { sizes = (try? turn { try backend.managerPort.targetSizes(of: name) }) ?? [:] }
        var manifest: CapturedTarget?
        var options = PasteboardOptions()
        if advertised.contains("XPB_MANIFEST") {
            guard let value = try? turn({ try backend.managerPort.capture(name, target: "XPB_MANIFEST", limit: 1 << 20) }) ?? nil,
                  let kept = Manifest.kept(value.data) else {
                return unreadable("its manifest")
            }
            manifest = value
            options = kept.options
        }
        return OwnerOffer(owner: owner, advertised: advertised, sizes: sizes, manifest: manifest, expires: options.expirationDate,
                          verdict: verdict(advertised: advertised, expires: options.expirationDate,
                                           isLocalOnly: options.isLocalOnly || rule == .noSync))
    }

    /// What contents kept by the daemon offer when it serves them (a history entry selected
    /// again, an owner gone): the same rule as for any owner.
    init(kept: Snapshot, servedBy window: X11Window) {
        owner = SelectionOwnerInfo(window: window, name: kept.source, processID: kept.pid, executableName: kept.app)
        // What its owner listed: a manifest's item targets, kept to serve with it, are xpb's own.
        let listed = Set(kept.advertised)
        advertised = kept.targets.map(\.target).filter { listed.contains($0) }
            + kept.advertised.filter { SecretMarking.markers.contains($0) }
        sizes = Dictionary(kept.targets.map { ($0.target, $0.data.count) }, uniquingKeysWith: { first, _ in first })
        // The kept manifest (its options already taken out) names the item targets kept with it.
        manifest = kept.targets.first { $0.target == "XPB_MANIFEST" }?.captured
        expires = kept.expires
        verdict = Self.verdict(advertised: advertised, expires: kept.expires, isLocalOnly: kept.isLocalOnly)
    }

    init(owner: SelectionOwnerInfo, advertised: [String], sizes: [String: Int], manifest: CapturedTarget?, expires: Date?, verdict: Verdict) {
        self.owner = owner
        self.advertised = advertised
        self.sizes = sizes
        self.manifest = manifest
        self.expires = expires
        self.verdict = verdict
    }

    /// The one rule (``CopyVerdict/of(advertised:expires:isLocalOnly:now:)``).
    static func verdict(advertised: [String], expires: Date?, isLocalOnly: Bool, now: Date = Date()) -> Verdict {
        CopyVerdict.of(advertised: advertised, expires: expires, isLocalOnly: isLocalOnly, now: now)
    }
}

struct OfferError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The offer of each selection's current owner, read at most once per ownership change however
/// many ask (the keeper after its debounce, sync as soon as a link wants it): the second asker
/// waits for the first one's reading. An ownership change read on the X thread forgets the
/// previous owner's offer, so a window id used again is read again.
final class OwnerOffers: @unchecked Sendable {
    private struct Entry {
        let owner: X11Window
        /// Nil while it is being read.
        var offer: OwnerOffer?
    }

    let backend: X11PasteboardBackend
    let gate: OwnerGate
    let turnDeadline: Double
    /// What is done with a copy by the app that made it (replaced on SIGHUP).
    var rules: AppRules {
        get { condition.lock(); defer { condition.unlock() }; return currentRules }
        set { condition.lock(); currentRules = newValue; condition.unlock() }
    }
    private var currentRules: AppRules
    // Guards `entries`; broadcast when a reading ends or an owner changes.
    private let condition = Condition()
    private var entries: [Pasteboard.Name: Entry] = [:]

    init(backend: X11PasteboardBackend, gate: OwnerGate, turnDeadline: Double, rules: AppRules = AppRules()) {
        self.backend = backend
        self.gate = gate
        self.turnDeadline = turnDeadline
        currentRules = rules
    }

    /// On the X thread, as an ownership change of `name` is read.
    func ownerChanged(_ name: Pasteboard.Name) {
        condition.lock()
        entries.removeValue(forKey: name)
        condition.broadcast()
        condition.unlock()
    }

    /// What `owner` offers on `name`: read now, or the reading another asker made (or is making)
    /// since the ownership change. Nil when `owner` no longer owns `name`. With
    /// `rereadingUnreadable`, a reading that failed is not taken: the owner is asked again.
    func offer(_ name: Pasteboard.Name, owner: X11Window, rereadingUnreadable: Bool = false) -> OwnerOffer? {
        condition.lock()
        while let entry = entries[name], entry.owner == owner, entry.offer == nil { condition.wait() }
        if let entry = entries[name], entry.owner == owner, let offer = entry.offer {
            guard rereadingUnreadable, case .unreadable = offer.verdict else {
                condition.unlock()
                return offer
            }
        }
        // The backend's count of ownership changes (moved before this is called): a reading of
        // an earlier owner is not kept.
        let change = backend.managerPort.ownershipEpoch(of: name)
        entries[name] = Entry(owner: owner, offer: nil)
        condition.unlock()

        // The owner read must be the one asked about (the selection may have moved on).
        var offer: OwnerOffer?
        if let info = try? backend.accountedOwner(of: name), info.window == owner {
            offer = OwnerOffer.read(name, owner: info, backend: backend, gate: gate, turnDeadline: turnDeadline, rules: rules)
        }
        condition.lock()
        if backend.managerPort.ownershipEpoch(of: name) == change, entries[name]?.owner == owner {
            if let offer { entries[name]?.offer = offer } else { entries.removeValue(forKey: name) }
        }
        condition.broadcast()
        condition.unlock()
        return offer
    }
}
