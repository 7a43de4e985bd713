/// Which reads of what a process owns (an xpb owner's items, a clipboard manager's kept copies)
/// are reported as pastes: reads in, a yes or no out. A value with no I/O in it; an X owner looks
/// each reader up (the X-Resource extension's client pid), a Wayland source follows its pipe
/// through `/proc`, only where ``mayLookUp(now:)`` lets it.
///
/// - Look-ups are bounded in rate: a bucket of ``burst`` refilled at ``perSecond``. A flood of
///   readers (any client may convert, as often as the flood rules let it) then costs at most that
///   many; the pastes past it go unreported.
/// - One reader's reads of one selection, each within ``gap`` of the one before (a toolkit asks
///   for the text, then HTML; an X MULTIPLE asks for several), are one paste: reported at its
///   first (``isNewPaste(_:now:)``). A reader is its process where the server names it: the X
///   server gives a gone client's resource ids to the next, so successive one-shot readers
///   (`xclip -o` twice) share their windows' ids, never their pids.
package struct PasteReports: Sendable {
    /// How close one reader's conversions of one selection must follow each other to be one
    /// paste (nanoseconds).
    package static let gap: UInt64 = 2_000_000_000
    package static let burst = 16
    package static let perSecond = 4
    /// How many readers are remembered (their last conversion) before the oldest are forgotten.
    package static let readersRemembered = 64

    /// A reader of a selection: its process id, or where the server names none, its client's
    /// resource id base.
    package struct Reader: Hashable, Sendable {
        let selection: UInt
        let reader: UInt64

        package init(selection: UInt, processID: Int) {
            self.selection = selection
            reader = UInt64(processID)
        }

        /// A reader known only by its client (the high bit keeps it apart from any pid).
        package init(selection: UInt, client: UInt) {
            self.selection = selection
            reader = UInt64(client) | 1 << 63
        }
    }

    /// Each reader's last conversion (nanoseconds).
    private var last: [Reader: UInt64] = [:]
    private var budget = LookUpBudget(burst: Self.burst, perSecond: Self.perSecond)

    package init() {}

    /// Whether a conversion at `now` may look its reader up (a token is taken).
    package mutating func mayLookUp(now: UInt64) -> Bool {
        budget.take(now: now)
    }

    /// A conversion by `reader` at `now`, looked up: whether it begins a paste to report.
    package mutating func isNewPaste(_ reader: Reader, now: UInt64) -> Bool {
        let before = last[reader]
        last[reader] = now
        if last.count > Self.readersRemembered { forgetOldest() }
        if let before, now >= before, now - before <= Self.gap { return false }
        return true
    }

    /// How many readers are remembered now.
    package var rememberedCount: Int { last.count }

    /// Forgets the readers whose last conversion is oldest, down to three quarters.
    private mutating func forgetOldest() {
        let kept = last.sorted { $0.value > $1.value }.prefix(Self.readersRemembered * 3 / 4)
        last = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
    }
}

/// How often readers may be looked up: a bucket of `burst` tokens refilled at `perSecond`, so
/// that a flood of readers costs at most that many look-ups (each is a few round trips to the X
/// server or a walk through `/proc`).
package struct LookUpBudget: Sendable {
    let burst: Int
    let perSecond: Int
    private var tokens: Double
    private var refilled: UInt64?

    package init(burst: Int, perSecond: Int) {
        self.burst = burst
        self.perSecond = perSecond
        tokens = Double(burst)
    }

    /// The look-ups of a secret's readers while a refusal rule names an app (``PasteboardKit/SecretRefusal``),
    /// per owner: past them a reader goes unnamed, and is refused.
    package static var secretReaders: LookUpBudget { LookUpBudget(burst: 32, perSecond: 8) }

    /// Whether a look-up at `now` (nanoseconds) may go ahead (a token is taken).
    package mutating func take(now: UInt64) -> Bool {
        if let refilled, now > refilled {
            tokens = min(Double(burst), tokens + Double(now - refilled) / 1e9 * Double(perSecond))
        }
        refilled = max(refilled ?? now, now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
