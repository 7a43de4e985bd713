import Foundation
import Testing
@testable import PasteboardKit
@testable import PasteboardX11

/// What a round trip carries.
enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case utf8Text, latin1String, mimeBlob, utiBlob

    var testDescription: String { rawValue }

    /// The X target a peer names.
    var target: String {
        switch self {
        case .utf8Text: return "UTF8_STRING"
        case .latin1String: return "STRING"
        case .mimeBlob: return "application/x-xpb-test"
        case .utiBlob: return "com.example.blob"
        }
    }

    /// The bytes on the wire for a payload of `size`.
    func wireBytes(_ size: Int) -> Data {
        switch self {
        case .utf8Text: return PasteboardX11Tests.utf8Text(size)
        case .latin1String: return latin1Text(size)
        case .mimeBlob, .utiBlob: return payload(size)
        }
    }

    /// What the model holds for those bytes, and under which type.
    func modelBytes(_ size: Int) -> (PasteboardType, Data) {
        switch self {
        case .utf8Text: return (.utf8PlainText, wireBytes(size))
        case .latin1String: return (.utf8PlainText, TargetCodec.latin1.decode(wireBytes(size)))
        case .mimeBlob: return (try! PasteboardType("application/x-xpb-test"), wireBytes(size))
        case .utiBlob: return (.blob, wireBytes(size))
        }
    }
}

extension PasteboardType {
    static let blob = try! PasteboardType("com.example.blob")
}

let roundTripSizes = [0, 1, 3999, 4001, 262_139, 262_141, 1 << 20, 50 << 20]

@Suite("Round trips with xclip and xsel", .serialized)
struct RoundTripTests {
    @Test("xpb → xclip -o, byte-exact", arguments: Kind.allCases, roundTripSizes)
    func xpbToXclip(kind: Kind, size: Int) throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let (type, bytes) = kind.modelBytes(size)
        try Pasteboard.general(of: backend).setData(bytes, forPasteboardType: type)
        let out = try run("xclip", ["-o", "-selection", "clipboard", "-t", kind.target], display: x, timeout: 120)
        #expect(out.status == 0, "\(out.error); \(ownerSends(backend))")
        #expect(out.output.count == size)
        #expect(out.output == kind.wireBytes(size))
    }

    @Test("xclip -i → xpb, byte-exact", arguments: Kind.allCases, roundTripSizes)
    func xclipToXpb(kind: Kind, size: Int) throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-t", kind.target, "-quiet"], display: x, input: kind.wireBytes(size))
        defer { owner.stop() }
        let board = Pasteboard.general(of: backend)
        let (type, bytes) = kind.modelBytes(size)
        #expect(eventually(timeout: 20) { board.contains(pasteboardTypes: [type]) })
        let read = try board.data(forPasteboardType: type)
        #expect(read?.count == bytes.count)
        #expect(read == bytes)
    }

    @Test("xpb → xsel -o, byte-exact text", arguments: roundTripSizes)
    func xpbToXsel(size: Int) throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let text = utf8Text(size)
        try Pasteboard.general(of: backend).setData(text, forPasteboardType: .utf8PlainText)
        let out = try run("xsel", ["-o", "-b"], display: x, timeout: 120)
        #expect(out.status == 0, "\(out.error); \(ownerSends(backend))")
        #expect(out.output == text)
    }

    @Test("xsel -i → xpb, byte-exact text", arguments: roundTripSizes)
    func xselToXpb(size: Int) throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let text = utf8Text(size)
        let owner = try Peer("xsel", ["-i", "-b", "--nodetach"], display: x, input: text)
        defer { owner.stop() }
        let board = Pasteboard.general(of: backend)
        if size == 0 {
            // xsel takes no selection for empty input.
            Thread.sleep(forTimeInterval: 0.3)
            #expect(board.string == nil || board.string == "")
            return
        }
        #expect(eventually(timeout: 20) { board.hasStrings })
        #expect(try board.data(forPasteboardType: .utf8PlainText) == text)
    }
}

/// For a failed read's message: the owner's INCR sends still open, where each stands (none: the
/// owner ended its send, whole or given up, and the reader waited for nothing).
func ownerSends(_ backend: X11PasteboardBackend) -> String {
    let sends = try? backend.connection.sync(timeout: 10) { session, done in done(.success(session.owner.sends.describe())) }
    guard let sends else { return "the owner's sends could not be asked for" }
    return sends.isEmpty ? "the owner has no send open" : "the owner's sends: " + sends.joined(separator: "; ")
}
