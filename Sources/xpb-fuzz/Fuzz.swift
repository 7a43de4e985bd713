import FoundationEssentials
import Glibc
import KDEConnect
import PasteboardDaemon
import PasteboardWayland
import PasteboardX11

// The fuzz target of xpb's parsers of untrusted bytes: what other X clients send
// (``UntrustedInput``), what sync peers and control clients send (``UntrustedPeerInput``), and
// what a Wayland compositor sends (``UntrustedCompositorInput``), the history's sealed
// payload files (``UntrustedHistoryFiles``), and what a KDE Connect device sends
// (``UntrustedDeviceInput``).
// Built for libFuzzer
// (see docs/library.md, "Fuzzing"):
//
//     swift build -c release --product xpb-fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING
//     .build/release/xpb-fuzz -max_total_time=600 Fuzz/corpus
//
// Built without FUZZING (as `swift build` does), it replays inputs: each file named on the
// command line is run once, so a crash the fuzzer found can be checked after a fix.

#if FUZZING
import Glibc

@_silgen_name("LLVMFuzzerRunDriver")
private func runDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
                       _ callback: @convention(c) (UnsafeRawPointer?, Int) -> CInt) -> CInt

@main
enum Fuzz {
    static func main() {
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runDriver(&argc, &argv) { start, count in
            let data = start.map { Data(bytes: $0, count: count) } ?? Data()
            UntrustedInput.exercise(data)
            UntrustedPeerInput.exercise(data)
            UntrustedCompositorInput.exercise(data)
            UntrustedHistoryFiles.exercise(data)
            UntrustedDeviceInput.exercise(data)
            return 0
        })
    }
}
#else
@main
enum Replay {
    static func main() {
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            printError("usage: xpb-fuzz FILE...  (replays fuzz inputs; build with -DFUZZING to fuzz)\n")
            exit(64)
        }
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else {
                printError("xpb-fuzz: cannot read \(path)\n")
                exit(1)
            }
            UntrustedInput.exercise(data)
            UntrustedPeerInput.exercise(data)
            UntrustedCompositorInput.exercise(data)
            UntrustedHistoryFiles.exercise(data)
            UntrustedDeviceInput.exercise(data)
        }
        print("replayed \(paths.count) input\(paths.count == 1 ? "" : "s")")
    }

    static func printError(_ message: String) {
        _ = message.withCString { write(2, $0, strlen($0)) }
    }
}
#endif
