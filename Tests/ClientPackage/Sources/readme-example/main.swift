import Foundation
import PasteboardKit
import PasteboardX11

// Write: this process now owns the X clipboard of $DISPLAY; xclip, GTK and Qt apps paste "hi".
Pasteboard.general.string = "hi"

// Read, with errors that say what went wrong (no display, a stopped owner, a lost server).
do {
    print(try Pasteboard.general.readString() ?? "no text")   // hi
    print(try Pasteboard.general.readTypes())                  // a TARGETS conversion: no data moves
} catch {
    print("cannot read the clipboard: \(error)")
}

// Lazy providers run on a worker thread when a client first asks for their type.
var provider = ItemProvider()
provider.register(.html) { Data("<b>hi</b>".utf8) }
provider.register(.utf8PlainText) { Data("hi".utf8) }
try Pasteboard.general.setItemProviders([provider])

// Changes come as an AsyncStream (and to an observer given to the backend's ChangeCenter).
let changes = Pasteboard.general.changes

// From an actor: perform runs the calls on a worker thread, never blocking a cooperative one.
actor Clip {
    func copy(_ text: String) async throws -> String? {
        try await Pasteboard.general.perform { board in
            try board.setString(text)
            return try board.readString()
        }
    }
}
print(try await Clip().copy("from an actor") ?? "")       // from an actor
for await change in changes.prefix(1) {
    print("change \(change.changeCount): +\(change.typesAdded) -\(change.typesRemoved)")
}

// Before exiting, hand the contents to a clipboard manager (xpbd), or they go with this process.
let kept = try Pasteboard.flushToClipboardManager()
print(kept ? "a clipboard manager keeps the contents" : "no clipboard manager: the contents end with this process")
