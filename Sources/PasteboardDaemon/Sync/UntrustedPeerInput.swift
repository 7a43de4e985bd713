import FoundationEssentials
import PasteboardWire

/// What a sync peer or a control client sends, behind one entry point for the fuzz target
/// (`Sources/xpb-fuzz`), next to the X parsers of ``PasteboardX11/UntrustedInput``: the frame
/// decoder, every message decoder of the control socket and of sync links, and the two state
/// machines those messages drive (``SyncLedger``, ``TransferTable``), fed as the daemon feeds
/// them, with the checks it makes first. Nothing a peer sends may trap, hang or grow without
/// bound; the state machines' promises are checked after every message and trap when broken.
package enum UntrustedPeerInput {
    package static func exercise(_ data: Data) {
        let wall = Date(timeIntervalSince1970: 2_000_000_000)
        let now: UInt64 = 2_000_000_000_000
        let selections: Set<String> = ["CLIPBOARD", "PRIMARY"]
        var ledger = SyncLedger(node: "fuzz")
        _ = ledger.linkUp(1, sends: selections, receives: selections, now: wall)
        let caps = TransferTable.Caps(maxTransfer: 1 << 20, maxTotal: 4 << 20, window: 256 << 10)
        var transfers = TransferTable(caps: caps)
        // A fetch of ours and one we serve, both on the peer's link, for its messages to meet.
        _ = transfers.openLocal(what: "fuzz", size: nil, link: 1, fetch: { .cancel(id: $0) }, now: wall)
        var servedKeys = [transfers.serveLocal(1, on: 1, window: 128 << 10)].compactMap { $0 }

        var decoder = FrameDecoder()
        decoder.append(data)
        while true {
            let next: Frame?
            do {
                next = try decoder.next()
            } catch {
                break
            }
            guard let frame = next else { break }
            precondition(frame.payload.count <= Frame.maxPayload, "a frame past the payload cap")
            switch frame.kind {
            case .hello:
                _ = try? ControlCoding.decode(ControlHello.self, from: frame.payload)
                if let hello = try? ControlCoding.decode(SyncHello.self, from: frame.payload) {
                    _ = SyncHello(node: "fuzz", name: "fuzz", sends: true, receives: true, selections: []).mismatch(with: hello)
                }
            case .request:
                _ = try? ControlCoding.decode(ControlRequest.self, from: frame.payload)
            case .reply:
                _ = try? ControlCoding.decode(ControlReply.self, from: frame.payload)
            case .page:
                HistoryPageCoding.exercise(frame.payload)
            case .error:
                _ = try? ControlCoding.decode(ControlFailure.self, from: frame.payload)
            case .data:
                guard let (id, bytes) = SyncData.decode(frame.payload) else { continue }
                _ = transfers.data(id, count: bytes.count, from: 1, now: wall)
            case .sync:
                guard case let .message(message, _) = try? SyncIncoming.decode(frame.payload) else { continue }
                switch message {
                case let .announce(announce):
                    guard SyncLedger.malformation(of: announce, maxTargets: SyncHub.maxTargets, maxTargetName: SyncHub.maxTargetName) == nil else { continue }
                    _ = ledger.announced(announce, from: 1, now: now, wall: wall)
                case let .withdraw(selection, stamp):
                    _ = ledger.withdrawn(selection, stamp: stamp, from: 1, now: now)
                case let .fetch(id, _, _, _, window, _):
                    if let key = transfers.serveLocal(id, on: 1, window: window) { servedKeys.append(key) }
                case let .begin(id, type, size):
                    _ = transfers.begin(id, type: type, size: size, from: 1, now: wall)
                case let .end(id, total):
                    _ = transfers.end(id, total: total, from: 1)
                case let .failed(id, message):
                    _ = transfers.failed(id, message: message, from: 1)
                case let .credit(id, bytes):
                    _ = transfers.credit(id, bytes: bytes, from: 1)
                case let .cancel(id):
                    _ = transfers.cancel(id, from: 1)
                case .ping, .pong:
                    break
                }
            }
            // The sender takes what credit there is, as the daemon's does.
            for key in servedKeys { _ = transfers.takeCredit(key, bytes: 1 << 10) }
            check(transfers)
        }
        _ = transfers.linkDown(1, message: "fuzz")
        precondition(transfers.fetches.isEmpty && transfers.served.isEmpty, "a transfer outlived its link")
    }

    /// What the daemon relies on, whatever a peer sent.
    private static func check(_ transfers: TransferTable) {
        for served in transfers.served.values {
            if case let .local(credit, window) = served {
                precondition(credit >= 0 && credit <= window && TransferTable.Caps.windowRange.contains(window), "a served transfer's credit outside its window")
            }
        }
        precondition(transfers.inFlight >= 0 && transfers.inFlight <= transfers.caps.maxTotal, "the bytes in flight past the total cap")
        for fetch in transfers.fetches.values {
            precondition(fetch.received <= fetch.limit, "a fetch received past its limit")
        }
    }
}
