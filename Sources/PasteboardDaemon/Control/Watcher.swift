import CLinux
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardWire
import Synchronization

/// A following client's feed (`watch`, `pastes` followed): notes are queued here and the client's
/// thread is woken through a pipe, which it polls together with the client's socket (a client
/// that goes is seen at once). A client that reads nothing holds at most ``maxQueued`` notes; the
/// oldest go.
final class Watcher<Note: Sendable>: Sendable {
    static var maxQueued: Int { 1024 }

    /// The pasteboard followed (its X selection), nil for every one.
    let selection: String?
    private let queued = Mutex<[Note]>([])
    /// Read end (polled by the client's thread) and write end.
    let wakeRead: Int32
    private let wakeWrite: Int32

    init?(selection: String?) {
        var fds: [Int32] = [0, 0]
        guard clinux_wake_pipe(&fds) == 0 else { return nil }
        self.selection = selection
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Whether notes of `selection` are followed.
    func follows(_ selection: String) -> Bool {
        self.selection == nil || self.selection == selection
    }

    func post(_ note: Note) {
        queued.withLock { queue in
            if queue.count >= Self.maxQueued { queue.removeFirst() }
            queue.append(note)
        }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// The notes queued since the last call.
    func take() -> [Note] {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &buffer, buffer.count) > 0 {}
        return queued.withLock { queue in
            defer { queue.removeAll() }
            return queue
        }
    }

    /// Says `started` to the client, then sends each note as it comes (`reply`) until the client
    /// closes its end (or says anything: it says nothing after its request) or a send fails.
    func relay(to channel: inout FrameChannel, started: String, logger: Logger, reply: (Note) -> ControlReply) -> Result<ControlAnswer, ControlFailure> {
        do {
            try channel.send(.reply, ControlReply.done(started))
            var descriptors = [pollfd(fd: channel.fd, events: Int16(POLLIN), revents: 0),
                               pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            while true {
                let ready = poll(&descriptors, 2, -1)
                if ready < 0, errno == EINTR { continue }
                guard ready > 0 else { break }
                if descriptors[0].revents != 0 { break }
                for note in take() { try channel.send(.reply, reply(note)) }
            }
        } catch {
            logger.debug("a follower left: \(error)")
        }
        return .success(.answered)
    }
}

/// The clients following one kind of note, each with its ``Watcher``.
final class Followers<Note: Sendable>: Sendable {
    private let watchers = Mutex<(next: UInt64, all: [UInt64: Watcher<Note>])>((0, [:]))

    /// Follows `watcher` until the returned id is dropped (``drop(_:)``).
    func add(_ watcher: Watcher<Note>) -> UInt64 {
        watchers.withLock { state in
            state.next += 1
            state.all[state.next] = watcher
            return state.next
        }
    }

    func drop(_ id: UInt64) {
        _ = watchers.withLock { $0.all.removeValue(forKey: id) }
    }

    /// Posts `note`, of `selection`, to those who follow it. Takes only this registry's lock and
    /// each watcher's queue's (a caller may hold its own: the headless pasteboards post under theirs).
    func post(_ note: Note, of selection: String) {
        for watcher in watchers.withLock({ Array($0.all.values) }) where watcher.follows(selection) { watcher.post(note) }
    }
}
