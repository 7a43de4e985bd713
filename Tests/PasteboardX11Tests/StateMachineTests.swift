import Foundation
import PasteboardKit
@testable import PasteboardSelections
import Synchronization
import Testing
@testable import PasteboardX11

/// The selection protocol's pure pieces, without an X server.
@Suite("Protocol state machines")
struct StateMachineTests {
    @Test("an outgoing INCR transfer hands out every byte in chunks, then one empty chunk, then nothing",
          arguments: [(0, 4), (1, 4), (4, 4), (9, 4), (12, 4)])
    func outgoing(size: Int, chunk: Int) throws {
        let data = Data((0..<size).map { UInt8($0 & 0xff) })
        var transfer = OutgoingTransfer(source: .data(data), chunkSize: chunk)
        var ranges: [Range<Int>] = []
        while let range = transfer.nextRange() { ranges.append(range) }
        #expect(transfer.isFinished)
        #expect(ranges.last?.isEmpty == true)
        #expect(ranges.dropLast().allSatisfy { !$0.isEmpty && $0.count <= chunk })
        #expect(ranges.dropLast().reduce(0) { $0 + $1.count } == size)
        #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
        #expect(ranges.count == (size + chunk - 1) / chunk + 1)
    }

    @Test("an incoming INCR transfer refuses to grow past its limit and ends on the empty chunk")
    func incoming() throws {
        var transfer = IncomingTransfer(announcedSize: 8, limit: 8)
        let first: [UInt8] = [1, 2, 3, 4]
        #expect(try first.withUnsafeBytes { try !transfer.append(bytes: $0) })
        let four: [UInt8] = [5, 6, 7, 8]
        #expect(try four.withUnsafeBytes { try !transfer.append(bytes: $0) })
        // Exactly the limit is fine; one byte more fails the read.
        let one: [UInt8] = [9]
        #expect(throws: PasteboardError.self) { try one.withUnsafeBytes { try transfer.append(bytes: $0) } }
        #expect(try transfer.append(bytes: UnsafeRawBufferPointer(start: nil, count: 0)))
        #expect(transfer.isComplete)
        #expect(transfer.data == Data([1, 2, 3, 4, 5, 6, 7, 8]))
    }

    @Test("an announced INCR size is a hint: a huge or negative claim allocates nothing up front")
    func incomingHint() throws {
        for claim in [Int.max, Int(Int32.max), -1, 0] {
            var transfer = IncomingTransfer(announcedSize: claim, limit: 4 << 30)
            #expect(try transfer.append(bytes: UnsafeRawBufferPointer(start: nil, count: 0)))
            #expect(transfer.data.isEmpty)
        }
        #expect(IncomingTransfer.reserveCap <= 64 << 20)
    }

    @Test("server timestamps are ordered across the 32-bit wrap (about every 49.7 days)")
    func timestampWrap() {
        let beforeWrap = X11Timestamp(rawValue: 0xFFFF_FFF0)
        let afterWrap = X11Timestamp(rawValue: 0x10)
        #expect(beforeWrap.isBefore(afterWrap))
        #expect(!afterWrap.isBefore(beforeWrap))
        #expect(!afterWrap.isBefore(afterWrap))
        #expect(X11Timestamp(rawValue: 1000).isBefore(X11Timestamp(rawValue: 2000)))
        // Only the low 32 bits count: Xlib hands times over as 64-bit longs.
        #expect(!X11Timestamp(rawValue: 0x1_0000_0010).isBefore(afterWrap))
        // Half the clock apart is the horizon: a time 2^31 - 1 ahead is still after.
        #expect(X11Timestamp(rawValue: 0).isBefore(X11Timestamp(rawValue: 0x7FFF_FFFF)))
        #expect(X11Timestamp.currentTime.isCurrentTime)
    }

