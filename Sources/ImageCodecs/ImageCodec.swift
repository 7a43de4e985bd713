internal import CImageCodecs
import FoundationEssentials
public import PasteboardKit

/// Registers these codecs as the model's image converter (``PasteboardKit/ImageConversion``):
/// found by name in any program that links this module.
public final class ImageCodecRegistration: ImageConverterProvider {
    public static var converter: any ImageConverter { Converter() }

    struct Converter: ImageConverter {
        func convert(_ data: Data, to format: ImageFormat) throws -> Data { try ImageCodec.convert(data, to: format) }
        func size(of data: Data) throws -> (width: Int, height: Int) { try ImageCodec.size(of: data) }
        func format(of data: Data) -> ImageFormat? { ImageCodec.format(of: data) }
    }
}

extension ImageFormat {
    fileprivate var code: Int32 {
        switch self {
        case .png: Int32(XPB_IMAGE_PNG)
        case .jpeg: Int32(XPB_IMAGE_JPEG)
        case .bmp: Int32(XPB_IMAGE_BMP)
        case .gif: Int32(XPB_IMAGE_GIF)
        case .tiff: Int32(XPB_IMAGE_TIFF)
        case .webp: Int32(XPB_IMAGE_WEBP)
        case .ppm: Int32(XPB_IMAGE_PPM)
        case .pgm: Int32(XPB_IMAGE_PGM)
        case .pbm: Int32(XPB_IMAGE_PBM)
        case .xpm: Int32(XPB_IMAGE_XPM)
        }
    }

    fileprivate init?(code: Int32) {
        guard let format = Self.allCases.first(where: { $0.code == code }) else { return nil }
        self = format
    }
}

extension ImageError {
    fileprivate init(status: Int32, message: [CChar]) {
        let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch status {
        case Int32(XPB_IMAGE_UNSUPPORTED): self.init(.unsupported, text.isEmpty ? "unsupported image format" : text)
        case Int32(XPB_IMAGE_TOO_LARGE): self.init(.tooLarge, text)
        case Int32(XPB_IMAGE_NO_MEMORY): self.init(.outOfMemory, text.isEmpty ? "out of memory" : text)
        default: self.init(.malformed, text.isEmpty ? "the image is malformed" : text)
        }
    }
}

/// Decoded pixels: 8-bit RGBA, rows top to bottom.
public struct Pixels: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public let rgba: [UInt8]

    public init(width: Int, height: Int, rgba: [UInt8]) {
        precondition(rgba.count == width * height * 4, "RGBA bytes must be width × height × 4")
        self.width = width
        self.height = height
        self.rgba = rgba
    }

    /// Whether any pixel is not fully opaque.
    public var hasAlpha: Bool { stride(from: 3, to: rgba.count, by: 4).contains { rgba[$0] != 255 } }
}

/// Image conversion through Debian's codecs (libpng, libjpeg-turbo, libwebp, libtiff, stb_image
/// for BMP and GIF; libnetpbm and libXpm for writing netpbm and XPM). Every decode checks the declared size against a pixel limit first.
public enum ImageCodec {
    /// The most pixels a decode accepts (``PasteboardKit/ImageConversion/maxPixels``).
    public static let defaultMaxPixels = ImageConversion.maxPixels

    /// The JPEG quality of conversions.
    public static let jpegQuality: Int32 = 90

    /// The format of an image by its signature; nil for other bytes.
    public static func format(of data: Data) -> ImageFormat? {
        data.withUnsafeBytes { bytes in
            ImageFormat(code: xpb_image_sniff(bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count))
        }
    }

    /// The declared width and height of an image, from its header alone.
    public static func size(of data: Data) throws(ImageError) -> (width: Int, height: Int) {
        var width: UInt32 = 0
        var height: UInt32 = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = data.withUnsafeBytes { bytes in
            message.withUnsafeMutableBufferPointer { buffer in
                xpb_image_info(bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count, &width, &height, buffer.baseAddress, buffer.count)
            }
        }
        guard status == Int32(XPB_IMAGE_OK) else { throw ImageError(status: status, message: message) }
        return (Int(width), Int(height))
    }

