import CommandLineTable
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardX11
import Synchronization

struct PasteCommand: Command {
    /// The options, each declared once: the spec lists them and the look-ups name them, so a
    /// look-up can only name a declared option.
    enum Option {
        static let type = OptionSpec.value("t", "type", "type[,type…]", "Accepted types, best first, comma-separated (UTI, MIME type, X target or short name such as text, html, png). An X target the owner offers that xpb has no type for, or would decode (COMPOUND_TEXT, STRING, text/uri-list), is read as it is: the owner's whole reply, as xclip -t reads it.", completion: SelectionOptions.typeCompletion)
        static let item = OptionSpec.value(nil, "item", "n", "The item to read (0 is the first).")
        static let maxSize = OptionSpec.value(nil, "max-size", "size", "Refuse data larger than this (bytes, or with a K, M or G suffix; default \(CommonOptions.defaultMaxSizeText)).")
        static let output = OptionSpec.value("o", "output", "file", "Write to this file instead of standard output.")
        static let trimNewline = OptionSpec.flag(nil, "trim-newline", "Leave out one trailing newline of the data (xclip -rmlastnl, xsel --trim).")
        static let noConvert = OptionSpec.flag(nil, "no-convert", "Only a type the owner has: without it, plain text asked of an item that has only HTML is made from the HTML here (tags out, references decoded), and an image format the owner lacks (-t jpeg of a PNG) is converted here from the image it has.")
        static let newlineAfterText = OptionSpec.flag(nil, "newline-after-text", "Write a newline after text (the wl-paste stand-in's default).", hidden: true)
        static let follow = OptionSpec.flag(nil, "follow", "Keep running and follow a growing pasteboard: after the contents, write what each change adds to them (the new contents whole when they do not extend what was written); ends when the X connection does.")
    }

    static let name = "paste"
    static let spec = CommandSpec(
        name: name,
        abstract: "Write the best available representation to standard output, byte-exact.",
        discussion: """
            Nothing is added: no newline, no conversion beyond the type's own encoding. The data \
            is streamed: it never needs to fit in memory. With -o, the file is written as a shell \
            redirection would (opened, truncated, written: symlinks followed, mode, owner and \
            links kept), and only once the data is known to be there.
            """,
        options: SelectionOptions.specs + [
            Option.type,
            Option.item,
            CommonOptions.timeout,
            CommonOptions.maxTime,
            Option.maxSize,
            Option.output,
            Option.trimNewline,
            Option.noConvert,
            Option.follow,
            Option.newlineAfterText,
        ])

    let selection: SelectionOptions
    let types: String?
    let item: Int
    let timeout: Double
    let maxTime: Double
    let maxSize: Int
    let output: String?
    let trimNewline: Bool
    let noConvert: Bool
    let follow: Bool
    let newlineAfterText: Bool

    init(_ arguments: ParsedArguments) throws(UsageError) {
        selection = try SelectionOptions(arguments)
        types = arguments.value(Option.type)
        item = try arguments.integer(Option.item) ?? 0
        timeout = try CommonOptions.timeout(in: arguments)
        maxTime = try CommonOptions.maxTime(in: arguments)
        maxSize = try arguments.size(Option.maxSize) ?? CommonOptions.defaultMaxSize
        output = arguments.value(Option.output)
        trimNewline = arguments.flag(Option.trimNewline)
        noConvert = arguments.flag(Option.noConvert)
        follow = arguments.flag(Option.follow)
        newlineAfterText = arguments.flag(Option.newlineAfterText)
        if item < 0 { throw UsageError("--item must be 0 or more") }
        if follow, output != nil || trimNewline { throw UsageError("--follow writes to standard output as the data grows: it takes neither --output nor --trim-newline") }
        if let types, types.split(separator: ",").isEmpty { throw UsageError("--type needs at least one type") }
    }

