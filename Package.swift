// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "xpb",
    products: [
        .library(name: "PasteboardKit", targets: ["PasteboardKit"]),
        .library(name: "PasteboardX11", targets: ["PasteboardX11"]),
        .executable(name: "xpb", targets: ["xpb"]),
    ],
    targets: [
        // Xlib, Xatom, Xutil and XFixes from Debian's libx11-dev and libxfixes-dev.
        .systemLibrary(
            name: "CX11",
            path: "Modules/CX11",
            pkgConfig: "x11 xfixes",
            providers: [.apt(["libx11-dev", "libxfixes-dev"])]
        ),
        // Linux calls Glibc's Swift module hides (SO_PEERCRED, memfd, SCM_RIGHTS), for the fast path.
        .systemLibrary(name: "CLinux", path: "Modules/CLinux"),
        // The platform-neutral pasteboard model: no X11 here.
        .target(name: "PasteboardKit"),
        // The X11 backend: selections, INCR, XFixes. Only this module sees Xlib.
        .target(name: "PasteboardX11", dependencies: ["PasteboardKit", "CX11", "CLinux"]),
        // The command line tool: parses (its own table-driven parser: start-up cost matters), calls
        // the library, prints.
        .executableTarget(name: "xpb", dependencies: ["PasteboardKit", "PasteboardX11", "CLinux"]),
        // The fuzz target of the parsers of untrusted bytes (libFuzzer; see the README). Built as
        // a replayer of saved inputs unless FUZZING is defined.
        .executableTarget(name: "xpb-fuzz", dependencies: ["PasteboardX11"]),
        .testTarget(name: "PasteboardKitTests", dependencies: ["PasteboardKit"]),
        // Test helpers: a private Xvfb per test, real peers (xclip, xsel) as child processes.
        .target(name: "X11TestSupport", path: "Tests/X11TestSupport"),
        .testTarget(name: "PasteboardX11Tests", dependencies: ["PasteboardX11", "PasteboardKit", "CX11", "X11TestSupport"]),
        // Runs the built xpb binary against a private Xvfb.
        .testTarget(name: "XPBToolTests", dependencies: ["PasteboardKit", "X11TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
