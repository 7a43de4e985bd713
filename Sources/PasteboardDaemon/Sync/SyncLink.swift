import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire
import Synchronization

/// The byte stream under a sync link: a UNIX socket (both ways on one descriptor), or the pipes
/// of an `ssh` process.
package final class SyncTransport: Sendable {
    let readFD: Int32
    let writeFD: Int32
    /// The transport's process (ssh), reaped by ``close()``.
    let process: TransportProcess?

    init(socket fd: Int32) {
        readFD = fd
        writeFD = fd
        process = nil
    }

    /// A pipe pair (a helper's standard input and output, on its side of the link).
    package init(readFD: Int32, writeFD: Int32) {
        self.readFD = readFD
        self.writeFD = writeFD
        process = nil
    }

    init(process: TransportProcess) {
        readFD = process.stdoutFD
        writeFD = process.stdinFD
        self.process = process
    }

    /// Wakes whatever blocks on the transport: a socket is shut down, a process terminated.
    func interrupt() {
        if let process {
            process.terminate()
        } else {
            shutdown(readFD, Int32(SHUT_RDWR))
        }
    }

    /// Closes the descriptors and reaps the process (once the link's threads are done with them).
    func close() {
        if let process {
            process.terminate()
            process.reap()
        } else {
            Glibc.close(readFD)
            if writeFD != readFD { Glibc.close(writeFD) }
        }
    }
}

