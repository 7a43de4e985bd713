import Foundation
import Testing
@testable import PasteboardWayland

#if canImport(Glibc)
import Glibc
#endif

/// An event's bytes, laid out by hand as the specification's wire format says (not by our
/// encoder), for the decoder's tests.
private func event(_ object: UInt32, _ opcode: UInt16, _ words: [UInt32]) -> [UInt8] {
    var bytes: [UInt8] = []
    func put(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
    put(object)
    put(UInt32(8 + 4 * words.count) << 16 | UInt32(opcode))
    words.forEach(put)
    return bytes
}

/// A string argument's words: its length with the NUL, then its bytes padded to 32 bits.
private func stringWords(_ text: String) -> [UInt32] {
    var bytes = Array(text.utf8) + [0]
    while bytes.count % 4 != 0 { bytes.append(0) }
    return [UInt32(text.utf8.count + 1)] + stride(from: 0, to: bytes.count, by: 4).map { index in
        UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2]) << 16 | UInt32(bytes[index + 3]) << 24
    }
}

private func decodeAll(_ bytes: [UInt8], fds: [Int32] = [], state: DataControlState) throws -> [WaylandMessage] {
    var decoder = WaylandDecoder()
    bytes.withUnsafeBytes { decoder.append($0) }
    try decoder.append(descriptors: fds)
    var messages: [WaylandMessage] = []
    while let message = try decoder.next(signature: { state.signature(object: $0, opcode: $1) }) { messages.append(message) }
    return messages
}

@Suite("Wayland wire format")
struct WaylandWireTests {
    @Test("requests are laid out as the specification says: header, words, strings with their NUL padded to 32 bits")
    func encoding() throws {
        let (bytes, fds) = try WaylandWire.encode(WaylandRequest.bind(registry: 2, name: 7, interface: "wl_seat", version: 1, id: 5))
        #expect(fds.isEmpty)
        // 8 header + 4 name + (4 + 8) "wl_seat\0" + 4 version + 4 id = 32 bytes.
        #expect(bytes == event(2, 0, [7] + stringWords("wl_seat") + [1, 5]))
        let receive = try WaylandWire.encode(WaylandRequest.receive(offer: 0xFF00_0001, type: Array("text/plain".utf8), fd: 9))
        #expect(receive.fds == [9])
        #expect(receive.bytes == event(0xFF00_0001, 0, stringWords("text/plain")))
        let clear = try WaylandWire.encode(WaylandRequest.setSelection(device: 6, source: nil, primary: true))
        #expect(clear.bytes == event(6, 2, [0]))
        #expect(throws: WaylandWireError.self) { try WaylandWire.encode(WaylandRequest.offer(source: 3, type: [0x61, 0, 0x62])) }
        #expect(throws: WaylandWireError.self) { try WaylandWire.encode(WaylandRequest.offer(source: 3, type: Array(repeating: 0x61, count: 5000))) }
    }

    @Test("events split anywhere decode whole, in order; descriptors are taken in order")
    func splitting() throws {
        var state = DataControlState()
        let registry = state.make(.registry)
        let source = state.make(.source(.wlr))
        let stream = event(registry, 0, [1] + stringWords("zwlr_data_control_manager_v1") + [2])
            + event(source, 0, stringWords("text/plain"))
            + event(source, 1, [])
        for cut in 0...stream.count {
            var decoder = WaylandDecoder()
            var messages: [WaylandMessage] = []
            for part in [Array(stream[..<cut]), Array(stream[cut...])] {
                part.withUnsafeBytes { decoder.append($0) }
                // A descriptor comes with the first bytes of the write that holds its message.
                if messages.isEmpty, part.count == cut { try decoder.append(descriptors: [42]) }
                while let message = try decoder.next(signature: { state.signature(object: $0, opcode: $1) }) { messages.append(message) }
            }
            #expect(messages.count == 3, "cut at \(cut)")
            #expect(messages.first?.arguments[1].text == "zwlr_data_control_manager_v1")
            #expect(messages.dropFirst().first?.arguments == [.string(Array("text/plain".utf8)), .fd(42)])
        }
    }

