internal import CLinux
internal import CX11
internal import CXEvents
import Dispatch
import FoundationEssentials
import PasteboardKit
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The one executor box: state that only the X thread touches, carried across the Sendable
/// boundary of the thread's start-up. Nothing else in the backend is `@unchecked Sendable`.
final class XThreadConfined<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A value a job on the X thread and its completions share (held in ``XThreadConfined``).
final class XThreadCell<Value> {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// A connection to an X server, owned by one thread.
///
/// The thread holds the `Display*`, blocks in `poll()` on the X connection and a wake-up pipe, and
/// runs every Xlib call: other threads hand it jobs through ``submit(_:)`` or wait for a result with
/// ``sync(timeout:_:)``. No Xlib pointer ever leaves the thread.
final class X11Connection: Sendable {
    /// Where the connection is in its life: open; closing (a final job is queued, no others
    /// are taken); stopped, with the reason.
    private enum Lifecycle {
        case open
        case closing
        case stopped(X11BackendError)
    }

    private struct Queue {
        var jobs: [@Sendable (X11Session) -> Void] = []
        var lifecycle = Lifecycle.open
        /// Whether the X thread is in poll() (or about to be) with no job to run: only then
        /// does a new job need the wake-up pipe, and only once (NIO's SelectableEventLoop does the
        /// same). A thread that is awake finds the job when its turn ends.
        var asleep = false

        /// Adds a job; true when the X thread must be woken for it.
        mutating func add(_ job: @escaping @Sendable (X11Session) -> Void) -> Bool {
            jobs.append(job)
            defer { asleep = false }
            return asleep
        }
    }

    private let queue = Mutex(Queue())
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopped = DispatchSemaphore(value: 0)
    private let threadID = Mutex<pthread_t?>(nil)
    private let stopHandler = Mutex<(@Sendable (X11BackendError) -> Void)?>(nil)
    /// The display name connected to.
    let displayName: String
    /// The session: driven by the X thread, or inline by the calling thread while it waits.
    private let session: XThreadConfined<X11Session>
    /// With ``X11Configuration/runsOnCallersThread``: the calling thread drives the session while
    /// it waits (``turnInline()``), until ``startThread()`` hands it to an X thread.
    private let runsInline: Atomic<Bool>
    /// Whether the calling thread is in a turn of the inline loop (a job may not wait on it).
    private let driving = Mutex(false)

    /// Tells Xlib, once per process and before any display opens, not to set up XKB.
    private static let ignoreKeyboardExtension: Void = { _ = XkbIgnoreExtension(1) }()

    /// The display name to connect to: `localhost:N` (what `ssh -X` sets) as `127.0.0.1:N`.
    /// xcb resolves a TCP display's host with getaddrinfo, which in a static glibc binary needs
    /// the system's NSS modules of the very glibc it was linked with for a host name, and none
    /// for a numeric address. The X authority cookie is chosen by the connected socket's
    /// address, the same for both.
    static func numericHost(_ name: String) -> String {
        name.hasPrefix("localhost:") ? "127.0.0.1" + name.dropFirst("localhost".count) : name
    }

