internal import CX11

/// The requestor windows whose property changes and destruction we ask for while something of
/// ours concerns them (a send, a request waiting for a worker or a peer, a save, a flood's
/// queue), counted per window: the events are asked for with the first and given back with the
/// last.
final class RequestorWatch {
    private unowned let session: X11Session
    private let wire: X11Wire
    private var watched: [X11Window: Int] = [:]

    init(session: X11Session) {
        self.session = session
        wire = session.wire
    }

    /// How many things of ours concern `requestor`.
    func count(_ requestor: X11Window) -> Int { watched[requestor, default: 0] }

    /// Asks for a requestor window's property changes and destruction while something of ours
    /// concerns it (counted). A window destroyed before the server took the request sends no
    /// DestroyNotify: the server answers BadWindow instead, and that answer drops what concerns
    /// the window as its destruction would (a reader killed as its INCR transfer started, whose
    /// transfer otherwise waited out the serve timeout). The answer comes later, so this returns
    /// true unless an earlier answer is already in.
    ///
    /// By the time the answer is read, the X server may have given the window's id to a new
    /// client's window (it reuses a departed client's ids), whose requests came after ours: they
    /// are the new window's, and are kept (a reader started just after a stopped owner went on
    /// got no answer at all, its request dropped with the dead window's).
    func watch(_ requestor: X11Window) -> Bool {
        var alive = true
        if watched[requestor, default: 0] == 0 {
            let display = wire.display
            wire.routeErrors({ XSelectInput(display, requestor.rawValue, PropertyChangeMask | StructureNotifyMask) },
                             onError: { [weak session = session] record in
                                 alive = false
                                 if record.errorCode == UInt8(BadWindow) { session?.requestorGone(requestor, asOf: record.serial) }
                             })
        }
        watched[requestor, default: 0] += 1
        return alive
    }

    /// One thing of ours no longer concerns `requestor`; with the last, its events stop.
    func release(_ requestor: X11Window) {
        let remaining = watched[requestor, default: 1] - 1
        if remaining <= 0 {
            watched.removeValue(forKey: requestor)
            wire.selectInput(requestor, NoEventMask)
        } else {
            watched[requestor] = remaining
        }
    }

    /// The window is gone: nothing of it is counted any more.
    func forget(_ requestor: X11Window) {
        watched.removeValue(forKey: requestor)
    }
}
