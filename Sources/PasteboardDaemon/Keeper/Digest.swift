import CCrypto
import FoundationEssentials

/// A SHA-256 digest in lowercase hexadecimal: the name of a kept payload.
package struct Digest: Hashable, Sendable, CustomStringConvertible {
    package let hex: String

    package init(of data: Data) {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        data.withUnsafeBytes { bytes in
            _ = ccrypto_sha256(bytes.baseAddress, bytes.count, &digest)
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
