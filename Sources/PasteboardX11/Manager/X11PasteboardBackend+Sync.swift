import FoundationEssentials
import PasteboardKit
import PasteboardSelections

/// What a sync daemon needs beyond a clipboard manager: owning a selection whose bytes live
/// elsewhere, and streaming an owner's target out without holding it whole.
extension X11PasteboardBackend {
    /// Owns the pasteboard's selection listing `targets` (after `TARGETS` and `TIMESTAMP`), each
    /// served from the stream its `open` starts when a requestor converts it.
    ///
    /// Compare-and-own: `precondition` is asked on the X thread, after the server timestamp is
    /// taken, with the selection's owner at that moment; false leaves the selection alone and
    /// returns false.
    package func proxy(_ name: Pasteboard.Name, targets: [RemoteTarget], credit: CopyCredit? = nil,
                       if precondition: @escaping @Sendable (X11Window) -> Bool) throws -> Bool {
        do {
            let _: X11Timestamp = try connection.sync(timeout: timeout) { [self] session, done in
                session.owner.own(self.selectionAtom(name, in: session), at: nil, if: precondition, making: { session, time in
                    var state = session.owner.makeRemoteSelection(targets, timestamp: time)
                    state.credit = credit
                    return state
                }) { done($0) }
            }
        } catch is OwnDeclined {
            return false
        }
        // Not items of this process: the change is counted from its XFixes event.
        state.withLock { _ = $0.owned.removeValue(forKey: name) }
        return true
    }

    /// Compare-and-clear: empties the pasteboard's selection if `precondition` holds for its
    /// owner on the X thread at that moment. Returns whether it is empty now by this call.
    package func clear(_ name: Pasteboard.Name, if precondition: @escaping @Sendable (X11Window) -> Bool) throws -> Bool {
        let cleared: Bool = try connection.sync(timeout: timeout) { [self] session, done in
            session.owner.clear(self.selectionAtom(name, in: session), if: precondition) { done($0) }
        }
        if cleared { state.withLock { _ = $0.owned.removeValue(forKey: name) } }
        return cleared
    }

    /// Calls `handler` on the X thread itself for every ownership change of a watched selection,
    /// as its XFixes event is read, before any other work: what it decides is ordered against
    /// everything the X thread does after. It must be quick and never wait on the connection.
    package func onOwnerChangeRead(_ handler: (@Sendable (SelectionOwnerChange) -> Void)?) {
        state.withLock { $0.ownerChangeReadHandler = handler }
    }

    /// Converts the selection to `target` and hands its bytes to `chunk` as they arrive (INCR
    /// read with at most `highWater` bytes waiting), after `begin` got the reply's type.
    /// Returns false when the owner refuses. A throwing callback stops the transfer.
    ///
    /// - Throws: on a deadline, a reply over `limit`, a lost connection, or a callback's error.
    package func stream(_ name: Pasteboard.Name, target: String, limit: Int, highWater: Int = 2 << 20,
                        begin: (String, Int?) throws -> Void, chunk: (Data) throws -> Void) throws -> Bool {
        let sink = StreamSink(highWater: highWater)
        let converted = Rendezvous<Bool>()
        guard connection.submit({ [self] session in
            session.reader.convert(self.selectionAtom(name, in: session), to: session.wire.atom(target), limit: limit, sink: sink) { result in
                converted.fulfil(result.map { $0 != nil })
            }
        }) else { throw connection.stopReason ?? X11BackendError.connectionLost }
        var begun = false
        func start() throws {
            guard !begun else { return }
            begun = true
            let atom = sink.replyType ?? .none
            let type = atom.isNone ? target : (try connection.sync(timeout: timeout) { session, done in
                done(.success(session.wire.name(of: atom) ?? target))
            })
            try begin(type, sink.size)
        }
        try sink.drain { data in
            try start()
            try chunk(data)
        }
        let ok = try converted.wait(timeout: configuration.transferDeadline + 5, stopped: { [connection] in connection.stopReason })
        if ok { try start() }
        return ok
    }
}
