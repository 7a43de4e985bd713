import FoundationEssentials

/// A page of the history (``ControlReply/historyPage(entries:total:partial:)``) in the compact
/// form of a ``FrameKind/page`` frame, which `xpb` asks for
/// (``ControlRequest/historyPage(search:offset:limit:compact:)``): JSON's keyed containers were
/// two thirds of a listing's cost (1,000 entries: about 11 ms to encode in xpbd, as many to
/// decode in xpb); this form costs a few hundred microseconds each way.
///
/// The form: `XPBPAGE1`, the total (a varint), whether it is partial (a byte), the number of
/// entries, then each entry's fields in a fixed order: a varint of flags saying which optional
/// fields follow, integers and counts as zigzag varints, strings and lists as a count then their
/// UTF-8 bytes or items, dates as the bits of their seconds since 1970 (8 bytes, little end
/// first). A page that does not parse whole (short, long, a count past what is left, text that
/// is not UTF-8) is refused, never half read.
package enum HistoryPageCoding {
    private static let magic = Array("XPBPAGE1".utf8)

    /// The optional fields an entry carries.
    private struct Present: OptionSet {
        let rawValue: UInt64
        static let source = Present(rawValue: 1 << 0)
        static let pid = Present(rawValue: 1 << 1)
        static let pixelWidth = Present(rawValue: 1 << 2)
        static let pixelHeight = Present(rawValue: 1 << 3)
        static let thumbnail = Present(rawValue: 1 << 4)
        static let app = Present(rawValue: 1 << 5)
        static let pinned = Present(rawValue: 1 << 6)
        static let id = Present(rawValue: 1 << 7)
        static let pastes = Present(rawValue: 1 << 8)
        static let known: Present = [.source, .pid, .pixelWidth, .pixelHeight, .thumbnail, .app, .pinned, .id, .pastes]
    }

    /// What a page's bytes said that is not a page.
    package struct Malformed: Error, CustomStringConvertible {
        package let description: String
    }

    package static func encode(entries: [HistoryEntrySummary], total: Int, partial: Bool) -> Data {
        var writer = Writer()
        writer.bytes.reserveCapacity(64 + entries.count * 200)
        writer.bytes += magic
        writer.int(total)
        writer.bytes.append(partial ? 1 : 0)
        writer.int(entries.count)
        for entry in entries {
            var present: Present = []
            if entry.source != nil { present.insert(.source) }
            if entry.pid != nil { present.insert(.pid) }
            if entry.pixelWidth != nil { present.insert(.pixelWidth) }
            if entry.pixelHeight != nil { present.insert(.pixelHeight) }
            if entry.thumbnail != nil { present.insert(.thumbnail) }
            if entry.app != nil { present.insert(.app) }
            if entry.pinned == true { present.insert(.pinned) }
            if entry.id != nil { present.insert(.id) }
            if entry.pastes != nil { present.insert(.pastes) }
            writer.varint(present.rawValue)
            writer.int(entry.index)
            writer.string(entry.selection)
            writer.date(entry.time)
            writer.strings(entry.targets)
            writer.strings(entry.types)
            writer.int(entry.size)
            writer.int(entry.keptBytes)
            if let source = entry.source { writer.string(source) }
            if let pid = entry.pid { writer.int(pid) }
            writer.string(entry.preview)
            writer.int(entry.moreLines)
            writer.string(entry.rest)
            if let width = entry.pixelWidth { writer.int(width) }
            if let height = entry.pixelHeight { writer.int(height) }
            if let thumbnail = entry.thumbnail { writer.string(thumbnail) }
            if let app = entry.app { writer.string(app) }
            if let id = entry.id { writer.int64(id) }
            if let pastes = entry.pastes {
                writer.int(pastes.count)
                for paste in pastes {
                    writer.date(paste.time)
                    writer.optional(paste.app)
                    writer.int(paste.pid ?? -1)
                    writer.optional(paste.unknown)
                }
            }
        }
        return Data(writer.bytes)
    }

    package static func decode(_ data: Data) throws(Malformed) -> (entries: [HistoryEntrySummary], total: Int, partial: Bool) {
        var reader = Reader(bytes: [UInt8](data))
        guard reader.bytes.starts(with: magic) else { throw Malformed(description: "not a history page") }
        reader.position = magic.count
        let total = try reader.count()
        let partial = try reader.byte()
        guard partial <= 1 else { throw Malformed(description: "a partial flag of \(partial)") }
        // Each entry takes at least a dozen bytes: a count past that is a lie, not a reservation.
        let count = try reader.count(each: 12)
        var entries: [HistoryEntrySummary] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let present = Present(rawValue: try reader.varint())
            guard present.isSubset(of: .known) else { throw Malformed(description: "fields this version does not know (\(present.rawValue))") }
            let index = try reader.int()
            let selection = try reader.string()
            let time = try reader.date()
            let targets = try reader.strings()
            let types = try reader.strings()
            let size = try reader.int()
            let keptBytes = try reader.int()
            let source = present.contains(.source) ? try reader.string() : nil
            let pid = present.contains(.pid) ? try reader.int() : nil
            let preview = try reader.string()
            let moreLines = try reader.int()
            let rest = try reader.string()
            let width = present.contains(.pixelWidth) ? try reader.int() : nil
            let height = present.contains(.pixelHeight) ? try reader.int() : nil
            let thumbnail = present.contains(.thumbnail) ? try reader.string() : nil
            let app = present.contains(.app) ? try reader.string() : nil
            let id = present.contains(.id) ? try reader.int64() : nil
            var pastes: [PasteRecord]?
            if present.contains(.pastes) {
                let number = try reader.count(each: 11)
                var records: [PasteRecord] = []
                for _ in 0..<number {
                    let time = try reader.date()
                    let app = try reader.optional()
                    let pid = try reader.int()
                    let unknown = try reader.optional()
                    records.append(PasteRecord(time: time, app: app, pid: pid < 0 ? nil : pid, unknown: unknown))
                }
                pastes = records
            }
            entries.append(HistoryEntrySummary(index: index, id: id, selection: selection, time: time, targets: targets, types: types,
                                               size: size, keptBytes: keptBytes, source: source, pid: pid, preview: preview,
                                               moreLines: moreLines, rest: rest, pixelWidth: width, pixelHeight: height,
                                               thumbnail: thumbnail, app: app, pinned: present.contains(.pinned), pastes: pastes))
        }
        guard reader.position == reader.bytes.count else { throw Malformed(description: "\(reader.bytes.count - reader.position) bytes after the page") }
        return (entries, total, partial == 1)
    }

    private struct Writer {
        var bytes: [UInt8] = []

        mutating func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func int64(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }
        mutating func int(_ value: Int) { int64(Int64(value)) }

        mutating func string(_ value: String) {
            var value = value
            value.withUTF8 { utf8 in
                int(utf8.count)
                bytes.append(contentsOf: utf8)
            }
        }

        mutating func strings(_ values: [String]) {
            int(values.count)
            for value in values { string(value) }
        }

        mutating func optional(_ value: String?) {
            bytes.append(value == nil ? 0 : 1)
            if let value { string(value) }
        }

        mutating func date(_ value: Date) {
            var bits = value.timeIntervalSince1970.bitPattern
            for _ in 0..<8 {
                bytes.append(UInt8(truncatingIfNeeded: bits))
                bits >>= 8
            }
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var position = 0

        var left: Int { bytes.count - position }

        mutating func byte() throws(Malformed) -> UInt8 {
            guard position < bytes.count else { throw Malformed(description: "the page ends early") }
            defer { position += 1 }
            return bytes[position]
        }

        mutating func varint() throws(Malformed) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = try byte()
                guard shift < 64, shift < 63 || byte <= 1 else { throw Malformed(description: "a number past 64 bits") }
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
        }

        mutating func int64() throws(Malformed) -> Int64 {
            let raw = try varint()
            return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
        }

        mutating func int() throws(Malformed) -> Int {
            Int(try int64())
        }

        /// A count of items of at least `each` bytes that the bytes left can hold.
        mutating func count(each: Int = 0) throws(Malformed) -> Int {
            let value = try int()
            guard value >= 0, each == 0 || value <= left / each else { throw Malformed(description: "a count of \(value) with \(left) bytes left") }
            return value
        }

        mutating func string() throws(Malformed) -> String {
            let length = try count(each: 1)
            defer { position += length }
            guard let text = String(validating: bytes[position..<position + length], as: UTF8.self) else {
                throw Malformed(description: "text that is not UTF-8")
            }
            return text
        }

        mutating func strings() throws(Malformed) -> [String] {
            let number = try count(each: 1)
            var values: [String] = []
            values.reserveCapacity(number)
            for _ in 0..<number { values.append(try string()) }
            return values
        }

        mutating func optional() throws(Malformed) -> String? {
            switch try byte() {
            case 0: return nil
            case 1: return try string()
            case let other: throw Malformed(description: "an optional marked \(other)")
            }
        }

        mutating func date() throws(Malformed) -> Date {
            guard left >= 8 else { throw Malformed(description: "the page ends early") }
            var bits: UInt64 = 0
            for offset in (0..<8).reversed() { bits = bits << 8 | UInt64(bytes[position + offset]) }
            position += 8
            let seconds = Double(bitPattern: bits)
            guard seconds.isFinite else { throw Malformed(description: "a time that is not a number") }
            return Date(timeIntervalSince1970: seconds)
        }
    }

    /// Runs the decoder over untrusted bytes (the fuzz target's hook): it must refuse or parse, never trap.
    package static func exercise(_ data: Data) {
        _ = try? decode(data)
        var page = data
        page.insert(contentsOf: magic, at: page.startIndex)
        _ = try? decode(page)
    }
}
