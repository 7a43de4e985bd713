import Foundation
import ImageCodecs
import PasteboardKit
import Testing
import X11TestSupport

/// A test picture: a gradient, with or without a varying (never zero) alpha.
func gradient(width: Int, height: Int, alpha: Bool) -> Pixels {
    var rgba: [UInt8] = []
    rgba.reserveCapacity(width * height * 4)
    for y in 0..<height {
        for x in 0..<width {
            rgba += [UInt8(x * 255 / max(1, width - 1)), UInt8(y * 255 / max(1, height - 1)), UInt8((x ^ y) & 0xFF),
                     alpha ? UInt8(1 + (x + y) % 255) : 255]
        }
    }
    return Pixels(width: width, height: height, rgba: rgba)
}

@Suite struct ImageCodecTests {
    @Test(arguments: [ImageFormat.png, .bmp, .tiff, .webp])
    func losslessFormatsKeepEveryPixel(format: ImageFormat) throws {
        for alpha in [false, true] where !(alpha && format == .tiff) {
            let pixels = gradient(width: 97, height: 31, alpha: alpha)
            let encoded = try ImageCodec.encode(pixels, as: format)
            #expect(ImageCodec.format(of: encoded) == format)
            #expect(try ImageCodec.size(of: encoded) == (97, 31))
            #expect(try ImageCodec.decode(encoded) == pixels, "\(format), alpha: \(alpha)")
        }
    }

    @Test func translucentTIFFComesBackWithinRounding() throws {
        let pixels = gradient(width: 40, height: 40, alpha: true)
        let again = try ImageCodec.decode(try ImageCodec.encode(pixels, as: .tiff))
        // libtiff premultiplies and xpb divides back: a faint pixel's colour is coarse.
        for index in stride(from: 0, to: pixels.rgba.count, by: 4) where pixels.rgba[index + 3] >= 128 {
            for channel in 0..<4 { #expect(abs(Int(again.rgba[index + channel]) - Int(pixels.rgba[index + channel])) <= 1) }
        }
    }

    @Test func jpegIsClose() throws {
        let pixels = gradient(width: 64, height: 64, alpha: false)
        let jpeg = try ImageCodec.encode(pixels, as: .jpeg)
        #expect(ImageCodec.format(of: jpeg) == .jpeg)
        let again = try ImageCodec.decode(jpeg)
        #expect(again.width == 64 && again.height == 64 && !again.hasAlpha)
        let error = zip(pixels.rgba, again.rgba).map { abs(Int($0) - Int($1)) }.reduce(0, +) / pixels.rgba.count
        #expect(error < 8)
    }

    @Test func jpegOfTransparentPixelsIsWhite() throws {
        let clear = Pixels(width: 8, height: 8, rgba: Array(repeating: 0, count: 8 * 8 * 4))
        let again = try ImageCodec.decode(try ImageCodec.encode(clear, as: .jpeg))
        #expect(again.rgba.allSatisfy { $0 >= 250 })
    }

    @Test func convertsBetweenFormats() throws {
        let png = try ImageCodec.encode(gradient(width: 50, height: 20, alpha: false), as: .png)
        for format in [ImageFormat.bmp, .tiff, .webp, .jpeg] {
            let converted = try ImageCodec.convert(png, to: format)
            #expect(ImageCodec.format(of: converted) == format)
        }
        #expect(try ImageCodec.convert(png, to: .png) == png)
        #expect(throws: ImageError.self) { try ImageCodec.convert(png, to: .gif) }
    }

    @Test func writesNetpbmAndXPM() throws {
        let pixels = Pixels(width: 2, height: 2, rgba: [255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255])
        let ppm = try ImageCodec.encode(pixels, as: .ppm)
        #expect(ppm == Data("P6\n2 2\n255\n".utf8) + Data([255, 0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255]))
        // Qt's grey, (11 R + 16 G + 5 B) / 32, and its bitmap of it.
        let pgm = try ImageCodec.encode(pixels, as: .pgm)
        #expect(pgm == Data("P5\n2 2\n255\n".utf8) + Data([87, 127, 0, 255]))
        let pbm = try ImageCodec.encode(pixels, as: .pbm)
        #expect(pbm == Data("P4\n2 2\n".utf8) + Data([0b1100_0000, 0b1000_0000]))
        let xpm = String(decoding: try ImageCodec.encode(pixels, as: .xpm), as: UTF8.self)
        #expect(xpm.hasPrefix("/* XPM */") && xpm.contains("\"2 2 4 1\""), "\(xpm)")
        #expect(xpm.contains("c #FF0000") && xpm.contains("c #00FF00") && xpm.contains("c None") && xpm.contains("c #FFFFFF"))
        // Past 64 colours, two characters a pixel.
        let many = gradient(width: 40, height: 40, alpha: false)
        let header = String(decoding: try ImageCodec.encode(many, as: .xpm), as: UTF8.self).split(separator: "\n")[2]
        #expect(header.hasSuffix(" 2\","), "\(header)")
        for format in [ImageFormat.ppm, .pgm, .pbm, .xpm] {
            #expect(!format.isReadable && format.isWritable)
            #expect { try ImageCodec.decode(try ImageCodec.encode(pixels, as: format)) } throws: { ($0 as? ImageError)?.kind == .unsupported }
        }
    }

    @Test func formatsWithASizeLimitSaySo() throws {
        // A GIF whose screen is 23297×1 (found by the fuzzer): it decodes; WebP cannot hold it.
        let gif = Data(base64Encoded: "R0lGODlhAVsBAIAAAP8AAAAAACwAAAAAAQABAAACAkQBADs=")!
        let pixels = try ImageCodec.decode(gif)
        #expect(pixels.width == 23297 && pixels.height == 1)
        #expect { try ImageCodec.encode(pixels, as: .webp) } throws: {
            ($0 as? ImageError)?.kind == .tooLarge && "\($0)".contains("16383")
        }
        #expect(ImageCodec.format(of: try ImageCodec.encode(pixels, as: .png)) == .png)
    }

