import Foundation
import PasteboardKit
import Testing

@Suite("Image formats: one table")
struct ImageFormatTests {
    @Test("the orders every part uses come from the formats: offered targets, source rank, reader preference, MIME spellings")
    func derivedTables() {
        #expect(ImageFormat.offeredTargets.map(\.name) == ["image/png", "image/jpeg", "image/bmp", "image/x-bmp", "image/x-MS-bmp", "image/tiff", "image/webp"])
        #expect(ImageFormat.bySourceRank == [.png, .tiff, .bmp, .webp, .gif, .jpeg])
        #expect(ReaderPreference.image == [.png, .tiff, .bmp, .webP, .gif, .jpeg, .image])
        for format in ImageFormat.allCases {
            for alias in format.mimeAliases { #expect(ImageFormat(mimeType: alias.uppercased()) == format) }
            #expect(format.isReadable == (format.sourceRank != nil))
        }
        #expect(ImageFormat(mimeType: "image/x-MS-bmp") == .bmp && ImageFormat(mimeType: "image/x-win-bitmap") == nil)
        let registry = TypeRegistry.standard
        #expect(registry.imageSource(among: [.jpeg, .gif, .bmp]) == .bmp)
        #expect(registry.imageSource(among: [.html]) == nil)
    }

    @Test("the image codecs register themselves: a program that links them converts through the model")
    func codecsRegister() throws {
        #expect(ImageConversion.converter != nil)
        // A 1×1 BMP (stb writes it): as PNG through the model's conversion.
        let bmp = Data([0x42, 0x4D, 0x3A, 0, 0, 0, 0, 0, 0, 0, 0x36, 0, 0, 0, 0x28, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0x18, 0,
                        0, 0, 0, 0, 4, 0, 0, 0, 0x13, 0x0B, 0, 0, 0x13, 0x0B, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0xFF, 0])
        let png = try ImageConversion.convert(bmp, to: .png)
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        #expect(try ImageConversion.size(of: png) == (width: 1, height: 1))
    }
}
