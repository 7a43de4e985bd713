import CLinux
import Foundation
import Synchronization
import Testing
@testable import PasteboardDaemon
@testable import PasteboardX11
@testable import PasteboardSelections

/// The pure parts of the third attack round's fixes (issue 41).
@Suite("round three: attribution")
struct AttributionUnitTests {
    @Test("a connection is handed down only when no holder is the process the server names")
    func handedDown() {
        // xclip's child (40) holds the connection its dead parent (39) made; xpbd (10) holds its
        // two; xprop (41) its one: the child alone.
        #expect(LocalProcess.handedDown(held: [10: [1, 2], 40: [3], 41: [4]], clientPIDs: [10, 10, 39, 41]) == [40])
        // A child that shares the connection of a parent that lives explains nothing new.
        #expect(LocalProcess.handedDown(held: [20: [5], 21: [5]], clientPIDs: [20]).isEmpty)
        // A process that holds more than the server accounts to it: which one it made is unknown,
        // so it is a holder of a handed-down connection.
        #expect(LocalProcess.handedDown(held: [30: [6, 7]], clientPIDs: [30, 29]) == [30])
        // Two forked owners of dead parents (xclip's child, and dbus-launch's, which a desktop
        // without a user bus has): both are candidates, told apart by which one answers.
        #expect(LocalProcess.handedDown(held: [50: [8], 60: [9]], clientPIDs: [49, 59]) == [50, 60])
        // The server's unknown pids (another host's clients) explain nothing.
        #expect(LocalProcess.handedDown(held: [70: [11]], clientPIDs: [-1, 0]) == [70])
    }

    @Test("a pipe's reader is the other process that holds it; its end is seen when it comes, not before")
    func pipeReader() throws {
        // A reader as wl-paste is one: it holds the read end of the pipe we write to (`cat`,
        // whose standard input it is), and has closed the write end.
        let (reader, readEnd, writeEnd) = try catReadingPipe()
        try readEnd.close()
        let write = writeEnd.fileDescriptor
        #expect(LocalProcess.readerOfPipe(write) == Int(reader.processIdentifier))
        // The compositor that passed the descriptor on may hold a copy a moment: it is the
        // reader only when nobody else holds the pipe.
        #expect(LocalProcess.readerOfPipe(write, passedBy: Int(reader.processIdentifier)) == Int(reader.processIdentifier))
        #expect(LocalProcess.readerOfPipe(write, passedBy: 1) == Int(reader.processIdentifier))
        #expect(LocalProcess.readerOfPipe(-1) == nil)
        #expect(LocalProcess.readerOfPipe(FileHandle.nullDevice.fileDescriptor) == nil, "not a pipe")
        #expect(!LocalProcess.waitForExit(of: Int(reader.processIdentifier), timeout: 0.1), "it reads on")
        try writeEnd.close()
        #expect(LocalProcess.waitForExit(of: Int(reader.processIdentifier), timeout: 10), "the end of its input ends it")
        reader.waitUntilExit()
    }

    /// `cat` started with a new pipe's read end as its standard input; both ends are still
    /// open here. Both close on exec: a process another test starts meanwhile must not inherit
    /// them and hold the pipe too (Foundation's Pipe makes inheritable descriptors; one such
    /// holder made the pipe-reader test name a stranger under a full run).
    private func catReadingPipe() throws -> (reader: Process, readEnd: FileHandle, writeEnd: FileHandle) {
        var ends: [Int32] = [-1, -1]
        try #require(clinux_pipe_cloexec(&ends) == 0)
        let readEnd = FileHandle(fileDescriptor: ends[0], closeOnDealloc: false)
        let writeEnd = FileHandle(fileDescriptor: ends[1], closeOnDealloc: false)
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/bin/cat")
        reader.standardInput = readEnd
        reader.standardOutput = FileHandle.nullDevice
        try reader.run()
        return (reader, readEnd, writeEnd)
    }

    @Test("a child of ours between its fork and its exec, holding the pipe by accident, is not its reader")
    func unexecutedChild() throws {
        // Under a full run, another test's spawn made such a child just as the pipe was looked
        // at: it held both ends (its exec would close them) and was named the reader.
        let (reader, readEnd, writeEnd) = try catReadingPipe()
        // A fork that never execs: it holds every descriptor of ours until it is killed.
        let child = fork()
        if child == 0 { while true { pause() } }
        try #require(child > 0)
        try readEnd.close()
        let cat = Int(reader.processIdentifier)
        #expect(LocalProcess.readerOfPipe(writeEnd.fileDescriptor) == cat)
        // The passer aside, the fork is the only other holder: nobody reads but the passer.
        #expect(LocalProcess.readerOfPipe(writeEnd.fileDescriptor, passedBy: cat) == cat)
        kill(child, SIGKILL)
        var status: Int32 = 0
        waitpid(child, &status, 0)
        try writeEnd.close()
        reader.waitUntilExit()
    }

