import FoundationEssentials
import PasteboardKit
import PasteboardSelections
import PasteboardWire

/// One kept target: its name, the reply's type, the bytes and their digest.
package struct KeptTarget: Sendable, Equatable {
    package var target: String
    package var type: String
    package var data: Data
    package var digest: Digest

    package init(target: String, type: String, data: Data, digest: Digest? = nil) {
        self.target = target
        self.type = type
        self.data = data
        self.digest = digest ?? Digest(of: data)
    }

    package var captured: CapturedTarget { CapturedTarget(target: target, type: type, data: data) }
}

/// Contents taken from a selection's owner: what the daemon serves when the owner is gone, and
/// what a history entry holds.
package struct Snapshot: Sendable {
    package var selection: Pasteboard.Name
    /// The owner's `TARGETS`, in its order.
    package var advertised: [String]
    /// The targets kept, in the owner's order; identical bytes share one `Data`.
    package var targets: [KeptTarget]
    package var time: Date
    /// The owner's window name and process id, where it published them.
    package var source: String?
    package var pid: Int?
    /// The application that copied (``SelectionOwnerInfo/appName``), where it could be told.
    package var app: String?
    /// The owner, as its host numbers owners (an X window; not stored; 0: none): ours once the
    /// daemon serves the contents.
    package var owner: UInt = 0
    /// The owner the contents were taken from (not stored), kept when the daemon serves them.
    package var capturedFrom: UInt = 0
    package var expires: Date?
    package var isLocalOnly = false
    /// Whether every kept target of the owner was fetched.
    package var isComplete = true
    /// The history row, once stored.
    package var id: Int64?

    package init(selection: Pasteboard.Name, advertised: [String], targets: [KeptTarget], time: Date = Date(),
                source: String? = nil, pid: Int? = nil) {
        self.selection = selection
        self.advertised = advertised
        self.targets = targets
        self.time = time
        self.source = source
        self.pid = pid
    }

    /// The contents made of what was taken from an owner (nil for a target that could not be
    /// taken): identical bytes kept once, at most `cap` bytes in all (a target past it is left
    /// out), xpb's manifest without its options (which set the expiry and local-only). Nil when
    /// nothing is kept.
    package init?(_ selection: Pasteboard.Name, advertised: [String], captured: [CapturedTarget?], complete: Bool = true, cap: Int) {
        var complete = complete
        var kept: [KeptTarget] = []
        var total = 0
        var seen: [Digest: Data] = [:]
        for value in captured {
            guard let value else {
                complete = false
                continue
            }
            var target = KeptTarget(target: value.target, type: value.type, data: value.data)
            if let data = seen[target.digest] {
                target.data = data
            } else {
                guard total + value.data.count <= cap else {
                    complete = false
                    continue
                }
                total += value.data.count
                seen[target.digest] = value.data
            }
            kept.append(target)
        }
        guard !kept.isEmpty else { return nil }
        self.init(selection: selection, advertised: advertised, targets: kept)
        isComplete = complete
        if let index = kept.firstIndex(where: { $0.target == "XPB_MANIFEST" }) {
            if let manifest = Manifest.kept(kept[index].data) {
                expires = manifest.options.expirationDate
                isLocalOnly = manifest.options.isLocalOnly
                targets[index] = KeptTarget(target: "XPB_MANIFEST", type: kept[index].type, data: manifest.manifest)
            } else {
                targets.remove(at: index)
            }
        }
    }

    /// What a keeper keeps of items held in this process (``HeldSelection``): every item's
    /// targets, as the desktop's keeper fetches them of an xpb owner. Nil when nothing is kept.
    init?(_ selection: Pasteboard.Name, of held: HeldSelection, cap: Int) {
        let wanted = KeepPolicy.fetchedTargets(KeepPolicy.keptTargets(held.targets, manifest: held.manifest), manifest: held.manifest)
        let captured = wanted.map { target -> CapturedTarget? in
            guard let (type, data) = try? held.bytes(for: target) else { return nil }
            return CapturedTarget(target: target, type: type, data: data)
        }
        self.init(selection, advertised: held.targets, captured: captured, cap: cap)
    }

    /// Whether the copy holds no bytes but xpb's own: an empty copy, which is how some apps clear
    /// the clipboard (``TakenBackCopies``).
    package var isEmpty: Bool { targets.allSatisfy { $0.data.isEmpty || $0.target.hasPrefix("XPB_") } }

    /// Zeroes the bytes this snapshot holds (a secret dropped), then lets them go. Bytes that
    /// another value shares still (a copy being served) are copied by the write and let go by
    /// that holder in its time; what this snapshot alone holds is zeroed where it lies.
    package mutating func wipe() {
        for index in targets.indices { targets[index].data.wipe() }
    }

    /// Bytes kept, identical payloads counted once.
    package var size: Int {
        var seen: Set<Digest> = []
        return targets.reduce(0) { $0 + (seen.insert($1.digest).inserted ? $1.data.count : 0) }
    }

    package func isExpired(at now: Date = Date()) -> Bool { expires.map { $0 <= now } ?? false }

    /// The targets a text can be read from, best first.
    static let textTargets = ["UTF8_STRING", "text/plain;charset=utf-8", "text/plain", "STRING", "TEXT"]

    /// The text of the contents, if they have a text target (the first `limit` bytes); for
    /// contents under names no reader knows alone (an app's `FOO_BAR`), their bytes if they are
    /// text, as the listing names them `text/plain`.
    package func text(limit: Int = 64 << 10) -> String? {
        for name in Self.textTargets {
            guard let target = targets.first(where: { $0.target == name }) else { continue }
            let bytes = target.data.prefix(limit)
            if name == "STRING" { return String(bytes.map { Character(Unicode.Scalar($0)) }) }
            return String(decoding: bytes, as: UTF8.self)
        }
        let named = targets.filter { !$0.target.hasPrefix("XPB_") && !TypeRegistry.isPrivate($0.target) }
        guard !named.contains(where: { TypeRegistry.standard.type(forTarget: $0.target) != nil }),
              let largest = named.max(by: { $0.data.count < $1.data.count }),
              let sniffed = ContentSniffer.sniff(largest.data.prefix(4096), totalSize: largest.data.count),
              TypeRegistry.standard.conforms(sniffed, to: .plainText) else { return nil }
        return String(decoding: largest.data.prefix(limit), as: UTF8.self)
    }

    /// One line for listings: the text's first non-empty line (shortened), or the first type
    /// and size.
    package var preview: String {
        if let text = text(limit: 4096) {
            let line = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingSpaces() } ?? ""
            return line.count > 100 ? String(line.prefix(99)) + "…" : line
        }
        guard let first = targets.first(where: { !$0.target.hasPrefix("XPB_") }) ?? targets.first else { return "" }
        return "[\(first.target) \(ByteCount.format(first.data.count))]"
    }

    /// Keeps identical payloads once: targets with the same digest share the first one's `Data`.
    mutating func shareIdenticalPayloads() {
        var first: [Digest: Data] = [:]
        for index in targets.indices {
            if let data = first[targets[index].digest] { targets[index].data = data } else { first[targets[index].digest] = targets[index].data }
        }
    }
}
