import Testing
@testable import PasteboardSelections
import X11TestSupport

/// The census of who holds the display's client ends (``HolderCensus``), as a value: a made-up
/// host of processes, descriptors and connections, against listing every process every time.
@Suite("round three: the census of connection holders")
struct HolderCensusTests {
    /// A host: processes (pid → start, the client ends they hold), and each client end's maker
    /// (the pid the server accounts its client to).
    private struct Host {
        var processes: [Int: (start: UInt64, held: Set<UInt32>)] = [:]
        var makers: [UInt32: Int] = [:]
        var listings = 0

        var clientEnds: Set<UInt32> { Set(makers.keys) }
        var clientPIDs: [Int] { makers.values.sorted() }
        var census: [HolderCensus.Process] { processes.keys.sorted().map { HolderCensus.Process(pid: $0, start: processes[$0]!.start) } }

        /// What listing every process gives (the census's oracle).
        var everyHolding: [Int: Set<UInt32>] {
            processes.filter { !$0.value.held.isEmpty }.mapValues(\.held)
        }

        mutating func list(_ pid: Int) -> Set<UInt32>? {
            listings += 1
            return processes[pid]?.held
        }

        /// A connection's end closed by `pid`: the connection ends with its last holder.
        mutating func close(_ end: UInt32, in pid: Int) {
            processes[pid]?.held.remove(end)
            if !processes.values.contains(where: { $0.held.contains(end) }) { makers.removeValue(forKey: end) }
        }

        mutating func exit(_ pid: Int) {
            for end in processes[pid]?.held ?? [] { close(end, in: pid) }
            processes.removeValue(forKey: pid)
        }
    }

    private func look(_ census: inout HolderCensus, _ host: inout Host) -> (held: [Int: Set<UInt32>], listed: Set<Int>) {
        let (processes, ends, clients) = (host.census, host.clientEnds, host.clientPIDs)
        return census.holdings(processes: processes, clientEnds: ends, clientPIDs: clients) { host.list($0) }
    }

    @Test("after a first look that lists every process, only new processes, holders and clients of the server are listed again")
    func listsOnlyWhatMayHaveChanged() {
        var host = Host()
        // A shell (1), a daemon (2), xpbd (3) with its connection (100), an app (4) with its own (101).
        host.processes = [1: (10, []), 2: (11, []), 3: (12, [100]), 4: (13, [101])]
        host.makers = [100: 3, 101: 4]
        var census = HolderCensus()
        var look1 = look(&census, &host)
        #expect(look1.listed == [1, 2, 3, 4])
        #expect(look1.held == host.everyHolding)
        // xpb copy: a parent (5) connects (102) and forks its owner (6), then exits.
        host.processes[5] = (20, [102])
        host.makers[102] = 5
        host.processes[6] = (21, [102])
        host.processes.removeValue(forKey: 5)
        look1 = look(&census, &host)
        #expect(look1.listed == [3, 4, 6], "the shell and the daemon hold nothing and connected to nothing")
        #expect(look1.held == host.everyHolding)
        #expect(LocalProcess.handedDown(held: look1.held, clientPIDs: host.clientPIDs) == [6])
        // The daemon's pid is given to another process, which inherited a client end (a fork of
        // the app that kept its descriptor): a new start time, listed.
        host.processes[2] = (30, [101])
        let look2 = look(&census, &host)
        #expect(look2.listed.contains(2))
        #expect(look2.held == host.everyHolding)
    }

    @Test("a process's start time is field 22 of its stat line, counted after the command's last parenthesis")
    func startTimeOfAStatLine() {
        func start(_ line: String) -> UInt64? { LocalProcess.startTime(inStatLine: ArraySlice(Array(line.utf8))) }
        let fields = "S 1 2 3 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 4096 200 18446744073709551615"
        #expect(start("42 (xpb) " + fields + "\n") == 123456)
        // A command may hold spaces and parentheses: only the last `)` ends it.
        #expect(start("43 (a) (b c) " + fields) == 123456)
        #expect(start("44 (cut) S 1 2") == nil)
        #expect(start("45 no parenthesis") == nil)
        // Our own line, read as the census reads it.
        let own = (try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8)) ?? ""
        #expect(start(own) != nil)
    }

    @Test("a seeded host of forks, connections, closes, exits and pids given again: every look gives what listing every process gives", arguments: 0..<24)
    func matchesAFullListing(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var host = Host()
        host.processes = [1: (1, [])]
        var census = HolderCensus()
        var nextPID = 2, nextEnd: UInt32 = 100, clock: UInt64 = 2
        var everyListing = 0, censusListing = 0
        for _ in 0..<60 {
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                let pids = host.processes.keys.sorted()
                let pid = pids.randomElement(using: &random)!
                switch Int.random(in: 0..<10, using: &random) {
                case 0...2:
                    // A fork: the child holds what its parent holds; sometimes a pid given again.
                    let dead = (2..<nextPID).filter { host.processes[$0] == nil }
                    let child = Bool.random(using: &random) ? dead.randomElement(using: &random) ?? nextPID : nextPID
                    if child == nextPID { nextPID += 1 }
                    clock += 1
                    host.processes[child] = (clock, host.processes[pid]!.held)
                case 3...4:
                    // A connection: the server accounts it to its maker.
                    host.processes[pid]!.held.insert(nextEnd)
                    host.makers[nextEnd] = pid
                    nextEnd += 1
                case 5...6:
                    if let end = host.processes[pid]!.held.randomElement(using: &random) { host.close(end, in: pid) }
                case 7:
                    // Two descriptors of one end (dup) change nothing; an exec that closes all of them does.
                    for end in host.processes[pid]!.held where Bool.random(using: &random) { host.close(end, in: pid) }
                default:
                    if pid != 1 { host.exit(pid) }
                }
            }
            let before = host.listings
            let result = look(&census, &host)
            censusListing += host.listings - before
            everyListing += host.processes.count
            #expect(result.held == host.everyHolding, "seed \(seed)")
            #expect(LocalProcess.handedDown(held: result.held, clientPIDs: host.clientPIDs)
                    == LocalProcess.handedDown(held: host.everyHolding, clientPIDs: host.clientPIDs))
        }
        #expect(censusListing < everyListing, "the census lists fewer processes than listing all of them each time")
    }
}
