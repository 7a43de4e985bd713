import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The paste queue (issue 46): xpbd serves one queued item per paste, in order.
@Suite("the paste queue")
struct QueueTests {
    private func queued(_ x: Xvfb, _ home: DaemonHome) throws -> [[String: Any]] {
        let outcome = try xpb(["queue", "--json"], x, home)
        guard outcome.status == 0 else { throw TestFailure("xpb queue: \(outcome.error)") }
        return try JSONSerialization.jsonObject(with: outcome.output) as? [[String: Any]] ?? []
    }

    private func xclipPaste(_ x: Xvfb) throws -> String {
        let outcome = try run("xclip", ["-o", "-selection", "clipboard"], display: x)
        #expect(outcome.status == 0, "xclip -o: \(outcome.error)")
        return outcome.text
    }

    @Test("three items go to three pastes by xclip, GTK and Qt in order; the clipboard keeps the last; a reader asking TARGETS twice and two text targets takes one item")
    func threeReaders() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        let second = home.root.appendingPathComponent("second.txt")
        let third = home.root.appendingPathComponent("third.txt")
        try Data("second item".utf8).write(to: second)
        try Data("third item".utf8).write(to: third)

        #expect(try xpb(["copy", "--queue"], x, home, input: Data("first item".utf8)).status == 0)
        let added = try xpb(["queue", "add", second.path, third.path], x, home)
        #expect(added.status == 0, "\(added.error)")
        let listed = try xpb(["queue"], x, home).text.split(separator: "\n")
        #expect(listed.count == 3 && listed[0].hasSuffix("first item") && listed[2].hasSuffix("third item"), "\(listed)")

        #expect(try xclipPaste(x) == "first item")
        try daemon.waitForLog("an item was pasted; 2 left")
        let gtk = try toolkitPeer("gtk_clipboard.py", ["text"], display: x).finish(timeout: 30)
        #expect(gtk.text == "second item\n", "\(gtk.error)")
        try daemon.waitForLog("an item was pasted; 1 left")
        let qt = try toolkitPeer("qt_clipboard.py", ["read"], display: x).finish(timeout: 30)
        #expect(qt.text.hasSuffix("third item\n"), "\(qt.text) \(qt.error)")
        try daemon.waitForLog("its last item was pasted")
        #expect(try queued(x, home).isEmpty)
        #expect(try xclipPaste(x) == "third item", "the clipboard keeps the last item")
        #expect(try xclipPaste(x) == "third item")

        // One paste that asks much: one item.
        for text in ["one", "two"] { #expect(try xpb(["queue", "add", "-"], x, home, input: Data(text.utf8)).status == 0) }
        let many = try toolkitPeer("gtk_clipboard.py", ["one-paste-many-asks"], display: x).finish(timeout: 30)
        #expect(many.text == "one\none\n", "\(many.text) \(many.error)")
        #expect(try queued(x, home).map { $0["preview"] as? String } == ["two"])
        // A reader that only asks TARGETS pastes nothing.
        #expect(try run("xclip", ["-o", "-selection", "clipboard", "-t", "TARGETS"], display: x).text.contains("UTF8_STRING"))
        #expect(try xclipPaste(x) == "two")
        try daemon.waitForLog("its last item was pasted", count: 2)
    }

    @Test("Chromium, which reads again only when the owner changes, pastes each queued item in turn; queued text files are text, not files")
    func chromium() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        let browser = try Chromium(x)
        // Sees each new owner of CLIPBOARD, reading nothing (no turn of the queue).
        let watcher = try toolkitPeer("gtk_clipboard.py", ["owner-changes"], display: x)
        try watcher.waitForOutput("ready")
        func changes() -> Int { watcher.outputSoFar.components(separatedBy: "owner-change").count - 1 }

        let words = ["ONE", "TWO", "THREE"]
        let files = try words.map { word -> String in
            let file = home.root.appendingPathComponent("\(word).txt")
            try Data(word.utf8).write(to: file)
            return file.path
        }
        let added = try xpb(["queue", "add"] + files, x, home)
        #expect(added.status == 0, "\(added.error)")
        for (index, word) in words.enumerated() {
            // The queue's ownership, then one announce after each paste but the last.
            let announced = eventually(timeout: 10) { changes() >= index + 1 }
            #expect(announced, "item \(index + 1) was not announced: \(changes()) owner changes")
            let pasted = try browser.paste()
            #expect(pasted.text == word, "paste \(index + 1): \(pasted)")
            #expect(pasted.types == ["text/plain"] && pasted.files == 0, "a queued text file is text: \(pasted)")
        }
        try daemon.waitForLog("its last item was pasted")
        // The last item stays, announced no more.
        #expect(try browser.paste().text == "THREE")
        #expect(changes() == 3, "\(changes()) owner changes")
        #expect(try xpb(["paste"], x, home).text == "THREE")
    }

    @Test("history entries queued in the order given; a copy by another app ends the queue; clear keeps the item served")
    func historyAndEnd() throws {
        let x = try Xvfb()
        let home = try DaemonHome()
        let daemon = try DaemonProcess(x, home: home)
        defer { _ = try? daemon.stop() }
        for (count, word) in ["alpha", "beta", "gamma"].enumerated() {
            #expect(try xclipCopy(word, display: x).status == 0)
            try daemon.waitForLog("kept CLIPBOARD", count: count + 1)
        }
        // Kept, then written on the storage queue: queued from the history once all three are in it.
        #expect(eventually(timeout: 10) { (try? history(x, home).count) == 3 })
        let queuedFromHistory = try xpb(["history", "queue", "2", "0", "1"], x, home)
        #expect(queuedFromHistory.status == 0, "\(queuedFromHistory.error)")
        #expect(queuedFromHistory.text.split(separator: "\n").map { $0.split(separator: " ").last.map(String.init) } == ["alpha", "gamma", "beta"])
        // xpb's own reader asks TARGETS with a guess beside it, then its manifest and data: one paste.
        #expect(try xpb(["paste"], x, home).text == "alpha")
        #expect(try xclipPaste(x) == "gamma")
        #expect(try xpb(["history", "queue", "7"], x, home).error.contains("no history entry 7"))

        #expect(try xclipCopy("delta", display: x).status == 0)
        try daemon.waitForLog("another app copied: its 1 items are dropped")
        try daemon.waitForLog("kept CLIPBOARD", count: 4)
        #expect(try queued(x, home).isEmpty)
        #expect(try xclipPaste(x) == "delta")

        #expect(try xpb(["history", "queue", "1", "2"], x, home).status == 0)
        let cleared = try xpb(["queue", "clear"], x, home)
        #expect(cleared.text == "paste queue cleared (2 items)\n", "\(cleared.text) \(cleared.error)")
        // The item served when the queue was cleared stays, for every reader.
        #expect(try xclipPaste(x) == "gamma")
        #expect(try xclipPaste(x) == "gamma")
        #expect(try xpb(["copy", "--queue", "--primary"], x, home, input: Data("x".utf8)).status == 64)
    }
}
