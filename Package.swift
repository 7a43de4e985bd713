// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "xpb",
    products: [
        .library(name: "PasteboardKit", targets: ["PasteboardKit"]),
    ],
    targets: [
        // Xlib, Xatom, Xutil and XFixes from Debian's libx11-dev and libxfixes-dev.
        .systemLibrary(
            name: "CX11",
            path: "Modules/CX11",
            pkgConfig: "x11 xfixes",
            providers: [.apt(["libx11-dev", "libxfixes-dev"])]
        ),
        // The platform-neutral pasteboard model: no X11 here.
        .target(name: "PasteboardKit"),
        .testTarget(name: "PasteboardKitTests", dependencies: ["PasteboardKit"]),
    ],
    swiftLanguageModes: [.v6]
)
