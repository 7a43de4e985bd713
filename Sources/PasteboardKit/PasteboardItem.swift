import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A closure that produces one representation when, and only when, a reader asks for it.
public typealias RepresentationProvider = @Sendable () throws -> Data

/// One representation of an item: bytes at hand, or a provider run on first read.
public enum Representation: Sendable {
    /// Bytes at hand.
    case data(Data)
    /// Bytes produced on first read and then kept.
    case lazy(LazyData)
    /// The bytes of a file, read when asked for; a backend may stream it in pieces instead of
    /// holding it in memory.
    case file(FileContents)

    /// The bytes, running the provider if this is its first read.
    public func resolve() throws -> Data {
        switch self {
        case let .data(bytes): return bytes
        case let .lazy(lazy): return try lazy.value()
        case let .file(file): return try file.read(offset: 0, length: file.size)
        }
    }

    /// The provider of a lazy representation that has not run yet (or is running now).
    public var pendingProvider: LazyData? {
        if case let .lazy(lazy) = self, !lazy.hasRun { return lazy }
        return nil
    }

    /// Whether the bytes are at hand without running anything.
    public var isResolved: Bool {
        switch self {
        case .data, .file: return true
        case let .lazy(lazy): return lazy.hasRun
        }
    }
}

/// A file whose bytes a representation stands for, read in pieces on demand (`pread`), so a
/// large file is served without a copy of it in memory. The file is opened once; its size is
/// taken then.
public final class FileContents: Sendable {
    private let descriptor: Int32
    /// The file's size when it was opened.
    public let size: Int
    /// The path it was opened from, for messages.
    public let path: String

    /// Opens a file for reading.
    ///
    /// - Throws: ``PasteboardError/backendFailure(_:)`` naming the file and the reason.
    public init(path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw PasteboardError.backendFailure("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            throw PasteboardError.backendFailure("cannot read \(path): not a regular file")
        }
        self.descriptor = descriptor
        self.size = Int(status.st_size)
        self.path = path
        modified = status.st_mtim
        openedSize = status.st_size
    }

    /// Takes over an open descriptor of a regular file (closing it when done), of which the first
    /// `size` bytes are the contents; `path` names it in messages.
    ///
    /// - Throws: ``PasteboardError/backendFailure(_:)`` (and closes the descriptor) when it is not
    ///   a regular file of at least `size` bytes.
    public init(adopting descriptor: Int32, size: Int, path: String) throws {
        var status = stat()
        guard size >= 0, fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, Int(status.st_size) >= size else {
            close(descriptor)
            throw PasteboardError.backendFailure("cannot read \(path): not a regular file of \(size) bytes")
        }
        self.descriptor = descriptor
        self.size = size
        self.path = path
        modified = status.st_mtim
        openedSize = status.st_size
    }

    deinit { close(descriptor) }

    /// The modification time and size when it was opened.
    private let modified: timespec
    private let openedSize: off_t

    /// Whether the file still has the size and modification time it had when it was opened: an
    /// owner serving a file that was cut short or edited since must refuse, not serve a part or
    /// something else.
    public var isUnchanged: Bool {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return false }
        return status.st_size == openedSize && status.st_mtim.tv_sec == modified.tv_sec && status.st_mtim.tv_nsec == modified.tv_nsec
    }

    /// Runs `body` with the open, read-only descriptor (for passing the file to another process
    /// of the same user). The descriptor stays owned by this object: do not close it, and read it
    /// with `pread`: its offset is shared.
    public func withDescriptor<T>(_ body: (Int32) throws -> T) rethrows -> T {
        try body(descriptor)
    }

    /// Exactly `length` bytes from `offset` into the start of `buffer` (which must hold them),
    /// without allocating: for serving a file in chunks through one reused buffer.
    ///
    /// - Throws: ``PasteboardError/backendFailure(_:)`` when the file ends before (it shrank).
    public func read(offset: Int, length: Int, into buffer: UnsafeMutableRawBufferPointer) throws {
        precondition(length <= buffer.count, "the buffer is smaller than the read")
        var done = 0
        while done < length {
            let count: Int
            do {
                count = try SystemCall.retrying { pread(descriptor, buffer.baseAddress! + done, length - done, off_t(offset + done)) }
            } catch {
                throw PasteboardError.backendFailure("cannot read \(path): \(error)")
            }
            guard count > 0 else { throw PasteboardError.backendFailure("cannot read \(path): it shrank while being served") }
            done += count
        }
    }

    /// Up to `length` bytes from `offset` (fewer at the end of the file).
    public func read(offset: Int, length: Int) throws -> Data {
        let wanted = max(0, min(length, size - offset))
        var data = Data(count: wanted)
        try data.withUnsafeMutableBytes { try read(offset: offset, length: wanted, into: $0) }
        return data
    }
}