    @Test("malformed events are refused, never trusted: sizes, strings, nulls, missing descriptors, unknown objects")
    func malformed() throws {
        var state = DataControlState()
        let registry = state.make(.registry)
        let source = state.make(.source(.wlr))
        let cases: [(String, [UInt8])] = [
            ("a size under the header", { var bytes = event(registry, 1, [3]); bytes[6] = 4; bytes[7] = 0; return bytes }()),
            ("a size that is not a multiple of 4", { var bytes = event(registry, 1, [3]); bytes[6] = 13; return bytes }()),
            ("a size over 4096", { var bytes = event(registry, 1, [3]); bytes[6] = 0x04; bytes[7] = 0x10; return bytes }()),
            ("a string longer than its message", event(registry, 0, [1, 400, 0, 2])),
            ("a string without its NUL", event(registry, 0, [1, 4, 0x6161_6161, 2])),
            ("a NUL inside a string", event(registry, 0, [1, 4, 0x0061_0061, 2])),
            ("a null string where none may be", event(registry, 0, [1, 0, 2])),
            ("bytes past the last argument", event(registry, 1, [3, 4])),
            ("a message cut inside an argument", event(registry, 0, [1])),
            ("a descriptor that did not come", event(source, 0, stringWords("text/plain"))),
            ("an object never made", event(77, 0, [1])),
            ("an opcode the interface lacks", event(registry, 9, [])),
        ]
        for (name, bytes) in cases {
            #expect(throws: WaylandWireError.self, "\(name)") { _ = try decodeAll(bytes, state: state) }
        }
        // A string of 0xFFFFFFFF bytes claimed: refused without reading past the message.
        #expect(throws: WaylandWireError.self) { _ = try decodeAll(event(registry, 0, [1, 0xFFFF_FFFF, 2]), state: state) }
    }

