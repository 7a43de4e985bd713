import Foundation
import Synchronization
@testable import PasteboardKit

/// A clock tests move by hand.
final class ManualClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_000_000))
    var now: Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

/// Counts how often each provider ran.
final class RunCounter: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    func hit(_ key: String) { counts.withLock { $0[key, default: 0] += 1 } }
    func count(_ key: String) -> Int { counts.withLock { $0[key, default: 0] } }
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
}

/// Collects the changes a center's observer is given.
final class ChangeLog: Sendable {
    struct Entry {
        let kind: PasteboardChange.Kind
        let info: [String: [String]]
        let count: Int
        let board: String
    }

    private let observed = Mutex<[Entry]>([])

    /// The observer to give a ``ChangeCenter``.
    var observer: ChangeCenter.Observer {
        { [weak self] change, _ in
            let entry = Entry(kind: change.kind,
                              info: ["added": change.typesAdded.map(\.identifier), "removed": change.typesRemoved.map(\.identifier)],
                              count: change.changeCount, board: change.name.rawValue)
            self?.observed.withLock { $0.append(entry) }
        }
    }

    var entries: [Entry] { observed.withLock { $0 } }
}

/// A fresh in-memory backend with its own change log and clock.
struct Fixture {
    let clock: ManualClock
    let log: ChangeLog
    let backend: InMemoryPasteboardBackend
    var general: Pasteboard { Pasteboard.general(of: backend) }

    init(realClock: Bool = false) {
        let clock = ManualClock()
        let log = ChangeLog()
        self.clock = clock
        self.log = log
        let now: @Sendable () -> Date
        if realClock { now = { Date() } } else { now = { clock.now } }
        backend = InMemoryPasteboardBackend(changeCenter: ChangeCenter(observer: log.observer), now: now)
    }
}

extension PasteboardType {
    static let blob = try! PasteboardType("com.example.blob")
}