    @Test("the manifest round-trips items, options and the fast-path name")
    func manifestRoundTrip() throws {
        var text = PasteboardItem()
        text.setData(Data("a".utf8), for: .utf8PlainText)
        text.setData(Data("<b>a</b>".utf8), for: .html)
        var image = PasteboardItem()
        image.setData(Data([0x89]), for: .png)
        let expiry = Date(timeIntervalSince1970: 1_900_000_000.5)
        var manifest = Manifest(items: [text, image], options: PasteboardOptions(localOnly: true, expirationDate: expiry))
        manifest.fastPath = "xpb-1-abc"
        let decoded = try #require(Manifest(decoding: manifest.encoded()))
        #expect(decoded == manifest)
        #expect(decoded.itemTypes == [[.utf8PlainText, .html], [.png]])
        #expect(decoded.entries.map(\.target) == ["XPB_ITEM_0_0", "XPB_ITEM_0_1", "XPB_ITEM_1_0"])
        #expect(decoded.options.isLocalOnly && decoded.options.expirationDate == expiry)
    }

    @Test("a malformed manifest is refused as a whole (the reader falls back to TARGETS)", arguments: [
        "", "not a manifest", "xpb-manifest\t2\titems=1\n0\tpublic.html\tT\n", "xpb-manifest\t1\n",
        "xpb-manifest\t1\titems=1\n1\tpublic.html\tT\n", "xpb-manifest\t1\titems=1\n-1\tpublic.html\tT\n",
        "xpb-manifest\t1\titems=2000000\n", "xpb-manifest\t1\titems=x\n", "xpb-manifest\t1\titems=1\n0\tpublic.html\n",
        "xpb-manifest\t1\titems=1\n0\t\tT\n", "xpb-manifest\t1\titems=1\n0\tpublic.html\t\n",
        "xpb-manifest\t1\titems=1\n0\tpublic.html\tT\textra\n", "xpb-manifest\t1\titems=1\n0\tpublic.html\tT\u{7F}\n",
        "xpb-manifest\t1\titems=1\r\n0\tpublic.html\tT\n", "xpb-manifest\t1\titems=1\n0\tpublic.html\tT\r\n",
        "xpb-manifest\t1\titems=1\n0\ta\u{85}b\tT\n", "xpb-manifest\t1\titems=\n", "xpb-manifest\t1\t=1\n",
    ])
    func malformedManifest(text: String) {
        #expect(Manifest(decoding: Data(text.utf8)) == nil)
    }