    @Test func decodesGIF() throws {
        // One red pixel: a 2-colour global table, LZW minimum code size 2.
        let gif = Data([0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0xFF, 0x00, 0x00, 0x00, 0x00,
                        0x00, 0x2C, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3B])
        #expect(ImageCodec.format(of: gif) == .gif)
        #expect(try ImageCodec.decode(gif) == Pixels(width: 1, height: 1, rgba: [255, 0, 0, 255]))
        #expect(ImageCodec.format(of: try ImageCodec.convert(gif, to: .png)) == .png)
    }

    @Test func bombIsRefusedFromItsHeader() throws {
        let bomb = bombPNG(width: 60000, height: 60000)
        #expect(bomb.count < 100)
        #expect(try ImageCodec.size(of: bomb) == (60000, 60000))
        let started = ContinuousClock.now
        #expect { try ImageCodec.decode(bomb) } throws: { ($0 as? ImageError)?.kind == .tooLarge }
        #expect { try ImageCodec.convert(bomb, to: .bmp) } throws: { ($0 as? ImageError)?.kind == .tooLarge }
        #expect { try ImageCodec.thumbnail(bomb) } throws: { ($0 as? ImageError)?.kind == .tooLarge }
        // Refused from the header, not after decoding: well under a second.
        #expect(ContinuousClock.now - started < .seconds(1))
        // Within the limit, the missing rows are an error of the codec, not a crash.
        #expect { try ImageCodec.decode(bombPNG(width: 300, height: 300)) } throws: { ($0 as? ImageError)?.kind == .malformed }
    }

    @Test func malformedAndForeignBytesAreClearErrors() throws {
        let png = try ImageCodec.encode(gradient(width: 30, height: 30, alpha: false), as: .png)
        #expect { try ImageCodec.decode(png.prefix(60)) } throws: { ($0 as? ImageError)?.kind == .malformed }
        #expect { try ImageCodec.decode(Data("hello".utf8)) } throws: { ($0 as? ImageError)?.kind == .unsupported }
        let jpeg = try ImageCodec.encode(gradient(width: 200, height: 200, alpha: false), as: .jpeg)
        // A JPEG cut in its image data decodes what it has (libjpeg's warning), like every viewer;
        // one cut before it is an error.
        #expect(try ImageCodec.decode(jpeg.prefix(jpeg.count * 3 / 4)).width == 200)
        #expect { try ImageCodec.decode(jpeg.prefix(100)) } throws: { ($0 as? ImageError)?.kind == .malformed }
        for format in [ImageFormat.bmp, .tiff, .webp] {
            let encoded = try ImageCodec.encode(gradient(width: 30, height: 30, alpha: false), as: format)
            #expect(throws: ImageError.self) { try ImageCodec.decode(encoded.prefix(20)) }
        }
    }

    @Test func thumbnailsFitInTheirBox() throws {
        let wide = try ImageCodec.encode(gradient(width: 1000, height: 300, alpha: false), as: .png)
        let thumbnail = try ImageCodec.thumbnail(wide, maxSide: 256)
        #expect(ImageCodec.format(of: thumbnail) == .png)
        #expect(try ImageCodec.size(of: thumbnail) == (256, 76))
        let small = try ImageCodec.encode(gradient(width: 20, height: 10, alpha: true), as: .png)
        #expect(try ImageCodec.size(of: try ImageCodec.thumbnail(small)) == (20, 10))
    }

