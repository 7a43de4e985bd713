import Foundation
import Logging
import PasteboardKit
import PasteboardSelections
import PasteboardWire
import Synchronization
import Testing
@testable import PasteboardDaemon

/// Two hubs of one process linked as a bridge links its ports (``SyncLinkSpec/Endpoint/inProcess(_:)``),
/// each over a headless clipboard the test writes to, as its port would.
@Suite("Sync: two hubs of one process, linked through a socket pair")
struct InProcessLinkTests {
    final class Node: Sendable {
        let clipboard = HeadlessClipboard()
        let hub: SyncHub
        let name: String

        /// A node whose hub answers in-process links asked for by `name`, started.
        static func serving(_ name: String) -> Node {
            let node = Node(name, links: [])
            node.hub.serveInProcess(as: name)
            node.hub.start()
            return node
        }

        /// A node whose hub dials the one serving `name`, started.
        static func dialing(_ name: String) -> Node {
            let node = Node("dialing", links: [SyncLinkSpec(endpoint: .inProcess(name))])
            node.hub.start()
            return node
        }

        /// The state of its one dialed link.
        var linkState: String? { hub.peerStatuses().first?.state }

        func stop() {
            hub.stopServingInProcess(name)
            hub.stop()
        }

        init(_ name: String, links: [SyncLinkSpec]) {
            self.name = name
            var configuration = SyncConfiguration()
            configuration.links = links
            configuration.syncsPrimary = true
            var logger = Logger(label: "link-\(name)")
            logger.logLevel = .critical
            hub = SyncHub(configuration: configuration, surface: clipboard, displayName: name, logger: logger)
            clipboard.onChange { [weak hub] name, owner, event in hub?.ownerChanged(name, owner: owner, event: event) }
        }

        func copy(_ text: String, on selection: String = "CLIPBOARD") {
            let data = Data(text.utf8)
            let held = KeptSelection(advertised: ["UTF8_STRING"], targets: [CapturedTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: data)])
            clipboard.write(selection, contents: held, size: data.count, origin: "test", expires: nil, isLocalOnly: false, writer: nil)
        }

        /// The text this node holds of `selection` now: its own copy's, or another node's fetched
        /// over the link (nil: nothing, or the fetch failed).
        func text(of selection: String = "CLIPBOARD") -> String? {
            guard let entry = clipboard.entry(selection).0 else { return nil }
            switch entry.contents {
            case let .local(held):
                guard let (_, data) = try? (held as? KeptSelection)?.bytes(for: "UTF8_STRING") else { return nil }
                return String(decoding: data, as: UTF8.self)
            case let .remote(targets):
                guard let stream = targets.first(where: { $0.target == "UTF8_STRING" })?.open() else { return nil }
                defer { stream.cancel() }
                var bytes = Data()
                let deadline = Date().addingTimeInterval(10)
                while Date() < deadline {
                    while let chunk = stream.take(upTo: 1 << 16) { bytes.append(chunk) }
                    let now = stream.snapshot()
                    if now.failure != nil { return nil }
                    if now.isEnded, now.buffered == 0 { return String(decoding: bytes, as: UTF8.self) }
                    let changed = DispatchSemaphore(value: 0)
                    stream.observe(after: now.version) { changed.signal() }
                    _ = changed.wait(timeout: .now() + 1)
                }
                return nil
            }
        }
    }

    /// Waits (up to 10 s) for `condition`, looking again at each change it may wait on.
    private static func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if condition() { return true }
            usleep(5_000)
        }
        return condition()
    }

    @Test("a copy on either node reaches the other, CLIPBOARD and PRIMARY, its bytes fetched over the pair; the dialing side's status names the link")
    func carries() throws {
        let name = "in-process-\(UUID().uuidString.prefix(8))"
        let served = Node.serving(name)
        let dialing = Node.dialing(name)
        defer {
            dialing.stop()
            served.stop()
        }
        #expect(Self.eventually { dialing.linkState == "connected" }, "\(dialing.hub.peerStatuses())")
        #expect(dialing.hub.peerStatuses().first?.name == "display \(name)")

        dialing.copy("made on the dialing node")
        #expect(Self.eventually { served.clipboard.entry("CLIPBOARD").1 > 0 && served.clipboard.currentOwner(of: .general) == served.clipboard.ourOwner })
        #expect(served.text() == "made on the dialing node")
        served.copy("made on the served node", on: "PRIMARY")
        #expect(Self.eventually { dialing.clipboard.currentOwner(of: .find) == dialing.clipboard.ourOwner })
        #expect(dialing.text(of: "PRIMARY") == "made on the served node")
        served.copy("and back")
        #expect(Self.eventually { dialing.text() == "and back" })
    }

    @Test("the link lost (the served hub stopped), the dialer redials the hub that serves the name next, and the carry goes on")
    func redials() throws {
        let name = "in-process-\(UUID().uuidString.prefix(8))"
        let first = Node.serving(name)
        let dialing = Node.dialing(name)
        defer { dialing.stop() }
        #expect(Self.eventually { dialing.linkState == "connected" })
        first.stop()
        #expect(Self.eventually { dialing.linkState != "connected" }, "\(dialing.hub.peerStatuses())")
        let second = Node.serving(name)
        defer { second.stop() }
        #expect(Self.eventually { dialing.linkState == "connected" }, "\(dialing.hub.peerStatuses())")
        dialing.copy("after the redial")
        #expect(Self.eventually { second.clipboard.currentOwner(of: .general) == second.clipboard.ourOwner })
        #expect(second.text() == "after the redial")
    }

    @Test("a link to a name no hub of this process serves is refused with that reason, and retried")
    func nobodyServes() throws {
        let dialing = Node.dialing("nobody-\(UUID().uuidString.prefix(8))")
        defer { dialing.stop() }
        #expect(Self.eventually { dialing.hub.peerStatuses().first?.lastError?.contains("no port of this xpbd serves display nobody-") == true },
                "\(dialing.hub.peerStatuses())")
        #expect(dialing.linkState == "retrying")
    }
}
