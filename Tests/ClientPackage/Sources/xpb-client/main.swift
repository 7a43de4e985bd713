// A library user's program: docs/library.md's example, an actor using the async API, and a slow
// provider for the benchmark. Every mode prints what it saw; errors go to stderr, exit 1.
import Foundation
import PasteboardKit
import PasteboardWayland
import PasteboardX11


/// Copies, reads back and inspects from inside an actor, through the async API only.
actor Editor {
    let board = Pasteboard.general

    func run(_ text: String) async throws -> String {
        try await board.perform { try $0.setString(text) }
        let (read, types, patterns, links) = try await board.perform { board in
            (try board.readString() ?? "nil", try board.readTypes().map(\.identifier).joined(separator: ","),
             try board.detectPatterns(for: [.probableWebURL]).map(\.rawValue).sorted(),
             try board.detectValues(for: [.links]).links.map(\.absoluteString))
        }
        return "read=\(read) types=\(types) patterns=\(patterns.joined(separator: ",")) links=\(links.joined(separator: ","))"
    }
}

/// Writes a line to standard output at once (a test waits for it).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments.dropFirst()
do {
    switch arguments.first {
    case "write":
        // The one-liner: no set-up, the X clipboard of $DISPLAY.
        Pasteboard.general.string = arguments.dropFirst().joined(separator: " ")
        say("ready changeCount=\(Pasteboard.general.changeCount)")
        while true { sleep(60) }
    case "set":
        // The one-liner where the pasteboards outlive this process (a host without a display,
        // whose headless xpbd holds them): set, then exit.
        Pasteboard.general.string = arguments.dropFirst().joined(separator: " ")
        say("set changeCount=\(Pasteboard.general.changeCount)")
    case "read":
        print(try Pasteboard.general.readString() ?? "(no text)")
    case "actor":
        print(try await Editor().run(arguments.dropFirst().joined(separator: " ")))
    case "slow-provider":
        // An owner whose HTML takes this many seconds to produce; its text is at hand.
        let seconds = Double(arguments.dropFirst().first ?? "2") ?? 2
        var provider = ItemProvider()
        provider.register(.html) {
            Thread.sleep(forTimeInterval: seconds)
            return Data("<b>slow</b>".utf8)
        }
        provider.register(.utf8PlainText) { Data("fast".utf8) }
        try Pasteboard.general.setItemProviders([provider])
        say("ready")
        while true { sleep(60) }
    default:
        FileHandle.standardError.write(Data("usage: xpb-client write TEXT | set TEXT | read | actor TEXT | slow-provider SECONDS\n".utf8))
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("xpb-client: \(error)\n".utf8))
    exit(1)
}
