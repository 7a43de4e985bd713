import FoundationEssentials

/// What went wrong with a pasteboard operation; each message says what happened and what to try.
public enum PasteboardError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// A type name that no pasteboard can carry.
    case invalidType(String, reason: String)
    /// A value that is not a property list (String, Data, numbers, Bool, Date, URL, arrays and
    /// string-keyed dictionaries of these).
    case notAPropertyList(typeName: String, path: String)
    /// An item index outside the pasteboard's items.
    case itemIndexOutOfRange(Int, count: Int)
    /// A pasteboard name that cannot be used.
    case invalidName(String, reason: String)
    /// The named pasteboard was removed.
    case pasteboardRemoved(String)
    /// A lazy provider threw while producing a representation.
    case providerFailed(type: PasteboardType, message: String)
    /// Data that does not decode as the type claims.
    case malformedData(type: PasteboardType, reason: String)
    /// Nothing happened before the deadline.
    case timedOut(operation: String, seconds: Double)
    /// The backend (for example the X server connection) failed.
    case backendFailure(String)
    /// No backend can be used (no display, no platform module linked); the reason says why.
    case unavailable(String)

    /// A sentence that says what happened and what to try.
    public var description: String {
        switch self {
        case let .invalidType(name, reason):
            return "invalid pasteboard type \(Self.quoted(name)): \(reason)"
        case let .notAPropertyList(typeName, path):
            return "a value of type \(typeName) at \(path) is not a property list; use String, Data, Int, Double, Bool, Date, URL, or arrays and [String: …] dictionaries of these"
        case let .itemIndexOutOfRange(index, count):
            return "item \(index) does not exist: the pasteboard holds \(count) item\(count == 1 ? "" : "s")"
        case let .invalidName(name, reason):
            return "invalid pasteboard name \(Self.quoted(name)): \(reason)"
        case let .pasteboardRemoved(name):
            return "the pasteboard \(Self.quoted(name)) was removed; create it again with Pasteboard(name:create: true)"
        case let .providerFailed(type, message):
            return "the provider for \(type) failed: \(message)"
        case let .malformedData(type, reason):
            return "the \(type) data is malformed: \(reason)"
        case let .timedOut(operation, seconds):
            return "\(operation) timed out after \(Self.format(seconds)) s; the other side may be stopped or busy, try again or raise the timeout"
        case let .backendFailure(message):
            return message
        case let .unavailable(reason):
            return reason
        }
    }

    /// The same sentence, for Foundation's error reporting.
    public var errorDescription: String? { description }

    static func quoted(_ text: String) -> String {
        "\"" + text.unicodeScalars.map { $0.properties.generalCategory == .control ? $0.escaped(asASCII: true) : String($0) }.joined() + "\""
    }

    /// Seconds as the errors say them: whole seconds as an integer, else to the millisecond
    /// ("5", "2.5", "0.25").
    package static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String((seconds * 1000).rounded() / 1000)
    }
}
