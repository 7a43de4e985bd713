internal import CX11
import FoundationEssentials
import PasteboardKit

/// The cut buffers: `CUT_BUFFER0` … `CUT_BUFFER7`, properties of the root window that predate
/// selections. xterm and older tools still read and write the first (`xclip -selection
/// buffer-cut`). No owner is involved: the bytes live in the X server until replaced.
extension X11PasteboardBackend {
    /// The bytes of cut buffer `index` (0…7); nil when it was never set.
    ///
    /// - Throws: for an index out of range, a buffer over `limit` bytes (default: the
    ///   configuration's `maxReadSize`), or a lost connection.
    public func cutBuffer(_ index: Int = 0, limit: Int? = nil) throws -> Data? {
        let property = try Self.cutBufferAtom(index)
        let limit = limit ?? configuration.maxReadSize
        return try connection.sync(timeout: timeout) { session, done in
            done(Result { try session.wire.readProperty(session.wire.root, property, delete: false, limit: limit)?.data })
        }
    }

    /// Replaces cut buffer `index` (0…7) with `data`, typed `STRING` as `XStoreBuffer` does,
    /// written in pieces the server takes.
    public func setCutBuffer(_ data: Data, index: Int = 0) throws {
        let property = try Self.cutBufferAtom(index)
        let failed: Bool = try connection.sync(timeout: Self.transferTimeout) { session, done in
            var failed = false
            let piece = session.wire.chunkSize
            data.withUnsafeBytes { bytes in
                var offset = 0
                repeat {
                    let end = min(bytes.count, offset + piece)
                    let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<end])
                    session.wire.routeErrors({
                        _ = XChangeProperty(session.wire.display, session.wire.root.rawValue, property.rawValue, X11Atom.string.rawValue, 8,
                                            offset == 0 ? PropModeReplace : PropModeAppend,
                                            slice.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(slice.count))
                    }, onError: { _ in failed = true })
                    offset = end
                } while offset < bytes.count
            }
            XSync(session.wire.display, 0)
            session.wire.collectErrors()
            done(.success(failed))
        }
        if failed { throw PasteboardError.backendFailure("the X server refused to store \(data.count) bytes in cut buffer \(index)") }
    }

    /// `CUT_BUFFER0` … `CUT_BUFFER7` are predefined atoms 9 … 16.
    static func cutBufferAtom(_ index: Int) throws -> X11Atom {
        guard (0...7).contains(index) else { throw PasteboardError.backendFailure("there are 8 cut buffers (0 to 7), not \(index)") }
        return X11Atom(rawValue: UInt(9 + index))
    }
}