    /// A 24-bit BMP of `width` × `height` stored top-down (a negative height in its header): the
    /// top row red, the rest blue.
    static func topDownBMP(width: Int, height: Int) -> Data {
        let row = (width * 3 + 3) / 4 * 4
        var data = Data()
        func le(_ value: Int, _ bytes: Int) { for index in 0..<bytes { data.append(UInt8(truncatingIfNeeded: value >> (8 * index))) } }
        data += [0x42, 0x4D]; le(54 + row * height, 4); le(0, 4); le(54, 4)
        le(40, 4); le(width, 4); le(-height, 4); le(1, 2); le(24, 2); le(0, 4); le(row * height, 4); le(2835, 4); le(2835, 4); le(0, 4); le(0, 4)
        for y in 0..<height {
            for _ in 0..<width { data += y == 0 ? [0, 0, 255] : [255, 0, 0] }  // BGR
            data += [UInt8](repeating: 0, count: row - width * 3)
        }
        return data
    }

    @Test func topDownBMPIsItsSize() throws {
        let bmp = Self.topDownBMP(width: 64, height: 48)
        #expect(try ImageCodec.size(of: bmp) == (64, 48))
        let pixels = try ImageCodec.decode(bmp)
        #expect(pixels.width == 64 && pixels.height == 48)
        #expect(Array(pixels.rgba.prefix(4)) == [255, 0, 0, 255], "the first row is the top one")
        #expect(Array(pixels.rgba.suffix(4)) == [0, 0, 255, 255])
        #expect(ImageCodec.format(of: try ImageCodec.convert(bmp, to: .png)) == .png)
    }

    @Test func tiffErrorsReadOnce() throws {
        // A 10×10 grey TIFF whose strip lies past the end of the file: libtiff's message about it,
        // prefixed once ("TIFF: TIFF: rror…" was vsnprintf reading the buffer it wrote).
        var tiff = Data([0x49, 0x49, 42, 0, 8, 0, 0, 0])
        func le(_ value: Int, _ bytes: Int) { for index in 0..<bytes { tiff.append(UInt8(truncatingIfNeeded: value >> (8 * index))) } }
        let entries: [(tag: Int, type: Int, value: Int)] = [(256, 3, 10), (257, 3, 10), (258, 3, 8), (259, 3, 1), (262, 3, 1),
                                                            (273, 4, 1000), (277, 3, 1), (278, 3, 10), (279, 4, 100)]
        le(entries.count, 2)
        for entry in entries { le(entry.tag, 2); le(entry.type, 2); le(1, 4); le(entry.value, 4) }
        le(0, 4)
        #expect(try ImageCodec.size(of: tiff) == (10, 10))
        do {
            _ = try ImageCodec.decode(tiff)
            Issue.record("a strip past the end decoded")
        } catch {
            #expect(error.description.hasPrefix("TIFF: ") && !error.description.hasPrefix("TIFF: TIFF"), "\(error.description)")
            #expect(error.description.count > 12 && !error.description.dropFirst(6).hasPrefix("rror"), "\(error.description)")
        }
    }

    @Test func xpmIsBoundedAsAnIconFormat() throws {
        // 65,536 colours fit; one more is refused, before libXpm copies any of it.
        var rgba: [UInt8] = []
        for index in 0..<65_537 { rgba += [UInt8(index & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index >> 16), 255] }
        let fits = Pixels(width: 65_536, height: 1, rgba: Array(rgba.prefix(65_536 * 4)))
        #expect(try ImageCodec.encode(fits, as: .xpm).starts(with: Data("/* XPM */".utf8)))
        let colourful = Pixels(width: 65_537, height: 1, rgba: rgba)
        #expect { try ImageCodec.encode(colourful, as: .xpm) } throws: {
            ($0 as? ImageError)?.kind == .tooLarge && "\($0)".contains("65536 colours")
        }
        // A photo's size (4096 × 1025 > 4 Mpx) is refused from its size, one colour or many.
        let big = Pixels(width: 4096, height: 1025, rgba: [UInt8](repeating: 200, count: 4096 * 1025 * 4))
        #expect { try ImageCodec.encode(big, as: .xpm) } throws: { ($0 as? ImageError)?.kind == .tooLarge && "\($0)".contains("4194304 pixels") }
    }

    @Test func jpegOfManyScansIsRefusedBeforeDecoding() throws {
        let jpeg = [UInt8](try ImageCodec.encode(gradient(width: 64, height: 48, alpha: false), as: .jpeg))
        let start = try #require((0..<jpeg.count - 1).first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA })
        let end = try #require((0..<jpeg.count - 1).last { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xD9 })
        func scans(_ count: Int) -> Data {
            var bytes = Array(jpeg[..<start])
            for _ in 0..<count { bytes += jpeg[start..<end] }
            return Data(bytes + [0xFF, 0xD9])
        }
        #expect(try ImageCodec.size(of: scans(600)) == (64, 48), "the header is valid")
        #expect { try ImageCodec.decode(scans(600)) } throws: { ($0 as? ImageError)?.kind == .tooLarge && "\($0)".contains("600 scans") }
        #expect { try ImageCodec.decode(scans(101)) } throws: { ($0 as? ImageError)?.kind == .tooLarge }
        #expect(try ImageCodec.decode(scans(1)).width == 64)
    }
}