    @Test("a kept manifest names only targets served with it: items emptied leave, the order stays, nothing left is no manifest")
    func restrictedManifest() throws {
        let manifest = Manifest(itemCount: 3, entries: [
            .init(item: 0, type: .utf8PlainText, target: "XPB_ITEM_0_0"), .init(item: 0, type: .html, target: "XPB_ITEM_0_1"),
            .init(item: 1, type: .png, target: "XPB_ITEM_1_0"), .init(item: 2, type: .rtf, target: "XPB_ITEM_2_0"),
        ], options: PasteboardOptions(localOnly: true))
        #expect(manifest.restricted(to: Set(manifest.entries.map(\.target))) == manifest)
        let cut = try #require(manifest.restricted(to: ["XPB_ITEM_0_1", "XPB_ITEM_2_0", "UTF8_STRING"]))
        #expect(cut.itemTypes == [[.html], [.rtf]])
        #expect(cut.entries.map(\.target) == ["XPB_ITEM_0_1", "XPB_ITEM_2_0"])
        #expect(cut.options.isLocalOnly)
        #expect(manifest.restricted(to: ["UTF8_STRING"]) == nil)

        // Served captured contents: the manifest cut to the targets kept with it, or left out.
        let text = CapturedTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: Data("hi".utf8))
        let item = CapturedTarget(target: "XPB_ITEM_1_0", type: "image/png", data: Data([1, 2]))
        let kept = CapturedTarget(target: "XPB_MANIFEST", type: "UTF8_STRING", data: manifest.encoded())
        #expect(CapturedPlan.withServableManifest([text, kept]) == [text])
        let served = CapturedPlan.withServableManifest([text, kept, item])
        #expect(served.map(\.target) == ["UTF8_STRING", "XPB_MANIFEST", "XPB_ITEM_1_0"])
        #expect(Manifest(decoding: served[1].data)?.itemTypes == [[.png]])
        let malformed = CapturedTarget(target: "XPB_MANIFEST", type: "UTF8_STRING", data: Data("nonsense".utf8))
        #expect(CapturedPlan.withServableManifest([malformed, text]) == [text])
    }

    @Test("kept contents held without a display serve what the X owner of them serves: the kept targets, and the text targets made from the kept UTF-8")
    func keptSelectionServesLikeTheOwner() throws {
        let text = CapturedTarget(target: "UTF8_STRING", type: "UTF8_STRING", data: Data("héllo".utf8))
        let html = CapturedTarget(target: "text/html", type: "text/html", data: Data("<b>héllo</b>".utf8))
        let advertised = ["TARGETS", "TIMESTAMP", "text/html", "UTF8_STRING", "STRING", "TEXT", "COMPOUND_TEXT", "application/x-not-kept"]
        let kept = KeptSelection(advertised: advertised, targets: [text, html])
        // The owner's order, only what is served: no protocol target, nothing that was not kept.
        #expect(kept.targets == ["text/html", "UTF8_STRING", "STRING", "TEXT", "COMPOUND_TEXT"])
        #expect(try kept.bytes(for: "UTF8_STRING")?.data == text.data)
        #expect(kept.size(of: "UTF8_STRING") == text.data.count)
        // Made on request, as on X: Latin-1 STRING, TEXT answered as UTF8_STRING.
        let latin1 = try #require(try kept.bytes(for: "STRING"))
        #expect(latin1.type == "STRING" && latin1.data == Data([0x68, 0xE9, 0x6C, 0x6C, 0x6F]))
        #expect(kept.size(of: "STRING") == nil, "a conversion's size is not known before it is made")
        let asText = try #require(try kept.bytes(for: "TEXT"))
        #expect(asText.type == "UTF8_STRING" && asText.data == text.data)
        #expect(try kept.bytes(for: "application/x-not-kept") == nil)
        #expect(try kept.bytes(for: "TARGETS") == nil)
    }

    @Test("a manifest's fields: empty lines and fields skipped, unknown fields ignored, a '=' in a value kept, '-' and odd expiries none")
    func manifestFields() throws {
        let text = "\n\nxpb-manifest\t\t1\titems=2\tlocal-only=1\tfuture=a=b\texpires=-\tfast-path2=xpb-1-x=y\n\n1\ttext/x-é\tXPB_ITEM_1_0\n0\tpublic.png\tPNG\n"
        let manifest = try #require(Manifest(decoding: Data(text.utf8)))
        #expect(manifest.itemTypes == [[.png], [try PasteboardType("text/x-é")]])
        #expect(manifest.options.isLocalOnly && manifest.options.expirationDate == nil)
        #expect(manifest.fastPath == "xpb-1-x=y")
        for expires in ["inf", "nan", "x", ""] {
            let odd = try #require(Manifest(decoding: Data("xpb-manifest\t1\titems=0\texpires=\(expires)\n".utf8)))
            #expect(odd.options.expirationDate == nil && odd.entries.isEmpty)
        }
    }

    @Test("a manifest that is not UTF-8 is refused")
    func manifestNotUTF8() {
        #expect(Manifest(decoding: Data([0x78, 0xff, 0xfe])) == nil)
    }

    @Test("one send serves memory and a stream through the same steps: ranges or chunks, waits, the empty end, an abort on failure")
    func outgoingSend() {
        let data = Data((0..<10).map { UInt8($0) })
        var memory = OutgoingSend(type: .none, supply: .source(OutgoingTransfer(source: .data(data), chunkSize: 4)))
        var ranges: [Range<Int>] = []
        while case let .write(_, range) = memory.next(chunkSize: 4) { ranges.append(range) }
        #expect(ranges == [0..<4, 4..<8, 8..<10])
        let afterEnd = memory.next(chunkSize: 4)
        guard case .finish = afterEnd else { Issue.record("a finished send ends again, not \(afterEnd)"); return }

        let stream = ByteStream()
        var streamed = OutgoingSend(type: .none, supply: .stream(stream))
        let waiting = streamed.next(chunkSize: 4)
        guard case let .wait(_, version) = waiting else { Issue.record("an empty stream waits, not \(waiting)"); return }
        stream.begin(type: "UTF8_STRING", size: 6)
        stream.append(Data("abcdef".utf8))
        #expect(stream.snapshot().version > version)
        var chunks: [String] = []
        while case let .writeChunk(chunk) = streamed.next(chunkSize: 4) { chunks.append(String(decoding: chunk, as: UTF8.self)) }
        #expect(chunks == ["abcd", "ef"])
        stream.finish()
        let end = streamed.next(chunkSize: 4)
        guard case .finish = end else { Issue.record("an ended stream finishes, not \(end)"); return }

        let failing = ByteStream()
        var failed = OutgoingSend(type: .none, supply: .stream(failing))
        failing.append(Data("part".utf8))
        failing.fail("the peer went away")
        let abort = failed.next(chunkSize: 4)
        guard case .abort = abort else { Issue.record("a failed stream aborts without the empty chunk, not \(abort)"); return }
    }

    @Test("a gated sink holds the first reply and asks for no more until its reader takes it; a cancelled one keeps nothing")
    func gatedSink() throws {
        let sink = StreamSink(gated: true)
        sink.push(Data("first".utf8))
        #expect(!sink.wantsMore)
        let resumed = Mutex(0)
        sink.onDrained { resumed.withLock { $0 += 1 } }
        #expect(resumed.withLock { $0 } == 0)
        sink.openGate()
        #expect(resumed.withLock { $0 } == 1 && sink.wantsMore)
        #expect(try sink.next() == Data("first".utf8))
        sink.finish(.success(()))
        #expect(try sink.next() == nil)

        let dropped = StreamSink(gated: true)
        dropped.cancel()
        dropped.push(Data("late".utf8))
        #expect(!dropped.wantsMore)
        dropped.finish(.success(()))
        #expect(try dropped.next() == nil)
    }

    @Test("timers fire in deadline order on the injected clock; a cancelled one never fires")
    func timers() {
        var queue = TimerQueue<String>()
        #expect(queue.millisecondsUntilNext(now: 0) == -1)
        let late = queue.schedule(after: 2, now: 0, "late")
        _ = queue.schedule(after: 0.5, now: 0, "early")
        let cancelled = queue.schedule(after: 1, now: 0, "cancelled")
        #expect(queue.millisecondsUntilNext(now: 0) == 500)
        #expect(queue.millisecondsUntilNext(now: 499_999_999) == 1)
        queue.cancel(cancelled)
        #expect(queue.due(now: 400_000_000).isEmpty)
        let due = queue.due(now: 3_000_000_000)
        #expect(due.count == 2 && due.last == late)
        #expect(due.compactMap { queue.take($0) } == ["early", "late"])
        #expect(queue.isEmpty)
        // An earlier action may cancel a later due one: taking it then gives nothing.
        let first = queue.schedule(after: 0, now: 0, "first")
        let second = queue.schedule(after: 0, now: 0, "second")
        #expect(queue.due(now: 1) == [first, second])
        queue.cancel(second)
        #expect(queue.take(first) == "first" && queue.take(second) == nil)
        // Absurd delays are clamped, never a trap; waits are capped at a minute.
        _ = queue.schedule(after: .infinity, now: 0, "never")
        _ = queue.schedule(after: 1e300, now: 0, "far")
        _ = queue.schedule(after: -5, now: 10, "now")
        #expect(queue.due(now: 10).compactMap { queue.take($0) } == ["now"])
        #expect(queue.millisecondsUntilNext(now: 10) == 60_000)
    }

    @Test("the well-known table lists every protocol target once")
    func wellKnown() {
        #expect(Set(WellKnown.allCases.map(\.rawValue)).count == WellKnown.allCases.count)
        #expect(WellKnown.protocolTargetNames.isSuperset(of: ["TARGETS", "MULTIPLE", "TIMESTAMP", "SAVE_TARGETS", "INCR", "XPB_MANIFEST"]))
        #expect(WellKnown.ownerTargets.first == .targets)
        #expect(Manifest.target == "XPB_MANIFEST")
    }

    @Test("the names every connection interns with the well-known ones are the registry's text targets, the first item target and the credit properties")
    func prefetchedNames() {
        #expect(X11Wire.prefetchedNames == X11Wire.derivedPrefetchedNames())
        #expect(Set(X11Wire.prefetchedNames).isDisjoint(with: WellKnown.allCases.map(\.rawValue)))
    }
}

