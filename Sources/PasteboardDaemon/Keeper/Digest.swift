import CHistorySeal
import FoundationEssentials

/// A SHA-256 digest in lowercase hexadecimal: the name of a kept payload.
package struct Digest: Hashable, Sendable, CustomStringConvertible {
    package let hex: String

    package init(of data: Data) {
        var digest = [UInt8](repeating: 0, count: 32)
        data.withUnsafeBytes { bytes in
            xpbseal_sha256(bytes.baseAddress, bytes.count, &digest)
        }
        hex = Self.hex(digest)
    }

    /// Bytes in lowercase hexadecimal.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    package init?(hex: String) {
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        self.hex = hex
    }

    package var description: String { hex }
}

/// How an owner that tells xpbd of its pastes (`xpb`'s) names its copy
/// (``ControlRequest/pasted(pasteboard:owner:paste:)``): on X by its window (`0x…`), where
/// Wayland names no owner by the SHA-256 of its first representation's bytes (`sha256:…`), which
/// the keeper that kept the copy has among its targets' digests.
package enum OwnerName {
    package static func content(_ data: Data) -> String { "sha256:" + Digest(of: data).hex }

    /// The digest a content name carries; nil for any other name.
    package static func contentDigest(_ name: String) -> Digest? {
        guard name.hasPrefix("sha256:") else { return nil }
        return Digest(hex: String(name.dropFirst("sha256:".count)))
    }
}
