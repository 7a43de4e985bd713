import FoundationEssentials

/// How the bytes of one X11 target relate to the bytes the model stores for a type: the one
/// conversion type, used by an owner serving its items, by a clipboard manager serving a target
/// made from one it kept, and by a reader making what the owner lacks (`xpb paste -t jpeg`).
public enum TargetCodec: Sendable, Hashable {
    /// The same bytes.
    case identity
    /// The model stores UTF-8; the target carries ISO 8859-1 (X11 `STRING`). Characters
    /// outside Latin-1 become `?` on the way out; on the way in, bytes that are valid UTF-8 with
    /// non-ASCII characters are taken as UTF-8 (what xsel sends as STRING).
    case latin1
    /// The model stores one URL; the target carries a `text/uri-list` (CRLF-terminated lines,
    /// `#` comments).
    case uriList
    /// The model stores one URL; the target carries Mozilla's `text/x-moz-url`: UTF-16LE
    /// `url\ntitle`.
    case mozURL
    /// The model stores file URLs; the target carries GNOME's `x-special/gnome-copied-files`:
    /// `copy` (or `cut`), then one URL per line, as file managers copy files.
    case gnomeCopiedFiles
    /// The model stores UTF-8 text; the target carries it as X11 Compound Text (``CompoundText``).
    case compoundText
    /// The model stores HTML; the target carries its plain text (``HTMLText``), as UTF-8.
    case textFromHTML
    /// The model stores HTML; the target carries its plain text in ISO 8859-1 (`STRING`).
    case latin1FromHTML
    /// The model stores an image in any format xpb reads; the target carries it converted to
    /// this format (``ImageCodec``). Conversions decode and encode whole images: owners run them
    /// on a worker, once per ownership.
    case image(ImageFormat)

    /// Whether an owner serves this target from every URL item at once (a list), not from one.
    public var isURLList: Bool { self == .uriList || self == .gnomeCopiedFiles }

    /// The target's bytes for several URLs (the lines of every URL item), for list codecs;
    /// `cut`: the files are to be moved (GNOME's list says `cut` instead of `copy`).
    public func encodeList(_ urls: [String], cut: Bool = false) -> Data {
        switch self {
        case .gnomeCopiedFiles: return Data(utf8Of: (cut ? "cut\n" : "copy\n") + urls.joined(separator: "\n"))
        default: return Data(utf8Of: urls.map { $0 + "\r\n" }.joined())
        }
    }

    /// Converts the model's bytes into this target's bytes; throws when an image cannot be
    /// converted (``ImageError``: malformed, over the pixel limit).
    public func encode(_ data: Data) throws -> Data {
        switch self {
        case .identity:
            return data
        case .latin1:
            return Self.latin1(fromUTF8: data)
        case .uriList, .gnomeCopiedFiles:
            return encodeList(TargetCodec.uriListEntries(data))
        case .mozURL:
            let url = String(decoding: data, as: UTF8.self)
            return UTF16LE.encode(url + "\n" + url)
        case .compoundText:
            return CompoundText.encode(utf8: data)
        case .textFromHTML:
            return try Self.text(fromHTML: data)
        case .latin1FromHTML:
            return Self.latin1(fromUTF8: try Self.text(fromHTML: data))
        case let .image(format):
            return try ImageConversion.convert(data, to: format)
        }
    }

    /// Markup with no text in it (an `<img>` alone, as a browser's "Copy image" puts beside
    /// the image): no text to serve, so the text targets refuse it (a reader asking for text gets
    /// a refusal, as it gets from the browser, not an empty success).
    public struct NoText: Error, CustomStringConvertible {
        public var description: String { "the HTML has no text" }
    }

    /// The text of HTML; throws ``NoText`` when it has none.
    public static func text(fromHTML data: Data) throws -> Data {
        let text = HTMLText.plainText(data)
        guard !text.isEmpty else { throw NoText() }
        return text
    }

