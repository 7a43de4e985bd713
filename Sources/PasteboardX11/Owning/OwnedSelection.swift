internal import CX11
import Dispatch
import FoundationEssentials
import Glibc
import ImageCodecs
import PasteboardKit
import PasteboardSelections
import Synchronization

/// How one target of an owned selection is served.
enum ServedTarget: Sendable {
    /// One representation of one item, converted by the alias's codec.
    case representation(item: Int, type: PasteboardType, codec: TargetCodec, replyType: X11Atom)
    /// Every URL item at once, as a list (`text/uri-list`, `x-special/gnome-copied-files`).
    case urlList(codec: TargetCodec, replyType: X11Atom)
    /// The manifest of all items.
    case manifest
    /// Bytes taken from another owner (a clipboard manager's kept contents), served as they came.
    case captured(Data, replyType: X11Atom)
    /// A target the owner offered and the manager did not fetch, made from one it kept: an image
    /// in another format, the text in another encoding. Converted on the first request
    /// (``OwnedSelection/convertedBytes(_:)``).
    case capturedConversion(Data, TargetCodec, replyType: X11Atom)
    /// Bytes that live elsewhere (a sync peer), streamed when a requestor converts the target
    /// (``SelectionServer/serveRemote(_:_:)``). Not served in `MULTIPLE` or over the fast path.
    case remote(RemoteTarget)

    /// Whether converting it is a paste of what we own: not the manifest (xpb's readers read it
    /// within their paste) nor another node's bytes we only pass on (a sync peer's).
    var isPaste: Bool {
        switch self {
        case .manifest, .remote: return false
        default: return true
        }
    }
}

/// A selection we own: the items, when we got it, and the targets we serve, built from one table.
struct OwnedSelection: Sendable {
    let items: [PasteboardItem]
    let options: PasteboardOptions
    /// When we became its owner (a paste queue's item: when it was announced).
    var timestamp: X11Timestamp
    /// The `TARGETS` reply, in order.
    let advertised: [X11Atom]
    let served: [X11Atom: ServedTarget]
    let manifest: Data
    let registry: TypeRegistry
    /// Whether any representation is a lazy provider: without one (every `xpb copy`), requests
    /// are answered at once, with no look for pending providers.
    let hasProviders: Bool
    /// Conversions computed once and shared by every requestor, by what they make: the targets
    /// that name one format (`image/bmp`, `image/x-bmp`, `IMAGE/BMP` …) share one.
    let conversions = ConversionCache()
    /// Who made the copy, published beside the selection while we own it (``CopyCredit``).
    var credit: CopyCredit? = nil

    /// Whether its items are marked secret (``SecretMarking``).
    var isSecret: Bool { items.contains(where: SecretMarking.isSecret) }

    /// What converting `target` makes, the key its bytes are kept under; nil for a target served
    /// as it is.
    func conversionKey(_ target: X11Atom) -> ConversionKey? {
        switch served[target] {
        case let .representation(item, type, codec, _)? where codec != .identity:
            return .representation(item: item, type: type.identifier, codec: codec)
        case let .capturedConversion(_, conversion, _)?:
            return .captured(conversion)
        case let .urlList(codec, _)?:
            return .urlList(codec)
        default:
            return nil
        }
    }

    /// Converted bytes of a large source are computed on a worker, not on the X thread.
    static let inlineConversionLimit = 256 << 10

    /// Whether a request for `target` must wait for work off the X thread first: a provider that
    /// has not run, or a conversion of a large representation not computed yet.
    func needsPreparation(_ target: X11Atom) -> Bool {
        if hasProviders, !pendingProviders(for: target).isEmpty { return true }
        guard let key = conversionKey(target), conversions[key] == nil else { return false }
        switch served[target] {
        case let .representation(item, type, codec, _)? where codec != .identity:
            return codec.isHeavy || items[item].representation(for: type).map(Self.sourceSize) ?? 0 > Self.inlineConversionLimit
        case let .capturedConversion(source, conversion, _)?:
            return conversion.isHeavy || source.count > Self.inlineConversionLimit
        case let .urlList(codec, _)?:
            return urlRepresentations(codec).reduce(0) { $0 + Self.sourceSize($1) } > Self.inlineConversionLimit
        default:
            return false
        }
    }

    private static func sourceSize(_ representation: Representation) -> Int {
        switch representation {
        case let .data(data): return data.count
        case let .file(file): return file.size
        case .lazy: return Int.max
        }
    }

    /// The bytes a converting target serves (nil for identity targets, served from the
    /// representation itself, and for a conversion that failed), computed once, a failure too:
    /// a malformed image or a bomb is decoded once, not for every request. Throws when a
    /// provider fails.
    func convertedBytes(_ target: X11Atom) throws -> Data? {
        guard let key = conversionKey(target) else { return nil }
        if let cached = conversions[key] { return cached.bytes }
        let bytes: Data
        switch served[target] {
        case let .representation(item, type, codec, _)? where codec != .identity:
            guard let source = try items[item].data(for: type) else { return nil }
            guard let converted = try? conversions.budget.convert(isHeavy: codec.isHeavy, { try codec.encode(source) }) else {
                conversions[key] = .failed
                return nil
            }
            bytes = converted
        case let .capturedConversion(source, conversion, _)?:
            guard let converted = try? conversions.budget.convert(isHeavy: conversion.isHeavy, { try conversion.encode(source) }) else {
                conversions[key] = .failed
                return nil
            }
            bytes = converted
        case let .urlList(codec, _)?:
            guard let list = try TargetPlan.urlList(items, codec, registry: registry) else { return nil }
            bytes = list
        default:
            return nil
        }
        return conversions.keep(bytes, for: key).bytes
    }