    /// Decodes the (first) image in `data`.
    public static func decode(_ data: Data, maxPixels: Int = defaultMaxPixels) throws(ImageError) -> Pixels {
        var image = xpb_image()
        defer { xpb_image_free(image.pixels) }
        try decode(data, maxPixels: maxPixels, into: &image)
        let count = Int(image.width) * Int(image.height) * 4
        return Pixels(width: Int(image.width), height: Int(image.height),
                      rgba: Array(UnsafeBufferPointer(start: image.pixels, count: count)))
    }

    /// Encodes pixels as `format`.
    public static func encode(_ pixels: Pixels, as format: ImageFormat) throws(ImageError) -> Data {
        var copy = pixels.rgba
        return try copy.withUnsafeMutableBufferPointer { (buffer) throws(ImageError) -> Data in
            var image = xpb_image(pixels: buffer.baseAddress, width: UInt32(pixels.width), height: UInt32(pixels.height))
            return try encode(&image, as: format)
        }
    }

    /// `data` (an image in any format xpb reads) as `format`; the same bytes when it already is.
    public static func convert(_ data: Data, to format: ImageFormat, maxPixels: Int = defaultMaxPixels) throws(ImageError) -> Data {
        guard format.isWritable else { throw ImageError(.unsupported, "xpb does not write \(format.mimeType)") }
        if Self.format(of: data) == format { return data }
        var image = xpb_image()
        defer { xpb_image_free(image.pixels) }
        try decode(data, maxPixels: maxPixels, into: &image)
        return try encode(&image, as: format)
    }

    /// A PNG of the image scaled to at most `maxSide` pixels on its long side (never enlarged).
    public static func thumbnail(_ data: Data, maxSide: Int = 256, maxPixels: Int = defaultMaxPixels) throws(ImageError) -> Data {
        var image = xpb_image()
        defer { xpb_image_free(image.pixels) }
        try decode(data, maxPixels: maxPixels, into: &image)
        let long = max(Int(image.width), Int(image.height))
        guard long > maxSide else { return try encode(&image, as: .png) }
        let width = max(1, Int(image.width) * maxSide / long)
        let height = max(1, Int(image.height) * maxSide / long)
        var small = xpb_image()
        defer { xpb_image_free(small.pixels) }
        guard xpb_image_resize(&image, UInt32(width), UInt32(height), &small) == Int32(XPB_IMAGE_OK) else {
            throw ImageError(.outOfMemory, "out of memory")
        }
        return try encode(&small, as: .png)
    }

    private static func decode(_ data: Data, maxPixels: Int, into image: inout xpb_image) throws(ImageError) {
        var message = [CChar](repeating: 0, count: 256)
        let status = data.withUnsafeBytes { bytes in
            message.withUnsafeMutableBufferPointer { buffer in
                xpb_image_decode(bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count, UInt64(max(0, maxPixels)), &image,
                                 buffer.baseAddress, buffer.count)
            }
        }
        guard status == Int32(XPB_IMAGE_OK) else { throw ImageError(status: status, message: message) }
    }

    private static func encode(_ image: inout xpb_image, as format: ImageFormat) throws(ImageError) -> Data {
        guard format.isWritable else { throw ImageError(.unsupported, "xpb does not write \(format.mimeType)") }
        var output: UnsafeMutablePointer<UInt8>? = nil
        var size = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = message.withUnsafeMutableBufferPointer { buffer in
            xpb_image_encode(&image, format.code, jpegQuality, &output, &size, buffer.baseAddress, buffer.count)
        }
        guard status == Int32(XPB_IMAGE_OK), let output else { throw ImageError(status: status, message: message) }
        return Data(bytesNoCopy: output, count: size, deallocator: .custom { pointer, _ in xpb_image_free(pointer) })
    }
}
