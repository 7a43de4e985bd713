import CHistorySeal
import FoundationEssentials
import Glibc

/// The key the history is sealed with at rest (the database, its log and journals through the
/// sealing VFS, payload files sealed whole; `Sources/CHistorySeal`), and where it came from.
package struct HistorySeal: Sendable, Equatable {
    /// Where a key lives.
    package enum Source: Sendable, Equatable, CustomStringConvertible {
        /// The user's keyring, through the Secret Service.
        case keyring
        /// A file of mode 600 (no Secret Service on the session bus).
        case keyFile(String)

        package var description: String {
            switch self {
            case .keyring: "the keyring (Secret Service)"
            case let .keyFile(path): "the key file \(path)"
            }
        }
    }

    /// 32 bytes.
    let key: [UInt8]
    package let source: Source

    init?(key: [UInt8], source: Source) {
        guard key.count == Int(XPBSEAL_KEY) else { return nil }
        self.key = key
        self.source = source
    }

    /// A new random key.
    static func random(source: Source) -> HistorySeal? {
        var key = [UInt8](repeating: 0, count: Int(XPBSEAL_KEY))
        guard key.withUnsafeMutableBufferPointer({ xpbseal_random($0.baseAddress, $0.count) }) == 0 else { return nil }
        return HistorySeal(key: key, source: source)
    }

    /// The URI that opens the database at `path` through the sealing VFS with this key.
    func uri(for path: String) -> String {
        let hex = Digest.hex(key)
        return "file:" + Self.uriPath(path) + "?vfs=\(XPBSEAL_VFS)&xpbkey=" + hex
    }

    /// A path as a URI's path: `?`, `#` and `%` (and anything not printable ASCII) escaped.
    static func uriPath(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "%"), 0..<0x21, 0x7F...: out += "%" + Digest.hex([byte]).uppercased()
            default: out.append(Character(Unicode.Scalar(byte)))
            }
        }
        return out
    }

    /// What a database file holds for this key.
    enum Probe {
        case empty, opens, plain, wrongKey, unreadable
    }

    func probe(_ path: String) -> Probe {
        switch key.withUnsafeBufferPointer({ xpbseal_probe(path, $0.baseAddress) }) {
        case Int32(XPBSEAL_EMPTY): .empty
        case Int32(XPBSEAL_OPENS): .opens
        case Int32(XPBSEAL_PLAIN): .plain
        case Int32(XPBSEAL_WRONG_KEY): .wrongKey
        default: .unreadable
        }
    }

    /// The name a payload file of `digest` (hex) has under this key: a keyed digest, so that the
    /// names tell nothing of the contents (a digest names a known text to anyone who hashes it).
    func fileName(forDigest digest: String) -> String {
        Digest(of: Data(key + Array("xpb payload file name\0".utf8) + Array(digest.utf8))).hex
    }

    /// `data` sealed as a payload file.
    func seal(_ data: Data) -> Data? {
        let size = Int(xpbseal_sealed_size(UInt64(data.count)))
        var out = Data(count: size)
        let ok = out.withUnsafeMutableBytes { target in
            data.withUnsafeBytes { source in
                key.withUnsafeBufferPointer { xpbseal_seal($0.baseAddress, source.baseAddress, UInt64(source.count), target.baseAddress) == 0 }
            }
        }
        return ok ? out : nil
    }

    /// Plain bytes `offset ..< offset + count` (fewer at the end; all with nil) of a sealed
    /// payload file's bytes; nil when they are not sealed with this key, or were changed.
    func open(_ sealed: Data, offset: Int = 0, count: Int? = nil) -> Data? {
        sealed.withUnsafeBytes { source -> Data? in
            let length = xpbseal_plain_length(source.baseAddress, UInt64(source.count))
            guard length >= 0 else { return nil }
            let start = min(max(offset, 0), Int(length))
            let wanted = min(count ?? Int(length), Int(length) - start)
            var out = Data(count: wanted)
            guard wanted > 0 else { return out }
            let given = out.withUnsafeMutableBytes { target in
                key.withUnsafeBufferPointer {
                    xpbseal_open($0.baseAddress, source.baseAddress, UInt64(source.count), UInt64(start), UInt64(wanted), target.baseAddress)
                }
            }
            guard given == wanted else { return nil }
            return out
        }
    }

    /// Whether the database at `path` is sealed (with whatever key): it has pages, and they are
    /// not a plain database's.
    static func isSealedDatabase(_ path: String) -> Bool {
        let anyKey = HistorySeal(key: [UInt8](repeating: 0, count: Int(XPBSEAL_KEY)), source: .keyring)
        return anyKey?.probe(path) == .wrongKey
    }

    /// Whether `bytes` begin as a sealed payload file does.
    static func isSealed(_ bytes: Data) -> Bool {
        bytes.withUnsafeBytes { xpbseal_is_sealed($0.baseAddress, UInt64($0.count)) != 0 }
    }
}

/// What the fuzz target feeds the sealed payload files' reader (their bytes are anyone's who can
/// write the state directory): a header and chunks, opened whole and in parts; and the input
/// sealed, which must open back to itself.
package enum UntrustedHistoryFiles {
    package static func exercise(_ data: Data) {
        guard let seal = HistorySeal(key: [UInt8](repeating: 7, count: 32), source: .keyring) else { return }
        _ = HistorySeal.isSealed(data)
        _ = seal.open(data)
        _ = seal.open(data, offset: 65_530, count: 100)
        _ = seal.open(data, offset: Int.max, count: 1)
        if data.count <= 1 << 20, let sealed = seal.seal(data) {
            precondition(seal.open(sealed) == data, "a sealed payload did not open back to itself")
        }
    }
}
