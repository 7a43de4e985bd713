internal import CX11
import PasteboardSelections
import FoundationEssentials

/// Serving targets whose bytes live elsewhere (a sync peer): the request waits, off nothing but
/// events, until the first bytes come; then a small reply is written whole and anything larger
/// goes out with INCR as an ``OutgoingSend`` of the stream, chunk by chunk as it delivers. The X
/// thread never blocks on the stream: it is told when something new arrived.
extension X11Session {
    /// Answers a request for a remote target.
    func serveRemote(_ request: ConversionRequest, _ remote: RemoteTarget) {
        // Watched until answered: a requestor destroyed meanwhile drops the request (and the stream).
        guard watchRequestor(request.requestor) else {
            releaseRequestor(request.requestor)
            return
        }
        guard let stream = remote.open() else {
            notify(request, succeeded: false)
            releaseRequestor(request.requestor)
            return
        }
        let id = makeOperationID()
        pendingRemote[id] = (request, stream)
        remoteProgress(id)
    }

    /// Something arrived for a waiting remote request: answer it once its form is known.
    private func remoteProgress(_ id: Int) {
        guard let (request, stream) = pendingRemote[id] else { return }
        let now = stream.snapshot()
        if now.failure != nil {
            pendingRemote.removeValue(forKey: id)
            notify(request, succeeded: false)
            releaseRequestor(request.requestor)
            return
        }
        guard let header = now.header else { return observeRemote(id, stream, after: now.version) }
        let whole = now.isEnded && now.buffered <= chunkSize
        let large = now.buffered > chunkSize || (header.size ?? 0) > chunkSize
        guard whole || large else { return observeRemote(id, stream, after: now.version) }
        pendingRemote.removeValue(forKey: id)
        let type = atom(header.type)
        if whole {
            var data = Data()
            while let chunk = stream.take(upTo: .max) { data.append(chunk) }
            var failed = false
            data.withUnsafeBytes { writeBytes(request.requestor, request.replyProperty, type: type, $0, onError: { _ in failed = true }) }
            notify(request, succeeded: !failed)
            releaseRequestor(request.requestor)
            return
        }
        // The watch taken in serveRemote now belongs to the transfer (released by dropOutgoing).
        let key = TransferKey(requestor: request.requestor, property: request.replyProperty)
        switch openOutgoing(key, OutgoingSend(type: type, supply: .stream(stream)), announcing: header.size ?? stream.sizeHint ?? now.buffered, watched: true) {
        case .opened:
            notify(request, succeeded: true)
        case .refused:
            stream.cancel()
            notify(request, succeeded: false)
            releaseRequestor(request.requestor)
        case .failed:
            notify(request, succeeded: false)
        }
    }

    /// The requestor's window is gone: its requests still waiting for their first bytes end, and
    /// their streams stop.
    func dropRemoteRequests(of requestor: X11Window) {
        for (id, pending) in pendingRemote where pending.request.requestor == requestor {
            pendingRemote.removeValue(forKey: id)
            pending.stream.cancel()
        }
    }

    private func observeRemote(_ id: Int, _ stream: ByteStream, after version: Int) {
        let enqueue = self.enqueue
        stream.observe(after: version) {
            _ = enqueue? { session in session.remoteProgress(id) }
        }
    }
}
