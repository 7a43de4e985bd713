import Foundation
import Testing
@testable import PasteboardKit
@testable import PasteboardX11

/// A reply's first piece asked for ahead of its turn (``X11Wire/prefetchProperty(_:_:limit:for:)``)
/// reads as the ordinary read would: the same bytes and format, the property deleted only when
/// the read that takes it asks, and a piece asked for another read never handed over.
@Suite("Reads asked ahead: the same reply as a read in turn")
struct PrefetchTests {
    /// What a read of `property` on the backend's own window gives, after `prepare` wrote it and
    /// perhaps asked for it ahead, and whether the property is left after the read.
    private func read(_ backend: X11PasteboardBackend, limit: Int = .max, truncate: Bool = false, reader: Int? = nil,
                      prepare: @escaping @Sendable (X11Wire, X11Atom) -> Void) throws -> (value: PropertyValue?, left: Bool) {
        try backend.connection.sync(timeout: 30) { session, done in
            let wire = session.wire
            let property = wire.atom("XPB_TEST_PREFETCH")
            wire.deleteProperty(wire.window, property)
            prepare(wire, property)
            done(Result {
                let value = try wire.readProperty(wire.window, property, delete: true, limit: limit, truncate: truncate, prefetchedFor: reader)
                let left = try wire.readProperty(wire.window, property, delete: false) != nil
                return (value, left)
            })
        }
    }

    private static func bytes(_ wire: X11Wire, _ property: X11Atom, _ data: Data) {
        data.withUnsafeBytes { wire.writeBytes(wire.window, property, type: wire.known[.utf8String], $0, onError: { _ in }) }
    }

    @Test("text, atoms, an empty and a missing property: taken ahead as read in turn, and deleted by the read")
    func sameAsInTurn() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let text = Data("hello, world\n".utf8)
        for ahead in [false, true] {
            let read = try read(backend, reader: 1) { wire, property in
                Self.bytes(wire, property, text)
                if ahead { wire.prefetchProperty(wire.window, property, limit: .max, for: 1) }
            }
            #expect(read.value?.data == text && read.value?.format == 8 && !read.left, "ahead: \(ahead)")
            let atoms = try self.read(backend, reader: 2) { wire, property in
                wire.writeLongs(wire.window, property, type: .atom, [1, 2, 0xFFFF_FFFF, 40], onError: { _ in })
                if ahead { wire.prefetchProperty(wire.window, property, limit: .max, for: 2) }
            }
            #expect(atoms.value?.format == 32 && atoms.value?.longs == [1, 2, 0xFFFF_FFFF, 40] && !atoms.left, "ahead: \(ahead)")
            let empty = try self.read(backend, reader: 3) { wire, property in
                Self.bytes(wire, property, Data())
                if ahead { wire.prefetchProperty(wire.window, property, limit: .max, for: 3) }
            }
            #expect(empty.value?.data == Data() && !empty.left, "ahead: \(ahead)")
            let missing = try self.read(backend, reader: 4) { wire, property in
                if ahead { wire.prefetchProperty(wire.window, property, limit: .max, for: 4) }
            }
            #expect(missing.value == nil && !missing.left, "ahead: \(ahead)")
        }
    }

    @Test("past the first piece: cut at the limit, gathered from pieces, or refused, as in turn")
    func pieces() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let large = Data((0..<(X11Wire.propertyPiece + 4_100)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        for ahead in [false, true] {
            let cut = try read(backend, limit: 16, truncate: true, reader: 5) { wire, property in
                Self.bytes(wire, property, large)
                if ahead { wire.prefetchProperty(wire.window, property, limit: 16, for: 5) }
            }
            #expect(cut.value?.data == large.prefix(16) && !cut.left, "ahead: \(ahead)")
            let whole = try read(backend, reader: 6) { wire, property in
                Self.bytes(wire, property, large)
                if ahead { wire.prefetchProperty(wire.window, property, limit: .max, for: 6) }
            }
            #expect(whole.value?.data == large && !whole.left, "ahead: \(ahead)")
            #expect(throws: PropertyTooLarge.self) {
                try read(backend, limit: 64, reader: 7) { wire, property in
                    Self.bytes(wire, property, large)
                    if ahead { wire.prefetchProperty(wire.window, property, limit: 64, for: 7) }
                }
            }
        }
    }

    @Test("a piece asked ahead for another read, or with another limit, is dropped and the property read anew; one never taken deletes nothing")
    func notHandedOver() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let first = Data("asked ahead".utf8)
        let second = Data("written after".utf8)
        // Asked ahead for read 8, then written again: read 9 gets what is there now.
        let other = try read(backend, reader: 9) { wire, property in
            Self.bytes(wire, property, first)
            wire.prefetchProperty(wire.window, property, limit: .max, for: 8)
            Self.bytes(wire, property, second)
        }
        #expect(other.value?.data == second && !other.left)
        let otherLimit = try read(backend, limit: 1 << 20, reader: 10) { wire, property in
            Self.bytes(wire, property, first)
            wire.prefetchProperty(wire.window, property, limit: 4, for: 10)
            Self.bytes(wire, property, second)
        }
        #expect(otherLimit.value?.data == second && !otherLimit.left)
        // Dropped unread: the property is still there for the read in turn.
        let dropped = try read(backend, reader: 11) { wire, property in
            Self.bytes(wire, property, first)
            wire.prefetchProperty(wire.window, property, limit: .max, for: 11)
            wire.dropPrefetched()
        }
        #expect(dropped.value?.data == first && !dropped.left)
    }
}
