import Foundation
import PasteboardKit
import PasteboardX11
import Testing
import X11TestSupport

@Suite("One change count per display")
struct ChangeCountTests {
    @Test("two library processes see the same changeCount while xpbd runs; without it each counts its own")
    func shared() throws {
        let x = try Xvfb()
        let early = try X11PasteboardBackend(display: x.display)
        defer { early.close(handOff: false) }
        // The backend asks XFixes for owner changes on its X thread after init returns (a start
        // does not wait for it); a change made before that request reaches the server is not
        // counted. A first changeCount is a round trip made after it: on a loaded machine xclip
        // took the clipboard before the request was in, and the count stayed 0 (a loaded run).
        #expect(early.changeCount(of: .general) == 0)
        let owner = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data("one".utf8))
        // 20 s, not 5: at a loaded suite's start (two busy loops, every suite starting its
        // processes at once) xclip took longer than 5 s to own the clipboard once.
        #expect(eventually(timeout: 20) { early.changeCount(of: .general) == 1 })
        owner.stop()
        let late = try X11PasteboardBackend(display: x.display)
        defer { late.close(handOff: false) }
        // Without the daemon: the late process never saw the first change.
        #expect(late.changeCount(of: .general) == 0 && early.changeCount(of: .general) >= 1)

        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home, arguments: ["--no-restore"])
        for (index, word) in ["two", "three"].enumerated() {
            let peer = try Peer("xclip", ["-i", "-selection", "clipboard", "-quiet"], display: x, input: Data(word.utf8))
            #expect(eventually { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x))?.text == word })
            // Kept before its owner goes, and served by the daemon after: the daemon's taking over
            // is a change too, and it must not land after `before` below (on a loaded machine it did).
            #expect(eventually { daemon.log.components(separatedBy: "kept CLIPBOARD from").count - 1 >= index + 1 })
            peer.stop()
            #expect(eventually { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x))?.text == word })
        }
        #expect(eventually { early.changeCount(of: .general) == late.changeCount(of: .general) && early.changeCount(of: .general) > 0 })
        // A write by one process is counted before its call returns, for both.
        let before = late.changeCount(of: .general)
        Pasteboard.general(of: early).string = "from the library"
        #expect(early.changeCount(of: .general) == before + 1)
        #expect(late.changeCount(of: .general) == before + 1)
        // Either process, again and again: the manager's count is followed from before each write
        // and waited for after it, whether it came before the wait began or after.
        for round in 1...12 {
            let (writer, other) = round.isMultiple(of: 2) ? (early, late) : (late, early)
            let start = other.changeCount(of: .general)
            Pasteboard.general(of: writer).string = "write \(round)"
            #expect(writer.changeCount(of: .general) == start + 1)
            #expect(other.changeCount(of: .general) == start + 1)
        }
        try daemon.stop()
    }
}

@Suite("Library hand-off to xpbd")
struct LibraryHandOffTests {
    @Test("a library program's close() hands every representation to xpbd, which serves them after it is gone")
    func handOff() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        let backend = try X11PasteboardBackend(display: x.display)
        #expect(backend.isPersistent(.general), "with a clipboard manager the general pasteboard is persistent")
        var item = PasteboardItem()
        item.setData(Data("library text".utf8), for: .utf8PlainText)
        item.setData(Data("<i>library html</i>".utf8), for: .html)
        try backend.setItems([item], options: PasteboardOptions(), on: .general)
        let started = Date()
        #expect(backend.close(), "the manager said it saved")
        #expect(Date().timeIntervalSince(started) < 2)
        try daemon.waitForLog("saved CLIPBOARD for")
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "UTF8_STRING"], display: x).text == "library text")
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"], display: x).text == "<i>library html</i>")
        try daemon.stop()
    }
}
