import CLinux
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardWire

/// Why a Wayland connection cannot be made or went on no further.
package struct WaylandError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// One connection to a Wayland compositor: the socket, the decoder, the ``DataControlState``,
/// and the thread that reads events (`xpb.wayland`). It performs the state's effects that are
/// the protocol's (destroying replaced offers and cancelled sources, waking a waiting round
/// trip) and hands the others to `events` (set once, before ``start()``), on that thread and
/// outside the lock.
package final class WaylandConnection: @unchecked Sendable {
    /// The socket's path.
    package let path: String
    private let fd: Int32
    /// Guards everything below, and wakes round trips.
    private let condition = Condition()
    private var state = DataControlState()
    private var decoder = WaylandDecoder()
    /// Why the connection ended, nil while it lives.
    private var ended: String?
    /// The socket went to a forked child (``leaveToChild()``): this process closed its descriptor.
    private var handedOff = false
    private var finishedCallbacks: Set<UInt32> = []
    /// Serializes writes: each message goes out whole, with its descriptor.
    private let writing = Condition()
    /// Inside ``withWriting(_:)``: the requests written wait here and go out together, in one
    /// `sendmsg`, when the block ends (guarded by `writing`). Each request sent alone woke the
    /// compositor, which could take the processor from this client each time: a 13-byte paste
    /// was preempted 4.1 times on average with six `sendmsg`s, 1.5 with three (sway, 20 runs).
    private var batch: [UInt8] = []
    private var batching = false
    /// Where the compositor's bytes and descriptors are received (used by one thread at a time).
    private let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 << 10, alignment: 16)
    private let receiveFDs = UnsafeMutableBufferPointer<Int32>.allocate(capacity: 28)
    /// No reading thread: the caller that waits for a round trip reads the events (a process
    /// that reads once and exits; nothing is served meanwhile).
    package private(set) var isInline = false
    /// Effects for the owner of the connection.
    package var events: (@Sendable ([DataControlState.Effect]) -> Void)?

    /// The socket a client connects to: `WAYLAND_DISPLAY` (default `wayland-0`), absolute or
    /// under `XDG_RUNTIME_DIR`.
    package static func socketPath(display: String?,
                                   runtimeDirectory: String? = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) }) throws -> String {
        let name = display ?? getenv("WAYLAND_DISPLAY").map { String(cString: $0) } ?? "wayland-0"
        if name.hasPrefix("/") { return name }
        guard let runtime = runtimeDirectory, !runtime.isEmpty else {
            throw WaylandError("XDG_RUNTIME_DIR is not set: the Wayland socket \(name) cannot be found")
        }
        return runtime + "/" + name
    }

    /// Connects to the compositor's socket.
    package init(display: String? = nil) throws {
        path = try Self.socketPath(display: display)
        do {
            fd = try LocalSocket.connect(path)
        } catch {
            throw WaylandError("cannot connect to the Wayland compositor at \(path): \(error)")
        }
    }

    deinit {
        decoder.closeDescriptors()
        if !handedOff { Glibc.close(fd) }
        receiveBuffer.deallocate()
        receiveFDs.deallocate()
    }

    /// The process at the socket's other end (SO_PEERCRED), nil when the kernel does not say.
    package var peerPID: Int? {
        var pid: pid_t = 0
        guard clinux_peer_pid(fd, &pid) == 0, pid > 0 else { return nil }
        return Int(pid)
    }

    /// Starts the thread that reads events; `inline`: none, the waiting caller reads them.
    package func start(inline: Bool = false) throws {
        isInline = inline
        guard !inline else { return }
        try DetachedThread.start(name: "xpb.wayland") { [self] in readEvents() }
    }

    /// Inline: from now on a thread of its own reads the events, and what this process owns is
    /// served between calls (`xpb copy` sets the selection on its one thread, forks, and the
    /// child calls this). Called from the only thread that uses the connection; nothing when a
    /// thread reads already.
    package func startThread() throws {
        guard isInline else { return }
        if let reason = endReason { throw WaylandError(reason) }
        isInline = false
        do {
            try DetachedThread.start(name: "xpb.wayland") { [self] in readEvents() }
        } catch {
            isInline = true
            throw error
        }
    }

    /// Inline, after a fork that gave the connection to the child (``startThread()`` there):
    /// this process lets go of it, nothing sent. The connection ends here, and this process's
    /// descriptor of the socket is closed; the child's stays open (a shutdown would end it for
    /// both). The connection must never be used here again.
    package func leaveToChild() {
        guard isInline else { return }
        condition.lock()
        if ended == nil { ended = "the connection was handed to the background owner" }
        handedOff = true
        condition.unlock()
        Glibc.close(fd)
    }

    /// Ends the connection: the reading thread stops, waiters wake.
    package func close() {
        condition.lock()
        if ended == nil { ended = "the connection was closed" }
        condition.broadcast()
        let handedOff = handedOff
        condition.unlock()
        if !handedOff { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Why the connection ended, nil while it lives.
    package var endReason: String? {
        condition.lock()
        defer { condition.unlock() }
        return ended
    }

    private func withStateLocked<T>(_ body: (inout DataControlState) -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body(&state)
    }

    /// Runs `body` on the state, under the lock.
    package func withState<T>(_ body: (inout DataControlState) throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body(&state)
    }

    // MARK: Requests

    /// Sends one request (a descriptor it carries is sent with it, and stays ours to close).
    package func send(_ message: WaylandMessage) throws {
        writing.lock()
        defer { writing.unlock() }
        try write(message)
    }

    /// Sends a request to `object` only while it lives: an offer the reading thread destroys
    /// (its selection was replaced) is destroyed under the same lock, so no request can reach a
    /// destroyed object, which would end the connection. False when it was gone.
    package func send(_ message: WaylandMessage, ifLive object: UInt32) throws -> Bool {
        writing.lock()
        defer { writing.unlock() }
        guard withState({ $0.interface(of: object) != nil }) else { return false }
        try write(message)
        return true
    }

    /// Destroys one of our objects (or an offer): forgotten and destroyed in one step.
    package func destroy(_ object: UInt32) {
        writing.lock()
        defer { writing.unlock() }
        destroyLocked(object)
    }

    /// Inside ``withWriting(_:)``: destroys one of our objects (``destroy(_:)``).
    package func destroyLocked(_ object: UInt32) {
        guard let interface = withState({ state -> WaylandInterface? in
            defer { state.forget(object) }
            return state.interface(of: object)
        }) else { return }
        try? write(WaylandRequest.destroy(object, interface))
    }

    /// Makes a new object of ours and sends the request that creates it, both under the writing
    /// lock: the compositor takes a client's new ids only in the order made (an id past the next
    /// free one ends the connection), so no other thread's new id may go out between the two.
    package func sendNew(_ interface: WaylandInterface, _ request: (UInt32) -> WaylandMessage) throws -> UInt32 {
        try withWriting { try writeNewLocked(interface, request) }
    }

    /// Runs `body` with the writing lock held: the requests it writes (``writeLocked(_:)``,
    /// ``writeNewLocked(_:_:)``) go out together when it ends, in one `sendmsg` (one with a
    /// descriptor at once, with those before it), none of another thread's between them. What
    /// was written before `body` threw goes out too.
    package func withWriting<T>(_ body: () throws -> T) throws -> T {
        writing.lock()
        defer { writing.unlock() }
        batching = true
        let result: T
        do {
            result = try body()
        } catch {
            batching = false
            try? flushBatch()
            throw error
        }
        batching = false
        try flushBatch()
        return result
    }

    /// Writes a message inside ``withWriting(_:)``.
    package func writeLocked(_ message: WaylandMessage) throws { try write(message) }

    /// Inside ``withWriting(_:)``: makes a new object of ours and writes the request that creates it.
    package func writeNewLocked(_ interface: WaylandInterface, _ request: (UInt32) -> WaylandMessage) throws -> UInt32 {
        let id = withState { $0.make(interface) }
        try write(request(id))
        return id
    }

    /// Writes a message whole (with the writing lock held). Inside ``withWriting(_:)`` it waits in
    /// the batch, unless it carries a descriptor: that sends the batch at once, with the
    /// descriptor (the caller closes it after).
    private func write(_ message: WaylandMessage) throws {
        let (bytes, fds) = try WaylandWire.encode(message)
        if let reason = endReason { throw WaylandError(reason) }
        batch += bytes
        if !batching || !fds.isEmpty { try flushBatch(descriptor: fds.first ?? -1) }
    }

    /// Sends the batch whole (with the writing lock held), `descriptor` (or none: -1) with its
    /// first byte.
    private func flushBatch(descriptor first: Int32 = -1) throws {
        defer { batch.removeAll(keepingCapacity: true) }
        var offset = 0
        var descriptor = first
        while offset < batch.count {
            let sent = batch.withUnsafeBytes { raw in
                clinux_send_with_fd(fd, raw.baseAddress! + offset, raw.count - offset, descriptor)
            }
            if sent < 0 {
                if errno == EAGAIN || errno == EINTR {
                    var pollFD = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&pollFD, 1, 1000)
                    continue
                }
                let reason = "the compositor's socket failed: \(String(cString: strerror(errno)))"
                end(reason)
                throw WaylandError(reason)
            }
            offset += sent
            descriptor = -1
        }
    }

    /// Sends a sync and waits for its callback: every request sent before it has been handled,
    /// and every event it caused has been read. `requests` writes (as in ``withWriting(_:)``)
    /// what goes out with the sync, in one `sendmsg`: one wake-up of the compositor for all.
    package func roundtrip(timeout: Double, after requests: () throws -> Void = {}) throws {
        let callback = try withWriting {
            try requests()
            return try writeNewLocked(.callback) { WaylandRequest.sync(callback: $0) }
        }
        try waitForCallback(callback, timeout: timeout)
    }

    /// Waits for the callback of a sync (``roundtrip(timeout:after:)``). Never inlined: the
    /// round trip is specialized for each caller's requests, and this part need not be.
    @inline(never)
    private func waitForCallback(_ callback: UInt32, timeout: Double) throws {
        let deadline = Date().addingTimeInterval(timeout)
        if isInline {
            while !withStateLocked({ _ in finishedCallbacks.contains(callback) }) {
                if let ended = endReason { throw WaylandError(ended) }
                let remaining = deadline.timeIntervalSinceNow
                guard remaining > 0 else { throw WaylandError("the compositor did not answer within \(timeout) s") }
                pump(timeout: Int32(min(remaining * 1000 + 1, Double(Int32.max))))
            }
            if let fatal = withState({ $0.fatalError }) { throw WaylandError(fatal) }
            condition.lock()
            finishedCallbacks.remove(callback)
            condition.unlock()
            return
        }
        condition.lock()
        defer { condition.unlock() }
        while !finishedCallbacks.contains(callback) {
            if let ended { throw WaylandError(ended) }
            if let fatal = state.fatalError { throw WaylandError(fatal) }
            guard condition.wait(until: deadline) || finishedCallbacks.contains(callback) else {
                throw WaylandError("the compositor did not answer within \(timeout) s")
            }
        }
        finishedCallbacks.remove(callback)
    }

    // MARK: Events

    private func end(_ reason: String) {
        condition.lock()
        if ended == nil { ended = reason }
        condition.broadcast()
        condition.unlock()
    }

    /// The reading thread: reads what comes until the connection ends.
    private func readEvents() {
        while endReason == nil, pump(timeout: -1) {}
        events?([.deviceFinished])
    }

    /// Reads what the compositor sent (waiting at most `timeout` milliseconds, -1: for ever),
    /// decodes the whole messages and performs their effects. One thread at a time: the reading
    /// thread, or without one (``isInline``) the caller that waits. False once the connection ended.
    @discardableResult
    private func pump(timeout: Int32) -> Bool {
        var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pollFD, 1, timeout)
        if ready < 0 {
            if errno == EINTR { return true }
            end("polling the compositor's socket failed: \(String(cString: strerror(errno)))")
            return false
        }
        if ready == 0 { return true }
        var count: Int32 = 0
        let received = clinux_receive_with_fds(fd, receiveBuffer.baseAddress, receiveBuffer.count, receiveFDs.baseAddress, Int32(receiveFDs.count), &count)
        if received < 0 {
            if errno == EAGAIN || errno == EINTR { return true }
            end("reading the compositor's socket failed: \(String(cString: strerror(errno)))")
            return false
        }
        let descriptors = Array(receiveFDs[0 ..< Int(count)])
        if received == 0 {
            for descriptor in descriptors { Glibc.close(descriptor) }
            end(withState { $0.fatalError } ?? "the compositor closed the connection")
            return false
        }
        var effects: [DataControlState.Effect] = []
        condition.lock()
        do {
            decoder.append(UnsafeRawBufferPointer(rebasing: receiveBuffer[0 ..< received]))
            try decoder.append(descriptors: descriptors)
            while let message = try decoder.next(signature: { state.signature(object: $0, opcode: $1) }) {
                effects += state.handle(message)
            }
        } catch {
            decoder.closeDescriptors()
            if ended == nil { ended = "the compositor sent what this client cannot read: \(error)" }
        }
        if let fatal = state.fatalError, ended == nil { ended = fatal }
        var forOwner: [DataControlState.Effect] = []
        var destroys: [UInt32] = []
        for effect in effects {
            switch effect {
            case let .callbackDone(id): finishedCallbacks.insert(id)
            case let .close(descriptor): Glibc.close(descriptor)
            case let .destroyOffer(offer):
                destroys.append(offer)
                forOwner.append(effect)
            default: forOwner.append(effect)
            }
        }
        condition.broadcast()
        let stopped = ended != nil
        condition.unlock()
        for offer in destroys { destroy(offer) }
        if !forOwner.isEmpty {
            if let events { events(forOwner) } else { closeDescriptors(of: forOwner) }
        }
        return !stopped
    }

    /// Closes the descriptors of effects nobody handles.
    private func closeDescriptors(of effects: [DataControlState.Effect]) {
        for case let .send(_, _, descriptor) in effects { Glibc.close(descriptor) }
    }
}