    /// Whether this codec's conversion is heavy enough that an owner never runs it on its event
    /// thread, whatever the size of its source.
    public var isHeavy: Bool {
        if case .image = self { return true }
        return false
    }

    /// Converts this target's bytes into the model's bytes.
    public func decode(_ data: Data) -> Data {
        switch self {
        case .identity, .textFromHTML, .latin1FromHTML, .image, .compoundText:
            // (Text derived from HTML is served, never read back as HTML; a converted image is
            // read as the image it is; Compound Text is served, and read only as a raw target.)
            return data
        case .latin1:
            // ICCCM's STRING is Latin-1, but xsel and other tools put UTF-8 into it. Latin-1 text
            // with accents is almost never valid UTF-8 (é is 0xE9 followed by ASCII), so bytes that
            // are valid UTF-8 and not plain ASCII are taken as UTF-8.
            if data.contains(where: { $0 >= 0x80 }), String(validating: data, as: UTF8.self) != nil { return data }
            var text = String.UnicodeScalarView()
            for byte in data { text.append(Unicode.Scalar(byte)) }
            return Data(utf8Of: String(text))
        case .uriList:
            // Every URL, one per line: Qt's setUrls and file managers put several in one list.
            return Data(utf8Of: TargetCodec.uriListEntries(data).joined(separator: "\n"))
        case .gnomeCopiedFiles:
            return Data(utf8Of: Self.gnomeCopiedFiles(data).urls.joined(separator: "\n"))
        case .mozURL:
            let text = String(decoding: UTF16LE.units(data), as: UTF16.self)
            let firstLine = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            return Data(utf8Of: String(firstLine))
        }
    }

    /// UTF-8 to ISO 8859-1 in one pass over the bytes (no string of the whole payload): code
    /// points above U+00FF and malformed sequences become `?`.
    static func latin1(fromUTF8 data: Data) -> Data {
        var output = Data(count: data.count)
        let written = output.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Int in
            data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Int in
                var index = 0
                var count = 0
                let question = UInt8(ascii: "?")
                while index < bytes.count {
                    let lead = bytes[index]
                    if lead < 0x80 {
                        out[count] = lead
                        index += 1
                    } else {
                        // The length the lead byte claims, and the continuation bytes actually there.
                        let length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
                        var valid = 1
                        while valid < length, index + valid < bytes.count, bytes[index + valid] & 0xC0 == 0x80 { valid += 1 }
                        if length == 2, valid == 2, lead <= 0xC3, lead >= 0xC2 {
                            out[count] = (lead & 0x1F) << 6 | (bytes[index + 1] & 0x3F)
                        } else {
                            out[count] = question
                        }
                        index += valid
                    }
                    count += 1
                }
                return count
            }
        }
        output.count = written
        return output
    }

    /// GNOME's `x-special/gnome-copied-files`: whether its first line says `cut` (the files are
    /// to be moved), and its URLs (the `copy`/`cut` line left out).
    public static func gnomeCopiedFiles(_ data: Data) -> (isCut: Bool, urls: [String]) {
        let lines = uriListEntries(data)
        let verb = lines.first == "copy" || lines.first == "cut" ? lines.first : nil
        return (verb == "cut", verb == nil ? lines : Array(lines.dropFirst()))
    }

    /// The URLs of a `text/uri-list`, comments and blank lines left out.
    public static func uriListEntries(_ data: Data) -> [String] {
        String(decoding: data, as: UTF8.self)
            .split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
            // ASCII spaces and tabs only, as the format has them (a no-break space is data).
            .map { $0.trimming { $0 == " " || $0 == "\t" } }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }
}

/// One X11 target name under which a type is served, and how its bytes are converted.
public struct TargetAlias: Sendable, Hashable {
    /// The target atom's name, e.g. `UTF8_STRING`.
    public let name: String
    /// How the target's bytes relate to the model's bytes.
    public let codec: TargetCodec
    /// The property type an owner uses for the reply (usually the target itself).
    public let replyType: String

