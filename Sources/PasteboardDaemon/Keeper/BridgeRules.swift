/// The bridge's two decisions about the compositor's own bridge, as values (facts in, a decision
/// out; the hosts carry it out): what a new Wayland ownership is to the bridge, and what to do
/// after the compositor's XWayland window manager took an X selection. Both hosts of a bridge
/// ask them, and neither knows the other's types: the facts are plain.
///
/// The compositor's bridge, once an X window has had the focus, takes the X selection for every
/// new Wayland copy (the bridge's own carries too, sometimes twice), and sets a Wayland
/// selection for every X copy and every X selection change (the bridge's too). Left alone, the
/// two bridges would carry one copy back and forth, or withdraw each other's.
package enum BridgeRules {
    /// What a new Wayland ownership that is not the bridge's own is.
    package enum WaylandTake: Equatable, Sendable {
        /// Judged by what the bridge remembers (``BridgeMemory/kind(_:text:)``): a copy a Wayland
        /// client made (kept, recorded, carried to X), or the compositor carrying a copy the
        /// bridge knows (an X copy, the bridge's own carry back, or a secret X copy without its
        /// mark): not kept, not carried.
        case judged(BridgeMemory.Kind)
        /// Replaced by another ownership before the bridge judged it: passed over, as the newer
        /// one's own event follows and is judged itself. Its text went with it, so it would pass
        /// for a person's copy, and its "replaced" verdict would withdraw the bridge's own copy
        /// everywhere (under load the compositor took CLIPBOARD twice for the newest Wayland copy:
        /// the first take, judged as a copy, withdrew that copy from X).
        case passedOver

        /// The compositor's carry of a copy (secret or not): its ownership is not kept.
        package var isEcho: Bool {
            if case let .judged(kind) = self { return kind != .copy }
            return false
        }
    }

    /// What the new Wayland ownership `owner` is, the selection's owner being `current` now:
    /// `kind` (``BridgeMemory/kind(_:text:)``, which may read the copy's text and wait for the X
    /// side) is asked only of an ownership still current, or of an emptied selection's last one.
    package static func judge(_ owner: UInt, current: UInt?, kind: () -> BridgeMemory.Kind) -> WaylandTake {
        if let current, current != owner { return .passedOver }
        return .judged(kind())
    }

    /// What the Wayland selection holds, as the bridge's X side asks after the compositor took
    /// the X selection for it.
    package enum WaylandSelection: Equatable, Sendable {
        /// Nothing, or the bridge's own source (a copy it carries, or one its keeper serves).
        case bridges
        /// A Wayland client's copy that the Wayland side has not read yet.
        case unread
        /// A Wayland client's copy the Wayland side has read: announced, or kept home.
        case read
        /// The bridge's own source serving a paste queue: X apps' reads through the compositor
        /// take their turns there; no copy of an item here would.
        case queue
    }

    /// How long the X side looks again for the announce of a Wayland client's copy the compositor
    /// took an X selection for.
    package static let announceWait = 5.0

    /// One look's outcome, after the compositor's XWayland window manager took an X selection:
    /// it answers for it only while an X window has the focus, so the bridge takes it back,
    /// always by compare-and-own (never over another client's copy).
    package enum TakeBack: Equatable, Sendable {
        /// Taken back by the sync hub, with the newest copy it knows (an announce's, as it came).
        case taken
        /// Look again in a moment: the announce of the copy it was taken for is on its way.
        case lookAgain(after: Double)
        /// Serve the copy the X side's keeper holds: the take was for the bridge's own carry of
        /// an X copy, whose app's ownership it ended.
        case serveKept
        /// Left to the compositor: the Wayland copy is not shared (secret, local-only).
        case leftNotShared
        /// Left to the compositor: it holds the paste queue's item, through which X apps take
        /// their turns.
        case leftQueue
        /// No announce came within ``announceWait``: nothing to take it back with.
        case gaveUp
    }

    /// One look, `elapsed` seconds after the take, the Wayland selection holding `selection`;
    /// `hubTakesBack` has the sync hub take it back with the newest copy it knows, and says
    /// whether it did (asked only where that is the answer).
    package static func takeBack(_ selection: WaylandSelection, elapsed: Double, hubTakesBack: () -> Bool) -> TakeBack {
        switch selection {
        case .unread:
            // Its announce is on its way: the copy the compositor took it for is newer than any
            // the hub holds.
            return elapsed < announceWait ? .lookAgain(after: 0.05) : .gaveUp
        case .read:
            // Announced (its announce owns the selection as it comes, or here), or kept home.
            if hubTakesBack() { return .taken }
            return elapsed < announceWait ? .lookAgain(after: 0.1) : .leftNotShared
        case .queue:
            return .leftQueue
        case .bridges:
            return hubTakesBack() ? .taken : .serveKept
        }
    }
}
