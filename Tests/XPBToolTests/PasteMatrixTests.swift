import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

// Every paste arrives whole: each reader a user runs (xpb paste with and without -t, the xclip
// and xsel stand-ins, xpbd's keeper) against each owner (xclip as a user runs it, xsel, GTK, Qt,
// xpb, xpbd's kept copy, a seeded hostile INCR owner), at the sizes where INCR changes shape.
// Every case compares the SHA-256 of what arrived with what was copied, and the exit status.

/// An owner of CLIPBOARD for the matrix.
enum MatrixOwner: String, CaseIterable, CustomStringConvertible, Sendable {
    /// `xclip -selection clipboard -i FILE`, as a user types it: it forks into the background.
    case xclip
    /// `xsel -b -i < FILE`: it forks too.
    case xsel
    case gtk
    case qt
    /// `xpb copy < FILE`: a background owner.
    case xpb
    /// The seeded INCR owner of xhostile (random chunks and delays, xclip's habits).
    case seeded

    var description: String { rawValue }

    /// The owner of a file's bytes in X11TestSupport, for those started that way.
    var incrOwner: IncrOwner? { IncrOwner(rawValue: rawValue) }

    /// The owner's INCR chunk size, where the protocol changes shape (nil: not fixed).
    var chunk: Int? {
        switch self {
        case .xclip, .xsel: return incrOwner?.chunk
        case .xpb: return 1 << 20
        default: return nil
        }
    }
}

/// A running owner: its process, when it stays ours to stop.
struct RunningOwner {
    let peer: Peer?

    func stop() { peer?.stop() }
}

/// A file holding `data`, for an owner to copy.
private func dataFile(_ data: Data) throws -> String { try scratchFile("matrix.data", data) }

/// Makes `owner` own CLIPBOARD with `data` (UTF-8 text) on `x`, and waits until it does: the
/// selection is emptied first, so the wait sees this owner and not the one before.
func startOwner(_ owner: MatrixOwner, _ data: Data, on x: Xvfb, seed: UInt64 = 1) throws -> RunningOwner {
    #expect(try xpb(["clear"], x).status == 0)
    let file = try dataFile(data)
    var peer: Peer?
    switch owner {
    case .xclip, .xsel, .seeded:
        peer = try owner.incrOwner?.start(file, on: x, seed: seed)
    case .gtk:
        peer = try toolkitPeer("gtk_clipboard.py", ["set-text-file", file], display: x)
        try peer?.waitForOutput("ready")
    case .qt:
        peer = try toolkitPeer("qt_clipboard.py", ["set-formats", "text/plain=\(file)"], display: x)
        try peer?.waitForOutput("ready")
    case .xpb:
        let copy = try xpb(["copy"], x, input: data)
        guard copy.status == 0 else { throw TestFailure("xpb copy failed: \(copy.error)") }
    }
    // xclip and xsel take the selection in their forked child, after the command returned.
    guard try eventually(timeout: 10, { try xpb(["types", "--targets"], x).text.contains("UTF8_STRING") }) else {
        throw TestFailure("\(owner) did not take CLIPBOARD")
    }
    return RunningOwner(peer: peer)
}

/// The pid of the process that owns CLIPBOARD (or PRIMARY), as `xpb info` names it from the X
/// server's word: a background xclip or xsel is ended by it, never by name (other tests run
/// theirs at the same time).
func ownerPID(_ x: Xvfb, primary: Bool = false) throws -> Int32 {
    let info = try xpb(["info"] + (primary ? ["--primary"] : []), x).text
    guard let pid = info.split(separator: "\n").first(where: { $0.hasPrefix("owner pid: ") }).flatMap({ Int32($0.dropFirst(11)) }) else {
        throw TestFailure("xpb info named no owner pid: \(info)")
    }
    return pid
}

/// A reader of CLIPBOARD for the matrix: a command a user runs.
enum MatrixReader: String, CaseIterable, CustomStringConvertible, Sendable {
    /// `xpb paste`: the type chosen from the offer (and guessed with TARGETS).
    case paste
    /// `xpb paste -t text -o FILE`.
    case pasteTyped
    /// `xclip -o -selection clipboard` through the stand-in.
    case xclipStandIn
    /// `xsel -b -o` through the stand-in.
    case xselStandIn

    var description: String { rawValue }

