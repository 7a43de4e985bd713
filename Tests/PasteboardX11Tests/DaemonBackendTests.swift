import Foundation
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Testing
import X11TestSupport

/// The library's backend on a host without a display, against a real `xpbd --headless`.
@Suite("the headless daemon's backend")
struct DaemonBackendTests {
    @Test("a read that breaks off (over its limit) leaves the next one whole: the connection is made again; changes arrive in order")
    func brokenOffRead() async throws {
        let x = try Xvfb()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-daemon-backend-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let runtime = root.appendingPathComponent("runtime").path
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let environment = ["DISPLAY": "", "XDG_RUNTIME_DIR": runtime, "XDG_STATE_HOME": root.path + "/state", "XDG_CACHE_HOME": root.path + "/cache",
                           "XDG_CONFIG_HOME": root.path + "/config"]
        let daemon = try Peer(try builtProduct("xpbd"), ["--headless", "--idle-exit", "0"], display: x, environment: environment)
        defer { daemon.stop() }
        #expect(eventually(timeout: 10) { daemon.errorSoFar.contains("listening on") }, "\(daemon.errorSoFar)")
        let socket = ControlEndpoint.headlessSocketPath(environment: ["XDG_RUNTIME_DIR": runtime], uid: getuid())
        let backend = try DaemonPasteboardBackend(socketPath: socket, credit: CopyCredit(name: "tester", pid: nil))
        defer { backend.close(handOff: false) }
        let changes = Pasteboard.general(of: backend).changes

        let text = Data(String(repeating: "0123456789", count: 100_000).utf8)
        var item = PasteboardItem()
        item.setData(text, for: .utf8PlainText)
        try backend.setItems([item], options: PasteboardOptions(), on: .general)
        // Over its limit (refused before any byte), and a sink that fails at its first chunk
        // (the rest of the answer is never read on that connection).
        struct SinkFailed: Error {}
        #expect(throws: (any Error).self) {
            _ = try backend.stream(of: .general, target: "UTF8_STRING", limit: 1000) { _ in }
        }
        #expect(throws: SinkFailed.self) {
            _ = try backend.stream(of: .general, target: "UTF8_STRING", limit: nil) { _ in throw SinkFailed() }
        }
        #expect(try backend.data(of: .general, item: 0, type: .utf8PlainText) == text)
        #expect(try backend.itemTypes(of: .general) == [[.utf8PlainText]])
        #expect(try backend.contentsOwner(of: .general)?.copiedBy?.name == "tester")

        var second = PasteboardItem()
        second.setData(Data("two".utf8), for: .utf8PlainText)
        try backend.setItems([second], options: PasteboardOptions(), on: .general)
        try backend.clear(.general)
        var seen: [Int] = []
        for await change in changes {
            seen.append(change.changeCount)
            if seen.count == 3 { break }
        }
        #expect(seen == [1, 2, 3], "\(seen)")
        // (The sync hub answers a clear with a compare-and-clear of its own, counted too.)
        #expect(backend.changeCount(of: .general) >= 3, "\(daemon.errorSoFar)")
    }
}
