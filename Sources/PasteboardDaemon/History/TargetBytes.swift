import FoundationEssentials
import ImageCodecs
import PasteboardKit

/// A kept target's bytes as listings read them, wherever they are (inline in the database, or in
/// their payload file): a target's first bytes, an image's pixel size (read once per image, since
/// listings ask again each time), and the whole payload a thumbnail is made from.
final class TargetBytes {
    private let payloads: PayloadFiles
    /// Pixel sizes of the images listed, by digest.
    private var pixelSizes: [String: (width: Int, height: Int)] = [:]

    init(payloads: PayloadFiles) {
        self.payloads = payloads
    }

    /// The first bytes of a kept target.
    func head(in database: SQLiteDatabase, entry: Int64, position: Int, digest: String, inline: Bool, count: Int = 64) -> Data? {
        if inline {
            return try? database.query("SELECT substr(data, 1, ?) FROM targets WHERE entry = ? AND position = ?",
                                       [.integer(Int64(count)), .integer(entry), .integer(Int64(position))]).first?[0].blob
        }
        guard let digest = Digest(hex: digest) else { return nil }
        return payloads.head(digest, count: count)
    }

    /// An image's pixel size, from its header (the first 256 KiB: a JPEG's may follow its Exif).
    func pixelSize(in database: SQLiteDatabase, entry: Int64, position: Int, digest: String, inline: Bool) -> (width: Int, height: Int)? {
        if let known = pixelSizes[digest] { return known }
        guard let bytes = head(in: database, entry: entry, position: position, digest: digest, inline: inline, count: 256 << 10),
              let size = try? ImageCodec.size(of: bytes) else { return nil }
        pixelSizes[digest] = size
        return size
    }

    /// A kept target's bytes (a plain payload file mapped, not read).
    func payload(in database: SQLiteDatabase, entry: Int64, position: Int, digest: String, inline: Bool) -> Data? {
        if inline {
            return try? database.query("SELECT data FROM targets WHERE entry = ? AND position = ?",
                                       [.integer(entry), .integer(Int64(position))]).first?[0].blob
        }
        guard let digest = Digest(hex: digest) else { return nil }
        return payloads.contents(digest)
    }

    /// The digests of the images whose pixel size is remembered.
    var sizedImages: Set<String> { Set(pixelSizes.keys) }

    /// Forgets the pixel sizes of images no entry keeps any more.
    func forgetSizes(except kept: Set<String>) {
        pixelSizes = pixelSizes.filter { kept.contains($0.key) }
    }
}
