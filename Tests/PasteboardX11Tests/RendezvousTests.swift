import Dispatch
import FoundationEssentials
import PasteboardKit
import Synchronization
import Testing
@testable import PasteboardX11

/// The meeting point between a waiting thread and the X thread carries its value untyped (a
/// generic class cost a paste its metadata at run time): each waiter gets back what was
/// fulfilled, as the type it names.
@Suite("Rendezvous")
struct RendezvousTests {
    @Test("a value comes back as it was fulfilled: a Bool, a Data? holding bytes, and a Data? holding nil (not a failed cast)")
    func values() throws {
        let flag = Rendezvous()
        flag.fulfil(Result<Bool, any Error>.success(true))
        let answered: Bool = try flag.wait(timeout: 5, stopped: { nil })
        #expect(answered)

        let present = Rendezvous()
        present.fulfil(Result<Data?, any Error>.success(Data([1, 2, 3])))
        let bytes: Data? = try present.wait(timeout: 5, stopped: { nil })
        #expect(bytes == Data([1, 2, 3]))

        let absent = Rendezvous()
        absent.fulfil(Result<Data?, any Error>.success(nil))
        let nothing: Data? = try absent.wait(timeout: 5, stopped: { nil })
        #expect(nothing == nil)
    }

    @Test("the first fulfilment wins, from another thread too; a failure comes back as thrown")
    func firstWins() throws {
        let once = Rendezvous()
        DispatchQueue.global().async { once.fulfil(Result<Int, any Error>.success(1)) }
        let first: Int = try once.wait(timeout: 5, stopped: { nil })
        once.fulfil(Result<Int, any Error>.success(2))
        #expect(first == 1)

        let failed = Rendezvous()
        failed.fulfil(Result<Bool, any Error>.failure(X11BackendError.connectionLost))
        #expect(throws: X11BackendError.self) { let _: Bool = try failed.wait(timeout: 5, stopped: { nil }) }
    }

    @Test("a waiter that names another type than the one fulfilled gets an error, not a crash")
    func mismatch() {
        let rendezvous = Rendezvous()
        rendezvous.fulfil(Result<Int, any Error>.success(7))
        #expect(throws: PasteboardError.self) { let _: String = try rendezvous.wait(timeout: 5, stopped: { nil }) }
    }

    @Test("a stopped connection and a deadline end the wait with their errors")
    func stoppedAndDeadline() {
        let stopped = Rendezvous()
        #expect(throws: X11BackendError.self) { let _: Bool = try stopped.wait(timeout: 30, stopped: { .connectionLost }) }
        let late = Rendezvous()
        #expect(throws: PasteboardError.self) { let _: Bool = try late.wait(timeout: 0.05, stopped: { nil }) }
    }

    @Test("inline (the loop runs on the waiting thread), the wait runs turns until one fulfils it, and none once it is fulfilled")
    func inline() throws {
        let turns = Mutex(0)
        let meeting = Mutex<Rendezvous?>(nil)
        let inline = Rendezvous(pump: {
            let turn = turns.withLock { count -> Int in
                count += 1
                return count
            }
            if turn == 3 { meeting.withLock { $0 }?.fulfil(Result<String, any Error>.success("third")) }
        })
        meeting.withLock { $0 = inline }
        let answer: String = try inline.wait(timeout: 5, stopped: { nil })
        #expect(answer == "third")
        #expect(turns.withLock { $0 } == 3)

        let settled = Rendezvous(pump: { turns.withLock { $0 += 1 } })
        settled.fulfil(Result<Int, any Error>.success(4))
        let value: Int = try settled.wait(timeout: 5, stopped: { nil })
        #expect(value == 4)
        #expect(turns.withLock { $0 } == 3)

        // A loop whose turns never fulfil it ends with the stop's reason.
        let stopping = Rendezvous(pump: {})
        #expect(throws: X11BackendError.self) { let _: Bool = try stopping.wait(timeout: 30, stopped: { .connectionLost }) }
    }
}
