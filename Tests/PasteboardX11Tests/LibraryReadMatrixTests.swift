import Foundation
import Testing
@testable import PasteboardKit
@testable import PasteboardX11

#if canImport(Glibc)
import Glibc
#endif

// The library's readers (Pasteboard.general's data, and the stream) against owners that send
// by INCR as real users run them: xclip in the background (not -quiet), xsel, and the seeded
// hostile owner, at the sizes where INCR changes shape. The typed reads of the round-trip tests
// only ever saw xclip in the foreground; xpb paste lost a chunk of an xclip copy that they did
// not see.

@Suite("the library reads every INCR owner whole")
struct LibraryReadMatrixTests {
    @Test("Pasteboard.general's data and the stream get every size whole", arguments: IncrOwner.allCases)
    func libraryReaders(owner: IncrOwner) throws {
        let x = try Xvfb()
        let backend = try x.backend()
        defer { backend.close(handOff: false) }
        let board = Pasteboard.general(of: backend)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-library-matrix-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let sizes = [1] + chunkBoundaries(owner.chunk) + [3_000_000]
        for (index, size) in sizes.enumerated() {
            let expected = utf8Text(size)
            let file = directory.appendingPathComponent("\(owner)-\(size)").path
            try expected.write(to: URL(fileURLWithPath: file))
            let before = board.changeCount
            let peer = try owner.start(file, on: x, seed: 20_000 + UInt64(index) * 100)
            defer { peer?.stop() }
            // The new owner's XFixes event has reached this backend (xclip and xsel take the
            // selection in their forked child, after the command returned).
            #expect(eventually(timeout: 10) { board.changeCount != before && ((try? backend.targets(of: .general)) ?? []).contains("UTF8_STRING") },
                    "\(owner) did not take CLIPBOARD")
            for round in 1...2 {
                let data = try board.data(forPasteboardType: .utf8PlainText) ?? Data()
                #expect(sha256Hex(data) == sha256Hex(expected), "\(owner), \(size) bytes, data, round \(round): \(data.count) bytes")
                var streamed = Data()
                let found = try backend.stream(of: .general, item: 0, type: .utf8PlainText, file: { streamed.append(try $0.read(offset: 0, length: $0.size)) },
                                               bytes: { streamed.append($0) })
                #expect(found && sha256Hex(streamed) == sha256Hex(expected),
                        "\(owner), \(size) bytes, stream, round \(round): \(streamed.count) bytes")
            }
        }
    }

    @Test("an INCR whose bytes fall short of the owner's announcement is read whole and reported")
    func sizeMismatchIsReported() throws {
        let x = try Xvfb()
        let warnings = Collector()
        let backend = try x.backend { $0.warning = { warnings.append(Data(($0 + "\n").utf8)) } }
        defer { backend.close(handOff: false) }
        // owner-incr-claim announces 5,000,000 bytes, then sends "hi" and ends.
        let owner = try Peer(try attacker(), ["owner-incr-claim", "5000000"], display: x)
        defer { owner.stop() }
        try owner.waitForOutput("ready")
        let data = try Pasteboard.general(of: backend).data(forPasteboardType: .utf8PlainText)
        #expect(data == Data("hi".utf8))
        let said = String(decoding: warnings.data, as: UTF8.self)
        #expect(said.contains("the selection owner sent 2 bytes, fewer bytes than it announced: some may be lost (5000000)"), "\(said)")
    }
}

