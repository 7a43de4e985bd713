import Foundation
import PasteboardKit
@testable import PasteboardSelections
@testable import PasteboardX11
import Synchronization
import Testing
import X11TestSupport

@Suite("Parsers of untrusted bytes")
struct UntrustedInputTests {
    @Test("the fuzzer's find: a manifest target ending in CR is refused, not misparsed")
    func manifestCarriageReturn() throws {
        // "items=2", entry "0000 p \r": the CR and the line break after it were one Character.
        let found = Data("xpb-manifest\t1\titems=2\tc\n0000\tp\t\r".utf8)
        #expect(Manifest(decoding: found) == nil)
        UntrustedInput.exercise(found)
        let good = Data("xpb-manifest\t1\titems=1\tlocal-only=0\texpires=-\n0\tpublic.utf8-plain-text\tXPB_ITEM_0_0\r\n".utf8)
        #expect(Manifest(decoding: good) == nil)
        let manifest = try #require(Manifest(decoding: Data("xpb-manifest\t1\titems=1\tlocal-only=0\texpires=inf\n0\tpublic.utf8-plain-text\tXPB_ITEM_0_0\n".utf8)))
        #expect(manifest.options.expirationDate == nil)
    }

    @Test("MULTIPLE lists: odd, empty and over-long lists are refused")
    func multiplePairs() {
        let atoms = (1...8).map { X11Atom(rawValue: UInt($0)) }
        #expect(MultiplePairs.parse(atoms, maxPairs: 4)?.count == 4)
        #expect(MultiplePairs.parse(atoms, maxPairs: 3) == nil)
        #expect(MultiplePairs.parse(Array(atoms.prefix(3)), maxPairs: 4) == nil)
        #expect(MultiplePairs.parse([], maxPairs: 4) == nil)
    }

    @Test("INCR: the announced size is a 32-bit value; streamed chunks count against the limit")
    func incr() throws {
        #expect(IncomingTransfer.announcedSize([0xFFFF_FFFF_FFFF]) == 0xFFFF_FFFF)
        #expect(IncomingTransfer.announcedSize([]) == nil)
        var transfer = IncomingTransfer(announcedSize: Int.max, limit: 10)
        #expect(try transfer.count(6) == false)
        #expect(transfer.remaining == 4)
        #expect(throws: PasteboardError.self) { try transfer.count(5) }
        #expect(try transfer.count(0) == true)
    }

    @Test("Latin-1 from UTF-8 in one pass: Latin-1 letters kept, the rest and malformed bytes become ?")
    func latin1() throws {
        #expect(try TargetCodec.latin1.encode(Data("héllo ✓".utf8)) == Data([0x68, 0xE9, 0x6C, 0x6C, 0x6F, 0x20, 0x3F]))
        #expect(try TargetCodec.latin1.encode(Data([0xC3])) == Data([0x3F]))
        #expect(try TargetCodec.latin1.encode(Data([0xE2, 0x41])) == Data([0x3F, 0x41]))
        #expect(try TargetCodec.latin1.encode(Data([0xFF, 0xC0, 0x80])) == Data([0x3F, 0x3F]))
        let text = "ÿ and ĀZ"
        #expect(try TargetCodec.latin1.encode(Data(text.utf8)) == Data([0xFF] + Array(" and ?Z".utf8)))
    }

    @Test("a stream sink hands chunks in order, ends with the transfer's outcome, and reports its backlog")
    func streamSink() throws {
        let sink = StreamSink()
        sink.push(Data("ab".utf8))
        sink.push(Data(count: StreamSink.highWater))
        #expect(!sink.wantsMore)
        let drained = DrainFlag()
        sink.onDrained { drained.set() }
        #expect(try sink.next() == Data("ab".utf8))
        #expect(try sink.next()?.count == StreamSink.highWater)
        #expect(drained.isSet)
        sink.finish(.failure(PasteboardError.backendFailure("gone")))
        #expect(throws: PasteboardError.self) { try sink.next() }
    }
}

private final class DrainFlag: Sendable {
    private let flag = Synchronization.Mutex(false)
    func set() { flag.withLock { $0 = true } }
    var isSet: Bool { flag.withLock { $0 } }
}

@Suite("A library owner attacked through its own window")
struct ForgedRequestorLibraryTests {
    @Test("3. after requests naming its own window and the root, the process still gets timestamps and INCR reads")
    func ownWindowRequestor() throws {
        let x = try Xvfb()
        let backend = try x.backend { $0.readTimeout = 3 }
        defer { backend.close(handOff: false) }
        let board = Pasteboard.general(of: backend)
        try board.setData(payload(3 << 20), forPasteboardType: .blob)
        for mode in ["self-requestor", "root-requestor"] {
            let outcome = try run(try attacker(), [mode, PasteboardType.blob.identifier], display: x)
            #expect(outcome.status == 0, "\(outcome.error)")
        }
        Thread.sleep(forTimeInterval: 0.3)
        // A new write needs a server timestamp (a PropertyNotify on our own window).
        try board.setData(Data("again".utf8), forPasteboardType: .utf8PlainText)
        // An INCR read needs the same event mask: 3 MB from xclip.
        let big = utf8Text(3 << 20)
        let xclip = try Peer("xclip", ["-i", "-selection", "primary", "-loops", "1"], display: x, input: big)
        defer { xclip.stop() }
        #expect(eventually(timeout: 5) { (try? backend.owner(of: .find)) != nil })
        #expect(try Pasteboard.find(of: backend).readString()?.utf8.count == big.count)
    }
}