    @Test("the state: offers and their types, the selections and their counts, replaced offers destroyed, peers bounded")
    func state() throws {
        var state = DataControlState()
        let device = state.make(.device(.wlr))
        state.made(device: device)
        let offer: UInt32 = 0xFF00_0000
        #expect(state.handle(WaylandMessage(object: device, opcode: 0, arguments: [.newID(offer)])).isEmpty)
        _ = state.handle(WaylandMessage(object: offer, opcode: 0, arguments: [.string(Array("text/plain".utf8))]))
        _ = state.handle(WaylandMessage(object: offer, opcode: 0, arguments: [.string(Array("text/plain".utf8))]))
        _ = state.handle(WaylandMessage(object: offer, opcode: 0, arguments: [.string(Array("UTF8_STRING".utf8))]))
        #expect(state.types(of: offer) == [Array("text/plain".utf8), Array("UTF8_STRING".utf8)])
        #expect(state.handle(WaylandMessage(object: device, opcode: 1, arguments: [.object(offer)])) == [.selectionChanged(.clipboard, offer: offer, owner: 2, changeCount: 1,
                                                                                                                      types: [Array("text/plain".utf8), Array("UTF8_STRING".utf8)])])
        #expect(state.changeCounts[.clipboard] == 1)
        // The same offer as the primary selection too: replacing the clipboard's keeps it.
        _ = state.handle(WaylandMessage(object: device, opcode: 3, arguments: [.object(offer)]))
        #expect(state.handle(WaylandMessage(object: device, opcode: 1, arguments: [.object(0)])) == [.selectionChanged(.clipboard, offer: nil, owner: nil, changeCount: 2, types: nil)])
        #expect(state.handle(WaylandMessage(object: device, opcode: 3, arguments: [.object(0)]))
            == [.selectionChanged(.primary, offer: nil, owner: nil, changeCount: 2, types: nil), .destroyOffer(offer)])
        #expect(state.changeCounts[.clipboard] == 2 && state.changeCounts[.primary] == 2)
        // A selection naming an offer never made ends the connection.
        _ = state.handle(WaylandMessage(object: device, opcode: 1, arguments: [.object(0xFF00_0009)]))
        #expect(state.fatalError != nil)

        var flooded = DataControlState()
        let other = flooded.make(.device(.ext))
        for index in 0 ..< UInt32(DataControlState.maxOffers + 1) {
            _ = flooded.handle(WaylandMessage(object: other, opcode: 0, arguments: [.newID(0xFF00_0000 + index)]))
        }
        #expect(flooded.fatalError?.contains("offers") == true)
        var listing = DataControlState()
        let third = listing.make(.device(.wlr))
        _ = listing.handle(WaylandMessage(object: third, opcode: 0, arguments: [.newID(offer)]))
        for index in 0 ..< 2000 {
            _ = listing.handle(WaylandMessage(object: offer, opcode: 0, arguments: [.string(Array("type/\(index)".utf8))]))
        }
        #expect(listing.types(of: offer)?.count == DataControlState.maxTypesPerOffer)

        // A type name that is not UTF-8 is left out (asked back repaired, its source would not know it).
        var named = DataControlState()
        let fourth = named.make(.device(.wlr))
        _ = named.handle(WaylandMessage(object: fourth, opcode: 0, arguments: [.newID(offer)]))
        for bytes in [Array("text/plain".utf8), [0x74, 0x65, 0x78, 0x74, 0x2F, 0xFF, 0xFE], Array("text/html".utf8)] {
            _ = named.handle(WaylandMessage(object: offer, opcode: 0, arguments: [.string(bytes)]))
        }
        #expect(named.types(of: offer)?.count == 2)
    }

    @Test("events for objects we destroyed are decoded by their interface and their descriptors closed")
    func zombies() throws {
        var state = DataControlState()
        let source = state.make(.source(.wlr))
        state.forget(source)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let messages = try decodeAll(event(source, 0, stringWords("text/plain")), fds: [fds[1]], state: state)
        #expect(messages.count == 1)
        #expect(state.handle(messages[0]) == [.close(fds[1])])
        close(fds[0])
        close(fds[1])
    }

    @Test("ext_data_control where the compositor has it, else wlr's; the same messages; ext and wlr v2 carry the primary selection")
    func flavours() throws {
        var state = DataControlState()
        let registry = state.make(.registry)
        func announce(_ name: UInt32, _ interface: String, _ version: UInt32) throws {
            let bytes = event(registry, 0, [name] + stringWords(interface) + [version])
            for message in try decodeAll(bytes, state: state) { _ = state.handle(message) }
        }
        try announce(1, "wl_seat", 8)
        #expect(state.dataControlGlobal == nil)
        try announce(2, "zwlr_data_control_manager_v1", 2)
        #expect(state.dataControlGlobal?.1 == .wlr)
        try announce(3, "ext_data_control_manager_v1", 1)
        #expect(state.dataControlGlobal?.1 == .ext && state.dataControlGlobal?.0.name == 3)
        #expect(state.seatGlobal?.name == 1)
        _ = state.handle(WaylandMessage(object: registry, opcode: 1, arguments: [.uint(3)]))
        #expect(state.dataControlGlobal?.1 == .wlr)
        #expect(DataControlFlavour.ext.hasPrimarySelection(version: 1))
        #expect(DataControlFlavour.wlr.hasPrimarySelection(version: 2) && !DataControlFlavour.wlr.hasPrimarySelection(version: 1))
        // An ext device's events decode and act as a wlr device's.
        let device = state.make(.device(.ext))
        let offer: UInt32 = 0xFF00_0004
        let stream = event(device, 0, [offer]) + event(offer, 0, stringWords("text/plain")) + event(device, 3, [offer]) + event(device, 2, [])
        var effects: [DataControlState.Effect] = []
        var decoder = WaylandDecoder()
        stream.withUnsafeBytes { decoder.append($0) }
        while let message = try decoder.next(signature: { state.signature(object: $0, opcode: $1) }) { effects += state.handle(message) }
        #expect(effects == [.selectionChanged(.primary, offer: offer, owner: 2, changeCount: 1, types: [Array("text/plain".utf8)]), .deviceFinished])
        #expect(state.interface(of: offer) == .offer(.ext))
        // Requests are the same bytes under either name.
        #expect(try WaylandWire.encode(WaylandRequest.getDevice(manager: 5, id: 6, seat: 7)).bytes == event(5, 1, [6, 7]))
        #expect(try WaylandWire.encode(WaylandRequest.destroy(5, .manager(.ext))).bytes == event(5, 2, []))
        #expect(try WaylandWire.encode(WaylandRequest.destroy(9, .source(.ext))).bytes == event(9, 1, []))
    }

    @Test("our own selection is told apart by its exact types; another client's is numbered anew")
    func ownership() throws {
        var state = DataControlState()
        let device = state.make(.device(.wlr))
        let source = state.make(.source(.wlr))
        state.expectOwn(.clipboard, source: source, types: [Array("text/plain".utf8), Array("text/plain".utf8)])
        func offer(_ id: UInt32, _ types: [String]) {
            _ = state.handle(WaylandMessage(object: device, opcode: 0, arguments: [.newID(id)]))
            for type in types { _ = state.handle(WaylandMessage(object: id, opcode: 0, arguments: [.string(Array(type.utf8))])) }
        }
        // Another client's copy came first: not ours.
        offer(0xFF00_0001, ["text/html"])
        _ = state.handle(WaylandMessage(object: device, opcode: 1, arguments: [.object(0xFF00_0001)]))
        #expect(state.owner(of: .clipboard) == 2)
        offer(0xFF00_0002, ["text/plain"])
        _ = state.handle(WaylandMessage(object: device, opcode: 1, arguments: [.object(0xFF00_0002)]))
        #expect(state.owner(of: .clipboard) == DataControlState.ourOwner)
        #expect(state.ownSources[.clipboard] == source)
        _ = state.handle(WaylandMessage(object: source, opcode: 1))
        #expect(state.ownSources[.clipboard] == nil)
        _ = state.handle(WaylandMessage(object: device, opcode: 1, arguments: [.object(0)]))
        #expect(state.owner(of: .clipboard) == nil)
    }

    @Test("the socket's path: WAYLAND_DISPLAY under XDG_RUNTIME_DIR, or absolute")
    func socketPath() throws {
        #expect(try WaylandConnection.socketPath(display: "wayland-3", runtimeDirectory: "/run/user/1000") == "/run/user/1000/wayland-3")
        #expect(try WaylandConnection.socketPath(display: "/tmp/sock", runtimeDirectory: nil) == "/tmp/sock")
        #expect(throws: WaylandError.self) { try WaylandConnection.socketPath(display: "wayland-0", runtimeDirectory: nil) }
    }
}
