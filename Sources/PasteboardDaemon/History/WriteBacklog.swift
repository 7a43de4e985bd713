import Dispatch
import Synchronization

/// The copies handed to the history's writes and not written yet: at most ``maxCopies`` of them
/// and ``maxBytes`` of their bytes (a copy larger than that goes alone). Past either bound a copy
/// waits for room, so a flood of copies is slowed to the disk's pace instead of being held in
/// memory. Two D-Bus clients took xpbd to 1 GB before there was any bound; with the count alone,
/// twelve headless writers of 32 MiB took it to 261 MiB while their copies waited for a slow disk.
final class WriteBacklog: Sendable {
    let maxCopies: Int
    let maxBytes: Int

    private struct State {
        var copies = 0
        var bytes = 0
        /// Callers waiting for room: each one that leaves wakes them to look again.
        var waiting = 0
    }

    private let state = Mutex(State())
    private let freed = DispatchSemaphore(value: 0)

    init(maxCopies: Int, maxBytes: Int) {
        self.maxCopies = maxCopies
        self.maxBytes = maxBytes
    }

    /// Whether a copy of `bytes` finds room now (and takes it).
    func tryEnter(_ bytes: Int) -> Bool {
        state.withLock { state in Self.take(&state, bytes, maxCopies: maxCopies, maxBytes: maxBytes) }
    }

    /// Takes room for a copy of `bytes`, waiting until `deadline` for it; false when none came
    /// (the caller goes on uncounted, as a copy that waited that long must still be written).
    func enter(_ bytes: Int, until deadline: DispatchTime) -> Bool {
        while true {
            let admitted = state.withLock { state -> Bool in
                if Self.take(&state, bytes, maxCopies: maxCopies, maxBytes: maxBytes) { return true }
                state.waiting += 1
                return false
            }
            if admitted { return true }
            let woke = freed.wait(timeout: deadline)
            state.withLock { $0.waiting -= 1 }
            // A wake-up is a hint: the room is looked at again under the lock.
            if woke == .timedOut { return tryEnter(bytes) }
        }
    }

    /// A copy of `bytes` that had room was written (or dropped).
    func leave(_ bytes: Int) {
        let waiting = state.withLock { state -> Int in
            state.copies -= 1
            state.bytes -= bytes
            return state.waiting
        }
        for _ in 0..<waiting { freed.signal() }
    }

    /// How many copies and bytes wait now.
    var load: (copies: Int, bytes: Int) {
        state.withLock { ($0.copies, $0.bytes) }
    }

    private static func take(_ state: inout State, _ bytes: Int, maxCopies: Int, maxBytes: Int) -> Bool {
        guard state.copies == 0 || (state.copies < maxCopies && state.bytes + bytes <= maxBytes) else { return false }
        state.copies += 1
        state.bytes += bytes
        return true
    }
}
