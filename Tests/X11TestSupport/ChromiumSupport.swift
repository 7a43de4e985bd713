import Foundation
import Glibc

/// Chromium as a clipboard peer, as people run it: a browser window with a page
/// (Tests/Peers/chromium_page.py) whose text box has the focus. Keys reach it as a user's do:
/// XTEST (`xdotool`) on an X display, the compositor's virtual keyboard (`wtype`) on sway, where
/// the window is focused through sway first. The page reports each paste (the text, the HTML and
/// the types Chromium read) and each copy to its loopback server, whose output the test reads.
///
/// Chromium reads the clipboard again only when its owner changes (XFixes on X, a new offer on
/// Wayland), and pastes what it read last until then.
public final class Chromium {
    /// On a compositor: Chromium's own Wayland backend, or XWayland.
    public enum Platform: Sendable {
        case x11
        case wayland
    }

    private let page: Peer
    private let browser: Peer
    private let session: any TestSession
    private let platform: Platform
    private let profile: String
    /// What Chromium runs with beside the session's environment.
    private let environment: [String: String]
    /// The page's reports read so far.
    private var seen = 0

    /// Starts the page's server and Chromium showing it; returns once the page has loaded and
    /// has the focus. `text` and `html` are what Chromium copies on ctrl+c. `environment` is
    /// added to the session's (the X display under a compositor).
    public init(_ session: any TestSession, platform: Platform = .x11, text: String = "from Chromium", html: String = "<b>from Chromium</b>",
                environment: [String: String] = [:]) throws {
        self.session = session
        self.platform = platform
        page = try toolkitPeer("chromium_page.py", [text, html], display: session)
        try page.waitForOutput("url ")
        guard let url = page.outputSoFar.split(separator: "\n").first?.dropFirst(4) else { throw TestFailure("the page's server named no address") }
        profile = NSTemporaryDirectory() + "xpb-chromium-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        // As root (the test machine) Chromium runs only without its sandbox. No GPU, no first-run
        // pages, no keyring: a plain window.
        var arguments = ["--no-sandbox", "--user-data-dir=\(profile)", "--no-first-run", "--no-default-browser-check", "--disable-gpu",
                         "--password-store=basic", "--disable-features=Translate,MediaRouter", "--disable-background-networking",
                         "--ozone-platform=\(platform == .wayland ? "wayland" : "x11")"]
        arguments.append("--app=\(url)")
        var environment = environment
        if platform == .x11 { environment["WAYLAND_DISPLAY"] = "" }
        self.environment = environment
        browser = try Peer("chromium", arguments, display: session, environment: environment)
        do {
            try page.waitForOutput("\"ready\"", timeout: 60)
        } catch {
            browser.stop()
            throw TestFailure("Chromium did not load its page: \(error) \(browser.errorSoFar.suffix(2000))")
        }
        seen = reports.count
    }

    /// Chromium's process id (its windows carry it).
    public var pid: pid_t { browser.pid }

    /// The page's reports so far, oldest first.
    private var reports: [[String: Any]] {
        page.outputSoFar.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits for the page's next report of `event`, skipping none.
    private func next(_ event: String, timeout: Double = 20) throws -> [String: Any] {
        let windows = (session as? Compositor).map { compositor in { (try? compositor.windows()).map { "\($0)" } ?? "?" } } ?? { "" }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let all = reports
            if all.count > seen {
                let report = all[seen]
                seen += 1
                guard report["event"] as? String == event else { throw TestFailure("Chromium's page reported \(report), not a \(event)") }
                return report
            }
            guard Date() < deadline, browser.isRunning else {
                throw TestFailure("Chromium's page reported no \(event) within \(timeout) s: \(windows()) \(browser.errorSoFar.suffix(1500))")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// Presses ctrl+`key` in Chromium's window, as a user does: on sway the window is focused
    /// first; a Wayland window gets the key from the compositor's virtual keyboard (wtype), an X
    /// window from XTEST (xdotool), which loses no key to a keymap arriving late.
    private func press(_ key: String) throws {
        let compositor = session as? Compositor
        if let compositor { try compositor.focus(pid: pid) }
        if platform == .wayland {
            guard compositor != nil else { throw TestFailure("Chromium on Wayland needs a compositor") }
            // wtype makes a new virtual keyboard each run; a key pressed before the client has
            // its keymap is lost (3 of 15 here): wtype waits 0.2 s first (-s).
            let typed = try run("wtype", ["-s", "200", "-M", "ctrl", key, "-m", "ctrl"], display: session)
            guard typed.status == 0 else { throw TestFailure("wtype: \(typed.error)") }
            return
        }
        let found = try run("xdotool", ["search", "--sync", "--onlyvisible", "--pid", String(pid)], display: session, environment: environment, timeout: 20)
        guard let window = found.text.split(separator: "\n").last else { throw TestFailure("Chromium shows no window: \(found.error)") }
        let typed = try run("xdotool", ["windowfocus", "--sync", String(window), "key", "--clearmodifiers", "ctrl+\(key)"], display: session,
                            environment: environment)
        guard typed.status == 0 else { throw TestFailure("xdotool: \(typed.error)") }
    }

    /// Pastes into the page (ctrl+v): what Chromium read, its text and types.
    public func paste() throws -> (text: String, html: String, types: [String], files: Int) {
        try press("v")
        let report = try next("paste")
        return (report["text"] as? String ?? "", report["html"] as? String ?? "", report["types"] as? [String] ?? [],
                report["files"] as? Int ?? 0)
    }

    /// Copies (ctrl+c): Chromium owns the clipboard with the page's text and HTML.
    public func copy() throws {
        try press("c")
        _ = try next("copy")
    }

    /// Quits Chromium (SIGTERM, as a window closed: it hands its copy to the clipboard manager).
    public func quit() throws {
        browser.signal(SIGTERM)
        _ = try browser.finish(timeout: 30)
    }

    deinit {
        browser.stop()
        page.stop()
        try? FileManager.default.removeItem(atPath: profile)
    }
}