@Suite("requestor windows")
struct RequestorWindowTests {
    @Test("a window of a single reply goes at once; one of an INCR transfer, or of a failure, rests; the oldest rest goes past the cap")
    func lifecycle() {
        var windows = RequestorWindows()
        let single = X11Window(rawValue: 1), incr = X11Window(rawValue: 2), failed = X11Window(rawValue: 3)
        for window in [single, incr, failed] { windows.add(window) }
        windows.noteIncremental(incr, selection: X11Atom(rawValue: 9))
        #expect(windows.contains(single) && windows.contains(incr))
        #expect(windows.end(single, clean: true, now: 0) == [single])
        #expect(windows.end(incr, clean: true, now: 1_000) == [])
        #expect(windows.end(failed, clean: false, now: 2_000) == [])
        #expect(windows.resting == [incr, failed])
        // Only the window given up unanswered takes a late answer off (an INCR window's owner
        // may still confirm its transfer there, as xsel does).
        #expect(windows.awaitsLateReply(failed) && !windows.awaitsLateReply(incr) && !windows.awaitsLateReply(single))
        // A closing reader waits for the owner of the INCR transfer, until its confirmation comes;
        // it asks that owner (the selection is known) rather than wait out the clock.
        #expect(windows.unconfirmedSelection == X11Atom(rawValue: 9))
        #expect(windows.settleDelay(now: 1_000) == RequestorWindows.settleNanoseconds)
        #expect(windows.settleDelay(now: 1_000 + RequestorWindows.settleNanoseconds) == 0)
        windows.noteSettled(incr)
        #expect(windows.settleDelay(now: 1_000) == 0 && windows.unconfirmedSelection == nil)
        // A probe ends the clock's part too: the probe's answer is waited for instead.
        let again = X11Window(rawValue: 4)
        windows.add(again)
        windows.noteIncremental(again, selection: X11Atom(rawValue: 9))
        _ = windows.end(again, clean: true, now: 5_000)
        #expect(windows.unconfirmedSelection != nil && windows.settleDelay(now: 5_000) > 0)
        windows.noteProbed()
        #expect(windows.unconfirmedSelection == nil && windows.settleDelay(now: 5_000) == 0)
        #expect(!windows.contains(incr))
        // Ending a window twice, or one never added, destroys nothing.
        #expect(windows.end(single, clean: true, now: 0) == [])
        var destroyed: [X11Window] = []
        for raw in 100..<UInt(100 + RequestorWindows.maxResting) {
            let window = X11Window(rawValue: raw)
            windows.add(window)
            destroyed += windows.end(window, clean: false, now: 3_000)
        }
        #expect(destroyed == [incr, failed, again])
        #expect(!windows.awaitsLateReply(failed), "a window destroyed takes nothing")
        #expect(windows.resting.count == RequestorWindows.maxResting)
        #expect(windows.removeAll().count == RequestorWindows.maxResting)
    }

    @Test("at most maxInUse windows are in use")
    func cap() {
        var windows = RequestorWindows()
        for raw in 1...UInt(RequestorWindows.maxInUse) {
            #expect(!windows.isFull)
            windows.add(X11Window(rawValue: raw))
        }
        #expect(windows.isFull)
    }
}

@Suite("a silent owner asked again")
struct SilentOwnerAskTests {
    /// xpbd's numbers: a 2 s read timeout, a 30 s deadline. Each request waits twice the one
    /// before; the last one's wait ends within the deadline.
    @Test("requests wait 2, 4, 8 and 16 s, four in all within a 30 s deadline, on time or late")
    func schedule() {
        let second: UInt64 = 1_000_000_000
        for lateness in [UInt64(0), second / 10] {
            var asks = SilentOwnerAsks(firstAsked: 7 * second, wait: 2)
            var now = asks.firstAsked
            var waits = [asks.wait]
            #expect(asks.remaining(now: now, deadline: 30) == 30)
            while true {
                now += UInt64(asks.wait * 1e9) + lateness
                guard let next = asks.next(now: now, deadline: 30) else { break }
                #expect(next.firstAsked == asks.firstAsked && next.count == asks.count + 1)
                asks = next
                waits.append(asks.wait)
            }
            #expect(waits == (lateness == 0 ? [2, 4, 8, 16] : [2, 4, 8]), "\(lateness) ns late")
            #expect(asks.waited == waits.reduce(0, +))
            #expect(asks.elapsed(now: now) >= 14 && asks.remaining(now: now, deadline: 30) <= 16)
        }
        // Past the deadline, what is left is a millisecond: the deadline timer fires at once.
        let asks = SilentOwnerAsks(firstAsked: 0, wait: 2)
        #expect(asks.remaining(now: 40 * second, deadline: 30) == 0.001)
        #expect(asks.next(now: 29 * second, deadline: 30) == nil)
    }
}