    /// What the reader wrote, and its exit status.
    func read(_ x: Xvfb, environment: [String: String] = [:]) throws -> (status: Int32, data: Data, error: String) {
        switch self {
        case .paste:
            let outcome = try xpb(["paste"], x, environment: environment)
            return (outcome.status, outcome.output, outcome.error)
        case .pasteTyped:
            let file = try scratchFile("pasted", Data())
            let outcome = try xpb(["paste", "-t", "text", "-o", file], x, environment: environment)
            return (outcome.status, (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data(), outcome.error)
        case .xclipStandIn:
            let outcome = try run(try ClipboardTools.standIns().xclip, ["-o", "-selection", "clipboard"], display: x, environment: environment)
            return (outcome.status, outcome.output, outcome.error)
        case .xselStandIn:
            let outcome = try run(try ClipboardTools.standIns().xsel, ["-b", "-o"], display: x, environment: environment)
            return (outcome.status, outcome.output, outcome.error)
        }
    }
}

/// Expects `reader` to get `expected` whole with status 0.
func expectWhole(_ reader: MatrixReader, _ expected: Data, _ x: Xvfb, _ label: String, environment: [String: String] = [:],
                 sourceLocation: SourceLocation = #_sourceLocation) throws {
    let (status, data, error) = try reader.read(x, environment: environment)
    #expect(status == 0 && data.count == expected.count && sha256Hex(data) == sha256Hex(expected),
            "\(label), \(reader): status \(status), \(data.count) of \(expected.count) bytes, sha256 \(sha256Hex(data).prefix(12)) for \(sha256Hex(expected).prefix(12)); \(error)",
            sourceLocation: sourceLocation)
}

@Suite("every paste arrives whole")
struct PasteMatrixTests {
    /// Every reader against every owner at one size well past a chunk of each (3 MB: xclip's
    /// INCR of three chunks, xsel's of 750, GTK's and Qt's of their own).
    @Test("each reader gets 3 MB whole from each owner", arguments: MatrixOwner.allCases)
    func everyReaderEveryOwner(owner: MatrixOwner) throws {
        let x = try Xvfb()
        let expected = utf8Text(3_000_000)
        let running = try startOwner(owner, expected, on: x, seed: 4_000)
        defer { running.stop() }
        for reader in MatrixReader.allCases {
            // Twice each: a reader that lost a chunk may also have left the owner stuck.
            for round in 1...2 { try expectWhole(reader, expected, x, "\(owner), 3 MB, round \(round)") }
        }
    }

    /// The sizes where the protocol changes shape, against the owners whose chunk is known, and
    /// the seeded owner at the same sizes: each reader, each size.
    @Test("each reader gets every size whole at the chunk boundaries", arguments: [MatrixOwner.xclip, .xsel, .seeded])
    func chunkBoundaries(owner: MatrixOwner) throws {
        let x = try Xvfb()
        // xsel owns nothing for empty input (it clears the selection instead).
        let sizes = (owner == .xsel ? [1] : [0, 1]) + X11TestSupport.chunkBoundaries(owner.chunk ?? 1_048_575) + [3_000_000]
        for (index, size) in sizes.enumerated() {
            let expected = utf8Text(size)
            let running = try startOwner(owner, expected, on: x, seed: 10_000 + UInt64(index) * 100)
            defer { running.stop() }
            for reader in MatrixReader.allCases {
                // An empty selection is no text to the stand-ins' originals either: xclip prints
                // nothing and exits 0, as xsel does.
                try expectWhole(reader, expected, x, "\(owner), \(size) bytes")
            }
        }
    }

    /// The seeded owner: 200 seeds over 20 sizes, each paste whole. A failure names the seed,
    /// which replays the owner's chunking and timing exactly (xhostile owner-incr-seeded).
    @Test("a seeded INCR owner: 200 seeds, every paste whole")
    func seededOwner() throws {
        let x = try Xvfb()
        let sizes = [0, 1, 2, 100, 3999, 4000, 4001, 65_535, 65_536, 262_143, 262_144, 1_048_575, 1_048_576, 1_048_577,
                     2_097_151, 2_097_152, 2_097_153, 3_000_000, 3_145_725, 4_194_304]
        let readers = MatrixReader.allCases
        for (batch, size) in sizes.enumerated() {
            let expected = utf8Text(size)
            let base = UInt64(batch) * 1000
            let running = try startOwner(.seeded, expected, on: x, seed: base)
            defer { running.stop() }
            for paste in 0..<10 {
                let before = running.peer?.outputSoFar ?? ""
                let reader = readers[(batch + paste) % readers.count]
                let (status, data, error) = try reader.read(x)
                let seeds = (running.peer?.outputSoFar ?? "").dropFirst(before.count).split(separator: "\n").filter { $0.hasPrefix("seed ") }
                #expect(status == 0 && sha256Hex(data) == sha256Hex(expected),
                        "\(size) bytes, \(reader), owner \(seeds.joined(separator: ", ")): status \(status), \(data.count) bytes; \(error)")
            }
        }
    }

    /// xpbd keeps what each owner copied, whole, and serves it once the owner is gone.
    @Test("xpbd keeps 3 MB whole from each owner and serves it after the owner exits",
          arguments: [MatrixOwner.xclip, .xsel, .gtk, .qt, .seeded])
    func keeperAfterOwnerExits(owner: MatrixOwner) throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        let expected = utf8Text(3_000_000)
        let running = try startOwner(owner, expected, on: x, seed: 7_000)
        try daemon.waitForLog("kept CLIPBOARD from")
        if running.peer != nil {
            running.stop()
        } else {
            kill(try ownerPID(x), SIGTERM)
        }
        try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
        for reader in MatrixReader.allCases {
            try expectWhole(reader, expected, x, "xpbd's copy of \(owner)'s", environment: home.environment)
        }
    }
}

