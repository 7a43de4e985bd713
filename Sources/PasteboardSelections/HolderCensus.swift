/// Which processes hold which client ends of the display's connections, kept from one look-up of
/// a selection's owner to the next (``LocalProcess/successor(of:display:clientPIDs:census:)``).
///
/// Listing every process's descriptors cost a daemon 105 ms of processor per copy on a host of
/// 386 processes and 20,000 descriptors (an `xpb copy` or an xclip forks after connecting, so
/// each of their copies needs a look). Most processes hold no client end and never will: a
/// process gains one only by connecting (the server then accounts a client to it), by being
/// forked from a holder (a new process), or by being passed a descriptor over a socket. So a
/// process is listed again only when it is new (a pid not seen, or seen with another start time:
/// a pid given again), held a client end at its last listing, or is accounted a client now; the
/// rest are known to hold none. What it does not see: a client end passed to an old process
/// over a socket (`SCM_RIGHTS`, `pidfd_getfd`).
///
/// A value: what `/proc` and the server show now in, holdings out; the descriptors are listed
/// through the closure it is given.
package struct HolderCensus: Sendable {
    /// A process as `/proc/N/stat` shows it.
    package struct Process: Sendable, Equatable {
        package let pid: Int
        /// Clock ticks from boot to the process's start: a pid given again is another process.
        package let start: UInt64
    }

    /// Each process at the last look-up: its start time and the client ends it held.
    private var entries: [Int: (start: UInt64, held: Set<UInt32>)] = [:]

    package init() {}

    /// The client ends each process holds (only processes that hold one), from `processes` (every
    /// process now), `clientEnds` (every client end of a connection to the display now) and
    /// `clientPIDs` (the server's pid of every client). `list(pid)` lists a process's descriptors
    /// and gives the client ends among them (nil when it cannot: gone, or another user's); it is
    /// called only for the processes that may hold one (see the type). Also returns the pids
    /// listed.
    package mutating func holdings(processes: [Process], clientEnds: Set<UInt32>, clientPIDs: [Int],
                                   list: (Int) -> Set<UInt32>?) -> (held: [Int: Set<UInt32>], listed: Set<Int>) {
        let clients = Set(clientPIDs)
        var next: [Int: (start: UInt64, held: Set<UInt32>)] = [:]
        var listed = Set<Int>()
        for process in processes {
            if let old = entries[process.pid], old.start == process.start, old.held.isEmpty, !clients.contains(process.pid) {
                next[process.pid] = old
            } else {
                next[process.pid] = (process.start, list(process.pid)?.intersection(clientEnds) ?? [])
                listed.insert(process.pid)
            }
        }
        entries = next
        return (next.filter { !$0.value.held.isEmpty }.mapValues(\.held), listed)
    }
}
