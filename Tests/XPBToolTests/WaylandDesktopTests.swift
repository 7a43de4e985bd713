import Foundation
import Testing
import X11TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A desktop as people have one: a headless sway with its XWayland, xpbd bridging the two, and
/// real toolkit windows mapped, focused and closed on either side. Once an X window has had the
/// focus, sway's own bridge is awake: its window manager takes the X selection for every
/// Wayland copy and answers only while an X window has the focus. A fresh compositor with no
/// window hides all of that.
private final class Desktop {
    let sway: Compositor
    let home: DaemonHome
    let daemon: DaemonProcess
    /// The X clients' environment (xpb told so: WAYLAND_DISPLAY stays in the session's).
    let x: [String: String]

    init() throws {
        sway = try Compositor(.sway(xwayland: true))
        let display = try #require(sway.xDisplay)
        home = try DaemonHome()
        daemon = try DaemonProcess(sway, home: home, environment: ["DISPLAY": display])
        try daemon.waitForLog("bridging display")
        try daemon.waitForLog("connected to")
        var x = sway.environment
        x["DISPLAY"] = display
        x["XPB_BACKEND"] = "x11"
        x["GDK_BACKEND"] = "x11"
        x["QT_QPA_PLATFORM"] = "xcb"
        self.x = x
    }

    deinit { _ = try? daemon.stop() }

    func onX(_ program: String, _ arguments: [String], input: Data? = nil) throws -> Outcome {
        try run(program, arguments, display: sway, input: input, environment: x)
    }

    /// xclip -i, whose serving child must not hold our pipes open.
    func copyOnX(_ text: String, primary: Bool = false) throws {
        let outcome = try onX("/bin/sh", ["-c", "xclip -i -selection \(primary ? "primary" : "clipboard") >/dev/null 2>&1"], input: Data(text.utf8))
        guard outcome.status == 0 else { throw TestFailure("xclip -i: \(outcome.error)") }
    }

    func copyOnWayland(_ text: String, primary: Bool = false) throws {
        // On standard input: a large text is no argument.
        let outcome = try run("wl-copy", ["-t", "text/plain;charset=utf-8"] + (primary ? ["--primary"] : []), display: sway, input: Data(text.utf8))
        guard outcome.status == 0 else { throw TestFailure("wl-copy: \(outcome.error)") }
    }

    /// What an X client reads, nil when it reads nothing.
    func readX(primary: Bool = false) -> String? {
        guard let outcome = try? onX("xclip", ["-o", "-selection", primary ? "primary" : "clipboard"]), outcome.status == 0 else { return nil }
        return outcome.text
    }

    /// What a Wayland client reads, nil when it reads nothing.
    func readWayland(primary: Bool = false) -> String? {
        guard let outcome = try? run("wl-paste", ["-n"] + (primary ? ["--primary"] : []), display: sway), outcome.status == 0 else { return nil }
        return outcome.text
    }

    /// Both sides read `text` (within a few seconds, with no window focused or whichever is).
    func expectBoth(_ text: String, primary: Bool = false, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let both = eventually(timeout: 10) { readX(primary: primary) == text && readWayland(primary: primary) == text }
        #expect(both, "\(what): X reads \(readX(primary: primary) ?? "nothing"), Wayland reads \(readWayland(primary: primary) ?? "nothing")\n\(daemon.log)\n\(compositorLog)",
                sourceLocation: sourceLocation)
    }

    /// A toolkit window that copies nothing, mapped (sway shows it, and focuses it as it maps).
    func window(_ script: String, onX: Bool) throws -> Peer {
        var environment = onX ? x : sway.environment
        if !onX {
            environment["GDK_BACKEND"] = "wayland"
            environment["QT_QPA_PLATFORM"] = "wayland"
        }
        let peer = try toolkitPeer(script, ["window", "a window"], display: sway, environment: environment)
        try peer.waitForOutput("ready")
        guard eventually(timeout: 10, { (try? sway.windows())?.contains { $0.pid == Int(peer.pid) && $0.isX == onX } == true }) else {
            throw TestFailure("sway did not map the window of \(script) (\(onX ? "X" : "Wayland")): \((try? sway.windows()).map { "\($0)" } ?? "?")")
        }
        return peer
    }

    /// Closes a window: its app ends, and sway no longer shows it.
    func close(_ window: Peer) throws {
        window.stop()
        guard eventually(timeout: 10, { (try? sway.windows())?.contains { $0.pid == Int(window.pid) } == false }) else {
            throw TestFailure("sway still shows the window of pid \(window.pid)")
        }
    }

    /// What sway logged of selections (with XPB_TEST_SWAY_DEBUG=1), the last of it.
    var compositorLog: String {
        sway.log.split(separator: "\n").filter { $0.contains("selection") || $0.contains("focus") }.suffix(60).joined(separator: "\n")
    }

    /// The bridge's moves so far: copies carried or served again.
    var moves: Int {
        daemon.log.components(separatedBy: "is now the copy from").count + daemon.log.components(separatedBy: "serving its kept copy again").count - 2
    }

    /// Waits until the bridge is quiet (no move for a second; a take-back may land a moment after
    /// both sides read a copy), and says whether it became so within 10 s: a loop never does.
    func settles() -> Bool {
        var last = moves
        var quietSince = Date()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            usleep(100_000)
            let now = moves
            if now != last {
                last = now
                quietSince = Date()
            } else if Date().timeIntervalSince(quietSince) >= 1 {
                return true
            }
        }
        return false
    }
}