    /// Creates a target alias; the reply type defaults to the target's own name.
    public init(_ name: String, codec: TargetCodec = .identity, replyType: String? = nil) {
        self.name = name
        self.codec = codec
        self.replyType = replyType ?? name
    }
}

/// One row of the type registry: a type with its parents, MIME types, X11 targets and file
/// name extensions.
public struct TypeDescriptor: Sendable {
    /// The type's identifier.
    public let type: PasteboardType
    /// The types this one directly conforms to.
    public let parents: [PasteboardType]
    /// MIME types, the preferred one first.
    public let mimeTypes: [String]
    /// X11 targets, in the order an owner advertises them.
    public let targets: [TargetAlias]
    /// File name extensions, lower case, the preferred one first.
    public let fileExtensions: [String]
    /// Short names people type on a command line (`text`, `html`, `png`).
    public let shortNames: [String]

    /// Creates a row; targets default to the MIME types, or to the identifier when there are none.
    public init(
        _ type: PasteboardType, parents: [PasteboardType], mimeTypes: [String] = [],
        targets: [TargetAlias]? = nil, fileExtensions: [String] = [], shortNames: [String] = []
    ) {
        self.type = type
        self.parents = parents
        self.mimeTypes = mimeTypes.map(TypeRegistry.normalizedMIME)
        self.targets = targets ?? (mimeTypes.isEmpty ? [TargetAlias(type.identifier)] : mimeTypes.map { TargetAlias($0) })
        self.fileExtensions = fileExtensions
        self.shortNames = shortNames
    }
}

/// The one table that maps representation types between UTIs, MIME types and X11 target names.
///
/// Both an X11 owner's `TARGETS` list and its conversions come from ``targets(for:)``, so a target
/// is never advertised without being served. Unknown reverse-DNS or MIME names pass through
/// unchanged: their only target is their own name.
public struct TypeRegistry: Sendable {
    /// The rows, in priority order: where two rows claim a name, the earlier wins.
    public let descriptors: [TypeDescriptor]

    /// Builds a registry from rows; where two rows claim a name, the earlier one wins.
    ///
    /// Look-ups scan the rows in order, which is also what makes the earlier row win. The table is
    /// a few dozen rows: scanning it costs less than hashing each of its names into an index at
    /// every start of a process, which was 15 % of a one-shot paste's instructions (callgrind)
    /// for the dozen look-ups a paste makes.
    public init(descriptors: [TypeDescriptor]) {
        self.descriptors = descriptors
    }

    /// The first row of a type.
    private func row(of type: PasteboardType) -> Int? {
        descriptors.firstIndex { $0.type == type }
    }

    /// The first row that claims a (normalized) MIME type or a short name.
    private func row(named name: String) -> Int? {
        descriptors.firstIndex { $0.mimeTypes.contains(name) || $0.shortNames.contains(name) }
    }

    /// The first row that serves an X target, with that row's alias of it.
    private func row(serving target: String) -> (row: Int, alias: TargetAlias)? {
        for (row, descriptor) in descriptors.enumerated() {
            if let alias = descriptor.targets.first(where: { $0.name == target }) { return (row, alias) }
        }
        return nil
    }

    /// The row for a type, if the registry knows it.
    public func descriptor(for type: PasteboardType) -> TypeDescriptor? {
        row(of: type).map { descriptors[$0] }
    }

    /// Resolves a name given as a UTI, a MIME type, an X11 target, a short name (`text`, `html`,
    /// `png`) or a file name extension (`txt`, `htm`, `jpeg`) to a type; an unknown name passes
    /// through unchanged.
    ///
    /// - Throws: ``PasteboardError/invalidType(_:reason:)`` for an empty or malformed name.
    public func resolve(_ name: String) throws -> PasteboardType {
        let type = try PasteboardType(name)
        if row(of: type) != nil { return type }
        if let hit = row(serving: name) { return descriptors[hit.row].type }
        if let row = row(named: Self.normalizedMIME(name)) { return descriptors[row].type }
        if !name.contains("/"), !name.contains("."), let byExtension = self.type(forFileExtension: name) { return byExtension }
        return type
    }

