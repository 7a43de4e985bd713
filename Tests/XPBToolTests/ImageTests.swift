import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The test picture (64×48 RGB).
let testImage = packageRoot.appendingPathComponent("Tests/Peers/image.png").path

/// The image targets Qt and GTK owners offer, in xpb's order.
let imageTargets = ["image/png", "image/jpeg", "image/bmp", "image/x-bmp", "image/x-MS-bmp", "image/tiff", "image/webp"]

/// Decodes two image files with GdkPixbuf (a decoder independent of xpb's) and compares their
/// pixels: the first one's size and the largest difference of a channel (-1: sizes differ).
func pixelDiff(_ a: String, _ b: String, _ x: Xvfb) throws -> (width: Int, height: Int, maxDiff: Int) {
    try parseDiff(try toolkitPeer("gtk_clipboard.py", ["pixel-diff", a, b], display: x).finish())
}

/// "size W H" and "maxdiff N" lines of a toolkit peer.
func parseDiff(_ outcome: Outcome) throws -> (width: Int, height: Int, maxDiff: Int) {
    let words = outcome.text.split(whereSeparator: \.isWhitespace).map(String.init)
    guard outcome.status == 0, words.count == 5, words[0] == "size", words[3] == "maxdiff",
          let width = Int(words[1]), let height = Int(words[2]), let diff = Int(words[4]) else {
        throw TestFailure("unexpected peer output: \(outcome.text) \(outcome.error)")
    }
    return (width, height, diff)
}

/// A file of what xclip reads of `target`.
func xclipFile(_ x: Xvfb, _ target: String) throws -> (path: String, outcome: Outcome) {
    let outcome = try xclipOut(x, ["-t", target])
    return (try scratchFile(target.replacingOccurrences(of: "/", with: "_"), outcome.output), outcome)
}

@Suite("Images in every format")
struct ImageTests {
    @Test("an image copied with xpb is offered as toolkits offer one, PNG first; BMP and TIFF decode to the same pixels, JPEG and WebP are theirs")
    func everyFormat() throws {
        let x = try Xvfb()
        #expect(try xpb(["copy", testImage], x).status == 0)
        let targets = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
        #expect(targets.filter { $0.hasPrefix("image/") } == imageTargets, "\(targets)")
        for target in ["image/bmp", "image/x-MS-bmp", "image/tiff"] {
            let (file, outcome) = try xclipFile(x, target)
            #expect(outcome.status == 0)
            let diff = try pixelDiff(file, testImage, x)
            #expect(diff.width == 64 && diff.height == 48 && diff.maxDiff == 0, "\(target): \(diff)")
        }
        let (jpeg, _) = try xclipFile(x, "image/jpeg")
        #expect(try Data(contentsOf: URL(fileURLWithPath: jpeg)).starts(with: [0xFF, 0xD8, 0xFF]))
        let lossy = try pixelDiff(jpeg, testImage, x)
        #expect(lossy.width == 64 && lossy.height == 48)
        let webp = try xclipOut(x, ["-t", "image/webp"]).output
        #expect(webp.starts(with: Data("RIFF".utf8)) && webp.dropFirst(8).starts(with: Data("WEBP".utf8)))
        // Readers at once: each gets the same conversion.
        let readers = try (0..<4).map { _ in try Peer("xclip", ["-o", "-selection", "clipboard", "-t", "image/tiff"], display: x) }
        let outputs = try readers.map { try $0.finish().output }
        #expect(Set(outputs).count == 1 && outputs[0].starts(with: [0x49, 0x49, 0x2A, 0x00]))
        // The image as the owner has it is served as it came.
        #expect(try xclipOut(x, ["-t", "image/png"]).output == Data(contentsOf: URL(fileURLWithPath: testImage)))
    }

