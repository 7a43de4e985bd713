internal import CX11
import PasteboardSelections

/// An X atom: a name the server interned. Xlib hands atoms, windows and timestamps over as the
/// same `unsigned long`; these wrappers let the compiler tell them apart (as swift-system's
/// `FileDescriptor` does for descriptors). The raw value goes to Xlib only in the call layer.
struct X11Atom: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    let rawValue: UInt
    init(rawValue: UInt) { self.rawValue = rawValue }

    /// `None`: no atom (a refused conversion, an obsolete requestor's missing property).
    static let none = X11Atom(rawValue: 0)
    /// Xatom's predefined atoms (its constants are casts, which Swift does not import).
    static let atom = X11Atom(rawValue: 4)
    static let cardinal = X11Atom(rawValue: 6)
    static let string = X11Atom(rawValue: 31)
    static let integer = X11Atom(rawValue: 19)

    var isNone: Bool { rawValue == 0 }
    var description: String { "atom \(rawValue)" }
}

/// An X window.
public struct X11Window: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The window's id on its server.
    public let rawValue: UInt
    /// Wraps a window id.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// `None`: no window (a selection without an owner).
    public static let none = X11Window(rawValue: 0)
    /// Whether this is no window.
    public var isNone: Bool { rawValue == 0 }
    /// The id in hexadecimal, as xprop and xwininfo print it.
    public var description: String { "0x" + String(rawValue, radix: 16) }
}

/// An X server timestamp: milliseconds on a 32-bit clock that wraps about every 49.7 days, so
/// two timestamps are ordered by their signed 32-bit difference, never by their values.
struct X11Timestamp: RawRepresentable, Hashable, Sendable {
    let rawValue: UInt
    init(rawValue: UInt) { self.rawValue = rawValue }

    /// `CurrentTime`: what obsolete clients send instead of a real time; never ours to send.
    static let currentTime = X11Timestamp(rawValue: 0)
    var isCurrentTime: Bool { rawValue == 0 }

    /// Whether this comes before `other`, allowing for the wrap (ICCCM §2.1).
    func isBefore(_ other: X11Timestamp) -> Bool {
        Int32(truncatingIfNeeded: UInt32(truncatingIfNeeded: rawValue) &- UInt32(truncatingIfNeeded: other.rawValue)) < 0
    }
}

/// The atoms the backend speaks by name, interned together in one round trip when a session
/// starts. The one table the protocol-target lists are built from.
enum WellKnown: String, CaseIterable, Sendable {
    case clipboard = "CLIPBOARD"
    case primary = "PRIMARY"
    case targets = "TARGETS"
    case multiple = "MULTIPLE"
    case timestamp = "TIMESTAMP"
    case saveTargets = "SAVE_TARGETS"
    case delete = "DELETE"
    case insertSelection = "INSERT_SELECTION"
    case insertProperty = "INSERT_PROPERTY"
    case length = "LENGTH"
    case atomPair = "ATOM_PAIR"
    case incr = "INCR"
    case null = "NULL"
    case utf8String = "UTF8_STRING"
    case manifest = "XPB_MANIFEST"
    case clipboardManager = "CLIPBOARD_MANAGER"
    case netWMPID = "_NET_WM_PID"
    case netWMName = "_NET_WM_NAME"
    case wmName = "WM_NAME"
    case wmClass = "WM_CLASS"
    case wmClientMachine = "WM_CLIENT_MACHINE"
    /// Our window's property for server timestamps (zero-length appends).
    case timestampProperty = "XPB_TIMESTAMP"
    /// Our window's property for the targets we ask a clipboard manager to save.
    case saveTargetsProperty = "XPB_SAVE_TARGETS"
    /// The client message a new owner of a manager selection sends (ICCCM 2.8).
    case manager = "MANAGER"
    /// The clipboard manager window's property with the display's change counts
    /// (CLIPBOARD, PRIMARY), which every library process reads.
    case changeCounts = "XPB_CHANGE_COUNTS"
    /// The same window's property with CLIPBOARD's count alone, written (before the pair) only
    /// when it changes: its notify alone tells a watcher that count passed.
    case clipboardChangeCount = "XPB_CHANGE_COUNT_CLIPBOARD"
    /// PRIMARY's count alone, as ``clipboardChangeCount``.
    case primaryChangeCount = "XPB_CHANGE_COUNT_PRIMARY"
    /// A list of (target, size) pairs some owners offer before any data moves.
    case targetSizes = "TARGET_SIZES"
    /// The property earlier versions' readers asked their likely target into, together with
    /// `TARGETS`, before they had chosen (``SpeculativeRead``); a reader now asks into
    /// ``X11Wire/guessProperty``, its own. An xpb owner answers either only with what its
    /// reader takes (``SelectionServer/answersGuess(_:in:selection:)``), else refuses it at once.
    case guess = "XPB_GUESS"

    /// What every owner answers besides data, in the order it advertises them.
    static let ownerTargets: [WellKnown] = [.targets, .multiple, .timestamp, .saveTargets]
    /// Targets about the protocol rather than data: never shown as types, never handed to a
    /// clipboard manager.
    static let protocolTargets: [WellKnown] = ownerTargets + [.delete, .insertSelection, .insertProperty, .length, .atomPair, .incr, .manifest]
    /// Their names (and `NULL`): the display-free table, which these atoms must match.
    static let protocolTargetNames = SelectionNames.protocolTargetNames

    /// The case's place in `allCases`: an enum without payloads is stored as it (one byte for
    /// up to 256 cases; ``WellKnownAtoms`` checks the order once).
    var ordinal: Int { Int(unsafeBitCast(self, to: UInt8.self)) }
}

/// The interned atoms of ``WellKnown``.
///
/// Looked up a dozen times per conversion served, so by the case's place in `allCases`, not a
/// dictionary: the enum's `Hashable` (from `RawRepresentable`) hashes the name's string, which
/// cost an owner 2,700 instructions per conversion (callgrind).
struct WellKnownAtoms: Sendable {
    /// In the order of `WellKnown.allCases`.
    private let atoms: [X11Atom]

    /// `atoms`: one per case, in the order of `WellKnown.allCases`.
    init(_ atoms: [X11Atom]) {
        precondition(atoms.count == WellKnown.allCases.count, "one atom per well-known name")
        precondition(WellKnown.allCases.enumerated().allSatisfy { $0.offset == $0.element.ordinal },
                     "a well-known name's ordinal is its place among the cases")
        self.atoms = atoms
    }

    subscript(_ name: WellKnown) -> X11Atom { atoms[name.ordinal] }

    /// Every well-known atom.
    var all: [X11Atom] { atoms }

    /// The atoms of the protocol targets.
    var protocolTargets: Set<X11Atom> { Set(WellKnown.protocolTargets.map { self[$0] }) }
}
