import FoundationEssentials
import PasteboardKit
import PasteboardSelections

/// How a read is carried out: over the fast path when an xpb owner offers one, else by converting
/// the best advertised target and decoding it by the registry's codec.
extension X11PasteboardBackend {
    /// Reads one representation over the same-host fast path with `reader` (into memory, or as a
    /// file); nil when the fast path is off, not offered, or fails, and the caller converts through
    /// X. An owner that took the request and then did not answer is a timeout, like a conversion
    /// that makes no progress: not a reason to wait again through X.
    func overFastPath<T>(
        _ name: Pasteboard.Name, item: Int, type: PasteboardType, offer: ForeignOffer,
        limit: Int? = nil,
        _ reader: (_ name: String, _ owner: UInt, _ selection: String, _ target: String, _ timeout: Double, _ limit: Int) throws(FastPathClient.TimedOut) -> T?
    ) throws -> T? {
        guard configuration.fastPath, let manifest = offer.manifest, let listener = manifest.fastPath,
              let entry = manifest.entries.first(where: { $0.item == item && $0.type == type }) else { return nil }
        let result: T?
        do {
            result = try reader(listener, offer.owner.rawValue, Self.selectionName(for: name), entry.target, configuration.readTimeout,
                                limit ?? configuration.maxReadSize)
        } catch {
            throw PasteboardError.timedOut(operation: "reading \(entry.target) over the fast path", seconds: configuration.readTimeout)
        }
        if result != nil { state.withLock { $0.fastPathReads += 1 } }
        return result
    }

    /// Converts one representation from the foreign owner: through the manifest's item target,
    /// or for the first item through the best ordinary target for the type (also when the owner
    /// refuses the manifest's target: a manifest is a hint, the targets are the contract). The
    /// targets tried are the advertised ones alone, in the registry's order
    /// (``OfferReading/candidateAliases(for:offered:registry:)``): xclip answers any target it is
    /// asked for with its data during INCR, so an unadvertised UTF8_STRING would bring Latin-1 bytes.
    func fetch(_ name: Pasteboard.Name, item: Int, type: PasteboardType, offer: ForeignOffer, fastPath: Bool = true,
               limit: Int? = nil) throws -> Data? {
        if let entry = offer.manifest?.entries.first(where: { $0.item == item && $0.type == type }) {
            if fastPath, let data = try overFastPath(name, item: item, type: type, offer: offer, limit: limit, FastPathClient.read) {
                return data
            }
            if let data = try convert(name, target: entry.target, limit: limit)?.data { return data }
        }
        guard item == 0 else { return nil }
        for alias in OfferReading.candidateAliases(for: type, offered: offer.targets, registry: registry) {
            guard let (data, replyType) = try convert(name, target: alias.name, limit: limit) else { continue }
            return OfferReading.codec(for: type, requested: alias, replyType: replyType, registry: registry).decode(data)
        }
        return nil
    }

    /// Converts the selection to one target: its bytes and the reply's type name, or nil when the
    /// owner refuses. Waits as long as the transfer makes progress.
    func convert(_ name: Pasteboard.Name, target: String, limit: Int? = nil) throws -> (data: Data, replyType: String)? {
        try connection.sync(timeout: Self.transferTimeout) { [self] (session, done: @escaping @Sendable (Result<(data: Data, replyType: String)?, any Error>) -> Void) in
            let selection = self.selectionAtom(name, in: session)
            session.reader.convert(selection, to: session.wire.atom(target), limit: limit) { result in
                done(result.map { value in value.map { ($0.data, session.wire.name(of: $0.type) ?? "") } })
            }
        }
    }

    /// The outer wait of a data transfer; the transfer's own no-progress deadline is what ends
    /// a stalled one.
    static let transferTimeout: Double = 24 * 3600
}

extension X11PasteboardBackend {
    /// Reads one representation without holding it in memory whole: `file` gets a file when
    /// this process owns the pasteboard with a file representation or an xpb owner on this host
    /// passes one over the fast path (copy it with `sendfile`); otherwise `bytes` gets the
    /// contents in order, piece by piece, as an INCR transfer brings them (a bounded backlog:
    /// the owner is asked for more only as `bytes` keeps up). Targets whose bytes must be
    /// decoded as a whole (Latin-1 `STRING`, URL lists) are read whole first.
    ///
    /// - Parameter limit: the most bytes accepted (default: the configuration's `maxReadSize`);
    ///   a larger representation fails the read, before any byte is passed when its size is
    ///   announced.
    /// - Returns: false when the owner does not offer the type (or refuses to convert it).
    /// - Throws: ``PasteboardError`` for timeouts, the limit, a vanished owner; whatever `file`
    ///   or `bytes` throw ends the read.
    public func stream(of name: Pasteboard.Name, item: Int, type: PasteboardType, limit: Int? = nil,
                       file: (FileContents) throws -> Void, bytes: (Data) throws -> Void) throws -> Bool {
        // The item is checked by the general form, after the choice.
        try stream(of: name, item: item, limit: limit, likely: type, choosing: { _ in type }, file: file, bytes: bytes)
    }