    func run() throws {
        if output == nil, StandardDescriptors.wasClosed(STDOUT_FILENO) {
            throw Failure("standard output is closed: nothing to write the data to (use -o FILE)")
        }
        let backend = try selection.connect(readTimeout: timeout, maxTime: maxTime, maxSize: maxSize, observesChanges: follow, readsOnce: !follow)
        defer { backend.close(handOff: false) }
        let registry = backend.registry
        // Set by the chooser when what is written is made here from what the owner has.
        let conversion = LocalConversion()
        let wanted = try wantedTypes(registry)
        let chosen = Mutex<PasteboardType?>(nil)
        let chooseType = chooser(registry, wanted: wanted, conversion: conversion)
        let choose: @Sendable ([[PasteboardType]]?) throws -> PasteboardType = { items in
            let type = try chooseType(items)
            chosen.withLock { $0 = type }
            return type
        }
        // Asked for with the owner's offer: the first of --type, else UTF-8 text (what a paste
        // without --type reads from most owners).
        let likely = wanted?.first ?? .utf8PlainText
        if follow { return try followChanges(backend, choose) }
        // The destination is opened when the first bytes (or the owner's file) are there: a
        // refused or failed read leaves an existing file as it was.
        var destination: Int32? = output == nil ? STDOUT_FILENO : nil

        defer { if let destination, output != nil { close(destination) } }
        let open = { () throws -> Int32 in
            if let destination { return destination }
            let fd = try OutputFile.open(output!)
            destination = fd
            return fd
        }
        // A file passed over the fast path is streamed by the kernel, never copied through here.
        // --trim-newline holds a final newline back until more data shows it was not the last.
        var heldNewline = false
        let bytes = { (data: Data) throws in
            guard trimNewline else { return try writeAll(data, to: open()) }
            guard !data.isEmpty else { return }
            if heldNewline { try writeAll(Data([UInt8(ascii: "\n")]), to: open()) }
            heldNewline = data.last == UInt8(ascii: "\n")
            try writeAll(heldNewline ? data.dropLast() : data, to: open())
        }
        // HTML made into text, an image into another format: collected whole, converted at the end.
        var collected = Data()
        let finish = { (found: Bool, target: String?) throws in
            if found, conversion.codec != nil { try bytes(try conversion.convert(collected)) }
            guard found else {
                // Offered, then refused: a failure of the owner (status 1), not a type that is not
                // there, so that the xsel stand-in, which prints nothing for the latter, fails too.
                throw Failure("the owner of \(selection.selection) offered the type but refused to convert it", .failure)
            }
            let fd = try open()
            // wl-paste's habit: a newline after text, whatever the text ends with.
            // (Text made here from HTML was chosen as the HTML: text too; an image converted is not.)
            if newlineAfterText, Self.isText(target: target, type: chosen.withLock { $0 }, registry: registry) {
                try writeAll(Data([UInt8(ascii: "\n")]), to: fd)
            }
        }
        let found: Bool
        // An X target named by --type is the owner's reply for it, whole and as it is.
        if let target = try rawTarget(backend, registry, wanted: wanted) {
            guard let found = try backend.stream(of: selection.name, target: target, limit: maxSize, bytes: bytes) else {
                throw selection.emptyFailure
            }
            return try finish(found, target)
        }
        found = try backend.stream(of: selection.name, item: item, limit: maxSize, likely: likely, choosing: choose,
                                       file: { file in
                                           if conversion.codec != nil { return collected.append(try file.read(offset: 0, length: file.size)) }
                                           guard trimNewline else { return try write(.file(file), to: open()) }
                                           var offset = 0
                                           while offset < file.size {
                                               let length = min(file.size - offset, 1 << 20)
                                               try bytes(file.read(offset: offset, length: length))
                                               offset += length
                                           }
                                       },
                                       bytes: { data in
                                           guard conversion.codec == nil else { return collected.append(data) }
                                           try bytes(data)
                                       })
        try finish(found, nil)
    }