@Suite("Protocol target names")
struct ProtocolTargetNameTests {
    @Test("the display-free table of protocol targets is the X side's atoms, NULL with them")
    func sameNames() {
        #expect(SelectionNames.protocolTargetNames == Set(WellKnown.protocolTargets.map(\.rawValue) + [WellKnown.null.rawValue]))
        #expect(Manifest.target == WellKnown.manifest.rawValue)
    }
}

@Suite("File lists in both file managers' flavours")
struct FileListFlavourTests {
    func target(_ name: String, _ text: String) -> CapturedTarget { CapturedTarget(target: name, type: name, data: Data(text.utf8)) }
    func names(_ targets: [CapturedTarget]) -> [String] { targets.map(\.target) }
    func text(_ targets: [CapturedTarget], _ name: String) -> String? {
        targets.first { $0.target == name }.map { String(decoding: $0.data, as: UTF8.self) }
    }

    @Test("GNOME's cut list gains a uri-list and KDE's mark; a copy list gains no mark")
    func fromGNOME() {
        let cut = FileListFlavours.completed([target("x-special/gnome-copied-files", "cut\nfile:///a\nfile:///b")])
        #expect(names(cut) == ["x-special/gnome-copied-files", "text/uri-list", "application/x-kde-cutselection"])
        #expect(text(cut, "text/uri-list") == "file:///a\r\nfile:///b\r\n" && text(cut, "application/x-kde-cutselection") == "1")
        let copy = FileListFlavours.completed([target("x-special/gnome-copied-files", "copy\nfile:///a"), target("text/uri-list", "file:///a\r\n")])
        #expect(names(copy) == ["x-special/gnome-copied-files", "text/uri-list"])
    }

