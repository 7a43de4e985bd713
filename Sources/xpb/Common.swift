import ArgumentParser
import Foundation
import PasteboardKit
import PasteboardX11

/// The exit statuses xpb documents.
enum Status: Int32 {
    case success = 0
    case failure = 1
    case empty = 2
    case typeUnavailable = 3
    case timedOut = 4
    case noDisplay = 5
    case usage = 64
}

/// A failure with the message to print and the status to exit with.
struct Failure: Error {
    let message: String
    let status: Status

    init(_ message: String, _ status: Status = .failure) {
        self.message = message
        self.status = status
    }

    /// Classifies any error thrown by the library.
    init(_ error: any Error) {
        switch error {
        case let failure as Failure:
            self = failure
        case let error as X11BackendError:
            switch error {
            case .noDisplay, .cannotOpenDisplay: self.init(error.description, .noDisplay)
            default: self.init(error.description)
            }
        case let error as PasteboardError:
            if case .timedOut = error { self.init(error.description, .timedOut) } else { self.init(error.description) }
        default:
            self.init(String(describing: error))
        }
    }
}

/// Runs a command body: a failure is printed as `xpb: …` on standard error and ends the process
/// with its documented status.
func reporting<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as ExitCode {
        throw error
    } catch {
        let failure = Failure(error)
        FileHandle.standardError.write(Data("xpb: \(failure.message)\n".utf8))
        throw ExitCode(failure.status.rawValue)
    }
}

/// Which pasteboard a command works on, and how to reach the display.
struct SelectionOptions: ParsableArguments {
    @Flag(name: [.customShort("p"), .customLong("primary")], help: "Use the primary selection (PRIMARY) instead of the clipboard.")
    var primary = false

    @Flag(name: .customLong("find"), help: "Use the find pasteboard: the same selection as --primary.")
    var find = false

    @Option(name: [.customShort("n"), .customLong("pasteboard")], help: ArgumentHelp("Use a named pasteboard (the selection XPB_PASTEBOARD:<name>).", valueName: "name"))
    var pasteboard: String?

    @Option(name: .customLong("display"), help: ArgumentHelp("The X display to use.", discussion: "Default: $DISPLAY.", valueName: "display"))
    var display: String?

    func validate() throws {
        if (primary || find) && pasteboard != nil {
            throw ValidationError("choose either --primary/--find or --pasteboard, not both")
        }
        if let pasteboard {
            do { _ = try Pasteboard.Name.validated(pasteboard) } catch { throw ValidationError(String(describing: error)) }
        }
    }

    /// The model's name for the chosen pasteboard.
    var name: Pasteboard.Name {
        if let pasteboard { return Pasteboard.Name(rawValue: pasteboard) }
        return primary || find ? .find : .general
    }

    /// How messages call the chosen pasteboard.
    var label: String {
        switch name {
        case .general: return "the clipboard"
        case .find: return "the primary selection"
        default: return "the pasteboard \"\(name.rawValue)\""
        }
    }

    /// The failure for a pasteboard with nothing on it.
    var emptyFailure: Failure {
        Failure("\(label) is empty (no owner for \(selection))", .empty)
    }

    /// The X selection behind it.
    var selection: String { X11PasteboardBackend.selectionName(for: name) }

    /// Connects to the display.
    func connect(readTimeout: Double? = nil) throws -> X11PasteboardBackend {
        var configuration = X11Configuration()
        if let readTimeout { configuration.readTimeout = readTimeout }
        return try X11PasteboardBackend(display: display, changeCenter: ChangeCenter(notificationCenter: nil), configuration: configuration)
    }

    /// The chosen pasteboard on a backend.
    func pasteboard(on backend: X11PasteboardBackend) -> Pasteboard {
        switch name {
        case .general: return .general(of: backend)
        case .find: return .find(of: backend)
        default: return Pasteboard(name: name, create: true, backend: backend) ?? .general(of: backend)
        }
    }
}

/// Writes bytes to standard output, unbuffered.
func writeOut(_ data: Data) {
    FileHandle.standardOutput.write(data)
}

/// Writes a line to standard output, unbuffered (so pipes see each line at once).
func writeLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// JSON text of an encodable value, keys sorted.
func json<T: Encodable>(_ value: T) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: (try? encoder.encode(value)) ?? Data("null".utf8), as: UTF8.self)
}

/// Parses a timeout given in seconds.
func seconds(_ text: String) throws -> Double {
    guard let value = Double(text), value.isFinite, value > 0 else {
        throw ValidationError("'\(text)' is not a positive number of seconds")
    }
    return value
}
