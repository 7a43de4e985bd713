import FoundationEssentials
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWayland
import PasteboardWire
import Synchronization

/// A Wayland session's selections as sync shares them: ownerships are the backend's numbers,
/// another node's copy is served as a source of ours whose bytes are fetched when a reader asks,
/// and a fetch of a copy made here reads the source's offer (or what the keeper kept).
final class WaylandSyncSurface: SyncSurface, @unchecked Sendable {
    let backend: WaylandPasteboardBackend
    /// What the keeper kept of an ownership (set once, before the hub starts).
    var kept: (@Sendable (Pasteboard.Name, UInt) -> Snapshot?)?
    /// Whether an ownership is the compositor's own bridge carrying a copy (set once).
    var isEcho: (@Sendable (UInt) -> Bool)?

    init(backend: WaylandPasteboardBackend) {
        self.backend = backend
    }

    var ourOwner: UInt { WaylandPasteboardBackend.ourOwner }

    func currentOwner(of name: Pasteboard.Name) -> UInt? {
        backend.currentOwner(of: name)
    }

    func own(_ name: Pasteboard.Name, targets: [RemoteTarget], origin: String, if precondition: @escaping @Sendable (UInt) -> Bool) throws -> Bool {
        // The compositor's bridge shows that copy here already: replacing it would only make the
        // compositor carry ours back.
        let isEcho = self.isEcho
        return try backend.proxy(name, targets: targets, if: { owner in
            if let owner, isEcho?(owner) == true { return false }
            return precondition(owner ?? 0)
        })
    }

    func clear(_ name: Pasteboard.Name, if precondition: @escaping @Sendable (UInt) -> Bool) throws -> Bool {
        try backend.clear(name, if: { precondition($0 ?? 0) })
    }

    /// Data-control says nothing of a pointer: a selection is finished when it is set.
    func waitUntilFinished(_ name: Pasteboard.Name, owner: UInt, while isCurrent: @escaping @Sendable () -> Bool) -> Bool { true }

    func verdict(_ name: Pasteboard.Name, owner: UInt, nodeName: String) -> SyncLedger.Verdict {
        let advertised: [String]
        var manifest: Data?
        var expires: Date?
        var isLocalOnly = false
        if owner == ourOwner {
            guard let snapshot = kept?(name, owner) else { return .notShared("no longer kept") }
            advertised = snapshot.advertised
            manifest = snapshot.targets.first { $0.target == Manifest.target }.flatMap { Manifest.kept($0.data)?.manifest }
            expires = snapshot.expires
            isLocalOnly = snapshot.isLocalOnly
        } else {
            guard let offered = backend.offeredTypes(of: name, owner: owner) else { return .replaced }
            advertised = offered
            if offered.contains(Manifest.target) {
                var bytes = Data()
                if (try? backend.read(name, owner: owner, type: Manifest.target, limit: 1 << 20, bytes: { bytes.append($0) })) != nil,
                   let read = Manifest.kept(bytes) {
                    manifest = read.manifest
                    expires = read.options.expirationDate
                    isLocalOnly = read.options.isLocalOnly
                }
            }
        }
        switch CopyVerdict.of(advertised: advertised, expires: expires, isLocalOnly: isLocalOnly) {
        case .shareable: break
        case let verdict: return .notShared(verdict.notSharedReason ?? "not shared")
        }
        let targets = SyncHub.announcedTargets(KeepPolicy.keptTargets(advertised, manifest: manifest), sizes: { _ in nil }, manifest: manifest)
        guard !targets.isEmpty else { return .notShared("without data targets") }
        return .shareable(targets: Array(targets), expires: expires, origin: "\(nodeName) (\(owner == ourOwner ? "history" : "a Wayland client"))")
    }

    func serve(_ name: Pasteboard.Name, owner: UInt, target: String, limit: Int, turnDeadline: Date,
               isCurrent: @escaping @Sendable () -> Bool, begin: (String, Int?) throws -> Void,
               chunk: (Data) throws -> Void) throws -> SyncServeOutcome {
        let selection = SelectionNames.selection(for: name)
        if let snapshot = kept?(name, owner), let value = snapshot.targets.first(where: { $0.target == target })?.captured {
            let data = target == Manifest.target ? (Manifest.kept(value.data)?.manifest ?? value.data) : value.data
            guard data.count <= limit else {
                return .refused("\(selection) \(target) is \(ByteCount.format(data.count)), over the \(ByteCount.format(limit)) cap per transfer")
            }
            try begin(value.type, data.count)
            try chunk(data)
            return .served
        }
        guard owner != ourOwner else { return .refused("\(selection) \(target) is no longer kept") }
        var begun = false
        let read = try backend.read(name, owner: owner, type: target, limit: limit) { data in
            guard isCurrent() else { throw SyncHub.Failure("\(selection) changed during the transfer") }
            if !begun {
                try begin(target, nil)
                begun = true
            }
            try chunk(data)
        }
        guard read != nil else { return .refused("\(selection) no longer offers \(target)") }
        if !begun { try begin(target, 0) }
        return .served
    }
}
