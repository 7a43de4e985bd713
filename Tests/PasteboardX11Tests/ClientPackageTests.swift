import Foundation
import Synchronization
import Testing

/// A separate Swift package (Tests/ClientPackage) that depends on this one by path, as a user's
/// program would, built in Swift 6 mode with warnings as errors, debug and release.
@Suite("A client package of the library", .serialized)
struct ClientPackageTests {
    /// The client binaries built so far in this test process, by configuration.
    private static let built = Mutex<[String: String]>([:])

    /// Builds the client in `configuration` (once per test process) and returns the binary's
    /// path. The build runs at the lowest priority on one core, so that the X11 tests running
    /// beside it keep their timing.
    static func build(_ configuration: String) throws -> String {
        try built.withLock { built in
            if let path = built[configuration] { return path }
            let swift = try which("swift")
            let package = packageRoot.appendingPathComponent("Tests/ClientPackage").path
            let scratch = packageRoot.appendingPathComponent(".build-client").path
            let arguments = ["-n", "19", swift, "build", "-c", configuration, "-j", "1", "--package-path", package,
                             "--scratch-path", scratch, "-Xswiftc", "-warnings-as-errors"]
            let outcome = try Peer("/usr/bin/nice", arguments, display: try Xvfb()).finish(timeout: 1200)
            guard outcome.status == 0 else {
                throw TestFailure("the client package did not build (\(configuration)):\n\(outcome.text)\n\(outcome.error)")
            }
            built[configuration] = "\(scratch)/\(configuration)/xpb-client"
            return built[configuration]!
        }
    }

