/// How many times each thread of a process had been given the processor when it was looked at
/// (``LocalProcess/timeslices(of:)``): the thread ids as listed, each one's count at the same index (as many).
package struct Timeslices: Sendable {
    package let threads: [Int]
    package let counts: [UInt64]

    package init(threads: [Int], counts: [UInt64]) {
        self.threads = threads
        self.counts = counts
    }

    /// Whether the process ran between `earlier` and this look: a thread seen both times was
    /// given the processor again, or a thread came or went (a thread is made by one that runs,
    /// and runs to its own end). Never a sum over the threads: one that ended would take its count
    /// out of it, and a process that ran would look as if it had not (seen in a test process whose
    /// worker threads come and go). Thread ids are unique: as many threads, each seen before, are
    /// the same threads.
    package func ran(since earlier: Timeslices) -> Bool {
        guard threads.count == earlier.threads.count else { return true }
        for index in threads.indices {
            guard let then = earlier.threads.firstIndex(of: threads[index]) else { return true }
            if counts[index] > earlier.counts[then] { return true }
        }
        return false
    }
}