    /// Streams one representation of an item, chosen by `choose` from the types of every item
    /// (nil: nobody owns the pasteboard), in the same round trips as ``itemTypesIfOwned(of:)``:
    /// the owner's offer is read once for both. `choose` throws to end the read (no such item,
    /// no acceptable type); `item` must then be an index of the list it was given.
    ///
    /// - Parameter likely: the type `choose` will most likely pick. The first item's target for it
    ///   is asked of a foreign owner together with its `TARGETS` (one round trip to the owner
    ///   instead of two), and used when the choice confirms it. A wrong guess costs the owner one
    ///   reply (or one INCR chunk), dropped here.
    public func stream(of name: Pasteboard.Name, item: Int, limit: Int? = nil, likely: PasteboardType? = nil,
                       choosing choose: ([[PasteboardType]]?) throws -> PasteboardType,
                       file: (FileContents) throws -> Void, bytes: (Data) throws -> Void) throws -> Bool {
        let limit = limit ?? configuration.maxReadSize
        let speculation = item == 0 ? likely.flatMap(speculativeTarget(for:)).map { SpeculativeRead(target: $0, limit: limit, pump: connection.pump) } : nil
        // Whatever the read did not take is dropped.
        defer { speculation?.abandon() }
        let source = try readSource(name, speculation: speculation)
        let type = try choose(source.itemTypes)
        try source.check(item)
        guard case let .foreign(offer, _) = source else {
            guard case let .owned(items) = source, let representation = items[item].representation(for: type) else { return false }
            if case let .file(contents) = representation {
                try Self.check(contents.size, limit)
                try file(contents)
            } else {
                let data = try representation.resolve()
                try Self.check(data.count, limit)
                try bytes(data)
            }
            return true
        }
        // The guess asked with the offer is taken when its bytes are what the read below would
        // read. A refused guess decides nothing (an xpb owner refuses most), so the target is
        // asked again below.
        if let speculation, Self.takesGuess(speculation, of: type, from: offer, registry: registry),
           try speculation.take(timeout: configuration.transferDeadline + 5, stopped: { [connection] in connection.stopReason }, bytes: bytes) {
            return true
        }
        // Given up before anything else is asked: the rest of its reply is drained first, since
        // an owner that serves one transfer at a time drops requests meanwhile.
        speculation?.abandon()
        if let contents = try overFastPath(name, item: item, type: type, offer: offer, limit: .max, FastPathClient.open) {
            try Self.check(contents.size, limit)
            try file(contents)
            return true
        }
        // The target to stream: the manifest's item target, or (also when the owner refuses
        // that one) the best advertised alias whose bytes are the model's bytes.
        if let entry = offer.manifest?.entries.first(where: { $0.item == item && $0.type == type }) {
            if try stream(name, target: entry.target, limit: limit, bytes: bytes) { return true }
        }
        guard item == 0, let alias = OfferReading.candidateAliases(for: type, offered: offer.targets, registry: registry).first else { return false }
        if alias.codec != .identity || alias.replyType != alias.name {
            // Decoded as a whole (bounded by the limit), then passed on.
            guard let data = try fetch(name, item: item, type: type, offer: offer.withoutManifest, fastPath: false, limit: limit) else { return false }
            try bytes(data)
            return true
        }
        return try stream(name, target: alias.name, limit: limit, bytes: bytes)
    }

    /// Whether a guess answered by the owner of `offer` holds the first item's `type`: from a
    /// plain owner, when it is the type's best advertised target, whose bytes are the model's
    /// bytes; from an xpb owner (its manifest names its own targets), when `type` is what the
    /// manifest's first item target serves, the one representation an xpb owner answers a guess
    /// with (``SelectionServer/answersGuess(_:in:selection:)``).
    static func takesGuess(_ speculation: SpeculativeRead, of type: PasteboardType, from offer: ForeignOffer, registry: TypeRegistry) -> Bool {
        if let manifest = offer.manifest {
            let first = Manifest.itemTarget(item: 0, index: 0)
            return manifest.entries.first(where: { $0.target == first }).map { $0.item == 0 && $0.type == type } ?? false
        }
        guard let alias = OfferReading.candidateAliases(for: type, offered: offer.targets, registry: registry).first else { return false }
        return alias.name == speculation.target && alias.codec == .identity && alias.replyType == alias.name
    }

    /// The target a read of `type` from a plain owner streams when the owner offers it: the
    /// type's first target whose bytes are the model's bytes (`UTF8_STRING` for UTF-8 text).
    private func speculativeTarget(for type: PasteboardType) -> String? {
        guard let alias = registry.targets(for: type).first, alias.codec == .identity, alias.replyType == alias.name,
              !SelectionNames.isReservedTarget(alias.name) else { return nil }
        return alias.name
    }

    /// Streams the owner's reply for one X target as it is, whole: no type, no decoding (what
    /// `xclip -o -t TARGET` prints). False when the owner refuses it; nil when nobody owns the
    /// pasteboard, or this process does (its items are read by type).
    public func stream(of name: Pasteboard.Name, target: String, limit: Int? = nil, bytes: (Data) throws -> Void) throws -> Bool? {
        guard ownedItems(name) == nil, try ownerWindow(of: name) != .none else { return nil }
        return try stream(name, target: target, limit: limit ?? configuration.maxReadSize, bytes: bytes)
    }

    /// Converts the selection to `target`, passing its bytes to `bytes` as they arrive; false
    /// when the owner refuses (before any byte).
    private func stream(_ name: Pasteboard.Name, target: String, limit: Int, bytes: (Data) throws -> Void) throws -> Bool {
        let sink = StreamSink(pump: connection.pump)
        let started = Rendezvous(pump: connection.pump)
        let selection = Self.selectionName(for: name)
        guard connection.submit({ session in
            session.reader.convert(session.wire.atom(selection), to: session.wire.atom(target), limit: limit, sink: sink) { result in
                started.fulfil(result.map { $0 != nil })
            }
        }) else { throw connection.stopReason ?? X11BackendError.connectionLost }
        try sink.drain(into: bytes)
        return try started.wait(timeout: configuration.transferDeadline + 5, stopped: { [connection] in connection.stopReason })
    }

    private static func check(_ size: Int, _ limit: Int) throws {
        guard size <= limit else {
            throw PasteboardError.backendFailure("the data is \(size) bytes, more than the \(limit)-byte limit")
        }
    }
}
