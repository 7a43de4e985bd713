// swift-tools-version:6.0
// A separate program that uses xpb's library the way any Swift package would: depends on it by
// path, imports PasteboardKit, PasteboardX11 and PasteboardWayland, calls nothing to set up. Built and run by
// Tests/PasteboardX11Tests/ClientPackageTests.swift (with -warnings-as-errors, Swift 6 mode)
// and by Benchmarks/run.sh.
import PackageDescription

let package = Package(
    name: "xpb-client",
    dependencies: [.package(name: "xpb", path: "../..")],
    targets: [
        .executableTarget(name: "xpb-client", dependencies: [
            .product(name: "PasteboardKit", package: "xpb"),
            .product(name: "PasteboardX11", package: "xpb"),
            .product(name: "PasteboardWayland", package: "xpb"),
        ]),
        // docs/library.md's example, word for word (a test checks they agree).
        .executableTarget(name: "readme-example", dependencies: [
            .product(name: "PasteboardKit", package: "xpb"),
            .product(name: "PasteboardX11", package: "xpb"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