    /// Whether what was written is text, as wl-paste decides it: a text type, or an X text
    /// target (`STRING`, `TEXT`, `UTF8_STRING`, `text/…`).
    private static func isText(target: String?, type: PasteboardType?, registry: TypeRegistry) -> Bool {
        if let target { return target.hasPrefix("text/") || ["STRING", "TEXT", "UTF8_STRING", "COMPOUND_TEXT"].contains(target) }
        return type.map { registry.conforms($0, to: .text) } ?? false
    }

    /// The names of --type, in order.
    private var typeNames: [String] { types.map { $0.split(separator: ",").map { $0.trimmingWhitespace() } } ?? [] }

    /// The X target to read as it is, when --type names one the owner lists before any type it
    /// has (xclip's `-t NAME`): a name the model has no type for (`COMPOUND_TEXT`,
    /// `GTK_TEXT_BUFFER_CONTENTS`, `UTF-8`), or one whose bytes the model would decode or cut
    /// (`STRING`'s Latin-1, `TEXT`, a `text/uri-list` of several files). Other names (`text/html`,
    /// `UTF8_STRING`, `png`) are read by type: the same bytes, over the fast path where there is one.
    private func rawTarget(_ backend: any StreamingPasteboardBackend, _ registry: TypeRegistry, wanted: [PasteboardType]?) throws -> String? {
        guard item == 0, let wanted else { return nil }
        let names = typeNames
        let raw = zip(names, wanted).filter { name, type in
            if let (_, alias) = registry.type(forTarget: name) { return alias.codec != .identity || alias.replyType != alias.name }
            // A name the registry knows (a short name such as html, a MIME type, a UTI) is a type;
            // a MIME or UTI it does not know is a type passed through under its own name.
            return registry.descriptor(for: type) == nil && !name.contains("/") && !name.contains(".")
        }.map(\.0)
        // Only then is the offer asked for apart from the read (a TARGETS read of its own).
        guard !raw.isEmpty else { return nil }
        let offered = try backend.targets(of: selection.name)
        var types: [PasteboardType]?
        for (name, type) in zip(names, wanted) {
            if raw.contains(name) {
                if offered.contains(name) { return name }
                continue
            }
            // A type the owner has comes first: read by type.
            if types == nil { types = (try backend.itemTypes(of: selection.name)).first ?? [] }
            if registry.bestType(among: types ?? [], accepting: [type]) != nil { return nil }
        }
        return nil
    }

    /// The accepted types of --type, best first (nil without it); unknown names are warned about.
    private func wantedTypes(_ registry: TypeRegistry) throws -> [PasteboardType]? {
        guard types != nil else { return nil }
        let names = typeNames
        names.forEach { warnIfUnknownType($0, registry: registry) }
        return try names.map { try registry.resolve($0) }
    }

    /// How the type is chosen from the owner's offer, as read for the transfer itself: one read
    /// of the offer, no second round trip to confirm it. The accepted types of --type (`wanted`),
    /// best first; else plain text, an image or the first type that is data (``TypeRegistry/defaultType(among:)``).
    private func chooser(_ registry: TypeRegistry, wanted: [PasteboardType]?, conversion: LocalConversion? = nil) -> @Sendable ([[PasteboardType]]?) throws -> PasteboardType {
        let convert = !noConvert && conversion != nil
        return { [selection, item] (items: [[PasteboardType]]?) throws -> PasteboardType in
            guard let items else { throw selection.emptyFailure }
            guard !items.isEmpty else {
                // Asked for a type: what is not there is that type (its owner may offer targets
                // that have none, which -t reads by their names).
                if let wanted {
                    throw Failure("\(selection.label) has no \(TypeNames.listed(wanted).joined(separator: " or ")); its owner offers no type xpb reads (see xpb types --targets)", .typeUnavailable)
                }
                throw Failure("\(selection.label) holds no data its owner will convert", .empty)
            }
            guard item < items.count else {
                throw Failure("item \(item) does not exist: \(selection.label) holds \(items.count) item\(items.count == 1 ? "" : "s")", .typeUnavailable)
            }
            let offered = items[item]
            if let wanted {
                if let chosen = registry.bestType(among: offered, accepting: wanted) { return chosen }
                // Plain text asked of an item that has only HTML: its text, made here.
                if convert, wanted.contains(where: { registry.conforms($0, to: .plainText) }),
                   let html = offered.first(where: { registry.conforms($0, to: .html) }) {
                    conversion?.set(.textFromHTML)
                    return html
                }
                // An image format the owner lacks: converted here from the best image it has.
                if convert, let format = wanted.lazy.compactMap({ registry.imageFormat(of: $0) }).first(where: \.isWritable),
                   let source = registry.imageSource(among: offered) {
                    conversion?.set(.image(format))
                    return source
                }
                throw Failure("\(selection.label) has no \(TypeNames.listed(wanted).joined(separator: " or ")); it offers \(TypeNames.listed(offered).joined(separator: ", "))", .typeUnavailable)
            }
            guard let chosen = registry.defaultType(among: offered) else {
                let named = offered.isEmpty ? "no type" : "only private markers (\(offered.map(\.identifier).joined(separator: ", "))); name one with -t"
                throw Failure("\(selection.label) offers \(named)", .typeUnavailable)
            }
            return chosen
        }
    }

