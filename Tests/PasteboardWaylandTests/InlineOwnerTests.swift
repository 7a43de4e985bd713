import Foundation
import PasteboardKit
import PasteboardWayland
import Testing
import X11TestSupport

/// `xpb copy` on Wayland sets the selection with the events read inline (no thread), forks, and
/// the child hands the reading to a thread of its own: the backend must then serve with no call
/// of its own.
@Suite("Wayland: an inline owner handed to a thread")
struct WaylandInlineOwnerTests {
    @Test("a source set with the events read inline is served after startThread() with no call of its own, a reader that asked before included; then replaced and cleared")
    func inlineThenThread() throws {
        let sway = try Compositor()
        var configuration = WaylandPasteboardBackend.Configuration()
        configuration.runsOnCallersThread = true
        let backend = try WaylandPasteboardBackend(display: sway.runtimeDirectory + "/" + sway.socketName, configuration: configuration)
        var item = PasteboardItem()
        item.setData(Data("inline ✓".utf8), for: .utf8PlainText)
        try backend.setItems([item], options: PasteboardOptions(), on: .general)
        // Nobody reads the events now: a reader that asks meanwhile is answered once they are.
        let reader = try Peer(try which("wl-paste"), ["-n"], display: sway)
        try backend.startThread()
        let answered = try reader.finish(timeout: 30)
        #expect(answered.status == 0 && answered.text == "inline ✓", "\(answered.error)")
        // Calls wait on the reading thread now, as a backend made with one does.
        item.setData(Data("second".utf8), for: .utf8PlainText)
        try backend.setItems([item], options: PasteboardOptions(), on: .general)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "second")
        try backend.clear(.general)
        #expect(eventually(timeout: 10) { (try? run("wl-paste", ["-n"], display: sway).status) != 0 })
        // A second start changes nothing.
        try backend.startThread()
        #expect(backend.isConnected)
    }
}