@Suite("Wayland: the bridge on a desktop as people have it: X windows mapped, focused and closed, focus moving")
struct WaylandDesktopTests {
    @Test("after a GTK and a Qt window under XWayland were mapped and closed: every copy on either side reaches the other, CLIPBOARD and PRIMARY, no window focused; X copies are never destroyed; nothing loops")
    func windowsMappedAndClosed() throws {
        let desktop = try Desktop()
        for script in ["gtk_clipboard.py", "qt_clipboard.py"] {
            let window = try desktop.window(script, onX: true)
            #expect(eventually(timeout: 10) { (try? desktop.sway.windows())?.contains { $0.pid == Int(window.pid) && $0.isFocused } == true })
            try desktop.close(window)
        }
        // sway's window manager has had a focused X window: its bridge is awake, and no X
        // window has the focus now.
        #expect(try desktop.sway.windows().allSatisfy { !$0.isX })
        for round in 1...3 {
            try desktop.copyOnX("copied on X \(round)")
            desktop.expectBoth("copied on X \(round)", "an X copy, round \(round)")
            try desktop.copyOnWayland("copied on Wayland \(round)")
            desktop.expectBoth("copied on Wayland \(round)", "a Wayland copy, round \(round)")
        }
        // Larger than one X request: INCR on the X side, many writes on the Wayland side.
        for (side, size) in [("X", 300_000), ("Wayland", 1 << 20)] {
            let large = String((0..<size).map { index in Character(UnicodeScalar(UInt8(97 + index % 26))) })
            if side == "X" { try desktop.copyOnX(large) } else { try desktop.copyOnWayland(large) }
            let both = eventually(timeout: 15) { desktop.readX() == large && desktop.readWayland() == large }
            #expect(both, "a copy of \(size) B on \(side): X reads \(desktop.readX()?.count ?? -1) B, Wayland reads \(desktop.readWayland()?.count ?? -1) B")
        }
        try desktop.copyOnWayland("copied on Wayland 3")
        desktop.expectBoth("copied on Wayland 3", "the last text again")
        try desktop.copyOnX("selected on X", primary: true)
        desktop.expectBoth("selected on X", primary: true, "an X PRIMARY")
        try desktop.copyOnWayland("selected on Wayland", primary: true)
        desktop.expectBoth("selected on Wayland", primary: true, "a Wayland PRIMARY")
        #expect(desktop.readX() == "copied on Wayland 3", "PRIMARY left CLIPBOARD alone")

        // Settled: reads on both sides move nothing, and the compositor is never taken for an app.
        #expect(desktop.settles(), "the bridge never went quiet: \(desktop.daemon.log)")
        let moves = desktop.moves
        for _ in 0..<3 {
            #expect(desktop.readX() == "copied on Wayland 3")
            #expect(desktop.readWayland() == "copied on Wayland 3")
        }
        #expect(desktop.moves == moves, "\(desktop.daemon.log)")
        #expect(!desktop.daemon.log.contains("ignored app"), "\(desktop.daemon.log)")
        // One history entry per CLIPBOARD copy (PRIMARY is kept only with --primary).
        let history = try xpb(["history"], desktop.sway, desktop.home).text
        #expect(history.components(separatedBy: "copied on").count - 1 == 6, "\(history)")
    }

