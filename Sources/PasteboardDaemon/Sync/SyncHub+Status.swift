import Dispatch
import FoundationEssentials
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// What `xpb daemon status` shows of sync: the value per selection and each link.
extension SyncHub {
    /// Per synced selection: the shared value (stamp, origin, link) and this display's own change.
    func valueStatuses() -> [SyncValueStatus] {
        state.withLock { state in
            synced.map { name in
                let selection = SelectionNames.selection(for: name)
                let slot = state.ledger.slots[selection]
                let shared = slot?.shared
                let via = shared?.source.flatMap { state.links[$0]?.label } ?? shared?.source.map { "link \($0) (closed)" }
                let localState: String? = slot?.local.map { local in
                    switch local.state {
                    case .pending: return "pending"
                    case .shared: return "shared"
                    case let .notShared(reason): return "not shared: \(reason)"
                    case .replaced: return "replaced before it was read"
                    case .cleared: return "cleared"
                    }
                }
                return SyncValueStatus(selection: selection, stamp: shared.map { "\($0.stamp)" }, origin: shared?.announce?.origin,
                                       state: shared == nil ? "none" : shared?.announce == nil ? "cleared" : "copy", via: via,
                                       localStamp: slot?.local.map { "\($0.stamp)" }, localState: localState)
            }
        }
    }

    func peerStatuses() -> [PeerStatus] {
        let (links, dialed) = state.withLock { state in (Array(state.links.values), dialers.withLock { $0 }) }
        var statuses = dialed.map { $0.status() }
        for link in links.sorted(by: { $0.id < $1.id }) where link.label.hasPrefix("incoming") {
            var status = PeerStatus(name: link.label, state: "connected",
                                    direction: PeerStatus.direction(sends: link.sends, receives: link.receives),
                                    selections: link.selections.map { SelectionNames.selection(for: $0) }.sorted(),
                                    remote: link.theirs.name, since: Date())
            Self.merge(link, into: &status)
            statuses.append(status)
        }
        return statuses
    }

    /// A link's counters in a status.
    static func merge(_ link: SyncLink, into status: inout PeerStatus) {
        let stats = link.stats.withLock { $0 }
        status.roundTripMilliseconds = stats.roundTrip.map { ($0 * 10_000).rounded() / 10 }
        status.lastAnnounce = stats.lastAnnounce
        status.announcesSent = stats.announcesSent
        status.announcesReceived = stats.announcesReceived
        status.bytesSent = stats.bytesSent
        status.bytesReceived = stats.bytesReceived
        status.ignoredMessages = stats.ignoredMessages
        status.ignoredFields = stats.ignoredFields
    }
}