    @Test("of several holders, the one that ran since is told; a sleeping one never is; two that ran are both told")
    func ranSince() throws {
        // A process asleep for the test's length, as dbus-launch's child waits on its socket.
        let sleeper = try Process.run(URL(fileURLWithPath: "/bin/sleep"), arguments: ["30"])
        defer { kill(sleeper.processIdentifier, SIGKILL) }
        let asleep = Int(sleeper.processIdentifier)
        // It has run (to exec), then sleeps: wait until it is asleep in its nanosleep.
        #expect(eventually { (try? String(contentsOfFile: "/proc/\(asleep)/stat", encoding: .utf8))?.split(separator: " ")[2] == "S" })
        let me = Int(getpid())
        #expect(LocalProcess.timeslices(of: me) != nil, "the kernel keeps scheduler statistics")
        #expect(LocalProcess.timeslices(of: 0) == nil)
        let before = [me, asleep].map { (pid: $0, timeslices: LocalProcess.timeslices(of: $0)) }
        // This process runs again (a sleep gives the processor up, and back).
        usleep(20_000)
        #expect(LocalProcess.ran(before) == [me])
        // Both ran: both are told (the owner is one of them).
        let earlier = before.map { (pid: $0.pid, timeslices: $0.timeslices.map { Timeslices(threads: $0.threads, counts: $0.counts.map { $0 - 1 }) }) }
        #expect(LocalProcess.ran(earlier) == [me, asleep])
        // None ran (a gone process's counts are unknown).
        #expect(LocalProcess.ran([(pid: asleep, timeslices: LocalProcess.timeslices(of: asleep))]).isEmpty)
    }

    @Test("a process ran when a thread seen twice ran again, or a thread came or went; never told by a sum that a thread's end lowers")
    func timeslicesCompared() {
        let earlier = Timeslices(threads: [10, 11, 12], counts: [5, 500, 7])
        #expect(!earlier.ran(since: earlier), "nothing ran")
        #expect(!Timeslices(threads: [12, 10, 11], counts: [7, 5, 500]).ran(since: earlier), "the threads listed in another order")
        #expect(Timeslices(threads: [10, 11, 12], counts: [5, 500, 8]).ran(since: earlier))
        // Thread 11 ended (it ran to its end) while 10 ran once more: the sum fell by 499, the
        // process ran.
        #expect(Timeslices(threads: [10, 12], counts: [6, 7]).ran(since: earlier))
        #expect(Timeslices(threads: [10, 12], counts: [5, 7]).ran(since: earlier), "a thread ended")
        #expect(Timeslices(threads: [10, 11, 12, 13], counts: [5, 500, 7, 1]).ran(since: earlier), "a thread was made")
        // A count that went down (a thread id used again) is not taken for a run by itself.
        #expect(!Timeslices(threads: [10, 11, 12], counts: [5, 499, 7]).ran(since: earlier))
    }