    /// Whether a name a user typed means something known: a registered type, target, MIME type
    /// or short name, or a name with the shape of a MIME type (`a/b`), a UTI (`a.b`) or an X atom
    /// (`COMPOUND_TEXT`: capitals or underscores). A bare lowercase word the registry does not
    /// know (`pgn`, `txt`) is most likely a typo.
    public func isKnownName(_ name: String) -> Bool {
        if name.contains("/") || name.contains(".") || name.contains(where: { $0.isUppercase || $0 == "_" }) { return true }
        guard let type = try? PasteboardType(name) else { return false }
        return row(of: type) != nil || row(serving: name) != nil || row(named: Self.normalizedMIME(name)) != nil
            || self.type(forFileExtension: name) != nil
    }

    /// The registered short names and file extensions closest to `name` (the nearest, at most two
    /// edits away, a swap of neighbours being one): suggestions for a name that is not known.
    public func nearestNames(to name: String) -> [String] {
        let wanted = Array(name.lowercased().unicodeScalars)
        var scored: [(name: String, distance: Int)] = []
        var seen: Set<String> = []
        for descriptor in descriptors {
            for candidate in descriptor.shortNames + descriptor.fileExtensions where seen.insert(candidate).inserted {
                let distance = Self.editDistance(wanted, Array(candidate.unicodeScalars))
                if distance <= 2 { scored.append((candidate, distance)) }
            }
        }
        guard let best = scored.map(\.distance).min() else { return [] }
        return scored.filter { $0.distance == best }.map(\.name).sorted()
    }

