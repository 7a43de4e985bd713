import Glibc

/// Writes to a reader's pipe whose reader may have gone: a reader killed mid-paste, or a client
/// that asks and closes its end at once. Such a write raises SIGPIPE, whose default ends the
/// process: an xpb owner died of any reader that closed early, and its copy was lost with it.
/// A library must not change the process's signal handling, so the signal is held back on the
/// writing thread only, and taken there.
enum BrokenPipe {
    /// Runs `body` with SIGPIPE blocked on this thread; a SIGPIPE its writes raised is taken
    /// before the thread's mask is restored (the writes saw EPIPE).
    static func guarding<T>(_ body: () -> T) -> T {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        let result = body()
        // Already blocked by the caller: what is pending stays theirs.
        guard sigismember(&previous, SIGPIPE) == 0 else { return result }
        var pending = sigset_t()
        if sigpending(&pending) == 0, sigismember(&pending, SIGPIPE) == 1 {
            var now = timespec(tv_sec: 0, tv_nsec: 0)
            while sigtimedwait(&pipeSignal, nil, &now) < 0, errno == EINTR {}
        }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        return result
    }
}
