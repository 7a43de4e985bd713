import Foundation
import Synchronization
import Testing
@testable import PasteboardKit

@Suite("Change delivery")
struct ChangeCenterTests {
    static func change(_ count: Int, _ name: Pasteboard.Name = .general) -> PasteboardChange {
        PasteboardChange(name: name, changeCount: count, typesBefore: [], typesAfter: [.utf8PlainText])
    }

    @Test("changes are delivered in the order their places were reserved, whoever fills them first")
    func reservedOrder() async {
        let center = ChangeCenter()
        let stream = center.stream(for: nil)
        let first = center.reserve()
        let second = center.reserve()
        let third = center.reserve()
        // Filled out of order (a foreign change described late, on another thread): held back.
        center.publish(Self.change(3), in: third)
        center.publish(Self.change(2), in: second)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                center.publish(Self.change(1), in: first)
                done.resume()
            }
        }
        center.finish()
        var seen: [Int] = []
        for await change in stream { seen.append(change.changeCount) }
        #expect(seen == [1, 2, 3])
    }

    @Test("many threads publishing at once: every subscriber sees every count once, in order")
    func concurrentPublishers() async {
        let center = ChangeCenter()
        let counter = Mutex(0)
        let streams = (0..<3).map { _ in center.stream(for: .general) }
        DispatchQueue.concurrentPerform(iterations: 400) { _ in
            // Counting and reserving under one lock, as backends do; publishing outside it.
            let (count, slot) = counter.withLock { count -> (Int, ChangeCenter.Slot) in
                count += 1
                return (count, center.reserve())
            }
            center.publish(Self.change(count), in: slot)
        }
        center.finish()
        for stream in streams {
            var seen: [Int] = []
            for await change in stream { seen.append(change.changeCount) }
            #expect(seen == Array(1...400))
        }
    }

    @Test("a stream made while the center finishes ends, never hangs")
    func streamDuringFinish() async {
        for _ in 0..<200 {
            let center = ChangeCenter()
            let made = Mutex<AsyncStream<PasteboardChange>?>(nil)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    made.withLock { $0 = center.stream(for: nil) }
                    done.resume()
                }
                center.finish()
            }
            let stream = made.withLock { $0 }!
            for await _ in stream {}
        }
        let finished = ChangeCenter()
        finished.finish()
        for await _ in finished.stream(for: nil) { Issue.record("a finished center delivered a change") }
    }

    @Test("the observer is given the pasteboard that changed, the same handle a program holds")
    func observerHandle() throws {
        let objects = Mutex([String]())
        let holder = Mutex<Pasteboard?>(nil)
        let backend = InMemoryPasteboardBackend(changeCenter: ChangeCenter { _, board in
            guard let board, board === holder.withLock({ $0 }) else { return }
            objects.withLock { $0.append(board.name.rawValue) }
        })
        let general = Pasteboard.general(of: backend)
        let notes = try #require(Pasteboard(name: "notes", create: true, backend: backend))
        holder.withLock { $0 = notes }
        #expect(general === Pasteboard.general(of: backend))
        general.string = "not observed"
        notes.string = "observed"
        #expect(objects.withLock { $0 } == ["notes"])
    }

    @Test("a queue a thread waits on: every change in order across threads, the held ones after the end, then nil; only its pasteboard's")
    func queueInOrder() {
        let center = ChangeCenter()
        let queue = center.queue(for: .general)
        let counter = Mutex(0)
        let taken = Mutex<[Int]>([])
        let reader = Thread { while let change = queue.next() { taken.withLock { $0.append(change.changeCount) } } }
        reader.start()
        DispatchQueue.concurrentPerform(iterations: 300) { index in
            let (count, slot) = counter.withLock { count -> (Int, ChangeCenter.Slot) in
                count += 1
                return (count, center.reserve())
            }
            center.publish(Self.change(count), in: slot)
            if index % 50 == 0 { center.publish(Self.change(0, .find)) }
        }
        center.finish()
        // The reader ends once it has taken everything: nil came after the last change.
        var waited = 0
        while !reader.isFinished, waited < 2_000 {
            usleep(5_000)
            waited += 1
        }
        #expect(reader.isFinished)
        let seen = taken.withLock { $0 }
        #expect(seen == Array(1...300))
        #expect(queue.next() == nil, "and nil again")
        #expect(center.queue(for: nil).next() == nil, "a queue made after the end ends at once")
    }

    @Test("a queue nobody takes from keeps the newest changes, and a closed one takes no more")
    func queueBounded() {
        let center = ChangeCenter()
        let queue = center.queue(for: nil)
        for count in 1...(ChangeCenter.buffered + 500) { center.publish(Self.change(count)) }
        var seen: [Int] = []
        queue.close()
        center.publish(Self.change(99_999))
        while let change = queue.next() { seen.append(change.changeCount) }
        #expect(seen == Array(501...(ChangeCenter.buffered + 500)))
    }
}