    /// Levenshtein distance, with a swap of two neighbours counted as one edit.
    static func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + [Int](repeating: 0, count: b.count)
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { current[j] = min(current[j], previous2[j - 2] + 1) }
            }
            previous2 = previous
            previous = current
        }
        return previous[b.count]
    }

    /// The type whose preferred MIME type, or one of whose MIME types, is `mime`.
    public func type(forMIMEType mime: String) -> PasteboardType? {
        row(named: Self.normalizedMIME(mime)).map { descriptors[$0].type }
    }

    /// The preferred MIME type of a type: its registered one, or its own name if it looks like MIME.
    public func preferredMIMEType(for type: PasteboardType) -> String? {
        if let mime = descriptor(for: type)?.mimeTypes.first { return mime }
        return type.identifier.contains("/") ? type.identifier : nil
    }

    /// The type registered for a file name extension (case-insensitive).
    public func type(forFileExtension fileExtension: String) -> PasteboardType? {
        let wanted = fileExtension.lowercased()
        return descriptors.first { $0.fileExtensions.contains(wanted) }?.type
    }

    /// The X11 targets a type is served as; an unknown type is served under its own name.
    public func targets(for type: PasteboardType) -> [TargetAlias] {
        descriptor(for: type)?.targets ?? [TargetAlias(type.identifier)]
    }

    /// The targets an owner serves a type under: its own (``targets(for:)``), and for a type that
    /// is text (conforms to `public.text`: JSON, RTF, HTML, SVG, `text/markdown` …) the plain-text
    /// targets too, so that readers that only ask for text (GTK's `wait_for_text`, Qt's `text()`,
    /// `xclip -o`) get it; for HTML, its text (``TargetCodec/textFromHTML``), not its markup. An
    /// item's own plain text, listed first, keeps those targets.
    /// Readers do not use this list: asking for JSON never yields plain text.
    public func servedTargets(for type: PasteboardType) -> [TargetAlias] {
        let own = targets(for: type)
        guard type != .utf8PlainText, conforms(type, to: .text) else { return own }
        let names = Set(own.map(\.name))
        let text = Self.textAliases.filter { !names.contains($0.name) }
        guard conforms(type, to: .html) else { return own + text }
        // HTML's text is its text, not its markup (tags out, references decoded, blocks as lines).
        return own + text.map { alias in
            TargetAlias(alias.name, codec: alias.codec == .latin1 ? .latin1FromHTML : .textFromHTML, replyType: alias.replyType)
        }
    }

    /// The image format of a type, when xpb's codecs read it.
    public func imageFormat(of type: PasteboardType) -> ImageFormat? {
        guard conforms(type, to: .image), let mime = preferredMIMEType(for: type) else { return nil }
        return ImageFormat(mimeType: mime)
    }

    /// The image an owner converts from, among an item's types: the best one xpb reads
    /// (``ImageFormat/sourceRank``: lossless first; never a format xpb only writes).
    public func imageSource(among types: [PasteboardType]) -> PasteboardType? {
        types.compactMap { type in imageFormat(of: type)?.sourceRank.map { (type, $0) } }.min { $0.1 < $1.1 }?.0
    }

    /// The image targets an owner serves for an item with an image xpb reads, in
    /// ``ImageFormat/offeredTargets``' order: each from the item's own representation of that format when
    /// it has one, else converted from ``imageSource(among:)`` (``TargetCodec/image(_:)``).
    /// Empty for items with no such image.
    public func imageTargets(for types: [PasteboardType]) -> [(alias: TargetAlias, type: PasteboardType)] {
        guard let source = imageSource(among: types) else { return [] }
        let own = Dictionary(types.compactMap { type in imageFormat(of: type).map { ($0, type) } }, uniquingKeysWith: { first, _ in first })
        return ImageFormat.offeredTargets.map { name, format in
            if let type = own[format] { return (TargetAlias(name), type) }
            return (TargetAlias(name, codec: .image(format)), source)
        }
    }

    /// The type and conversion behind an X11 target name a foreign owner advertises: a
    /// registered target; a MIME name the registry knows under any spelling (`image/x-MS-bmp`);
    /// else an unknown MIME or reverse-DNS name passes through as a type of the same name. Nil for
    /// other X atom names (`COMPOUND_TEXT`, `PIXMAP`, toolkit-private atoms), whose encodings the
    /// model does not speak, and for names that cannot be types.
    public func type(forTarget target: String) -> (type: PasteboardType, alias: TargetAlias)? {
        if let hit = row(serving: target) { return (descriptors[hit.row].type, hit.alias) }
        let isMIME = target.contains("/")
        if isMIME, let row = row(named: Self.normalizedMIME(target)) { return (descriptors[row].type, TargetAlias(target)) }
        guard isMIME || target.contains("."), let type = try? PasteboardType(target) else { return nil }
        return (type, TargetAlias(target))
    }

    /// The direct parents of a type; unknown `text/…` and `image/…` MIME names conform to text
    /// and image, every other unknown type to `public.data`.
    public func parents(of type: PasteboardType) -> [PasteboardType] {
        if let descriptor = descriptor(for: type) { return descriptor.parents }
        if type == .data { return [] }
        let lower = type.identifier.lowercased()
        if lower.hasPrefix("text/") { return [.text] }
        if lower.hasPrefix("image/") { return [.image] }
        return [.data]
    }

    /// Whether `type` is `parent` or conforms to it through the conformance tree.
    public func conforms(_ type: PasteboardType, to parent: PasteboardType) -> Bool {
        var pending = [type]
        var seen = Set<PasteboardType>()
        while let next = pending.popLast() {
            if next == parent { return true }
            guard seen.insert(next).inserted else { continue }
            pending.append(contentsOf: parents(of: next))
        }
        return false
    }

    /// The best of the `available` types for a reader that accepts `accepted`, in its order of
    /// preference: the first accepted type offered exactly, else the first offered type that
    /// conforms to an accepted one.
    public func bestType(among available: [PasteboardType], accepting accepted: [PasteboardType]) -> PasteboardType? {
        for wanted in accepted {
            if available.contains(wanted) { return wanted }
            if let conforming = available.first(where: { conforms($0, to: wanted) }) { return conforming }
        }
        return nil
    }

    /// Lower-cases a MIME name and removes the spaces around its parameters.
    package static func normalizedMIME(_ name: String) -> String {
        // Most names (all of the built-in table's) are normal already: no upper case, no spaces.
        if !name.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) {
            return name
        }
        return name.split(separator: ";", omittingEmptySubsequences: false)
            .map { $0.trimming { $0 == " " || $0 == "\t" }.lowercased() }
            .joined(separator: ";")
    }
}