    /// Runs what `target` needs before it can be answered without blocking: its providers, and
    /// its conversion. On a worker thread; failures show when the request is answered.
    func prepare(_ target: X11Atom) {
        for provider in pendingProviders(for: target) { _ = try? provider.value() }
        _ = try? convertedBytes(target)
    }

    /// The URL representation of each item a list target serves (``TargetPlan/urlRepresentations(_:_:registry:)``).
    func urlRepresentations(_ codec: TargetCodec) -> [Representation] {
        TargetPlan.urlRepresentations(items, codec, registry: registry)
    }

    /// The providers a conversion to `target` would run that have not run yet.
    func pendingProviders(for target: X11Atom) -> [LazyData] {
        switch served[target] {
        case nil, .manifest?, .captured?, .capturedConversion?, .remote?:
            return []
        case let .representation(item, type, _, _)?:
            return items[item].representation(for: type)?.pendingProvider.map { [$0] } ?? []
        case let .urlList(codec, _)?:
            return urlRepresentations(codec).compactMap(\.pendingProvider)
        }
    }
}

/// A `SelectionRequest` event as plain values, to answer now or after its providers ran.
struct ConversionRequest: Sendable {
    let owner: X11Window
    let requestor: X11Window
    let selection: X11Atom
    let target: X11Atom
    /// The property as sent (None from obsolete clients).
    let property: X11Atom
    let time: X11Timestamp
    /// The serial of the last request of ours the server had processed when it sent this one:
    /// it tells a request made before a request of ours from one made after it.
    let serial: UInt

    init(owner: X11Window, requestor: X11Window, selection: X11Atom, target: X11Atom, property: X11Atom, time: X11Timestamp, serial: UInt) {
        self.owner = owner
        self.requestor = requestor
        self.selection = selection
        self.target = target
        self.property = property
        self.time = time
        self.serial = serial
    }

    /// A SelectionRequest event, with its sequence widened to the full `serial`.
    init(_ event: WireEvent, serial: UInt) {
        self.init(owner: X11Window(rawValue: UInt(event.owner)), requestor: X11Window(rawValue: UInt(event.window)),
                  selection: X11Atom(rawValue: UInt(event.selection)), target: X11Atom(rawValue: UInt(event.target)),
                  property: X11Atom(rawValue: UInt(event.property)), time: X11Timestamp(rawValue: UInt(event.time)), serial: serial)
    }

    /// Where the answer goes: the property, or for obsolete clients the target's name.
    var replyProperty: X11Atom { property.isNone ? target : property }
}


/// What a conversion makes, whatever target names it: one representation through one codec,
/// a kept target converted one way, or the URL list in one flavour.
enum ConversionKey: Hashable, Sendable {
    case representation(item: Int, type: String, codec: TargetCodec)
    case captured(TargetCodec)
    case urlList(TargetCodec)
}

/// Conversions of an owned selection's representations (Latin-1 text, URL lists, images), by
/// what they make (``ConversionKey``), computed once and shared by every requestor; computed on a
/// worker thread when large (images always). A failed conversion is kept as failed. What is kept
/// counts against its ``ConversionBudget`` (the process's) until the selection goes.
final class ConversionCache: Sendable {
    enum Conversion: Sendable {
        case done(Data)
        case failed

        var bytes: Data? {
            if case let .done(bytes) = self { return bytes }
            return nil
        }
    }

    private let storage = Mutex<(conversions: [ConversionKey: Conversion], bytes: Int)>(([:], 0))
    /// What the kept bytes count against.
    let budget: ConversionBudget

    init(budget: ConversionBudget = .process) {
        self.budget = budget
    }

    subscript(_ key: ConversionKey) -> Conversion? {
        get { storage.withLock { $0.conversions[key] } }
        set { storage.withLock { $0.conversions[key] = newValue } }
    }

    /// Keeps `bytes` as `key`'s conversion if the budget has room for them, else keeps the
    /// conversion as failed (the target is refused; what the process holds stays bounded).
    /// Returns what is kept: a conversion that raced this one keeps its result.
    func keep(_ bytes: Data, for key: ConversionKey) -> Conversion {
        storage.withLock { state in
            if let existing = state.conversions[key] { return existing }
            let kept: Conversion = budget.reserve(bytes.count) ? .done(bytes) : .failed
            if case .done = kept { state.bytes += bytes.count }
            state.conversions[key] = kept
            return kept
        }
    }

    deinit {
        budget.release(storage.withLock { $0.bytes })
    }
}


/// One target's preparation (providers, conversion) for one ownership: by the conversion it
/// makes, so that targets naming the same one share it.
struct PreparationKey: Hashable {
    enum Work: Hashable {
        case conversion(ConversionKey)
        case target(X11Atom)
    }

    let conversions: ObjectIdentifier
    let work: Work
}

/// The untrusted list of a `MULTIPLE` request.
enum MultiplePairs {
    /// (target, property) pairs from a requestor's ATOM_PAIR values; nil for an empty or odd
    /// list, or one of more than `maxPairs` pairs.
    static func parse(_ atoms: [X11Atom], maxPairs: Int) -> [(target: X11Atom, property: X11Atom)]? {
        guard !atoms.isEmpty, atoms.count % 2 == 0, atoms.count / 2 <= maxPairs else { return nil }
        return stride(from: 0, to: atoms.count, by: 2).map { (atoms[$0], atoms[$0 + 1]) }
    }
}

