import Foundation
import Synchronization
import PasteboardKit
import PasteboardWayland
import Testing
import X11TestSupport

@Suite("Wayland requests from several threads")
struct ConcurrentRequestTests {
    /// The compositor takes a client's new ids only in the order they were made: a sync whose
    /// callback id was made before another thread's new source, and sent after it, ended the
    /// connection ("invalid arguments for wl_display@1.sync"; a loaded run's xpbd, clearing on
    /// one thread while its keeper copied on another).
    @Test("copies and clears from two threads at once: every new id reaches the compositor in the order made")
    func newIDsInOrder() throws {
        let sway = try Compositor()
        let backend = try WaylandPasteboardBackend(display: sway.runtimeDirectory + "/" + sway.socketName)
        let failures = Mutex<[String]>([])
        let rounds = 300
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            for round in 0..<rounds {
                do {
                    if worker == 0 {
                        try backend.clear(.general)
                    } else {
                        var item = PasteboardItem()
                        item.setData(Data("\(worker) \(round)".utf8), for: .utf8PlainText)
                        try backend.setItems([item], options: PasteboardOptions(), on: .general)
                    }
                } catch {
                    failures.withLock { $0.append("worker \(worker), round \(round): \(error)") }
                    return
                }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        #expect(backend.isConnected)
        var item = PasteboardItem()
        item.setData(Data("last".utf8), for: .utf8PlainText)
        try backend.setItems([item], options: PasteboardOptions(), on: .general)
        #expect(try run("wl-paste", ["-n"], display: sway).text == "last")
    }
}