/// A representation produced on demand: the provider runs at most once, the first time the bytes
/// are read, even when several readers ask at the same moment; its result, or its error, is kept.
public final class LazyData: Sendable {
    private enum State {
        case pending(RepresentationProvider)
        case done(Result<Data, PasteboardError>)
    }

    private let type: PasteboardType
    private let state: Mutex<State>

    /// Wraps a provider for a representation of `type`.
    public init(type: PasteboardType, provider: @escaping RepresentationProvider) {
        self.type = type
        self.state = Mutex(.pending(provider))
    }

    /// Whether the provider has already run. Never waits: while the provider is running on
    /// another thread, this is false.
    public var hasRun: Bool {
        state.withLockIfAvailable { if case .done = $0 { return true } else { return false } } ?? false
    }

    /// The bytes: the provider runs on the first call; later calls return what it produced.
    public func value() throws -> Data {
        let result = state.withLock { state -> Result<Data, PasteboardError> in
            switch state {
            case let .done(result):
                return result
            case let .pending(provider):
                let result: Result<Data, PasteboardError>
                do {
                    result = .success(try provider())
                } catch let error as PasteboardError {
                    result = .failure(error)
                } catch {
                    result = .failure(.providerFailed(type: type, message: String(describing: error)))
                }
                state = .done(result)
                return result
            }
        }
        return try result.get()
    }
}

/// One item on a pasteboard: several representations of the same thing (HTML and plain text of
/// one selection, PNG and JPEG of one picture), each under its own type, in the order added.
public struct PasteboardItem: Sendable {
    /// The representations in the order they were added.
    public private(set) var representations: [(type: PasteboardType, representation: Representation)] = []

    /// An item with no representations.
    public init() {}

    /// An item holding each value under its type, encoded as ``ValueCoding`` describes.
    ///
    /// - Throws: ``PasteboardError/notAPropertyList(typeName:path:)`` for a value that is not a
    ///   property list.
    public init(_ values: [PasteboardType: Any]) throws {
        for (type, value) in values.sorted(by: { $0.key < $1.key }) {
            try setValue(value, for: type)
        }
    }

    /// The types of this item, in the order added.
    public var types: [PasteboardType] { representations.map(\.type) }

    /// Whether the item has a representation of exactly this type.
    public func hasType(_ type: PasteboardType) -> Bool {
        representations.contains { $0.type == type }
    }

    /// Sets (or replaces) the bytes of one representation.
    public mutating func setData(_ data: Data, for type: PasteboardType) {
        set(.data(data), for: type)
    }

    /// Sets (or replaces) one representation from a property-list value.
    ///
    /// - Throws: ``PasteboardError/notAPropertyList(typeName:path:)`` for a value that is not a
    ///   property list.
    public mutating func setValue(_ value: Any, for type: PasteboardType) throws {
        set(.data(try ValueCoding.encode(PropertyListValue(converting: value), as: type)), for: type)
    }

    /// Sets (or replaces) one representation with a file's bytes, read only when asked for.
    public mutating func setFile(_ file: FileContents, for type: PasteboardType) {
        set(.file(file), for: type)
    }

    /// Sets (or replaces) one representation with a provider that runs only when that type is read.
    public mutating func setProvider(for type: PasteboardType, _ provider: @escaping RepresentationProvider) {
        set(.lazy(LazyData(type: type, provider: provider)), for: type)
    }

    /// Sets (or replaces) one representation.
    public mutating func set(_ representation: Representation, for type: PasteboardType) {
        if let index = representations.firstIndex(where: { $0.type == type }) {
            representations[index].representation = representation
        } else {
            representations.append((type, representation))
        }
    }

    /// Removes one representation.
    public mutating func removeRepresentation(for type: PasteboardType) {
        representations.removeAll { $0.type == type }
    }

    /// The representation stored under exactly this type.
    public func representation(for type: PasteboardType) -> Representation? {
        representations.first { $0.type == type }?.representation
    }

    /// The bytes of exactly this type, running its provider (and no other) if needed.
    public func data(for type: PasteboardType) throws -> Data? {
        try representation(for: type)?.resolve()
    }
}

/// Options that apply to the items of one write.
public struct PasteboardOptions: Sendable, Equatable {
    /// The items stay on this machine: never synced to another display or host.
    public var isLocalOnly: Bool
    /// When the items are removed from the pasteboard; nil for never.
    public var expirationDate: Date?

    /// Options with the given values; the defaults are "may sync" and "never expires".
    public init(localOnly: Bool = false, expirationDate: Date? = nil) {
        self.isLocalOnly = localOnly
        self.expirationDate = expirationDate
    }
}
