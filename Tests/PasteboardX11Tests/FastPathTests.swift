import Foundation
import Glibc
import PasteboardKit
@testable import PasteboardSelections
@testable import PasteboardX11
import Testing

/// Two backends on one display, each with its own connection and X thread: the owner serves the
/// fast path from its thread exactly as it would from another process.
@Suite("Fast path: same host, same user, outside the X server")
struct FastPathTests {
    /// A temporary file holding `data`.
    private func file(_ data: Data) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-fast-\(UUID().uuidString)").path
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    private func manifest(_ backend: X11PasteboardBackend) throws -> Manifest? {
        try backend.rawConvert(target: Manifest.target).flatMap { Manifest(decoding: $0.data) }
    }

    @Test("a file the owner serves reaches the reader byte-exact as a descriptor, not through X")
    func fileRepresentation() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        defer { owner.close(handOff: false) }
        let reader = try x.backend()
        defer { reader.close(handOff: false) }
        let bytes = payload(20 << 20, seed: 11)
        let path = try file(bytes)
        defer { unlink(path) }
        var item = PasteboardItem()
        item.set(.file(try FileContents(path: path)), for: .blob)
        try Pasteboard.general(of: owner).setItems([item])

        #expect(try manifest(reader)?.fastPath?.hasPrefix("xpb-") == true)
        #expect(try Pasteboard.general(of: reader).data(forPasteboardType: .blob) == bytes)
        #expect(reader.fastPathReadCount == 1)
        // As a file: the reader can stream it without reading it into memory.
        guard case let .file(contents)? = try reader.contents(of: .general, item: 0, type: .blob) else {
            Issue.record("the fast path did not hand over a file")
            return
        }
        #expect(contents.size == bytes.count)
        #expect(try contents.read(offset: 0, length: contents.size) == bytes)
        #expect(reader.fastPathReadCount == 2)
    }

    @Test("bytes in memory travel as a sealed memory file; codecs and other clients are unaffected")
    func dataRepresentation() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        defer { owner.close(handOff: false) }
        let reader = try x.backend()
        defer { reader.close(handOff: false) }
        let bytes = payload(5 << 20, seed: 5)
        try Pasteboard.general(of: owner).setItems([[PasteboardType.blob: bytes, .utf8PlainText: "naïve"]])
        let board = Pasteboard.general(of: reader)
        #expect(try board.data(forPasteboardType: .blob) == bytes)
        #expect(board.string == "naïve")
        #expect(reader.fastPathReadCount == 2)
        // xclip knows nothing of it and converts through the X server as always.
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "com.example.blob"], display: x).output == bytes)
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "STRING"], display: x).output == Data([0x6E, 0x61, 0xEF, 0x76, 0x65]))
    }

    @Test("switched off at either end, the same read goes through X (INCR) byte-exact")
    func switchedOff() throws {
        let x = try Xvfb()
        let bytes = payload(3 << 20, seed: 9)
        do {
            let owner = try x.backend()
            defer { owner.close(handOff: false) }
            let reader = try x.backend { $0.fastPath = false }
            defer { reader.close(handOff: false) }
            try Pasteboard.general(of: owner).setData(bytes, forPasteboardType: .blob)
            #expect(try Pasteboard.general(of: reader).data(forPasteboardType: .blob) == bytes)
            #expect(reader.fastPathReadCount == 0)
        }
        let owner = try x.backend { $0.fastPath = false }
        defer { owner.close(handOff: false) }
        let reader = try x.backend()
        defer { reader.close(handOff: false) }
        try Pasteboard.general(of: owner).setData(bytes, forPasteboardType: .blob)
        #expect(try manifest(reader)?.fastPath == nil)
        #expect(try Pasteboard.general(of: reader).data(forPasteboardType: .blob) == bytes)
        #expect(reader.fastPathReadCount == 0)
    }

    @Test("requests the owner cannot answer are refused; it keeps serving")
    func refusals() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        defer { owner.close(handOff: false) }
        let reader = try x.backend()
        defer { reader.close(handOff: false) }
        try Pasteboard.general(of: owner).setData(Data("kept".utf8), forPasteboardType: .utf8PlainText)
        let name = try #require(try manifest(reader)?.fastPath)
        let window = try #require(try reader.owner(of: .general)).window.rawValue
        // A listener that does not name the selection's owner gets no request.
        #expect(try FastPathClient.read(name: name, owner: window + 1, selection: "CLIPBOARD", target: "XPB_ITEM_0_0", timeout: 2, limit: 1 << 20) == nil)
        #expect(try FastPathClient.read(name: name, owner: window, selection: "CLIPBOARD", target: "NO_SUCH_TARGET", timeout: 2, limit: 1 << 20) == nil)
        #expect(try FastPathClient.read(name: name, owner: window, selection: "PRIMARY", target: "XPB_ITEM_0_0", timeout: 2, limit: 1 << 20) == nil)
        #expect(try FastPathClient.read(name: name, owner: window, selection: "CLIPBOARD", target: "XPB_ITEM_0_0", timeout: 2, limit: 3) == nil)
        #expect(try FastPathClient.read(name: "xpb-no-such-listener", owner: window, selection: "CLIPBOARD", target: "XPB_ITEM_0_0", timeout: 2, limit: 1 << 20) == nil)
        #expect(try FastPathClient.read(name: name, owner: window, selection: "CLIPBOARD", target: "XPB_ITEM_0_0", timeout: 2, limit: 1 << 20) == Data("kept".utf8))
    }

    // Needs root to start a process as another user (setpriv, python3: .ci/run installs them).
    @Test("another user's process is disconnected unanswered", .enabled(if: getuid() == 0, "only root can run a client as another user"))
    func otherUser() throws {
        let x = try Xvfb()
        let owner = try x.backend()
        defer { owner.close(handOff: false) }
        try Pasteboard.general(of: owner).setData(Data("secret".utf8), forPasteboardType: .utf8PlainText)
        // Read by another connection: a request naming the owner's own window is refused.
        let reader = try x.backend()
        defer { reader.close(handOff: false) }
        let name = try #require(try reader.rawConvert(target: Manifest.target).flatMap { Manifest(decoding: $0.data) }?.fastPath)
        let window = try #require(try reader.owner(of: .general)).window.rawValue
        // Connects as uid 65534 and prints what it received and whether a descriptor came along.
        let client = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect("\\0" + sys.argv[1])
            try:
                s.sendall(b"XPB1\\tCLIPBOARD\\tXPB_ITEM_0_0\\n")
                message, fds, flags, address = socket.recv_fds(s, 4096, 1)
            except (BrokenPipeError, ConnectionResetError):
                message, fds = b"", []
            print(repr(message), len(fds))
            """
        let outcome = try run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", client, name], display: x)
        #expect(outcome.status == 0, "\(outcome.error)")
        #expect(outcome.text == "b'' 0\n")
        // The same request from this user is answered.
        #expect(try FastPathClient.read(name: name, owner: window, selection: "CLIPBOARD", target: "XPB_ITEM_0_0", timeout: 2, limit: 1 << 20) == Data("secret".utf8))
    }
}
