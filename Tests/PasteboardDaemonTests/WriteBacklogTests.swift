import Dispatch
import Foundation
import Synchronization
import Testing
@testable import PasteboardDaemon

/// The copies waiting to be written: bounded by count and by bytes, a larger copy alone.
@Suite("The history's write backlog")
struct WriteBacklogTests {
    @Test("room by count and by bytes; a copy larger than the byte bound goes alone; leaving makes room")
    func bounds() {
        let backlog = WriteBacklog(maxCopies: 3, maxBytes: 100)
        #expect(backlog.tryEnter(60))
        #expect(!backlog.tryEnter(50), "110 bytes would wait")
        #expect(backlog.tryEnter(40))
        #expect(!backlog.tryEnter(1), "the bytes are full")
        backlog.leave(60)
        #expect(backlog.tryEnter(10) && backlog.tryEnter(10))
        #expect(!backlog.tryEnter(0), "three copies wait")
        backlog.leave(40)
        backlog.leave(10)
        backlog.leave(10)
        #expect(backlog.load == (0, 0))
        #expect(backlog.tryEnter(500), "alone, a copy past the byte bound is let in")
        #expect(!backlog.tryEnter(1))
        backlog.leave(500)
        #expect(backlog.load == (0, 0))
    }

    @Test("a writer waiting for room goes on once a copy is written; one that waits past its deadline goes on uncounted")
    func waiting() {
        let backlog = WriteBacklog(maxCopies: 1, maxBytes: 100)
        #expect(backlog.tryEnter(80))
        #expect(!backlog.enter(80, until: .now() + 0.05), "nothing left within the deadline")
        let entered = DispatchSemaphore(value: 0)
        let result = Mutex<Bool?>(nil)
        Thread.detachNewThread {
            let got = backlog.enter(80, until: .now() + 30)
            result.withLock { $0 = got }
            entered.signal()
        }
        #expect(entered.wait(timeout: .now() + 0.2) == .timedOut, "it waits while the first copy is unwritten")
        backlog.leave(80)
        #expect(entered.wait(timeout: .now() + 20) == .success)
        #expect(result.withLock { $0 } == true)
        #expect(backlog.load == (1, 80))
    }
}
