import FoundationEssentials
import PasteboardKit
import PasteboardSelections

/// What a clipboard manager (xpbd) does on a Wayland session beyond what a library user does:
/// hear every selection event with its ownership's number, read the offer of one ownership
/// (never a newer one's by mistake), serve kept contents or another node's copy as a source of
/// its own, and own or clear by compare-and-set on the ownership. Ownerships are numbered by this
/// client (``DataControlState/owner(of:)``): data-control names no client, and the compositor
/// reuses offer ids.
extension WaylandPasteboardBackend {
    /// The number of the ownerships this process holds.
    package static var ourOwner: UInt { DataControlState.ourOwner }

    /// Calls `handler` on the events thread for every selection event, after the change is
    /// published: the pasteboard and its new ownership (nil: empty).
    package func onSelectionChange(_ handler: (@Sendable (Pasteboard.Name, UInt?) -> Void)?) {
        state.withLock { $0.selectionHook = handler }
    }

    /// Calls `handler` once when the connection to the compositor ends (with why); at once if it
    /// has already.
    package func onConnectionEnd(_ handler: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.endHook = handler }
        if let reason = connection.endReason {
            let hook = state.withLock { state in
                defer { state.endHook = nil }
                return state.endHook
            }
            hook?(reason)
        }
    }

    /// A selection's ownership now, nil while it is empty.
    package func currentOwner(of name: Pasteboard.Name) -> UInt? {
        guard let selection = try? selection(name) else { return nil }
        return connection.withState { $0.owner(of: selection) }
    }

    /// The types offered by ownership `owner` of a selection, nil when it is no longer current.
    package func offeredTypes(of name: Pasteboard.Name, owner: UInt) -> [String]? {
        guard let selection = try? selection(name) else { return nil }
        return connection.withState { state in
            guard state.owner(of: selection) == owner, let offer = state.current[selection], let types = state.types(of: offer) else { return nil }
            return types.map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// Streams one type of ownership `owner`'s offer; nil when the ownership is no longer
    /// current or does not offer the type. The reply's type is the type asked (a source writes
    /// bytes, not a type).
    package func read(_ name: Pasteboard.Name, owner: UInt, type: String, limit: Int, bytes: (Data) throws -> Void) throws -> String? {
        let selection = try selection(name)
        guard let offer = connection.withState({ state -> (id: UInt32, types: [String])? in
            guard state.owner(of: selection) == owner, let id = state.current[selection], let types = state.types(of: id) else { return nil }
            return (id, types.map { String(decoding: $0, as: UTF8.self) })
        }) else { return nil }
        return try receive(offer, type: type, limit: limit, bytes: bytes) ? type : nil
    }

    /// Serves contents a manager kept as the selection, if `precondition` allows it.
    package func serve(_ kept: any HeldTargets, on name: Pasteboard.Name, if precondition: @escaping (UInt?) -> Bool) throws -> Bool {
        try own(.kept(kept), on: name, if: precondition)
    }

    /// Serves a paste queue's item: each receive takes its turn first, told the reader's process
    /// (``TurnTakingTargets``). If `precondition` allows it (as ``serve(_:on:if:)``).
    package func serveQueued(_ queue: any TurnTakingTargets, on name: Pasteboard.Name, if precondition: @escaping (UInt?) -> Bool) throws -> Bool {
        try own(.kept(queue), on: name, if: precondition)
    }

    /// Whether our source on `name` is a paste queue's (contents that take turns).
    package func servesQueue(on name: Pasteboard.Name) -> Bool {
        guard let selection = try? selection(name) else { return false }
        return state.withLock { state in
            guard let source = state.ours[selection], case .kept(let held)? = state.held[source] else { return false }
            return held is any TurnTakingTargets
        }
    }

    /// Serves another node's copy as the selection, its bytes fetched when a reader asks, if
    /// `precondition` allows it.
    package func proxy(_ name: Pasteboard.Name, targets: [RemoteTarget], if precondition: @escaping (UInt?) -> Bool) throws -> Bool {
        try own(.remote(targets), on: name, if: precondition)
    }

    /// Empties the selection if `precondition` allows it.
    package func clear(_ name: Pasteboard.Name, if precondition: @escaping (UInt?) -> Bool) throws -> Bool {
        let selection = try selection(name)
        var cleared = false
        try connection.roundtrip(timeout: configuration.readTimeout) {
            let device = connection.withState { state -> UInt32? in
                precondition(state.owner(of: selection)) ? state.device : nil
            }
            guard let device else { return }
            try connection.writeLocked(WaylandRequest.setSelection(device: device, source: nil, primary: selection == .primary))
            cleared = true
        }
        return cleared
    }

    /// Whether the compositor carries the primary selection.
    package var hasPrimarySelection: Bool { state.withLock { $0.hasPrimary } }

    /// The compositor's process (the kernel's account of the socket's other end), nil when it
    /// does not say.
    package var compositorPID: Int? { connection.peerPID }

    /// The compositor's socket, for logs and the node's name.
    package var socketPath: String { connection.path }
}