    @Test("a job's names: a script is named by its script, not its shell; every live process of the process group counts; a password manager's job is told from its caller")
    func jobNames() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-job-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A password manager's script that runs a helper (here sleep, as pass runs xclip).
        let script = directory.appendingPathComponent("passage").path
        let childFile = directory.appendingPathComponent("child").path
        try "sleep 30 & echo $! > \(childFile); wait\n".write(toFile: script, atomically: true, encoding: .utf8)
        // A job of its own, as a terminal's shell makes one; none of our pipes (the test runner
        // waits for them to close).
        let job = Process()
        job.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        job.arguments = ["-w", "/bin/sh", script]
        job.standardInput = FileHandle.nullDevice
        job.standardOutput = FileHandle.nullDevice
        job.standardError = FileHandle.nullDevice
        try job.run()
        defer {
            // The whole job goes: its process group.
            if let child = (try? String(contentsOfFile: childFile, encoding: .utf8)).flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
               let group = LocalProcess.status(of: child)?.processGroup, group > 1 {
                kill(pid_t(-group), SIGKILL)
            }
            job.terminate()
        }
        #expect(eventually { FileManager.default.fileExists(atPath: childFile) && ((try? String(contentsOfFile: childFile, encoding: .utf8))?.hasSuffix("\n") ?? false) })
        let child = try #require(Int((try String(contentsOfFile: childFile, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)))
        // `$!` is written as soon as the shell forks: the child is a copy of the script's shell
        // until it has exec'd sleep.
        #expect(eventually { LocalProcess.names(of: child).contains("sleep") }, "\(LocalProcess.names(of: child))")
        let names = LocalProcess.jobNames(of: child)
        #expect(names.contains("passage") && names.contains("sleep"), "\(names)")
        let tool = try #require(PasswordTool(calling: child, secretApps: AppRules().secretAppNames))
        #expect(tool.name == "passage")
        #expect(tool.started <= Date() && tool.started > Date().addingTimeInterval(-60), "\(tool.started)")
        // This test's own process is no password manager's job.
        #expect(PasswordTool(calling: Int(getpid()), secretApps: AppRules().secretAppNames) == nil)
    }

    @Test("of several holders, the exiting ones are waited for in one wait; the one left serves, two left tell nothing")
    func servingHolder() throws {
        let sleepers = try (0..<2).map { _ in try Process.run(URL(fileURLWithPath: "/bin/sleep"), arguments: ["30"]) }
        // SIGKILL: a child started through Foundation inherits the signals this process's
        // threads block (SIGTERM among them), and would sleep its 30 s out.
        defer { sleepers.forEach { kill($0.processIdentifier, SIGKILL) } }
        let (a, b) = (Int(sleepers[0].processIdentifier), Int(sleepers[1].processIdentifier))
        #expect(eventually { [a, b].allSatisfy { (try? String(contentsOfFile: "/proc/\($0)/stat", encoding: .utf8))?.split(separator: " ")[2] == "S" } })
        // Neither goes: both are left when the wait ends, and nobody is named.
        #expect(LocalProcess.waitForExits([a, b], leaving: 1, timeout: 0.05).sorted() == [a, b].sorted())
        #expect(LocalProcess.serving([a, b], exitWait: 0.05, ask: {}) == nil)
        // One left already: no wait.
        #expect(LocalProcess.waitForExits([a, 0], leaving: 1, timeout: 30) == [a])

        // A holder that exits during the wait (its input ends): the wait ends then, with the other.
        // (Its pipe is close-on-exec here, as catReadingPipe's: a process another test starts
        // meanwhile must not hold the write end, or cat never sees its input end.)
        func exiting() throws -> (Process, FileHandle) {
            let (process, readEnd, writeEnd) = try catReadingPipe()
            try readEnd.close()
            return (process, writeEnd)
        }
        let (cat, input) = try exiting()
        let catPID = Int(cat.processIdentifier)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { try? input.close() }
        #expect(LocalProcess.waitForExits([a, catPID], leaving: 1, timeout: 30) == [a])
        cat.waitUntilExit()

        // The owner asked, the one that ran is named; or, none having run, the one left after
        // the others exit.
        let me = Int(getpid())
        #expect(LocalProcess.serving([me, a], exitWait: 0.05, ask: { usleep(20_000) }) == me)
        let (other, otherInput) = try exiting()
        #expect(LocalProcess.serving([b, Int(other.processIdentifier)], exitWait: 30, ask: {
            // It runs to its end, and is gone before the look: only the one left can serve.
            try? otherInput.close()
            other.waitUntilExit()
        }) == b)
    }

    @Test("of several holders that all ran to a request, the owner is among them: they are asked again until one is left running; one that keeps running tells nothing")
    func servingAskedAgain() throws {
        // A holder made to run by a request when the test wants it (as an owner that lost its
        // selection runs while it exits): cat, poked through a pipe, its echo read back.
        var input: [Int32] = [-1, -1]
        var output: [Int32] = [-1, -1]
        try #require(clinux_pipe_cloexec(&input) == 0 && clinux_pipe_cloexec(&output) == 0)
        let cat = Process()
        cat.executableURL = URL(fileURLWithPath: "/bin/cat")
        cat.standardInput = FileHandle(fileDescriptor: input[0], closeOnDealloc: false)
        cat.standardOutput = FileHandle(fileDescriptor: output[1], closeOnDealloc: false)
        try cat.run()
        close(input[0])
        close(output[1])
        defer {
            close(input[1])
            close(output[0])
            kill(cat.processIdentifier, SIGKILL)
            cat.waitUntilExit()
        }
        func poke() {
            var byte: UInt8 = 1
            _ = write(input[1], &byte, 1)
            _ = read(output[0], &byte, 1)
        }
        let (me, holder) = (Int(getpid()), Int(cat.processIdentifier))
        // A first echo before anything is counted: a cat still starting up (loading, on the
        // processor) would answer the first request without being put on the processor again,
        // and so not count as run (seen once on a loaded machine: the test process alone was named).
        poke()
        // Both run to every request (this process sleeps in it), for as long as it is asked:
        // nobody is named.
        var asks = 0
        #expect(LocalProcess.serving([me, holder], exitWait: 0.2, ask: { asks += 1; poke(); usleep(1_000) }) == nil)
        #expect(asks > 1, "asked again while both ran")
        // It runs to the first request only (as an exiting owner is soon done): the second tells
        // the one that still runs to answer.
        asks = 0
        #expect(LocalProcess.serving([me, holder], exitWait: 30, ask: {
            asks += 1
            if asks == 1 { poke() }
            usleep(1_000)
        }) == me)
        #expect(asks == 2)
    }

    @Test("a zombie is not a running process; this process is")
    func zombies() {
        #expect(LocalProcess.isRunning(Int(getpid())))
        #expect(!LocalProcess.isRunning(0))
        let child = fork()
        if child == 0 { _exit(0) }
        // Not reaped yet: /proc/N is there, the process is not.
        #expect(eventually { !LocalProcess.isRunning(Int(child)) })
        #expect(FileManager.default.fileExists(atPath: "/proc/\(child)"))
        var status: Int32 = 0
        waitpid(child, &status, 0)
    }

    private func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            usleep(10_000)
        }
        return false
    }

    @Test("an owner whose process is unknown is secret when its window's title names a password manager")
    func unknownOwnerByTitle() {
        let rules = AppRules()
        #expect(rules.rule(for: CopyOwner(title: "Passwords.kdbx - KeePassXC")) == .secret)
        #expect(rules.rule(for: CopyOwner(title: "Bitwarden")) == .secret)
        // Known to be another program: its title does not decide (an editor showing a file named so).
        #expect(rules.rule(for: CopyOwner(processID: 7, executableName: "mousepad", title: "notes about keepassxc")) == nil)
        // A title that only contains the letters is not the name.
        #expect(rules.rule(for: CopyOwner(title: "mykeepassxcnotes")) == nil)
        // Unknown process, WM_CLASS of a password manager: secret as before.
        #expect(rules.rule(for: CopyOwner(otherNames: ["keepassxc", "KeePassXC"])) == .secret)
        var custom = AppRules()
        custom.usesDefaultSecretApps = false
        custom.secretApps = ["MyVault"]
        #expect(custom.rule(for: CopyOwner(title: "myvault — unlocked")) == .secret)
        #expect(custom.rule(for: CopyOwner(title: "KeePassXC")) == nil)
    }
}

