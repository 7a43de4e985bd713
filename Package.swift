// swift-tools-version:6.0
import PackageDescription

// The daemon's modules, the command line table and the xpb command's own module are built for size
// in release builds: the static binary (xpb, xpbd a link to it) has a size limit, and a one-shot
// copy or paste measured the same either way (its time is the process start and the X round trips).
// Never a module of the library's products: a package depending on xpb may not build unsafe flags.
let daemonSize: [SwiftSetting] = [.unsafeFlags(["-Osize"], .when(configuration: .release))]

let package = Package(
    name: "xpb",
    products: [
        .library(name: "PasteboardKit", targets: ["PasteboardKit"]),
        .library(name: "PasteboardX11", targets: ["PasteboardX11"]),
        .library(name: "PasteboardSelections", targets: ["PasteboardSelections"]),
        .library(name: "PasteboardWayland", targets: ["PasteboardWayland"]),
        .executable(name: "xpb", targets: ["xpb"]),
        .executable(name: "xpbd", targets: ["xpbd"]),
        .executable(name: "xpbd-kdeconnect", targets: ["xpbd-kdeconnect"]),
    ],
    dependencies: [
        // Logging for the daemon (xpbd) only: the library and xpb do not link it.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // Xlib, Xatom, Xutil, XFixes and X-Resource (who owns a selection) from Debian's
        // libx11-dev, libxfixes-dev and libxres-dev.
        .systemLibrary(
            name: "CX11",
            path: "Modules/CX11",
            pkgConfig: "x11 xfixes xres",
            providers: [.apt(["libx11-dev", "libxfixes-dev", "libxres-dev"])]
        ),
        // Linux calls Glibc's Swift module hides (SO_PEERCRED, memfd, SCM_RIGHTS), for the fast path.
        .systemLibrary(name: "CLinux", path: "Modules/CLinux"),
        // SQLite's C API (Debian's libsqlite3-dev), for the daemon's history.
        .systemLibrary(name: "CSQLite", path: "Modules/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // libdbus-1, D-Bus's reference implementation (Debian's libdbus-1-dev), for xpbd's session
        // bus service; CDBusGlue gives its static archive the two libsystemd calls it names.
        .systemLibrary(name: "CDBus", path: "Modules/CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .target(name: "CDBusGlue"),
        // The command line as the C library hands it to the program, for Swift's
        // CommandLine.arguments: the runtime's own reads /proc/self/maps at every start (5 % of a
        // 13-byte paste). Linked into xpb only; see its .c file.
        .target(name: "CProcessArguments"),
        // The history sealed at rest: an SQLite VFS sealing every page of the database, its log
        // and journals, and sealed payload files; AES-256-GCM from nettle (Debian: nettle-dev),
        // 37 KB in the static binary; and SHA-256, the names of the content-addressed files.
        .target(name: "CHistorySeal", dependencies: ["CSQLite"], linkerSettings: [.linkedLibrary("nettle")]),
        // The event queue, owned by XCB and read one decoded event at a time (Xlib internals and
        // Xlib-xcb, apart from CX11). Debian: libx11-xcb-dev.
        .target(name: "CXEvents", dependencies: ["CX11"], linkerSettings: [.linkedLibrary("X11-xcb"), .linkedLibrary("xcb")]),
        // Glue to Debian's image codecs: libpng, libjpeg-turbo (TurboJPEG), libwebp, libtiff,
        // stb_image (BMP and GIF reading, BMP writing, resizing), libnetpbm and libXpm (writing).
        .target(name: "CImageCodecs", linkerSettings: [
            // Debian: libpng-dev, libturbojpeg0-dev, libwebp-dev, libtiff-dev, libstb-dev,
            // libnetpbm-dev, libxpm-dev.
            .linkedLibrary("png16"), .linkedLibrary("turbojpeg"), .linkedLibrary("webp"), .linkedLibrary("tiff"),
            .linkedLibrary("stb"), .linkedLibrary("netpbm"), .linkedLibrary("Xpm"), .linkedLibrary("X11"),
            .linkedLibrary("z"), .linkedLibrary("m"),
        ]),
        // Image conversion between the formats the clipboard carries, with a pixel limit on
        // decodes; registers itself as the model's image converter (PasteboardKit's
        // ImageConversion), so that the model links no image library.
        .target(name: "ImageCodecs", dependencies: ["CImageCodecs", "PasteboardKit"]),
        // The platform-neutral pasteboard model: no X11 API and no X library here (the image
        // codecs, whose XPM writer links libX11, register themselves from their own module).
        // FoundationEssentials only, as every module the binaries link: Foundation proper brings
        // 44 MB of ICU data into a static binary.
        .target(name: "PasteboardKit", dependencies: ["CLinux"]),
        // What every host of pasteboards serves and reads, with no display: selection names, the
        // manifest, the target plans of held and kept selections, the offer reader, remote
        // targets; and the backend of a host without a display (xpbd's control socket), which
        // Pasteboard.general picks where there is no display and xpbd answers.
        .target(name: "PasteboardSelections", dependencies: ["PasteboardKit", "PasteboardWire", "CLinux"]),
        // The X11 backend: selections, INCR, XFixes. Only this module sees Xlib.
        .target(name: "PasteboardX11", dependencies: ["PasteboardKit", "PasteboardSelections", "ImageCodecs", "PasteboardWire", "CX11", "CXEvents", "CLinux"]),
        // The Wayland backend: data-control over a wire codec of our own (Debian ships no static
        // libwayland-client), so that the binaries stay static. No Wayland library is linked.
        .target(name: "PasteboardWayland", dependencies: ["PasteboardKit", "PasteboardSelections", "PasteboardWire", "CLinux"]),
        // The command line tool: parses (its own table-driven parser: start-up cost matters), calls
        // the library, prints.
        // Also xpbd: run under that name (the installed xpbd is a link to xpb), it is the daemon.
        .executableTarget(name: "xpb", dependencies: ["CProcessArguments", "PasteboardKit", "ImageCodecs", "PasteboardSelections", "PasteboardX11", "PasteboardWayland", "PasteboardWire", "CommandLineTable", "CLinux", "DaemonTool", "PasteboardDaemon"], swiftSettings: daemonSize),
        // The table-driven command line parser and help of xpb and xpbd.
        .target(name: "CommandLineTable", swiftSettings: daemonSize),
        // The daemon's control protocol: framing, message types, version, socket path. No I/O
        // dependency, so that xpb's blocking client stays fast to start.
        .target(name: "PasteboardWire"),
        // The daemon's core, knowing no display: the daemon over a host port (ClipboardHost), the
        // history, the rules (secret, app, content, taken back), sync, the control socket, D-Bus,
        // and the host without a display (memory). It depends on neither PasteboardX11 nor
        // PasteboardWayland: the compiler keeps the hosts out (docs/ARCHITECTURE.md).
        .target(name: "PasteboardDaemon", dependencies: [
            "PasteboardKit", "PasteboardSelections", "ImageCodecs", "PasteboardWire", "CSQLite", "CLinux",
            "CDBus", "CDBusGlue", "CHistorySeal",
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: daemonSize),
        // The X display's host port: the ICCCM clipboard manager, SAVE_TARGETS, PRIMARY and
        // CLIPBOARD carried to each other, the X sync surface.
        .target(name: "DaemonDisplayHost", dependencies: [
            "PasteboardDaemon", "PasteboardKit", "PasteboardSelections", "PasteboardWire", "PasteboardX11",
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: daemonSize),
        // The Wayland session's host port: data-control, the paste queue's sources, the Wayland
        // sync surface.
        .target(name: "DaemonWaylandHost", dependencies: [
            "PasteboardDaemon", "PasteboardKit", "PasteboardSelections", "PasteboardWire", "PasteboardWayland",
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: daemonSize),
        // KDE Connect's LAN protocol as pure values, no sockets: its packets, their framing and
        // the checks an untrusted device's bytes meet, the link's handshake, pairing, and the
        // clipboard's rule across the link. Host-free, like the daemon's core.
        .target(name: "KDEConnect", swiftSettings: daemonSize),
        // TLS, keys and certificates from OpenSSL (libssl), for KDE Connect's link.
        .systemLibrary(name: "CTLS", path: "Modules/CTLS", providers: [.apt(["libssl-dev"])]),
        // KDE Connect's link to a device: the device's certificate and key, TLS over a socket
        // in the handshake's role, the device's certificate checked against the pinned one.
        // Not linked into xpb: TLS with X.509 draws about 4 MB of OpenSSL into a static binary.
        .target(name: "KDEConnectLink", dependencies: ["KDEConnect", "CTLS", "PasteboardKit", "CLinux"]),
        // xpbd's command line (options, configuration file, logging, signals), thin over
        // PasteboardDaemon, and the one place that wires hosts to it (DaemonSession; the bridge
        // of the two); a library, so that the xpb binary can run it when called as xpbd.
        .target(name: "DaemonTool", dependencies: [
            "PasteboardDaemon", "DaemonDisplayHost", "DaemonWaylandHost", "PasteboardKit", "PasteboardWire", "PasteboardX11",
            "PasteboardWayland", "CommandLineTable", .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: daemonSize),
        // The daemon as an executable of its own, for development builds and the tests; make
        // installs xpbd as a link to xpb instead (one binary).
        .executableTarget(name: "xpbd", dependencies: ["DaemonTool"]),
        // The KDE Connect device `xpbd --kdeconnect` runs beside it, linked to it by xpb-sync
        // on its standard input and output: a program of its own so that xpb carries no TLS.
        .executableTarget(name: "xpbd-kdeconnect", dependencies: [
            "KDEConnect", "KDEConnectLink", "PasteboardDaemon", "PasteboardKit", "PasteboardSelections", "PasteboardWire",
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: daemonSize),
        // The fuzz target of the parsers of untrusted bytes (libFuzzer; see the README). Built as
        // a replayer of saved inputs unless FUZZING is defined.
        .executableTarget(name: "xpb-fuzz", dependencies: ["PasteboardX11", "PasteboardSelections", "PasteboardDaemon", "PasteboardWayland", "KDEConnect"]),
        .testTarget(name: "PasteboardWaylandTests", dependencies: ["PasteboardWayland", "PasteboardKit", "X11TestSupport"]),
        .testTarget(name: "PasteboardKitTests", dependencies: ["PasteboardKit", "ImageCodecs"]),
        .testTarget(name: "ImageCodecsTests", dependencies: ["ImageCodecs", "PasteboardKit", "X11TestSupport"]),
        // Test helpers: a private Xvfb per test, real peers (xclip, xsel) as child processes.
        .target(name: "X11TestSupport", dependencies: ["CHistorySeal"], path: "Tests/X11TestSupport"),
        .testTarget(name: "PasteboardX11Tests", dependencies: ["PasteboardX11", "PasteboardSelections", "PasteboardWire", "PasteboardKit", "CX11", "X11TestSupport"]),
        // Runs the built xpb binary against a private Xvfb.
        .testTarget(name: "XPBToolTests", dependencies: ["PasteboardKit", "PasteboardWire", "X11TestSupport"]),
        // KDE Connect's packets, handshake, pairing and clipboard rule, as pure values.
        .testTarget(name: "KDEConnectTests", dependencies: ["KDEConnect", "KDEConnectLink", "CLinux", "X11TestSupport"]),
        // The daemon's store, policy and wire format, and the daemon running against a private Xvfb.
        .testTarget(name: "PasteboardDaemonTests", dependencies: ["PasteboardDaemon", "CHistorySeal", "PasteboardWire", "PasteboardX11", "PasteboardSelections", "PasteboardKit", "X11TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