    @Test("focus moving between an X window and a Wayland window: copies on either side reach the other whichever has the focus, and after the X window closes")
    func focusMoving() throws {
        let desktop = try Desktop()
        let xWindow = try desktop.window("gtk_clipboard.py", onX: true)
        defer { xWindow.stop() }
        let waylandWindow = try desktop.window("gtk_clipboard.py", onX: false)
        defer { waylandWindow.stop() }
        for (index, window) in [xWindow, waylandWindow, xWindow, waylandWindow].enumerated() {
            try desktop.sway.focus(pid: window.pid)
            let side = window === xWindow ? "the X window" : "the Wayland window"
            try desktop.copyOnX("X copy \(index)")
            desktop.expectBoth("X copy \(index)", "an X copy with \(side) focused")
            try desktop.copyOnWayland("Wayland copy \(index)")
            desktop.expectBoth("Wayland copy \(index)", "a Wayland copy with \(side) focused")
            try desktop.copyOnX("X selection \(index)", primary: true)
            desktop.expectBoth("X selection \(index)", primary: true, "an X PRIMARY with \(side) focused")
        }
        // The X window closes while it has the focus.
        try desktop.sway.focus(pid: xWindow.pid)
        try desktop.close(xWindow)
        try desktop.copyOnWayland("after the close")
        desktop.expectBoth("after the close", "a Wayland copy after the X window closed")
        try desktop.copyOnX("X after the close")
        desktop.expectBoth("X after the close", "an X copy after the X window closed")
        #expect(desktop.settles(), "the bridge never went quiet: \(desktop.daemon.log)")
        let moves = desktop.moves
        for _ in 0..<3 {
            #expect(desktop.readX() == "X after the close" && desktop.readWayland() == "X after the close")
        }
        #expect(desktop.moves == moves, "reads move nothing once settled: \(desktop.daemon.log)")
    }

    @Test("Chromium on XWayland and on Wayland: its copy, text and HTML, reaches the other side; it pastes the copies of either side; on Wayland it pastes each queued item in turn")
    func chromium() throws {
        let desktop = try Desktop()
        for platform in [Chromium.Platform.x11, .wayland] {
            let name = platform == .x11 ? "XWayland" : "Wayland"
            let browser = try Chromium(desktop.sway, platform: platform, text: "Chromium on \(name)", html: "<b>Chromium on \(name)</b>",
                                       environment: platform == .x11 ? desktop.x : [:])
            try browser.copy()
            desktop.expectBoth("Chromium on \(name)", "Chromium's copy on \(name)")
            let html = platform == .x11 ? try run("wl-paste", ["-t", "text/html"], display: desktop.sway).text
                                        : try desktop.onX("xclip", ["-o", "-selection", "clipboard", "-t", "text/html"]).text
            #expect(html.contains("<b>Chromium on \(name)</b>"), "the HTML of Chromium's copy on \(name), read on the other side: \(html)")

            try desktop.copyOnX("X copy for Chromium on \(name)")
            desktop.expectBoth("X copy for Chromium on \(name)", "an X copy")
            #expect(try browser.paste().text == "X copy for Chromium on \(name)")
            try desktop.copyOnWayland("Wayland copy for Chromium on \(name)")
            desktop.expectBoth("Wayland copy for Chromium on \(name)", "a Wayland copy")
            #expect(try browser.paste().text == "Wayland copy for Chromium on \(name)")

            if platform == .wayland {
                let words = ["ONE", "TWO", "THREE"]
                let files = try words.map { word -> String in
                    let file = desktop.home.root.appendingPathComponent("\(word).txt")
                    try Data(word.utf8).write(to: file)
                    return file.path
                }
                let added = try xpb(["queue", "add"] + files, desktop.sway, desktop.home)
                #expect(added.status == 0, "\(added.error)")
                // The X side leaves the queue to the compositor's bridge (it took X CLIPBOARD for
                // it), not an older copy of its own.
                try desktop.daemon.waitForLog("holds the paste queue's item: left to it")
                for (index, word) in words.enumerated() {
                    // Chromium's receives within a second are one paste: the next is set once
                    // it is silent.
                    if index > 0 { try desktop.daemon.waitForLog("paste queue: item \(index + 1) of 3 is served") }
                    let pasted = try browser.paste()
                    #expect(pasted.text == word && pasted.files == 0, "\(pasted) \(pasted.text)\n\(desktop.daemon.log)\n\(desktop.compositorLog)")
                }
                try desktop.daemon.waitForLog("its last item was pasted")
                #expect(try browser.paste().text == "THREE", "the last item stays")
            }
            try browser.quit()
        }
        #expect(desktop.settles(), "the bridge never went quiet: \(desktop.daemon.log)")
    }
}
