/// When xpbd lost its display (the compositor dropped it or went away, the X server went): whether
/// to connect again, and when.
///
/// A server that drops one client lives on (a compositor whose buffer to xpbd overflowed; one
/// that found a request it disliked): xpbd connects again at once, and keeps the clipboard. A
/// server that went for good ends the session: xpbd tries for ``giveUpAfter`` seconds in all,
/// then exits with a failure, as before (the session's own start, or systemd's
/// `Restart=on-failure`, brings it back with the next session). Waits double from
/// ``firstWait``, up to ``longestWait``. A connection that lasts ``stableAfter`` ends the outage;
/// one lost sooner continues it, so a server that keeps dropping xpbd is given up too.
///
/// A pure value: the driver (``ReconnectingDaemon``) tells it what happened and does what it says.
struct ReconnectPolicy {
    static let firstWait = 0.1
    static let longestWait = 2.0
    static let giveUpAfter = 10.0
    static let stableAfter = 60.0

    package enum Decision: Equatable {
        case retry(after: Double)
        case giveUp
    }

    /// Seconds waited in this outage.
    private var waited = 0.0
    private var nextWait = ReconnectPolicy.firstWait

    /// The display was lost after a connection of `lasted` seconds.
    mutating func lost(after lasted: Double) -> Decision {
        if lasted >= Self.stableAfter { self = ReconnectPolicy() }
        return wait()
    }

    /// A try to connect again failed.
    mutating func failed() -> Decision { wait() }

    private mutating func wait() -> Decision {
        guard waited + nextWait <= Self.giveUpAfter + 1e-9 else { return .giveUp }
        let delay = nextWait
        waited += delay
        nextWait = min(nextWait * 2, Self.longestWait)
        return .retry(after: delay)
    }
}