    @Test("xpb paste -t jpeg of an owner with only PNG gets a JPEG made here; --no-convert refuses; GTK and Qt read a JPEG copied with xpb")
    func readerConvertsAndToolkitsReadJPEG() throws {
        let x = try Xvfb()
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "image/png", "-quiet", testImage], display: x)
        defer { owner.stop() }
        #expect(eventually { (try? xpb(["types"], x).text) == "image/png\n" })
        let jpeg = try xpb(["paste", "-t", "jpeg"], x)
        #expect(jpeg.status == 0 && jpeg.output.starts(with: [0xFF, 0xD8, 0xFF]), "\(jpeg.error)")
        let bmp = try xpb(["paste", "-t", "image/bmp"], x)
        #expect(bmp.status == 0 && bmp.output.starts(with: Data("BM".utf8)))
        #expect(try pixelDiff(try scratchFile("paste.bmp", bmp.output), testImage, x).maxDiff == 0)
        let refused = try xpb(["paste", "-t", "jpeg", "--no-convert"], x)
        #expect(refused.status == 3 && refused.error.contains("has no image/jpeg; it offers image/png"), "\(refused.error)")
        owner.stop()

        // A JPEG copied with xpb: GTK asks for PNG, Qt for its first image format; both get the picture.
        let shot = try scratchFile("shot.jpg", jpeg.output)
        #expect(try xpb(["copy", shot], x).status == 0)
        let gtk = try parseDiff(try toolkitPeer("gtk_clipboard.py", ["image-diff", shot], display: x).finish())
        #expect(gtk.width == 64 && gtk.height == 48 && gtk.maxDiff <= 8, "GTK: \(gtk)")
        let qt = try parseDiff(try toolkitPeer("qt_clipboard.py", ["image-diff", shot], display: x).finish())
        #expect(qt.width == 64 && qt.height == 48 && qt.maxDiff <= 8, "Qt: \(qt)")
    }

    @Test("a decompression bomb (a small PNG that declares 60000×60000) is refused at once with bounded memory, by a reader and by an owner")
    func bomb() throws {
        let x = try Xvfb()
        let bomb = bombPNG(width: 60000, height: 60000)
        let file = try scratchFile("bomb.png", bomb)
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", "image/png", "-quiet", file], display: x)
        defer { owner.stop() }
        #expect(eventually { (try? xpb(["types"], x).text) == "image/png\n" })
        let timed = try run("/usr/bin/time", ["-f", "maxrss %M", try xpbPath(), "paste", "-t", "bmp"], display: x, timeout: 10)
        #expect(timed.status == 1 && timed.error.contains("60000x60000 pixels, more than the limit"), "\(timed.error)")
        let kilobytes = timed.error.split(separator: "\n").last.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? .max
        #expect(kilobytes < 64 << 10, "a refused bomb took \(kilobytes) KiB")
        owner.stop()

        // Copied with xpb: its header says it is too large, so no conversion is offered (or
        // served), and the PNG itself still is.
        #expect(try xpb(["copy", file], x).status == 0)
        let targets = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
        #expect(targets.filter { $0.hasPrefix("image/") } == ["image/png"], "\(targets)")
        for target in ["image/bmp", "image/jpeg", "image/bmp"] {
            let refused = try xclipOut(x, ["-t", target])
            #expect(refused.status != 0 && refused.output.isEmpty, "\(target)")
        }
        #expect(try xclipOut(x, ["-t", "image/png"]).output == bomb)

        // A header that fits over data that does not decode: offered, and each request refused
        // (the failure is kept for the ownership), the owner serving on.
        let broken = bombPNG(width: 300, height: 300)
        #expect(try xpb(["copy", try scratchFile("broken.png", broken)], x).status == 0)
        let offered = try xclipOut(x, ["-t", "TARGETS"]).text.split(separator: "\n").map(String.init)
        #expect(offered.filter { $0.hasPrefix("image/") } == imageTargets)
        for target in ["image/bmp", "image/bmp", "image/tiff"] {
            let refused = try xclipOut(x, ["-t", target])
            #expect(refused.status != 0 && refused.output.isEmpty, "\(target)")
        }
        #expect(try xclipOut(x, ["-t", "image/png"]).output == broken)
    }
}
