import FoundationEssentials
import PasteboardKit

/// A conversion asked for in the same round trip as the owner's `TARGETS`, before the reader has
/// chosen its type: the target the reader will most likely stream (`UTF8_STRING` for text). The
/// owner answers both in turn, so a paste from a plain owner waits for one answer instead of two.
///
/// Its sink is gated: until the reader takes the read, the X thread asks for nothing past the
/// owner's first reply (or first INCR chunk). A guess the choice does not confirm costs the owner
/// that one reply, and is dropped.
final class SpeculativeRead: Sendable {
    let target: String
    let limit: Int
    let sink: StreamSink
    /// Whether the owner converted the target (false: it refused, or it was never asked).
    private let answered: Rendezvous

    /// `pump`: the connection's inline turn (``X11Connection/pump``), if the reader runs the loop.
    init(target: String, limit: Int, pump: (@Sendable () -> Void)? = nil) {
        self.target = target
        self.limit = limit
        sink = StreamSink(gated: true, pump: pump)
        answered = Rendezvous(pump: pump)
    }

    /// X thread: asks the owner of `selection` for the target, into our guess property
    /// (``X11Wire/guessProperty``, which tells an xpb owner it is a guess) of a requestor window
    /// of its own, like every conversion.
    func issue(_ selection: X11Atom, in session: X11Session, flushes: Bool = true) {
        session.reader.convert(selection, to: session.wire.atom(target), limit: limit, sink: sink, into: session.wire.guessProperty,
                               flushes: flushes) { [answered] result in
            answered.fulfil(result.map { $0 != nil })
        }
    }

    /// The target was not asked for (nobody owns the selection, or the offer came from the cache).
    func skip() {
        sink.finish(.success(()))
        answered.fulfil(.success(false))
    }

    /// Reader: streams the reply to `bytes`. False when the owner refused it (nothing was passed).
    func take(timeout: Double, stopped: () -> X11BackendError?, bytes: (Data) throws -> Void) throws -> Bool {
        sink.openGate()
        try sink.drain(into: bytes)
        return try answered.wait(timeout: timeout, stopped: stopped)
    }

    /// Reader: the guess was wrong; what came is dropped, and the rest of the reply drained by
    /// the X thread (new conversions of the selection wait for its end).
    func abandon() {
        sink.cancel()
    }
}
