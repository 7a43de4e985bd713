import FoundationEssentials
import ImageCodecs
import PasteboardKit
import PasteboardSelections

/// Every parser of bytes another X client controls, behind one entry point for the fuzz target
/// (`Sources/xpb-fuzz`): the manifest, `MULTIPLE` pair lists, INCR size claims and chunks,
/// `text/uri-list`, `x-special/gnome-copied-files`, `text/x-moz-url`, `application/x-color`,
/// Latin-1 `STRING`, UTF-16 text, text from HTML and images (PNG, JPEG, BMP, GIF, TIFF, WebP). Each must return (or throw a clear error) on any input:
/// never trap, hang or grow without bound. Checks that must hold for every input trap here, so
/// that the fuzzer reports them.
package enum UntrustedInput {
    package static func exercise(_ data: Data) {
        // The manifest: what parses must survive its own encoding unchanged.
        if let manifest = Manifest(decoding: data) {
            let again = Manifest(decoding: manifest.encoded())
            precondition(again?.entries == manifest.entries && again?.itemCount == manifest.itemCount,
                         "a manifest changed through encode and decode")
            _ = manifest.itemTypes
        }
        // Format-32 values as a requestor's ATOM_PAIR list or an owner's INCR property.
        let values: [UInt] = stride(from: 0, to: data.count - 3, by: 4).map { offset in
            data[data.startIndex + offset ..< data.startIndex + offset + 4].reduce(0) { $0 << 8 | UInt($1) }
        }
        if let pairs = MultiplePairs.parse(values.map(X11Atom.init(rawValue:)), maxPairs: SelectionServer.maxMultiplePairs) {
            precondition(pairs.count <= SelectionServer.maxMultiplePairs && pairs.count * 2 == values.count, "a MULTIPLE list past its cap")
        }
        let announced = IncomingTransfer.announcedSize(values)
        var transfer = IncomingTransfer(announcedSize: announced ?? 0, limit: 4096)
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let length = min(Int(bytes[offset]) + 1, bytes.count - offset)
                guard let complete = try? transfer.append(bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])),
                      !complete else { break }
                offset += length
            }
        }
        precondition(transfer.data.count <= 4096, "an INCR transfer grew past its limit")
        // Target codecs, both ways.
        for codec in [TargetCodec.uriList, .gnomeCopiedFiles, .mozURL, .latin1] {
            let decoded = codec.decode(data)
            _ = try? codec.encode(decoded)
        }
        let latin1 = (try? TargetCodec.latin1.encode(data)) ?? Data()
        precondition(latin1.count <= data.count, "Latin-1 grew past its UTF-8 source")
        _ = TargetCodec.uriListEntries(data)
        _ = try? PasteboardColor(encoded: data)
        // An owner's HTML as the text of an HTML-only item: one pass, never much larger, and work
        // linear in the input (`<p><br>` repeated once made it quadratic).
        let html = HTMLText.plainTextWork(data)
        precondition(html.text.count <= data.count * 2 + 16, "text from HTML grew past its source")
        precondition(html.steps <= HTMLText.workBound(data.count), "text from \(data.count) bytes of HTML took \(html.steps) steps")
        _ = ValueCoding.decodeText(data, as: .utf16PlainText)
        _ = ValueCoding.decodeText(data, as: .utf8PlainText)
        // An owner's word on who made its copy (`_XPB_COPIED_BY_…`): what parses says it again.
        if let credit = CopyCredit(decoding: data) {
            precondition(CopyCredit(decoding: credit.encoded) == credit && !credit.name.isEmpty, "a copy credit changed through encode and decode")
        }
        exerciseImage(data)
    }

    /// An owner's image through every decoder (the fuzzer reaches each by its signature): a
    /// decode stays within the pixel limit, and what decodes survives the lossless formats
    /// pixel for pixel.
    static func exerciseImage(_ data: Data) {
        let limit = 1 << 20
        guard let pixels = try? ImageCodec.decode(data, maxPixels: limit) else { return }
        precondition(pixels.width * pixels.height <= limit, "a decode went past the pixel limit")
        for format in [ImageFormat.png, .bmp, .tiff] {
            guard let encoded = try? ImageCodec.encode(pixels, as: format) else { preconditionFailure("\(format) refused decoded pixels") }
            guard let again = try? ImageCodec.decode(encoded, maxPixels: limit) else { preconditionFailure("\(format) of decoded pixels did not decode") }
            // (libtiff's reader premultiplies alpha: a translucent pixel comes back rounded.)
            precondition(again == pixels || (format == .tiff && pixels.hasAlpha), "\(format) changed the pixels")
        }
        // The other writers, from any decoded pixels: each writes them, or says they are too large
        // for the format (WebP holds at most 16383 pixels a side).
        for format in [ImageFormat.ppm, .pgm, .pbm, .xpm, .jpeg, .webp] {
            do {
                _ = try ImageCodec.encode(pixels, as: format)
            } catch {
                precondition(error.kind == .tooLarge, "\(format) refused decoded pixels: \(error)")
            }
        }
    }
}