@Suite("xpbd keeps PRIMARY whole")
struct PrimaryKeeperTests {
    /// The keeper's capture of a 3 MB xclip copy of PRIMARY, with a paste running beside it, three
    /// rounds: each kept copy is whole once xclip is gone (the shared window of the keeper's reads
    /// once kept 1–2 MiB of it, served it and wrote it to the history).
    @Test("xpbd --primary keeps a 3 MB xclip copy whole while a paste reads it too, round after round")
    func primaryRounds() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--primary"])
        defer { _ = try? daemon.stop() }
        for round in 1...3 {
            let expected = utf8Text(3_000_000 + round)
            let file = try scratchFile("primary-\(round)", expected)
            try run("/bin/sh", ["-c", "xclip -selection primary -i \"$0\" >/dev/null 2>&1", file], display: x)
            // xclip takes the selection in its forked child, after the command returned: until
            // then xpbd still serves the last round's copy, and a paste started at once read that
            // under load (3,000,002 bytes in round 3).
            let owned = eventually(timeout: 10) {
                guard let pid = try? ownerPID(x, primary: true) else { return false }
                return (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.hasPrefix("xclip") == true
            }
            guard owned else { throw TestFailure("round \(round): xclip did not take PRIMARY") }
            // A reader beside the keeper's capture.
            let beside = try Peer(try xpbPath(), ["paste", "--primary"], display: x, environment: home.environment)
            try daemon.waitForLog("kept PRIMARY from", count: round)
            let pasted = try beside.finish()
            #expect(pasted.status == 0 && sha256Hex(pasted.output) == sha256Hex(expected),
                    "round \(round): the paste beside the capture: \(pasted.status), \(pasted.output.count) bytes; \(pasted.error)")
            kill(try ownerPID(x, primary: true), SIGTERM)
            try daemon.waitForLog("the owner of PRIMARY went away; serving", count: round)
            let kept = try xpb(["paste", "--primary"], x, environment: home.environment)
            #expect(kept.status == 0 && sha256Hex(kept.output) == sha256Hex(expected),
                    "round \(round): xpbd's copy: \(kept.status), \(kept.output.count) of \(expected.count) bytes; \(kept.error)")
        }
    }
}

@Suite("every paste arrives whole on another display")
struct SyncPasteMatrixTests {
    /// xpbd on a second display syncing the first: each reader there gets what each owner here
    /// copied, fetched over the link when it is read.
    @Test("a sync peer on a second display gets 3 MB whole from each owner", arguments: MatrixOwner.allCases)
    func syncPeer(owner: MatrixOwner) throws {
        let runtime = try DaemonHome()
        let a = try Xvfb()
        let b = try Xvfb()
        let here = try DaemonProcess(a, home: runtime, arguments: ["--state-dir", runtime.root.appendingPathComponent("state-a").path])
        defer { _ = try? here.stop() }
        let there = try DaemonProcess(b, home: runtime, arguments: ["--state-dir", runtime.root.appendingPathComponent("state-b").path,
                                                                    "--sync-display", a.display])
        defer { _ = try? there.stop() }
        try there.waitForLog("connected to", timeout: 15)
        let expected = utf8Text(3_000_000)
        let running = try startOwner(owner, expected, on: a, seed: 9_000)
        defer { running.stop() }
        try there.waitForLog("is now the copy from", timeout: 15)
        for reader in MatrixReader.allCases {
            try expectWhole(reader, expected, b, "\(owner)'s copy on another display", environment: runtime.environment)
        }
    }
}

