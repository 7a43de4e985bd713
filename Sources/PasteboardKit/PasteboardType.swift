/// A representation type: a uniform type identifier such as `public.utf8-plain-text`, or any other
/// type name (a MIME type, an X11 target name) that passes through unchanged.
///
/// Two types are equal when their identifiers are equal; aliases such as `UTF8_STRING` or
/// `text/plain;charset=utf-8` are resolved to their identifier by ``TypeRegistry/resolve(_:)``.
public struct PasteboardType: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The identifier, exactly as given.
    public let identifier: String

    /// Creates a type from an identifier, rejecting names that no pasteboard could carry.
    ///
    /// - Throws: ``PasteboardError/invalidType(_:reason:)`` for an empty name, one of only
    ///   white space, or one holding control characters.
    public init(_ identifier: String) throws {
        if let reason = Self.problem(with: identifier) {
            throw PasteboardError.invalidType(identifier, reason: reason)
        }
        self.identifier = identifier
    }

    /// Creates a type from an identifier known to be valid (used for the built-in constants).
    init(uncheckedIdentifier identifier: String) {
        self.identifier = identifier
    }

    /// Why `identifier` cannot name a type, or nil when it can.
    static func problem(with identifier: String) -> String? {
        if identifier.isEmpty { return "a type name cannot be empty" }
        // Printable ASCII (every built-in type, every MIME type and UTI met) is decided on its
        // bytes: its only white space is the space, it has no control characters. The general
        // case below walks Characters and Unicode properties, whose tables a reader's start
        // would otherwise page in for each type of a manifest.
        if identifier.utf8.count <= 1024, identifier.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            return identifier.utf8.contains(where: { $0 != 0x20 }) ? nil : "a type name cannot be only white space"
        }
        if identifier.allSatisfy(\.isWhitespace) { return "a type name cannot be only white space" }
        if identifier.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "a type name cannot contain control characters"
        }
        if identifier.utf8.count > 1024 { return "a type name is limited to 1024 bytes" }
        return nil
    }

    /// The identifier.
    public var description: String { identifier }

    /// Orders types by identifier, for stable listings.
    public static func < (lhs: PasteboardType, rhs: PasteboardType) -> Bool {
        lhs.identifier < rhs.identifier
    }
}

extension PasteboardType {
    /// Any data: the root of the conformance tree.
    public static let data = PasteboardType(uncheckedIdentifier: "public.data")
    /// Any content meant for people to read.
    public static let content = PasteboardType(uncheckedIdentifier: "public.content")
    /// Any text.
    public static let text = PasteboardType(uncheckedIdentifier: "public.text")
    /// Plain text of unspecified encoding.
    public static let plainText = PasteboardType(uncheckedIdentifier: "public.plain-text")
    /// Plain text in UTF-8.
    public static let utf8PlainText = PasteboardType(uncheckedIdentifier: "public.utf8-plain-text")
    /// Plain text in UTF-16 (little-endian, no byte-order mark).
    public static let utf16PlainText = PasteboardType(uncheckedIdentifier: "public.utf16-plain-text")
    /// HTML.
    public static let html = PasteboardType(uncheckedIdentifier: "public.html")
    /// Rich Text Format.
    public static let rtf = PasteboardType(uncheckedIdentifier: "public.rtf")
    /// A URL, stored as its UTF-8 absolute string.
    public static let url = PasteboardType(uncheckedIdentifier: "public.url")
    /// A `file://` URL.
    public static let fileURL = PasteboardType(uncheckedIdentifier: "public.file-url")
    /// Any image.
    public static let image = PasteboardType(uncheckedIdentifier: "public.image")
    /// A PNG image.
    public static let png = PasteboardType(uncheckedIdentifier: "public.png")
    /// A JPEG image.
    public static let jpeg = PasteboardType(uncheckedIdentifier: "public.jpeg")
    /// A GIF image.
    public static let gif = PasteboardType(uncheckedIdentifier: "com.compuserve.gif")
    /// A TIFF image.
    public static let tiff = PasteboardType(uncheckedIdentifier: "public.tiff")
    /// A Windows bitmap image.
    public static let bmp = PasteboardType(uncheckedIdentifier: "com.microsoft.bmp")
    /// A WebP image.
    public static let webP = PasteboardType(uncheckedIdentifier: "org.webmproject.webp")
    /// An SVG image.
    public static let svg = PasteboardType(uncheckedIdentifier: "public.svg-image")
    /// A PDF document.
    public static let pdf = PasteboardType(uncheckedIdentifier: "com.adobe.pdf")
    /// A color: four little-endian 16-bit channels, red, green, blue, alpha (`application/x-color`).
    public static let color = PasteboardType(uncheckedIdentifier: "org.xpb.color")
    /// A property list in Apple's binary format; carries values that have no type of their own.
    public static let propertyList = PasteboardType(uncheckedIdentifier: "com.apple.property-list")
    /// JSON text.
    public static let json = PasteboardType(uncheckedIdentifier: "public.json")
    /// The password-manager hint KDE and others use to keep secrets out of clipboard history.
    public static let passwordManagerHint = PasteboardType(uncheckedIdentifier: "x-kde-passwordManagerHint")
    /// KDE's mark of a file list that is a cut (`1`), not a copy: pasting moves the files. With
    /// it, GNOME's copied-files list says `cut` too.
    public static let cutSelection = PasteboardType(uncheckedIdentifier: "application/x-kde-cutselection")
}
