import Foundation
import Testing
@testable import PasteboardKit
@testable import PasteboardX11

@Suite("X11 smoke")
struct SmokeTests {
    @Test("write with xpb, read with xclip; write with xclip, read with xpb")
    func roundTrip() throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let board = Pasteboard.general(of: backend)
        board.string = "héllo"
        let out = try run("xclip", ["-o", "-selection", "clipboard"], display: x)
        #expect(out.text == "héllo")
        let peer = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("from xclip".utf8))
        defer { peer.stop() }
        #expect(eventually { board.string == "from xclip" })
    }
}
