import FoundationEssentials
import PasteboardWire

/// The ordering of sync on one node, as a pure value: events go in (this display's ownership
/// changes, what an owner offers, other nodes' announces and withdraws, links up and down,
/// expiry), effects come out (read an offer, send to links, own a proxy, clear the display,
/// schedule an expiry). No I/O, no locks, no X: ``SyncHub`` feeds it on one lock and performs
/// the effects; the simulation in the tests drives many of them through a seeded network.
///
/// Per selection the ledger keeps two registers (docs/sync-protocol.md, "Ordering"):
/// - **shared**: a last-writer-wins register of what crosses links, ordered by ``SyncStamp``
///   (hybrid logical clock, then node id): the newest shareable copy, or a tombstone (a clear, a
///   withdraw, an expiry). It only moves forward, and every node relays a change of it exactly
///   once, so all nodes settle on the same value;
/// - **local**: this display's newest change of its own, stamped when the X thread read its
///   XFixes event. Secret and local-only copies live only here: they never reach `shared`, never
///   leave the node, and keep older copies from elsewhere off this display (this node's own
///   earlier copy, whose bytes its display no longer holds, is withdrawn).
///
/// The display shows whichever of the two is newer.
package struct SyncLedger {
    typealias LinkID = Int
    /// An X window id (0: None).
    typealias Owner = UInt

    /// What an owner change on this display was, as the X thread read it.
    package enum OwnerEvent: Equatable {
        /// A client of this display took the selection: a new copy.
        case copied
        /// A client set no owner on purpose (`xsel --clear`, a password manager): a clear.
        case cleared
        /// The owner went away (its window or connection closed): the keeper serves what it
        /// kept of it, under the same stamp. Not a change of contents.
        case gone
        /// This daemon took the selection (a proxy, kept contents): not a change of contents.
        case ours
    }

    /// What a new owner offers, read by the driver for a ``Effect/readOffer(selection:stamp:owner:)``.
    package enum Verdict: Equatable {
        /// May leave the machine: its targets, expiry, and who made it (for people).
        case shareable(targets: [SyncTarget], expires: Date?, origin: String)
        /// Stays here: secret, local-only, expired, no data targets, or unreadable; why.
        case notShared(String)
        /// Its owner no longer owned the selection when the offer was read: the display does not
        /// show this change (this daemon took the selection back in the same instant, or a newer
        /// owner's event is on its way).
        case replaced
    }

    enum Effect: Equatable {
        /// Read what `owner` offers (off the X thread) and report it with ``offerRead(_:stamp:verdict:)``.
        case readOffer(selection: String, stamp: SyncStamp, owner: Owner)
        /// Send a message on these links.
        case send(SyncMessage, to: [LinkID])
        /// Take the display's selection for a copy made elsewhere, if ``mayOwn(_:stamp:actualOwner:ours:)``
        /// still holds on the X thread (compare-and-own).
        case own(SyncAnnounce)
        /// Empty the display's selection for a newer clear from elsewhere, if ``mayClear(_:stamp:actualOwner:ours:)``
        /// still holds on the X thread.
        case clear(selection: String, stamp: SyncStamp)
        /// Call ``expired(_:stamp:)`` at this date.
        case expireAt(Date, selection: String, stamp: SyncStamp)
    }

    /// The shared register of a selection.
    struct Shared: Equatable {
        let stamp: SyncStamp
        /// Nil: a tombstone (cleared, withdrawn or expired).
        var announce: SyncAnnounce?
        /// The link the value came from; nil when it is this node's.
        var source: LinkID?
    }

    /// This display's newest change of its own.
    struct Local: Equatable {
        enum State: Equatable {
            /// Its offer is not read yet (it is asked for when a link is up).
            case pending(isAsked: Bool)
            /// Announced: it is the shared register's value (or was, until a newer one came).
            case shared
            /// It stays on this machine; why.
            case notShared(String)
            /// Its owner lost the selection before its offer was read: it is not on the display,
            /// and keeps nothing older off it.
            case replaced
            case cleared
        }

        let stamp: SyncStamp
        let owner: Owner
        var state: State
    }

    struct Slot: Equatable {
        var shared: Shared?
        var local: Local?
        /// The owner of the display's selection as the last XFixes event read told it.
        var seenOwner: Owner = 0
    }

    struct Link: Equatable {
        /// The selections this node sends, and takes, on the link.
        let sends: Set<String>
        let receives: Set<String>
    }

    let node: String
    /// The newest clock this node has seen or made (ms since 1970).
    private(set) var clock: UInt64 = 0
    private(set) var slots: [String: Slot] = [:]
    private(set) var links: [LinkID: Link] = [:]

    init(node: String) {
        self.node = node
    }

    /// How far ahead of this machine's clock an announce may be: clocks of machines differ, but a
    /// stamp a day ahead would win over every copy for a day.
    static let maxClockSkew: UInt64 = 24 * 3600 * 1000

    // MARK: This display

    /// The X thread read an ownership change of `selection` (at `now`, ms since 1970): a copy or
    /// a clear is stamped here and now, before anything from elsewhere can be taken over it.
    mutating func ownerChanged(_ selection: String, owner: Owner, event: OwnerEvent, now: UInt64) -> [Effect] {
        slots[selection, default: Slot()].seenOwner = owner
        switch event {
        case .gone, .ours:
            return []
        case .copied:
            let stamp = nextStamp(now: now)
            let isAsked = isSent(selection)
            slots[selection]!.local = Local(stamp: stamp, owner: owner, state: .pending(isAsked: isAsked))
            return isAsked ? [.readOffer(selection: selection, stamp: stamp, owner: owner)] : []
        case .cleared:
            let stamp = nextStamp(now: now)
            slots[selection]!.local = Local(stamp: stamp, owner: 0, state: .cleared)
            slots[selection]!.shared = Shared(stamp: stamp, announce: nil, source: nil)
            // The display is cleared again if this daemon took the selection for an older copy
            // after the clear (the clear's event was not read then, and None looked free).
            return [.clear(selection: selection, stamp: stamp)] + send(.withdraw(selection: selection, stamp: stamp), except: nil, selection: selection)
        }
    }

    /// A history entry became the selection (`xpb history select`): a new copy of this node's.
    mutating func selectedAgain(_ selection: String, owner: Owner, now: UInt64) -> [Effect] {
        ownerChanged(selection, owner: owner, event: .copied, now: now)
    }

    /// What the owner of the change `stamp` offers: announced if it may leave the machine and is
    /// still the newest change of this display.
    mutating func offerRead(_ selection: String, stamp: SyncStamp, verdict: Verdict) -> [Effect] {
        guard var local = slots[selection]?.local, local.stamp == stamp, case .pending = local.state else { return [] }
        switch verdict {
        case let .notShared(reason):
            local.state = .notShared(reason)
            slots[selection]!.local = local
            return withdrawOwnOlder(selection, than: stamp)
        case .replaced:
            local.state = .replaced
            slots[selection]!.local = local
            var effects = withdrawOwnOlder(selection, than: stamp)
            // The display shows the newest value from elsewhere again (compare-and-own on the X
            // thread: an owner whose event is not read yet keeps it).
            if let shared = slots[selection]!.shared, shared.source != nil {
                effects.insert(shared.announce.map { .own($0) } ?? .clear(selection: selection, stamp: shared.stamp), at: 0)
            }
            return effects
        case let .shareable(targets, expires, origin):
            local.state = .shared
            slots[selection]!.local = local
            if let shared = slots[selection]!.shared, shared.stamp > stamp { return [] }
            let announce = SyncAnnounce(selection: selection, stamp: stamp, origin: origin, targets: targets, expires: expires)
            slots[selection]!.shared = Shared(stamp: stamp, announce: announce, source: nil)
            var effects = send(.announce(announce), except: nil, selection: selection)
            if let expires { effects.append(.expireAt(expires, selection: selection, stamp: stamp)) }
            return effects
        }
    }

    // MARK: Links

    /// A link's hellos were exchanged: it gets what this node holds (copies and tombstones, not
    /// what stays here), and changes whose offers waited for a link are read now.
    mutating func linkUp(_ id: LinkID, sends: Set<String>, receives: Set<String>, now: Date) -> [Effect] {
        links[id] = Link(sends: sends, receives: receives)
        var effects: [Effect] = []
        for selection in slots.keys.sorted() {
            guard var local = slots[selection]?.local, case .pending(isAsked: false) = local.state, isSent(selection) else { continue }
            local.state = .pending(isAsked: true)
            slots[selection]!.local = local
            effects.append(.readOffer(selection: selection, stamp: local.stamp, owner: local.owner))
        }
        for selection in sends.sorted() {
            guard let shared = slots[selection]?.shared, shared.source != id else { continue }
            if let announce = shared.announce, !(announce.expires.map { $0 <= now } ?? false) {
                effects.append(.send(.announce(announce), to: [id]))
            } else if shared.announce == nil {
                effects.append(.send(.withdraw(selection: selection, stamp: shared.stamp), to: [id]))
            }
        }
        return effects
    }

    /// A link closed. Values it brought stay (their bytes cannot be fetched until the same value
    /// comes again on another link, or a newer one replaces it).
    mutating func linkDown(_ id: LinkID) {
        links.removeValue(forKey: id)
    }

    // MARK: Other nodes

    /// Why an announce is refused before it is weighed, or nil.
    /// Whether `name` may be a target: printable ASCII (X atom names are Latin-1; MIME types and
    /// every toolkit's targets are ASCII, some with spaces and quotes in parameters), beginning
    /// with a letter or `_`. Anything else from a peer would only become a useless atom.
    static func isPlausibleTargetName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first == UInt8(ascii: "_") || (first | 0x20) >= UInt8(ascii: "a") && (first | 0x20) <= UInt8(ascii: "z") else {
            return false
        }
        return name.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    static func malformation(of announce: SyncAnnounce, maxTargets: Int, maxTargetName: Int) -> String? {
        if announce.targets.isEmpty { return "it lists no targets" }
        if announce.targets.count > maxTargets { return "it lists \(announce.targets.count) targets (at most \(maxTargets))" }
        for target in announce.targets {
            if target.target.isEmpty || target.target.utf8.count > maxTargetName { return "a target name is empty or too long" }
            if (target.size ?? 0) < 0 { return "a target has a negative size" }
            if let inline = target.inline {
                guard target.target == SyncTarget.inlineTarget else { return "it carries the bytes of \(target.target) (only xpb's manifest may come with an announce)" }
                guard inline.count <= SyncTarget.maxInline else { return "its manifest is \(inline.count) bytes (at most \(SyncTarget.maxInline))" }
            }
            if !isPlausibleTargetName(target.target) {
                return "a target name is not a plausible MIME type or atom name (printable ASCII, beginning with a letter or _)"
            }
        }
        return nil
    }

    /// Another node's copy, from link `link`: taken into the shared register if newer, relayed
    /// to the other links, and owned on this display unless a newer change of its own is there.
    mutating func announced(_ announce: SyncAnnounce, from link: LinkID, now: UInt64, wall: Date) -> [Effect] {
        let selection = announce.selection
        guard links[link]?.receives.contains(selection) == true else { return [] }
        guard announce.stamp.clock <= now &+ Self.maxClockSkew else { return [] }
        clock = max(clock, announce.stamp.clock)
        if let expires = announce.expires, expires <= wall { return [] }
        if let shared = slots[selection]?.shared, announce.stamp <= shared.stamp {
            // The same value again (a link came back): take the bytes from here while the link it
            // came on is down.
            if announce.stamp == shared.stamp, shared.announce != nil, let source = shared.source, links[source] == nil {
                slots[selection]!.shared!.source = link
            }
            return []
        }
        slots[selection, default: Slot()].shared = Shared(stamp: announce.stamp, announce: announce, source: link)
        var effects = send(.announce(announce), except: link, selection: selection)
        if isLocalOlder(selection, than: announce.stamp) { effects.insert(.own(announce), at: 0) }
        if let expires = announce.expires { effects.append(.expireAt(expires, selection: selection, stamp: announce.stamp)) }
        return effects
    }

    /// Another node's withdraw: everything up to `stamp` is gone (a clear there, or the copy of
    /// `stamp` expired or was withdrawn by its origin).
    mutating func withdrawn(_ selection: String, stamp: SyncStamp, from link: LinkID, now: UInt64) -> [Effect] {
        guard links[link]?.receives.contains(selection) == true else { return [] }
        guard stamp.clock <= now &+ Self.maxClockSkew else { return [] }
        clock = max(clock, stamp.clock)
        if let shared = slots[selection]?.shared {
            if stamp < shared.stamp || (stamp == shared.stamp && shared.announce == nil) { return [] }
        }
        slots[selection, default: Slot()].shared = Shared(stamp: stamp, announce: nil, source: link)
        var effects = send(.withdraw(selection: selection, stamp: stamp), except: link, selection: selection)
        // The display drops a proxy of the withdrawn copy, or anything older than a clear (not a
        // copy of its own: that one's stamp is not older).
        if isLocalOlder(selection, than: stamp) { effects.insert(.clear(selection: selection, stamp: stamp), at: 0) }
        return effects
    }

    /// The copy `stamp` reached its expiration date here: a tombstone, withdrawn on every link,
    /// and cleared from the display if it was a proxy.
    mutating func expired(_ selection: String, stamp: SyncStamp) -> [Effect] {
        guard var shared = slots[selection]?.shared, shared.stamp == stamp, shared.announce != nil else { return [] }
        shared.announce = nil
        slots[selection]!.shared = shared
        var effects = send(.withdraw(selection: selection, stamp: stamp), except: nil, selection: selection)
        if isLocalOlder(selection, than: stamp) { effects.insert(.clear(selection: selection, stamp: stamp), at: 0) }
        return effects
    }

    /// This node's own copy of `selection` by `owner`, announced already, is taken back (its text
    /// turned out to be one the rules keep home, `--ignore-match`): withdrawn on every link, as
    /// at an expiry. Nothing when that copy is not the shared one (not announced yet, or replaced).
    mutating func withdrawOwn(_ selection: String, owner: Owner) -> [Effect] {
        guard let local = slots[selection]?.local, local.owner == owner, local.state == .shared,
              let shared = slots[selection]?.shared, shared.source == nil, shared.stamp == local.stamp else { return [] }
        slots[selection]!.local!.state = .notShared("its text matches --ignore-match")
        return expired(selection, stamp: shared.stamp)
    }

    /// Another bridge (a compositor's, between its Wayland clients and its XWayland) took the
    /// display's selection for the copy that is newest already, and serves it only at times: the
    /// newest copy from elsewhere is owned again (compare-and-own, as at an announce). Nothing
    /// when the newest is this display's own, whose bytes the keeper holds.
    mutating func takeBack(_ selection: String) -> [Effect] {
        guard let shared = slots[selection]?.shared, let announce = shared.announce, shared.source != nil,
              isLocalOlder(selection, than: shared.stamp) else { return [] }
        return [.own(announce)]
    }

    // MARK: Questions the driver asks (on the X thread, at the moment it acts)

    /// Compare-and-own: the copy `stamp` is still the newest value for the display, and the
    /// selection's owner now is one the ledger has seen (or nobody, or us): a newer copy whose
    /// XFixes event is not read yet is never replaced.
    func mayOwn(_ selection: String, stamp: SyncStamp, actualOwner: Owner, ours: Owner) -> Bool {
        guard let shared = slots[selection]?.shared, shared.stamp == stamp, shared.announce != nil, shared.source != nil else { return false }
        return isLocalOlder(selection, than: stamp) && isKnown(selection, actualOwner, ours: ours)
    }

    /// Compare-and-clear, as ``mayOwn(_:stamp:actualOwner:ours:)`` for a tombstone (another
    /// node's, or this display's own clear).
    func mayClear(_ selection: String, stamp: SyncStamp, actualOwner: Owner, ours: Owner) -> Bool {
        guard let shared = slots[selection]?.shared, shared.stamp == stamp, shared.announce == nil else { return false }
        let isOwnClear = slots[selection]?.local.map { $0.stamp == stamp && $0.state == .cleared } ?? false
        return (isOwnClear || isLocalOlder(selection, than: stamp)) && isKnown(selection, actualOwner, ours: ours)
    }

    /// Whether the display's change to `owner` has been read, and its offer too: announced, or
    /// found to stay here (an owner change not read yet, or one whose offer is still to be read,
    /// may yet be announced).
    func hasRead(_ selection: String, owner: Owner) -> Bool {
        guard let slot = slots[selection], slot.seenOwner == owner else { return false }
        // An offer not asked for (no link was up) is read as far as it will be until one is.
        guard let local = slot.local, local.owner == owner, case .pending(isAsked: true) = local.state else { return true }
        return false
    }

    /// The shared value `stamp` if it is current and a copy (a fetch of it may be served).
    func sharedCopy(_ selection: String, stamp: SyncStamp) -> Shared? {
        guard let shared = slots[selection]?.shared, shared.stamp == stamp, shared.announce != nil else { return nil }
        return shared
    }

    /// Whether the change `stamp` of this display is still its newest (its bytes are still the
    /// owner's to serve).
    func isCurrentLocal(_ selection: String, stamp: SyncStamp) -> Bool {
        slots[selection]?.local?.stamp == stamp
    }

    // MARK: Helpers

    private mutating func nextStamp(now: UInt64) -> SyncStamp {
        clock = max(now, clock &+ 1)
        return SyncStamp(clock: clock, node: node)
    }

    private func isLocalOlder(_ selection: String, than stamp: SyncStamp) -> Bool {
        guard let local = slots[selection]?.local, local.state != .replaced else { return true }
        return local.stamp < stamp
    }

    /// This node's own copy, if it is the shared value and older than this display's change
    /// `stamp` that stays here: its bytes are no longer this display's to serve, so it is
    /// withdrawn everywhere.
    private mutating func withdrawOwnOlder(_ selection: String, than stamp: SyncStamp) -> [Effect] {
        guard var shared = slots[selection]!.shared, shared.source == nil, shared.announce != nil, shared.stamp < stamp else { return [] }
        shared.announce = nil
        slots[selection]!.shared = shared
        return send(.withdraw(selection: selection, stamp: shared.stamp), except: nil, selection: selection)
    }

    private func isKnown(_ selection: String, _ owner: Owner, ours: Owner) -> Bool {
        owner == 0 || owner == ours || owner == slots[selection]?.seenOwner
    }

    private func isSent(_ selection: String) -> Bool {
        links.values.contains { $0.sends.contains(selection) }
    }

    private func send(_ message: SyncMessage, except source: LinkID?, selection: String) -> [Effect] {
        let targets = links.filter { $0.key != source && $0.value.sends.contains(selection) }.map(\.key).sorted()
        return targets.isEmpty ? [] : [.send(message, to: targets)]
    }
}