    @Test("KDE's uri-list and mark gain GNOME's list saying cut; web URLs and other contents gain nothing")
    func fromKDE() {
        let cut = FileListFlavours.completed([target("text/uri-list", "file:///a%20b\r\n"), target("application/x-kde-cutselection", "1")])
        #expect(text(cut, "x-special/gnome-copied-files") == "cut\nfile:///a%20b")
        let copy = FileListFlavours.completed([target("text/uri-list", "file:///a\r\n")])
        #expect(text(copy, "x-special/gnome-copied-files") == "copy\nfile:///a")
        #expect(names(FileListFlavours.completed([target("text/uri-list", "https://example.org\r\n")])) == ["text/uri-list"])
        #expect(names(FileListFlavours.completed([target("UTF8_STRING", "hi")])) == ["UTF8_STRING"])
    }

    @Test("Compound Text from UTF-8: Latin-1 as its bytes, other characters and C1 controls in UTF-8 segments, bad bytes as ?")
    func compoundText() {
        func encode(_ bytes: [UInt8]) -> [UInt8] { Array(CompoundText.encode(utf8: Data(bytes))) }
        func encode(_ text: String) -> [UInt8] { encode(Array(text.utf8)) }
        let start: [UInt8] = [0x1B, 0x25, 0x47], end: [UInt8] = [0x1B, 0x25, 0x40]
        #expect(encode("plain\ttext\n") == Array("plain\ttext\n".utf8))
        #expect(encode("Grüße, ÿ é") == [0x47, 0x72, 0xFC, 0xDF, 0x65, 0x2C, 0x20, 0xFF, 0x20, 0xE9])
        #expect(encode("a€b") == [0x61] + start + [0xE2, 0x82, 0xAC] + end + [0x62])
        // One segment for a run, closed at the end of the text; an emoji is four bytes in it.
        #expect(encode("日本😀") == start + Array("日本😀".utf8) + end)
        // U+0085 (a C1 control) would be 0x85 in GR, which Compound Text reserves.
        #expect(encode("x\u{85}") == [0x78] + start + [0xC2, 0x85] + end)
        // Invalid: a lone continuation byte, a truncated sequence, an overlong form, a surrogate.
        #expect(encode([0x80, 0x41]) == [0x3F, 0x41])
        #expect(encode([0xE2, 0x82]) == [0x3F, 0x3F])
        #expect(encode([0xC0, 0xAF]) == [0x3F, 0x3F])
        #expect(encode([0xED, 0xA0, 0x80]) == [0x3F, 0x3F, 0x3F])
        #expect(encode([0xE2, 0x82, 0xAC, 0xFF]) == start + [0xE2, 0x82, 0xAC] + end + [0x3F])
    }
}
