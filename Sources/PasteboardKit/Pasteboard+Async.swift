import Dispatch

/// The async entry point: one call that runs any synchronous reads and writes of a pasteboard
/// on a worker thread outside Swift's cooperative pool, and resumes the caller when they are
/// done. A read can wait for another process (a stopped X owner takes up to the read timeout,
/// 5 s by default), so an actor or the main actor must not make it on its own thread:
///
///     let (text, types) = try await board.perform { try ($0.readString(), $0.readTypes()) }
///
/// One entry point instead of an async twin of every method: the synchronous API is the whole
/// API (nothing to learn twice, no overload chosen by context), and a batch of calls costs one
/// thread hop, not one per call.
extension Pasteboard {
    /// Runs `body` with this pasteboard on a worker thread and returns what it returns (or
    /// throws what it throws), without blocking the caller's thread meanwhile.
    public func perform<T: Sendable>(_ body: @escaping @Sendable (Pasteboard) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Background.run("xpb.perform", qos: .userInitiated) {
                continuation.resume(with: Result { try body(self) })
            }
        }
    }
}