    /// Opens the display (nil: `$DISPLAY`) and starts the X thread, or with
    /// ``X11Configuration/runsOnCallersThread`` makes the calling thread the X thread.
    init(displayName: String?, configuration: X11Configuration) throws {
        // getenv, not ProcessInfo.environment: that builds a dictionary of the whole environment.
        guard let name = displayName ?? getenv("DISPLAY").map({ String(cString: $0) }), !name.isEmpty else {
            throw X11BackendError.noDisplay
        }
        self.displayName = name
        XErrorSink.install()
        // Xlib would otherwise negotiate XKEYBOARD while opening (two round trips per start); no
        // keyboard is read here.
        _ = Self.ignoreKeyboardExtension
        guard let display = XOpenDisplay(Self.numericHost(name)) else { throw X11BackendError.cannotOpenDisplay(name) }
        XErrorSink.guardExit(of: display)
        // Events are read by the loop alone, one turn's worth at a time (X11Session.pump).
        cxevents_take_queue(UnsafeMutableRawPointer(display))
        var fds: [Int32] = [0, 0]
        guard clinux_wake_pipe(&fds) == 0 else {
            XCloseDisplay(display)
            throw PasteboardError.backendFailure("cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        let session = XThreadConfined(X11Session(display: display, configuration: configuration))
        self.session = session
        runsInline = Atomic(configuration.runsOnCallersThread)
        session.value.enqueue = { [weak self] job in self?.submit(job) ?? false }
        if configuration.runsOnCallersThread {
            threadID.withLock { $0 = pthread_self() }
            session.value.wire.thread = pthread_self()
            return
        }
        do {
            try startLoop()
        } catch {
            Glibc.close(wakeRead)
            Glibc.close(wakeWrite)
            XCloseDisplay(display)
            throw error
        }
    }

    /// Starts the X thread and hands it the session.
    private func startLoop() throws {
        do {
            try DetachedThread.start(name: "xpb-x11") { [self] in
                self.threadID.withLock { $0 = pthread_self() }
                self.session.value.wire.thread = pthread_self()
                self.run(self.session.value)
            }
        } catch {
            throw PasteboardError.backendFailure("cannot start the X thread: \(error)")
        }
    }

    /// Inline (``X11Configuration/runsOnCallersThread``): from now on an X thread of its own
    /// drives the session, and the backend serves between calls. For a process that owns a
    /// selection first on its one thread, then forks, and serves from the child (`xpb copy`:
    /// xclip's order). Called from outside any call into the backend; nothing when the loop has
    /// a thread already.
    func startThread() throws {
        guard runsInline.load(ordering: .acquiring), !driving.withLock({ $0 }) else { return }
        if let reason = stopReason { throw reason }
        runsInline.store(false, ordering: .releasing)
        do {
            try startLoop()
        } catch {
            runsInline.store(true, ordering: .releasing)
            throw error
        }
    }

    /// Inline, after a fork that gave the connection to the child (``startThread()`` there):
    /// this process lets go of it without a word to the server. Nothing is sent, no job is taken
    /// from now on, and this process's descriptors of it (the socket, the wake-up pipe) are
    /// closed: the child's stay open. The connection must never be used here again, nor closed
    /// (its owner keeps it: XCloseDisplay would send a request on the child's connection).
    func leaveToChild() {
        guard runsInline.load(ordering: .acquiring) else { return }
        queue.withLock { queue in
            queue.lifecycle = .stopped(.connectionLost)
            queue.jobs.removeAll()
        }
        Glibc.close(XConnectionNumber(session.value.wire.display))
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    /// Whether the calling thread is the X thread.
    var isOnXThread: Bool {
        threadID.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Inline: runs one turn of the loop on the calling thread, for a wait (nil when the X thread
    /// runs the loop). Waits hand it to ``Rendezvous`` and ``StreamSink``.
    var pump: (@Sendable () -> Void)? {
        guard runsInline.load(ordering: .acquiring) else { return nil }
        return { @Sendable [weak self] in self?.turnInline() }
    }

    /// Whether a caller on this thread would wait on itself: on the X thread, or inline in a job.
    private var waitsOnItself: Bool {
        isOnXThread && (!runsInline.load(ordering: .acquiring) || driving.withLock { $0 })
    }

    /// Hands a job to the X thread; false if the connection has stopped.
    @discardableResult
    func submit(_ job: @escaping @Sendable (X11Session) -> Void) -> Bool {
        let (accepted, asleep) = queue.withLock { queue -> (Bool, Bool) in
            guard case .open = queue.lifecycle else { return (false, false) }
            return (true, queue.add(job))
        }
        if asleep { wake() }
        return accepted
    }

    /// Runs `body` on the X thread and waits for it to call its completion.
    ///
    /// - Parameter timeout: a last resort on top of the operation's own deadlines.
    func sync<T: Sendable>(
        timeout: Double,
        _ body: @escaping @Sendable (X11Session, @escaping @Sendable (Result<T, any Error>) -> Void) -> Void
    ) throws -> T {
        guard !waitsOnItself else {
            throw PasteboardError.backendFailure("a pasteboard was read from inside a provider on the X thread; read it from another thread")
        }
        let rendezvous = Rendezvous(pump: pump)
        let accepted = submit { session in body(session) { rendezvous.fulfil($0) } }
        guard accepted else { throw stopReason ?? X11BackendError.connectionLost }
        return try rendezvous.wait(timeout: timeout, stopped: { [self] in self.stopReason })
    }

    /// Called once, on the X thread, when the connection stops (closed or lost).
    func onStop(_ handler: @escaping @Sendable (X11BackendError) -> Void) {
        stopHandler.withLock { $0 = handler }
    }

    /// Why the connection stopped, once it has.
    var stopReason: X11BackendError? {
        queue.withLock { queue in
            if case let .stopped(reason) = queue.lifecycle { return reason }
            return nil
        }
    }

    /// Runs `finalJob` (for example a hand-off to a clipboard manager), then stops the thread and
    /// closes the display. Waits at most `timeout` seconds.
    func close(timeout: Double = 5, finalJob: (@Sendable (X11Session, @escaping () -> Void) -> Void)? = nil) {
        let (accepted, asleep) = queue.withLock { queue -> (Bool, Bool) in
            guard case .open = queue.lifecycle else { return (false, false) }
            queue.lifecycle = .closing
            return (true, queue.add { session in
                // Owners that still act on the window of a transfer just read get to, first.
                session.reader.afterOwnersSettle {
                    if let finalJob {
                        finalJob(session) { session.requestStop() }
                    } else {
                        session.requestStop()
                    }
                }
            })
        }
        guard accepted else { return }
        if asleep { wake() }
        // On the X thread itself (a backend released from a callback) waiting would only stall.
        guard !waitsOnItself else { return }
        if runsInline.load(ordering: .acquiring) {
            let end = DispatchTime.now() + min(max(0, timeout), 1e9)
            while stopReason == nil, DispatchTime.now() < end { turnInline() }
            return
        }
        if stopped.wait(timeout: .now() + timeout) == .timedOut {
            // The thread is stuck in a provider; leave it, the process owns it now.
            return
        }
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    private func drainWake() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &buffer, buffer.count) > 0 {}
    }

    private func run(_ session: X11Session) {
        while !turn(session, longestWait: -1) {}
        end(session)
    }

    /// One turn of the loop: the queued jobs, a batch of events, and (nothing else to do) a wait
    /// in poll() for the X socket, a job, a watched descriptor or the next timer, at most
    /// `longestWait` milliseconds (-1: no limit). True when the loop stops: asked to, or the
    /// connection died.
    private func turn(_ session: X11Session, longestWait: Int32) -> Bool {
        let jobs = queue.withLock { queue -> [@Sendable (X11Session) -> Void] in
            defer { queue.jobs.removeAll() }
            return queue.jobs
        }
        for job in jobs { job(session) }
        let handled = session.pump()
        if session.isDead || session.lifecycle == .stopRequested { return true }
        if session.hasQueuedEvents() { return false }
        // Inline, the waiter looks at what the jobs and events did before the loop sleeps.
        if runsInline.load(ordering: .relaxed), handled || !jobs.isEmpty { return false }
        let asleep = queue.withLock { queue -> Bool in
            queue.asleep = queue.jobs.isEmpty
            return queue.asleep
        }
        guard asleep else { return false }
        var fds = [pollfd(fd: XConnectionNumber(session.wire.display), events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        fds += session.descriptorHandlers.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let timer = session.nextTimerDelayMilliseconds()
        _ = poll(&fds, nfds_t(fds.count), longestWait < 0 ? timer : timer < 0 ? longestWait : min(timer, longestWait))
        queue.withLock { $0.asleep = false }
        if fds[1].revents != 0 { drainWake() }
        for ready in fds.dropFirst(2) where ready.revents != 0 {
            // Looked up again: an earlier handler may have closed this descriptor.
            session.descriptorHandlers[ready.fd]?()
        }
        return false
    }

    /// Inline: one turn on the calling thread (nothing when it is in a turn already, or the loop
    /// has stopped). A turn waits at most 250 ms, so that a waiter checks its own deadline.
    private func turnInline() {
        guard runsInline.load(ordering: .acquiring), stopReason == nil else { return }
        let session = session.value
        let entered = driving.withLock { driving -> Bool in
            guard !driving else { return false }
            driving = true
            return true
        }
        guard entered else { return }
        let stops = turn(session, longestWait: 250)
        driving.withLock { $0 = false }
        if stops { end(session) }
    }

    /// The loop has stopped: jobs still queued are dropped (their waiters see the stop reason and
    /// fail), the session finishes, and the stop handler runs.
    private func end(_ session: X11Session) {
        // What waiters are told, whether the loop was asked to stop or the connection died.
        let reason = X11BackendError.connectionLost
        queue.withLock { queue in
            queue.lifecycle = .stopped(reason)
            queue.jobs.removeAll()
        }
        session.finish(reason: reason)
        stopHandler.withLock { $0 }?(reason)
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
        stopped.signal()
    }
}

/// A one-shot meeting point between a waiting thread and the X thread.
///
/// Not generic: a generic class's metadata is made at run time for each type argument it is
/// used with (about 17,000 instructions each: a one-shot paste met it twice, for `Bool` and
/// `Data?`), where a plain class's is in the binary. The value is carried as `any Sendable` and
/// given back as the type it was fulfilled with; a waiter names that type.
final class Rendezvous: Sendable {
    private let result = Mutex<Result<any Sendable, any Error>?>(nil)
    private let semaphore = DispatchSemaphore(value: 0)
    /// Inline: a turn of the loop to run instead of sleeping (``X11Connection/pump``).
    private let pump: (@Sendable () -> Void)?

    init(pump: (@Sendable () -> Void)? = nil) {
        self.pump = pump
    }

    func fulfil<T: Sendable>(_ value: Result<T, any Error>) {
        settle(value.map { $0 as any Sendable })
    }

    private func settle(_ value: Result<any Sendable, any Error>) {
        let first = result.withLock { current -> Bool in
            guard current == nil else { return false }
            current = value
            return true
        }
        if first { semaphore.signal() }
    }

    /// Waits for the result, checking every so often whether the connection stopped. `T` is the
    /// type the X thread fulfils it with.
    func wait<T: Sendable>(timeout: Double, stopped: () -> X11BackendError?) throws -> T {
        // Clamped: DispatchTime traps on a span past Int64 nanoseconds (about 292 years).
        let end = DispatchTime.now() + min(max(0, timeout), 1e9)
        while true {
            if let pump {
                // The loop runs here: the result comes from a turn of it. Looked at, not waited
                // for: a semaphore's wait with a deadline of now still sleeps in the kernel until
                // a timer fires (timer slack, then a wake-up: 75 to 165 µs each here; a 13-byte
                // paste took three). The signal left unconsumed dies with this one-shot meeting.
                if result.withLock({ $0 != nil }) { break }
                pump()
            } else if semaphore.wait(timeout: min(end, .now() + 0.25)) == .success {
                break
            }
            if let reason = stopped() {
                settle(.failure(reason))
                break
            }
            if DispatchTime.now() >= end {
                settle(.failure(PasteboardError.timedOut(operation: "the X11 request", seconds: timeout)))
                break
            }
        }
        let value = try result.withLock { $0! }.get()
        guard let typed = value as? T else {
            throw PasteboardError.backendFailure("the X thread answered with \(type(of: value)), not \(T.self)")
        }
        return typed
    }
}