    /// --follow: the contents, then what each change adds to them. A change that does not extend
    /// what was written (a new copy) is written whole; an empty pasteboard writes nothing and
    /// waits for the next change.
    private func followChanges(_ backend: any StreamingPasteboardBackend, _ choose: @escaping @Sendable ([[PasteboardType]]?) throws -> PasteboardType) throws {
        let changes = selection.pasteboard(on: backend).changeQueue
        var output = FollowOutput()
        let readNow = { () throws -> Data? in
            var data = Data()
            let found = try backend.stream(of: selection.name, item: item, limit: maxSize, likely: nil, choosing: choose,
                                           file: { data.append(try $0.read(offset: 0, length: $0.size)) }, bytes: { data.append($0) })
            return found ? data : nil
        }
        do {
            if let data = try readNow() { try output.show(data) }
        } catch let failure as Failure where failure.status == .empty || failure.status == .typeUnavailable {
            // Nothing to write yet: the next change may bring it.
        }
        while changes.next() != nil {
            do {
                if let data = try readNow() { try output.show(data) }
            } catch let failure as Failure where failure.status == .empty || failure.status == .typeUnavailable {
                continue
            } catch let error as PasteboardError {
                // An owner that went away or stalled: its successor is the next change.
                writeText("xpb: \(Failure(error).message)\n", to: STDERR_FILENO)
            }
        }
        if !backend.isConnected { throw Failure(selection.host.lostConnection) }
    }
}

/// What `paste --follow` wrote: new contents that extend it are written as what they add, any
/// other contents whole.
struct FollowOutput {
    private var written = Data()

    mutating func show(_ data: Data) throws {
        try writeAll(data.starts(with: written) ? data.dropFirst(written.count) : data, to: STDOUT_FILENO)
        written = data
    }
}

/// What `xpb paste` makes here from the type it reads, when the owner lacks the one asked for
/// (plain text from HTML, an image in another format): the conversion (``TargetCodec``) the
/// chooser sets on the thread where the read begins, applied to the whole source at the end.
final class LocalConversion: Sendable {
    private let value = Mutex<TargetCodec?>(nil)
    var codec: TargetCodec? { value.withLock { $0 } }
    func set(_ codec: TargetCodec) { value.withLock { $0 = codec } }

    /// The source converted; a failure says what the owner's data lacked.
    func convert(_ data: Data) throws -> Data {
        guard let codec else { return data }
        do {
            return try codec.encode(data)
        } catch is TargetCodec.NoText {
            // Markup with no text (a browser's image copy: an <img> alone) has no text to give: a
            // failure, as xclip's is when the owner refuses text, not an empty success.
            throw Failure("the HTML the owner has holds no text", .typeUnavailable)
        } catch {
            guard case let .image(format) = codec else { throw error }
            throw Failure("cannot convert the owner's image to \(format.mimeType): \(error)")
        }
    }
}