/// Frames read from a descriptor with `read(2)` (pipes and sockets alike).
package struct FrameReader {
    package let fd: Int32
    private var decoder = FrameDecoder()
    private var buffer = [UInt8](repeating: 0, count: 256 << 10)

    package init(fd: Int32) { self.fd = fd }

    /// The next frame; nil at the end of the stream. With `timeout`, waits at most that long.
    package mutating func next(timeout: Double? = nil) throws(WireError) -> Frame? {
        let end = timeout.map { Date().addingTimeInterval($0) }
        while true {
            if let frame = try decoder.next() { return frame }
            if let end {
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let left = Int32(max(0, end.timeIntervalSinceNow) * 1000)
                let ready = poll(&entry, 1, left)
                if ready < 0, errno == EINTR { continue }
                if ready == 0 { throw WireError("the peer did not answer within \(Int(timeout ?? 0)) s") }
            }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw WireError("receiving: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return nil }
            decoder.append(Data(buffer[0..<count]))
        }
    }
}

/// Writes a frame whole with `write(2)` (pipes and sockets alike).
package func writeFrame(_ frame: Frame, to fd: Int32) throws(WireError) {
    let code = frame.encoded.withUnsafeBytes { writeAll(fd, $0) }
    if let code { throw WireError("sending: \(String(cString: strerror(code)))") }
}

/// One sync link: another daemon, after both said hello. A reader thread hands frames to the
/// hub; a writer thread sends what the hub queued, so that no caller ever waits on the peer (a
/// stopped peer fills its socket, not our threads). The hub's heartbeat closes a silent link.
package final class SyncLink: Sendable {
    struct Stats {
        var lastReceived = Date()
        var lastPing = Date.distantPast
        var pingSeq = 0
        var pingSentAt: [Int: Date] = [:]
        var roundTrip: Double?
        var lastAnnounce: Date?
        var announcesSent = 0
        var announcesReceived = 0
        var bytesSent = 0
        var bytesReceived = 0
        /// What a newer peer sent that this version does not know, ignored: messages of unknown
        /// kinds, and unknown fields of known ones; and the kinds logged already.
        var ignoredMessages = 0
        var ignoredFields = 0
        var ignoredKindsLogged: Set<String> = []
    }

    private struct Outbox {
        var frames: [Data] = []
        var head = 0
        var bytes = 0
        var closing: String?
    }

    /// A peer that lets this much pile up unread (beyond the transfers' windows) is dropped.
    static let maxQueued = 64 << 20

    let id: Int
    let transport: SyncTransport
    /// For logs and status.
    let label: String
    let theirs: SyncHello
    /// What this link does, both sides' wishes combined.
    let sends: Bool
    let receives: Bool
    let selections: Set<Pasteboard.Name>
    let stats = Mutex(Stats())
    private let outbox = Mutex(Outbox())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let running = Mutex(2)

    init(id: Int, transport: SyncTransport, label: String, theirs: SyncHello, sends: Bool, receives: Bool, selections: Set<Pasteboard.Name>) {
        self.id = id
        self.transport = transport
        self.label = label
        self.theirs = theirs
        self.sends = sends
        self.receives = receives
        self.selections = selections
    }

    /// Whether this side's changes of `name` go out on this link, and the other side's come in.
    func sends(_ name: Pasteboard.Name) -> Bool { sends && selections.contains(name) }
    func receives(_ name: Pasteboard.Name) -> Bool { receives && selections.contains(name) }

    package var closeReason: String? { outbox.withLock { $0.closing } }

    /// Starts the threads. `handler` gets each frame (on the reader thread); `onClose` runs once
    /// both threads ended and the transport is closed.
    func start(reader: FrameReader, handler: @escaping @Sendable (SyncLink, Frame) -> Void,
               onClose: @escaping @Sendable (SyncLink, String) -> Void) {
        let done: @Sendable () -> Void = { [self] in
            let last = running.withLock { count -> Bool in
                count -= 1
                return count == 0
            }
            guard last else { return }
            transport.close()
            onClose(self, closeReason ?? "closed")
            finished.signal()
        }
        let readerBody: @Sendable () -> Void = { [self] in
            var reader = reader
            do {
                while let frame = try reader.next() {
                    stats.withLock {
                        $0.lastReceived = Date()
                        $0.bytesReceived += frame.payload.count + Frame.headerSize
                    }
                    handler(self, frame)
                }
                close("the peer closed the link")
            } catch {
                close("\(error)")
            }
            done()
        }
        do {
            try DetachedThread.start(name: "xpbd.sync.read", readerBody)
        } catch {
            close("no thread for the link: \(error)")
            done()
            done()
            return
        }
        do {
            try DetachedThread.start(name: "xpbd.sync.write") { [self] in
                writeLoop()
                done()
            }
        } catch {
            // The reader ends once the link is closed.
            close("no thread for the link: \(error)")
            done()
        }
    }

    /// Blocks until the link's threads ended.
    package func waitUntilFinished() {
        finished.wait()
        finished.signal()
    }

    func send(_ message: SyncMessage) {
        guard let payload = try? ControlCoding.encode(message) else { return }
        enqueue(Frame(kind: .sync, payload: payload).encoded)
    }

    func sendData(id: UInt64, _ bytes: Data) {
        let payload = bytes.withUnsafeBytes { SyncData.encode(id: id, $0) }
        enqueue(Frame(kind: .data, payload: payload).encoded)
    }

    private func enqueue(_ bytes: Data) {
        let overflow = outbox.withLock { box -> Bool in
            guard box.closing == nil else { return false }
            box.frames.append(bytes)
            box.bytes += bytes.count
            return box.bytes > Self.maxQueued
        }
        if overflow {
            close("the peer stopped reading (\(Self.maxQueued >> 20) MiB queued)")
        } else {
            wake.signal()
        }
    }

    /// Ends the link (idempotent): the threads stop, the transport closes.
    func close(_ reason: String) {
        let first = outbox.withLock { box -> Bool in
            guard box.closing == nil else { return false }
            box.closing = reason
            box.frames.removeAll()
            box.bytes = 0
            return true
        }
        guard first else { return }
        wake.signal()
        transport.interrupt()
    }

    private func writeLoop() {
        while true {
            wake.wait()
            while true {
                let next = outbox.withLock { box -> Data?? in
                    if box.closing != nil { return .some(nil) }
                    guard box.head < box.frames.count else {
                        box.frames.removeAll(keepingCapacity: true)
                        box.head = 0
                        return .none
                    }
                    let frame = box.frames[box.head]
                    box.frames[box.head] = Data()
                    box.head += 1
                    box.bytes -= frame.count
                    return frame
                }
                guard let frame = next else { break }
                guard let frame else { return }
                let failure = frame.withUnsafeBytes { writeAll(transport.writeFD, $0) }.map { String(cString: strerror($0)) }
                if let failure {
                    close("sending: \(failure)")
                    return
                }
                stats.withLock { $0.bytesSent += frame.count }
            }
        }
    }
}

/// A child process with its standard streams on pipes (the ssh transport).
final class TransportProcess: Sendable {
    let pid: pid_t
    let stdinFD: Int32
    let stdoutFD: Int32
    let stderrFD: Int32
    private let reaped = Mutex<Int32?>(nil)

    /// Starts `arguments[0]` (a path) with `arguments`.
    init(_ arguments: [String]) throws {
        let stdinPipe: (read: Int32, write: Int32), stdoutPipe: (read: Int32, write: Int32), stderrPipe: (read: Int32, write: Int32)
        do {
            stdinPipe = try ChildProcess.pipe()
            stdoutPipe = try ChildProcess.pipe()
            stderrPipe = try ChildProcess.pipe()
        } catch {
            throw POSIXFailure("pipe", error.rawValue)
        }
        // In a group of its own (a terminal's ^C reaches xpbd, which ends its links itself),
        // with default signal handling (xpbd ignores SIGPIPE).
        var process = ChildProcess(executable: arguments[0], arguments: arguments)
        process.descriptors = [0: .inherit(stdinPipe.read), 1: .inherit(stdoutPipe.write), 2: .inherit(stderrPipe.write)]
        process.grouping = .newGroup
        defer {
            close(stdinPipe.read)
            close(stdoutPipe.write)
            close(stderrPipe.write)
        }
        let child: pid_t
        do {
            child = try process.spawn()
        } catch {
            close(stdinPipe.write)
            close(stdoutPipe.read)
            close(stderrPipe.read)
            throw POSIXFailure("starting \(arguments[0])", error.rawValue)
        }
        pid = child
        stdinFD = stdinPipe.write
        stdoutFD = stdoutPipe.read
        stderrFD = stderrPipe.read
    }

    func terminate() {
        if reaped.withLock({ $0 }) == nil { kill(pid, SIGTERM) }
    }

    /// Waits up to `seconds` for the process to end (after ``terminate()``), then kills it: a
    /// daemon that stops leaves no child behind (xpbd-kdeconnect would go on as a device). The
    /// process is left for ``reap()``.
    func awaitExit(within seconds: Double) {
        guard reaped.withLock({ $0 }) == nil else { return }
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var info = siginfo_t()
            // WNOWAIT: seen, not reaped.
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info._sifields._sigchld.si_pid != 0 { return }
            usleep(2_000)
        }
        kill(pid, SIGKILL)
    }

    /// Waits for the process to end and closes the pipes; the exit status as waitpid gives it.
    @discardableResult
    func reap() -> Int32 {
        if let status = reaped.withLock({ $0 }) { return status }
        close(stdinFD)
        close(stdoutFD)
        let status = ChildProcess.wait(for: pid)
        close(stderrFD)
        reaped.withLock { $0 = status }
        return status
    }
}