extension TypeRegistry {
    /// The targets of plain text, UTF-8 first: what X clients ask for when they want text.
    static let textAliases = [
        TargetAlias("UTF8_STRING"),
        TargetAlias("text/plain;charset=utf-8"),
        TargetAlias("text/plain"),
        TargetAlias("STRING", codec: .latin1),
        TargetAlias("TEXT", replyType: "UTF8_STRING"),
    ]

    /// The built-in table.
    public static let standard = TypeRegistry(descriptors: [
        TypeDescriptor(.data, parents: []),
        TypeDescriptor(.content, parents: []),
        TypeDescriptor(.text, parents: [.data, .content]),
        TypeDescriptor(
            .utf8PlainText, parents: [.plainText],
            mimeTypes: ["text/plain;charset=utf-8", "text/plain"],
            targets: textAliases,
            fileExtensions: ["txt", "text"], shortNames: ["text", "string", "utf8"]),
        TypeDescriptor(.plainText, parents: [.text]),
        TypeDescriptor(.utf16PlainText, parents: [.plainText], mimeTypes: ["text/plain;charset=utf-16"]),
        TypeDescriptor(.html, parents: [.text], mimeTypes: ["text/html"], fileExtensions: ["html", "htm"], shortNames: ["html"]),
        TypeDescriptor(.rtf, parents: [.text], mimeTypes: ["text/rtf", "application/rtf"], fileExtensions: ["rtf"], shortNames: ["rtf"]),
        TypeDescriptor(.json, parents: [.text], mimeTypes: ["application/json"], fileExtensions: ["json"], shortNames: ["json"]),
        // URLs are served as text too (GTK's wait_for_text, Qt's text(), xclip -o); the text
        // rows above claim the text targets first, so reading them still gives text.
        TypeDescriptor(
            .url, parents: [.data],
            mimeTypes: ["text/uri-list", "text/x-moz-url"],
            targets: [TargetAlias("text/uri-list", codec: .uriList), TargetAlias("text/x-moz-url", codec: .mozURL)] + textAliases,
            shortNames: ["url", "uri"]),
        // File URLs as file managers copy files: a uri-list (GTK's URIs, Qt's urls()) and GNOME's list.
        TypeDescriptor(
            .fileURL, parents: [.url],
            mimeTypes: ["x-special/gnome-copied-files"],
            targets: [TargetAlias("text/uri-list", codec: .uriList), TargetAlias("x-special/gnome-copied-files", codec: .gnomeCopiedFiles)] + textAliases,
            shortNames: ["file-url"]),
        TypeDescriptor(.image, parents: [.data, .content]),
        TypeDescriptor(.png, parents: [.image], mimeTypes: ["image/png"], fileExtensions: ["png"], shortNames: ["png"]),
        TypeDescriptor(.jpeg, parents: [.image], mimeTypes: ["image/jpeg"], fileExtensions: ["jpg", "jpeg"], shortNames: ["jpeg", "jpg"]),
        TypeDescriptor(.gif, parents: [.image], mimeTypes: ["image/gif"], fileExtensions: ["gif"], shortNames: ["gif"]),
        TypeDescriptor(.tiff, parents: [.image], mimeTypes: ["image/tiff"], fileExtensions: ["tif", "tiff"], shortNames: ["tiff"]),
        TypeDescriptor(.bmp, parents: [.image], mimeTypes: ["image/bmp", "image/x-bmp", "image/x-ms-bmp"],
                       targets: [TargetAlias("image/bmp")], fileExtensions: ["bmp"], shortNames: ["bmp"]),
        TypeDescriptor(.webP, parents: [.image], mimeTypes: ["image/webp"], fileExtensions: ["webp"], shortNames: ["webp"]),
        // SVG is XML: text as much as an image.
        TypeDescriptor(.svg, parents: [.image, .text], mimeTypes: ["image/svg+xml"], fileExtensions: ["svg"], shortNames: ["svg"]),
        TypeDescriptor(.pdf, parents: [.data, .content], mimeTypes: ["application/pdf"], fileExtensions: ["pdf"], shortNames: ["pdf"]),
        TypeDescriptor(.color, parents: [.data], mimeTypes: ["application/x-color"], shortNames: ["color"]),
        TypeDescriptor(.propertyList, parents: [.data], mimeTypes: ["application/x-plist"], fileExtensions: ["plist"]),
        TypeDescriptor(.passwordManagerHint, parents: [.data]),
        TypeDescriptor(.cutSelection, parents: [.data], mimeTypes: ["application/x-kde-cutselection"]),
    ])
}