@Suite("round three: the conversion budget")
struct ConversionBudgetTests {
    @Test("one budget for the selections that share it: a conversion past its share or past what is left is refused; a cache gone gives its bytes back")
    func budget() {
        // A budget of the test's own: the other tests' selections in this process count against
        // the process's, and would race the numbers here.
        let budget = ConversionBudget(limits: .init(perConversion: 100, total: 150))
        do {
            let cache = ConversionCache(budget: budget)
            #expect(cache.keep(Data(count: 101), for: .captured(.latin1)).bytes == nil, "past one conversion's share")
            #expect(cache.keep(Data(count: 90), for: .captured(.compoundText)).bytes?.count == 90)
            // The same conversion asked again (another name of it) is what is kept.
            #expect(cache.keep(Data(count: 10), for: .captured(.compoundText)).bytes?.count == 90)
            let other = ConversionCache(budget: budget)
            #expect(other.keep(Data(count: 70), for: .captured(.compoundText)).bytes == nil, "past the total")
            #expect(other.keep(Data(count: 60), for: .captured(.latin1)).bytes?.count == 60, "what is left is given")
            #expect(budget.held == 150)
        }
        #expect(budget.held == 0, "released with the caches")
    }
}

@Suite("round three: the bridge's echoes")
struct BridgeEchoesTests {
    @Test("a copy in the source right after a read of what we carried is an echo; episodes are said once; a new carry or a destination not ours starts afresh")
    func echoes() {
        var echoes = BridgeEchoes()
        // No read of PRIMARY since we carried: the user's copy.
        #expect(echoes.changed(.general, carriedTo: .find, destinationIsOurs: true, at: 100) == .carry)
        echoes.read(.find, at: 100.2)
        #expect(echoes.changed(.general, carriedTo: .find, destinationIsOurs: true, at: 100.5) == .echo(firstOfEpisode: true))
        echoes.read(.find, at: 101)
        #expect(echoes.changed(.general, carriedTo: .find, destinationIsOurs: true, at: 101.1) == .echo(firstOfEpisode: false))
        // Past the window: a copy of its own.
        #expect(echoes.changed(.general, carriedTo: .find, destinationIsOurs: true, at: 102.5) == .carry)
        // Not ours any more: nothing to echo.
        echoes.read(.find, at: 103)
        #expect(echoes.changed(.general, carriedTo: .find, destinationIsOurs: false, at: 103.1) == .carry)
        // A new carry forgets the reads of the one before.
        echoes.carried(.find)
        #expect(echoes.changed(.general, carriedTo: .find, destinationIsOurs: true, at: 103.2) == .carry)
        // After a quiet half minute, the next episode is said again.
        echoes.read(.find, at: 200)
        #expect(echoes.changed(.general, carriedTo: .find, destinationIsOurs: true, at: 200.1) == .echo(firstOfEpisode: true))
        // A read of the other direction's destination says nothing of this one.
        echoes.read(.general, at: 300)
        #expect(echoes.changed(.general, carriedTo: .find, destinationIsOurs: true, at: 300.1) == .carry)
    }
}