@Suite("xclip's and xsel's habits, kept")
struct StandInHabitTests {
    /// `-t NAME` is the X target NAME when the owner offers it, read as it is: names the model has
    /// no type for, as Mousepad, LibreOffice and GTK offer them; also once xpbd has taken over.
    @Test("raw target names are read as the owner's bytes, by xpb paste and the xclip stand-in, from xclip and from xpbd's copy",
          arguments: ["FOO_BAR", "UTF-8", "COMPOUND_TEXT", "GTK_TEXT_BUFFER_CONTENTS"])
    func rawTargets(name: String) throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        let owner = try Peer("xclip", ["-selection", "clipboard", "-t", name, "-quiet"], display: x, input: Data("abc".utf8))
        try daemon.waitForLog("kept CLIPBOARD from")
        let xclip = try ClipboardTools.standIns().xclip
        for source in ["xclip", "xpbd's copy"] {
            let paste = try xpb(["paste", "-t", name], x, environment: home.environment)
            #expect(paste.status == 0 && paste.text == "abc", "\(source): xpb paste -t \(name): \(paste.status) \(paste.error)")
            let standIn = try run(xclip, ["-o", "-selection", "clipboard", "-t", name], display: x, environment: home.environment)
            #expect(standIn.status == 0 && standIn.text == "abc", "\(source): xclip stand-in -t \(name): \(standIn.status) \(standIn.error)")
            // A name the owner does not offer is not there: status 3, and 1 from the stand-in.
            #expect(try xpb(["paste", "-t", "NOT_OFFERED"], x, environment: home.environment).status == 3)
            #expect(try run(xclip, ["-o", "-selection", "clipboard", "-t", "NOT_OFFERED"], display: x, environment: home.environment).status == 1)
            if source == "xclip" {
                owner.stop()
                try daemon.waitForLog("the owner of CLIPBOARD went away; serving")
            }
        }
    }

    /// A browser's "Copy image": an image and markup with no text (`<img>`), whose owner refuses
    /// text (xpb's owner of the same, like Chromium). Asked for text, xclip fails and xsel prints
    /// nothing: the stand-ins do the same, never an empty success; the real tools are asked too,
    /// so the table in the README stays true.
    @Test("text asked of an image with markup and no text fails as xclip fails, and is empty as xsel's is")
    func noTextFromAnImage() throws {
        let x = try Xvfb()
        let png = try scratchFile("image.png", try Data(contentsOf: packageRoot.appendingPathComponent("Tests/Peers/image.png")))
        let html = try scratchFile("image.html", Data("<img src=\"https://example.org/a.png\">".utf8))
        #expect(try xpb(["copy", "-t", "image/png=\(png)", "-t", "text/html=\(html)"], x).status == 0)
        let tools = try ClipboardTools.standIns()
        for (label, xclip, xsel) in [("real", "/usr/bin/xclip", "/usr/bin/xsel"), ("stand-in", tools.xclip, tools.xsel)] {
            let xclipOut = try run(xclip, ["-o", "-selection", "clipboard"], display: x)
            #expect(xclipOut.status == 1 && xclipOut.output.isEmpty, "\(label) xclip -o: \(xclipOut.status) \(xclipOut.error)")
            let xselOut = try run(xsel, ["-b", "-o"], display: x)
            #expect(xselOut.status == 0 && xselOut.output.isEmpty, "\(label) xsel -o: \(xselOut.status) \(xselOut.error)")
        }
        let paste = try xpb(["paste", "-t", "text"], x)
        #expect(paste.status == 3 && paste.error.contains("holds no text"), "\(paste.status) \(paste.error)")
        // The image itself is there, byte for byte.
        #expect(try xpb(["paste", "-t", "png"], x).output == (try Data(contentsOf: URL(fileURLWithPath: png))))
    }

    /// Markup with no text copied with xpb: its text targets refuse, as a browser's do.
    @Test("an xpb owner of markup with no text refuses its text targets")
    func xpbOwnerRefusesNoText() throws {
        let x = try Xvfb()
        let html = try scratchFile("image.html", Data("<img src=\"a.png\">".utf8))
        #expect(try xpb(["copy", "-t", "text/html=\(html)"], x).status == 0)
        let text = try run("/usr/bin/xclip", ["-o", "-selection", "clipboard", "-t", "UTF8_STRING"], display: x)
        #expect(text.status == 1, "xclip -o -t UTF8_STRING: \(text.status) \(text.text)")
        #expect(try run("/usr/bin/xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x).text == "<img src=\"a.png\">")
    }

    /// A target asked for by name is the owner's whole reply: a list of two files, as xclip reads it.
    @Test("xpb paste -t text/uri-list is the owner's whole list, as xclip -o -t text/uri-list")
    func wholeURIList() throws {
        let x = try Xvfb()
        let first = try scratchFile("a.txt", Data("a".utf8))
        let second = try scratchFile("b.txt", Data("b".utf8))
        #expect(try xpb(["copy", first, second], x).status == 0)
        let real = try run("/usr/bin/xclip", ["-o", "-selection", "clipboard", "-t", "text/uri-list"], display: x)
        let pasted = try xpb(["paste", "-t", "text/uri-list"], x)
        #expect(real.status == 0 && pasted.status == 0)
        #expect(pasted.output == real.output, "\(pasted.text) against xclip's \(real.text)")
        #expect(pasted.text.contains(URL(fileURLWithPath: first).lastPathComponent) && pasted.text.contains(URL(fileURLWithPath: second).lastPathComponent))
    }
}
