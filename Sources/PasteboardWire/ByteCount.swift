import Foundation

/// Byte counts for people, as the daemon's log and xpb's listings show them: `512 B`,
/// `1.2 KiB`, `50.0 MiB`.
public enum ByteCount {
    public static func format(_ bytes: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f", value) + " " + units[unit]
    }
}