@Suite("The bridge's memory of copies (the compositor's echoes)")
struct BridgeMemoryTests {
    @Test("a Wayland copy equal to the X copy just made, or to the Wayland copy just carried, is an echo; another, or one with no text, is not")
    func echoes() {
        // A wait long enough for any load: the text comes from another thread.
        let memory = BridgeMemory(wait: 60, settle: 0)
        #expect(!memory.isEcho(.general, text: Data("hello".utf8)))
        memory.xChanged(.general)
        DispatchQueue.global().async { memory.xText(.general, Data("hello".utf8)) }
        // Waits for the X copy's text, then compares.
        #expect(memory.isEcho(.general, text: Data("hello".utf8)))
        #expect(!memory.isEcho(.general, text: Data("other".utf8)))
        #expect(!memory.isEcho(.find, text: Data("hello".utf8)))
        memory.carried(.find, text: Data("carried".utf8))
        #expect(memory.isEcho(.find, text: Data("carried".utf8)))
        #expect(!memory.isEcho(.find, text: Data()))
        // A copy with no text to compare is a copy (the compositor never carries what the bridge
        // owns on X: its reads are refused, so nothing follows the bridge's own takes).
        #expect(!memory.isEcho(.find, text: nil))
        // A secret X copy: what follows is its echo, secret, whatever its text.
        let secrets = BridgeMemory(wait: 60, settle: 0)
        secrets.xChanged(.find)
        DispatchQueue.global().async { secrets.xSecret(.find) }
        #expect(secrets.kind(.find, text: Data("anything".utf8)) == .secretEcho)
    }

    @Test("a Wayland copy first brings the X side up to date: an X secret whose change the X side had not read yet is still told, even after an older X copy within the window (it was kept under load)")
    func catchesUpWithX() {
        let memory = BridgeMemory(wait: 60, settle: 0)
        let asked = Mutex(0)
        // The X side reads the secret's change only when asked to catch up, as a loaded X
        // thread does.
        memory.catchesUp {
            asked.withLock { $0 += 1 }
            memory.xChanged(.general)
            DispatchQueue.global().async { memory.xSecret(.general) }
        }
        #expect(memory.kind(.general, text: Data("hunter2".utf8)) == .secretEcho)
        #expect(asked.withLock { $0 } == 1)
        // An ordinary X copy noted just before does not hide a newer X change not read yet.
        let older = BridgeMemory(wait: 60, settle: 0)
        older.xChanged(.general)
        older.xText(.general, Data("copied on X".utf8))
        older.catchesUp {
            older.xChanged(.general)
            DispatchQueue.global().async { older.xSecret(.general) }
        }
        #expect(older.kind(.general, text: Data("hunter2".utf8)) == .secretEcho)
        // An X change the X side could not read within the wait: the copy may be its echo, and
        // a secret's; it is not taken for a copy.
        let behind = BridgeMemory(wait: 0.05, settle: 0)
        behind.xChanged(.general)
        #expect(behind.kind(.general, text: Data("hunter2".utf8)) == .echo)
    }
}
