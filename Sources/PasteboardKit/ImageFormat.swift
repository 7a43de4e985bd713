import FoundationEssentials
import Synchronization

/// An image encoding the clipboard carries: its type identifier, the MIME names toolkits give it,
/// and where it ranks. Every image table and order in xpb is derived from these: what the
/// registry offers for an image, which image an owner converts from, which image a clipboard
/// manager keeps, which one a reader prefers. A new format is a case here (and its codec in
/// `ImageCodecs`).
public enum ImageFormat: String, Sendable, Hashable, CaseIterable {
    case png, jpeg, bmp, gif, tiff, webp
    /// Netpbm's colour, grey and bitmap formats and X's XPM: written only, for the owners that
    /// offer them (Qt), never read.
    case ppm, pgm, pbm, xpm

    /// Whether xpb encodes this format (GIF is read, never written).
    public var isWritable: Bool { self != .gif }

    /// Whether xpb decodes this format.
    public var isReadable: Bool { ![.ppm, .pgm, .pbm, .xpm].contains(self) }

    /// The format's type identifier, for the formats the model names.
    public var type: PasteboardType? {
        switch self {
        case .png: .png
        case .jpeg: .jpeg
        case .bmp: .bmp
        case .gif: .gif
        case .tiff: .tiff
        case .webp: .webP
        case .ppm, .pgm, .pbm, .xpm: nil
        }
    }

    /// Every MIME name of the format, the preferred first: the spellings toolkits use
    /// (`image/x-MS-bmp`, `image/jpg`). GTK's `image/x-win-bitmap` is an icon, not a bitmap.
    public var mimeAliases: [String] {
        switch self {
        case .png: ["image/png"]
        case .jpeg: ["image/jpeg", "image/jpg", "image/pjpeg"]
        case .bmp: ["image/bmp", "image/x-bmp", "image/x-ms-bmp"]
        case .gif: ["image/gif"]
        case .tiff: ["image/tiff", "image/x-tiff"]
        case .webp: ["image/webp"]
        case .ppm: ["image/x-portable-pixmap", "image/ppm"]
        case .pgm: ["image/x-portable-graymap", "image/pgm"]
        case .pbm: ["image/x-portable-bitmap", "image/pbm"]
        case .xpm: ["image/x-xpixmap", "image/xpm"]
        }
    }

    /// The format's MIME name.
    public var mimeType: String { mimeAliases[0] }

    /// The format of a MIME name, under any of its spellings, in any case.
    public init?(mimeType: String) {
        let name = mimeType.lowercased()
        guard let format = Self.allCases.first(where: { $0.mimeAliases.contains(name) }) else { return nil }
        self = format
    }

    /// Its rank as the image others are made from, and as the image a reader or a clipboard
    /// manager takes among several: lossless first (PNG, TIFF, BMP, WebP, GIF, then JPEG); nil
    /// for a format xpb does not read.
    public var sourceRank: Int? {
        switch self {
        case .png: 0
        case .tiff: 1
        case .bmp: 2
        case .webp: 3
        case .gif: 4
        case .jpeg: 5
        case .ppm, .pgm, .pbm, .xpm: nil
        }
    }

    /// The formats xpb reads, best source first (``sourceRank``).
    public static let bySourceRank: [ImageFormat] = allCases.filter { $0.sourceRank != nil }.sorted { $0.sourceRank! < $1.sourceRank! }

    /// The target names an owner offers for the format, in the order Qt and GTK owners list them;
    /// empty for a format owners are not expected to offer (GIF is read only; netpbm and XPM only
    /// for owners that list them).
    public var offeredTargetNames: [String] {
        switch self {
        case .png: ["image/png"]
        case .jpeg: ["image/jpeg"]
        case .bmp: ["image/bmp", "image/x-bmp", "image/x-MS-bmp"]
        case .tiff: ["image/tiff"]
        case .webp: ["image/webp"]
        case .gif, .ppm, .pgm, .pbm, .xpm: []
        }
    }

    /// The image targets Qt and GTK owners advertise for one image, in their order (PNG first,
    /// then the cases' order): what an xpb owner offers for an item with an image, and a
    /// clipboard manager for a kept one.
    public static let offeredTargets: [(name: String, format: ImageFormat)] = allCases.flatMap { format in
        format.offeredTargetNames.map { (name: $0, format: format) }
    }
}

/// Why an image could not be read or written.
public struct ImageError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Not an image in a format xpb reads, or a format xpb does not write.
        case unsupported
        /// More pixels than the limit (a decompression bomb is refused here, from its header).
        case tooLarge
        /// The codec refused the bytes.
        case malformed
        case outOfMemory
    }

    public let kind: Kind
    public let description: String

    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// What converts images for the model (``TargetCodec/image(_:)``, ``PasteboardImage``): the
/// `ImageCodecs` module's codecs, which register themselves (found by name, as a platform
/// backend is), so that this module links no image library.
public protocol ImageConverter: Sendable {
    /// `data` (an image in any format xpb reads) as `format`; the same bytes when it already is.
    func convert(_ data: Data, to format: ImageFormat) throws -> Data
    /// The declared width and height of an image, from its header alone.
    func size(of data: Data) throws -> (width: Int, height: Int)
    /// The format of an image by its signature; nil for other bytes.
    func format(of data: Data) -> ImageFormat?
}

/// A type that provides the image converter; its class is looked up by name.
public protocol ImageConverterProvider: AnyObject {
    static var converter: any ImageConverter { get }
}

/// The image converter in use.
public enum ImageConversion {
    /// The class names looked for, in order.
    public static let providerTypeNames = ["ImageCodecs.ImageCodecRegistration"]

    private static let installed = Mutex<(any ImageConverter)?>(nil)

    /// Installs a converter (replacing the discovered one).
    public static func register(_ converter: any ImageConverter) {
        installed.withLock { $0 = converter }
    }

    /// The registered converter, else the linked codecs'; nil when no codecs are linked.
    public static var converter: (any ImageConverter)? {
        installed.withLock { installed in
            if let installed { return installed }
            let found = providerTypeNames.lazy.compactMap { _typeByName($0) as? any ImageConverterProvider.Type }.first?.converter
            installed = found
            return found
        }
    }

    static func required() throws -> any ImageConverter {
        guard let converter else {
            throw ImageError(.unsupported, "no image codecs are linked into this program: link ImageCodecs (PasteboardX11 does)")
        }
        return converter
    }

    /// `data` as `format` (``ImageConverter/convert(_:to:)``).
    public static func convert(_ data: Data, to format: ImageFormat) throws -> Data {
        try required().convert(data, to: format)
    }

    /// An image's declared size (``ImageConverter/size(of:)``).
    public static func size(of data: Data) throws -> (width: Int, height: Int) {
        try required().size(of: data)
    }

    /// An image's format by its signature (``ImageConverter/format(of:)``); nil for other bytes,
    /// or when no codecs are linked.
    public static func format(of data: Data) -> ImageFormat? {
        converter?.format(of: data)
    }

    /// The most pixels a decode accepts: 64 Mpx, 256 MiB of RGBA (a 50-megapixel photo fits; a
    /// bomb that declares 60000×60000 is refused from its header).
    public static let maxPixels = 64 << 20
}
