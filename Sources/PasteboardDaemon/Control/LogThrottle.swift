import FoundationEssentials

/// How often one kind of warning that other processes can provoke (refused connections and
/// links) reaches the log: a burst, then one per interval, telling how many were left out.
/// A flood of refused hellos must not flood the journal. Pure: the caller passes the time.
package struct LogThrottle {
    /// Messages let through at once before the interval applies.
    let burst: Int
    /// Seconds between messages once the burst is spent.
    let interval: Double
    private var allowance: Int
    private var last: Double = -.infinity
    private var suppressed = 0

    init(burst: Int = 5, interval: Double = 60) {
        self.burst = burst
        self.interval = interval
        allowance = burst
    }

    /// Whether to log now, and how many were left out since the last one logged.
    mutating func admit(now: Double) -> (log: Bool, suppressed: Int) {
        if now - last >= interval { allowance = burst }
        guard allowance > 0 else {
            suppressed += 1
            return (false, 0)
        }
        allowance -= 1
        last = now
        defer { suppressed = 0 }
        return (true, suppressed)
    }

    /// `text` as one printable line: another process chose it (a peer's name), and control
    /// characters must not reach a terminal that shows the log.
    package static func printable(_ text: String, limit: Int = 200) -> String {
        let cleaned = String(String.UnicodeScalarView(text.unicodeScalars.map { scalar in
            scalar.value < 0x20 || (0x7F ..< 0xA0).contains(scalar.value) ? "?" : scalar
        }))
        return cleaned.count > limit ? String(cleaned.prefix(limit)) + "…" : cleaned
    }
}