    @Test("Pasteboard.general.string = … with no set-up reaches xclip; no display is a clear error", arguments: ["debug", "release"])
    func oneLiner(configuration: String) throws {
        let client = try Self.build(configuration)
        let x = try Xvfb()
        let writer = try Peer(client, ["write", "hi from \(configuration)"], display: x)
        defer { writer.stop() }
        try writer.waitForOutput("ready changeCount=1")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).text == "hi from \(configuration)")
        // Another library process reads it back through the same one-liner API.
        #expect(try run(client, ["read"], display: x).text == "hi from \(configuration)\n")

        // The async API from an actor.
        let actor = try run(client, ["actor", "see https://example.org/x"], display: x)
        #expect(actor.status == 0, "\(actor.error)")
        #expect(actor.text == "read=see https://example.org/x types=public.utf8-plain-text patterns= links=https://example.org/x\n")
        // Its contents died with it: no clipboard manager runs on this display.
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: x).status != 0)

        // No display: an error that says why, never a private in-memory clipboard.
        for display in ["", ":99999"] {
            let refused = try run(client, ["read"], display: x, environment: ["DISPLAY": display])
            #expect(refused.status == 1)
            #expect(refused.error.contains("no pasteboard backend") && refused.error.contains("display"), "\(refused.error)")
        }
    }

    @Test("with PasteboardWayland linked, Pasteboard.general on a Wayland session is the compositor's clipboard; on GNOME's, XWayland's")
    func sessions() throws {
        let client = try Self.build("debug")
        let sway = try Compositor()
        let writer = try Peer(client, ["write", "hi from the library on sway"], display: sway)
        defer { writer.stop() }
        try writer.waitForOutput("ready")
        #expect(try run("wl-paste", ["-n"], display: sway).text == "hi from the library on sway")
        #expect(try run(client, ["read"], display: sway).text == "hi from the library on sway\n")

        // No data-control: the same program goes through XWayland with no set-up.
        let mutter = try Compositor(.mutter)
        let gnome = try Peer(client, ["write", "hi from the library on GNOME"], display: mutter)
        defer { gnome.stop() }
        try gnome.waitForOutput("ready")
        #expect(try run("xclip", ["-o", "-selection", "clipboard"], display: mutter).text == "hi from the library on GNOME")
        // Told to use the compositor, it says why it cannot.
        let named = try run(client, ["read"], display: mutter, environment: ["XPB_BACKEND": "wayland"])
        #expect(named.status == 1 && named.error.contains("data-control"), "\(named.error)")
    }

    @Test("a package depending on xpb by git URL and version tag resolves and builds it (no unsafe flags) and reaches X")
    func gitDependency() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-git-client-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        // The library as a repository of its own, as a user's package fetches it: this tree's
        // manifest and sources, committed and tagged.
        let repository = work.appendingPathComponent("xpb")
        try FileManager.default.createDirectory(at: repository, withIntermediateDirectories: true)
        for entry in ["Package.swift", "Sources", "Modules"] {
            try FileManager.default.copyItem(at: packageRoot.appendingPathComponent(entry), to: repository.appendingPathComponent(entry))
        }
        let x = try Xvfb()
        let git = ["-c", "user.name=test", "-c", "user.email=test@localhost", "-C", repository.path]
        for command in [["init", "-q"], ["add", "-A"], ["commit", "-qm", "release"], ["tag", "1.0.0"]] {
            let outcome = try run(try which("git"), git + command, display: x)
            #expect(outcome.status == 0, "git \(command): \(outcome.error)")
        }
        let client = work.appendingPathComponent("client")
        try FileManager.default.createDirectory(at: client.appendingPathComponent("Sources/app"), withIntermediateDirectories: true)
        try """
            // swift-tools-version:6.0
            import PackageDescription
            let package = Package(
                name: "app",
                dependencies: [.package(url: "\(repository.absoluteString)", from: "1.0.0")],
                targets: [.executableTarget(name: "app", dependencies: [
                    .product(name: "PasteboardKit", package: "xpb"),
                    .product(name: "PasteboardX11", package: "xpb"),
                ])],
                swiftLanguageModes: [.v6]
            )

            """.write(to: client.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        try """
            import Foundation
            import PasteboardKit
            import PasteboardX11

            // Owns the clipboard until the test stops it.
            Pasteboard.general.string = "from a git dependency"
            while true { Thread.sleep(forTimeInterval: 60) }

            """.write(to: client.appendingPathComponent("Sources/app/main.swift"), atomically: true, encoding: .utf8)
        let build = try Peer("/usr/bin/nice", ["-n", "19", try which("swift"), "build", "-j", "1", "--package-path", client.path,
                                               "--scratch-path", packageRoot.appendingPathComponent(".build-git-client").path],
                             display: x).finish(timeout: 1200)
        #expect(build.status == 0, "\(build.text)\n\(build.error)")
        #expect(!(build.text + build.error).contains("unsafe"))
        let app = try Peer(packageRoot.appendingPathComponent(".build-git-client/debug/app").path, [], display: x)
        defer { app.stop() }
        #expect(eventually { (try? run("xclip", ["-o", "-selection", "clipboard"], display: x).text) == "from a git dependency" })
    }

    @Test("on a host without a display, Pasteboard.general is the headless xpbd's: a library program sets it and exits, and the desktop reads it with xpb paste over a real ssh")
    func headlessGeneral() throws {
        let client = try Self.build("debug")
        let x = try Xvfb()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-headless-client-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let runtime = root.appendingPathComponent("runtime").path
        let home = root.appendingPathComponent("home").path
        for directory in [runtime, home] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // The server: no display (the Xvfb only lends the test's environment), its own runtime directory.
        let server = ["DISPLAY": "", "XDG_RUNTIME_DIR": runtime, "HOME": home, "XDG_STATE_HOME": home + "/state", "XDG_CACHE_HOME": home + "/cache",
                      "XDG_CONFIG_HOME": home + "/config"]
        // No daemon yet: the library says what is missing.
        let none = try run(client, ["read"], display: x, environment: server)
        #expect(none.status == 1 && none.error.contains("no display and no headless xpbd"), "\(none.status) \(none.error)")
        let daemon = try Peer(try builtProduct("xpbd"), ["--headless", "--idle-exit", "0"], display: x, environment: server)
        defer { daemon.stop() }
        #expect(eventually(timeout: 10) { daemon.errorSoFar.contains("listening on") }, "\(daemon.errorSoFar)")
        let set = try run(client, ["set", "hi from a server"], display: x, environment: server)
        #expect(set.status == 0 && set.text == "set changeCount=1\n", "\(set.status) \(set.text) \(set.error)")
        // Another library process there reads it back.
        #expect(try run(client, ["read"], display: x, environment: server).text == "hi from a server\n")
        // The desktop, over ssh (sshd passes no environment: the remote command sets it).
        let sshd = try LoopbackSSHD(display: x)
        defer { sshd.stop() }
        let remote = "env -u DISPLAY XDG_RUNTIME_DIR=\(runtime) HOME=\(home) \(try builtProduct("xpb")) paste"
        let pasted = try run("/bin/sh", ["-c", "\(sshd.sshCommand) \(LoopbackSSHD.host) '\(remote)'"], display: x, timeout: 60)
        #expect(pasted.status == 0 && pasted.text == "hi from a server", "\(pasted.status) \(pasted.text) \(pasted.error)")
        let info = try run("/bin/sh", ["-c", "\(sshd.sshCommand) \(LoopbackSSHD.host) '\(remote.dropLast("paste".count))info'"], display: x, timeout: 60)
        #expect(info.text.contains("owner app: xpb-client"), "the library process that copied: \(info.text) \(info.error)")
    }

    @Test("docs/library.md's example is the client package's readme-example, word for word, and it runs")
    func readmeExample() throws {
        let source = try String(contentsOf: packageRoot.appendingPathComponent("Tests/ClientPackage/Sources/readme-example/main.swift"), encoding: .utf8)
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("docs/library.md"), encoding: .utf8)
        #expect(readme.contains("```swift\n" + source + "```"), "docs/library.md's example differs from Tests/ClientPackage/Sources/readme-example/main.swift")
        let client = try Self.build("debug")
        let example = client.replacingOccurrences(of: "/xpb-client", with: "/readme-example")
        let outcome = try run(example, [], display: try Xvfb(), timeout: 60)
        #expect(outcome.status == 0, "\(outcome.error)")
        #expect(outcome.text == """
            hi
            [public.utf8-plain-text]
            from an actor
            change 3: +[] -[public.html]
            no clipboard manager: the contents end with this process

            """)
    }
}