extension TypeRegistry {
    /// What a reader that names no type gets: plain text, else an image, else the first type
    /// that is data rather than a toolkit's private marker (``isPrivate(_:)``); nil when only
    /// markers are offered.
    public func defaultType(among offered: [PasteboardType]) -> PasteboardType? {
        let data = offered.filter { !Self.isPrivate($0.identifier) }
        return bestType(among: data, accepting: ReaderPreference.plainText)
            ?? bestType(among: data, accepting: ReaderPreference.image)
            ?? data.first
    }

    /// Whether a type or target name is a toolkit's or protocol's own marker rather than data a
    /// person copied: Chromium's `chromium/x-…` (its `x-internal-source-rfh-token`), `x-special/…`
    /// (GNOME's copied-files list is a file list, and kept), Qt's `application/x-qt-…`, the
    /// desktop portal's `application/vnd.portal.…`, KDE's cut mark, and X names of the selection protocol
    /// (`SAVE_TARGETS`, `TARGETS` …), private atoms (`_…`) and xpb's own (`XPB_…`).
    public static func isPrivate(_ name: String) -> Bool {
        let lower = name.lowercased()
        if lower.hasPrefix("chromium/x-") || lower.hasPrefix("application/x-qt-") || lower.hasPrefix("application/vnd.portal.")
            || lower == "application/x-kde-cutselection" {
            return true
        }
        if lower.hasPrefix("x-special/") { return lower != "x-special/gnome-copied-files" }
        return name.hasPrefix("_") || name.hasPrefix("XPB_") || protocolNames.contains(name)
    }

    /// X targets about the selection protocol, not data.
    static let protocolNames: Set<String> = [
        "TARGETS", "MULTIPLE", "TIMESTAMP", "DELETE", "INSERT_SELECTION", "INSERT_PROPERTY", "SAVE_TARGETS", "TARGET_SIZES",
        "LENGTH", "ATOM_PAIR", "INCR", "NULL", "CLIPBOARD_MANAGER",
    ]
}

/// The order in which common kinds of reader prefer types, for ``TypeRegistry/bestType(among:accepting:)``.
public enum ReaderPreference {
    /// A rich-text reader: HTML, then RTF, then plain text.
    public static let richText: [PasteboardType] = [.html, .rtf, .utf8PlainText, .plainText]
    /// A plain-text reader.
    public static let plainText: [PasteboardType] = [.utf8PlainText, .plainText]
    /// An image reader: the formats xpb reads in ``ImageFormat/sourceRank``'s order (lossless
    /// first), then any image.
    public static let image: [PasteboardType] = ImageFormat.bySourceRank.compactMap(\.type) + [.image]
}
