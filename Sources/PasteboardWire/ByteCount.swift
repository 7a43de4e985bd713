import FoundationEssentials

/// Byte counts for people, as the daemon's log and xpb's listings show them: `512 B`,
/// `1.2 KiB`, `50.0 MiB`.
package enum ByteCount {
    package static func format(_ bytes: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        guard unit > 0 else { return "\(bytes) B" }
        // One decimal, rounded half away from zero, as printf's "%.1f" would show it.
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) " + units[unit]
    }
}
