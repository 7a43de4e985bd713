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

/// Collects notifications posted to a private center.
final class NotificationLog: Sendable {
    let center = NotificationCenter()
    private let posted = Mutex<[(name: Notification.Name, info: [String: [String]], count: Int, board: String)]>([])

    init() {
        for name in [Pasteboard.changedNotification, Pasteboard.removedNotification] {
            _ = center.addObserver(forName: name, object: nil, queue: nil) { [weak self] note in
                let info = note.userInfo ?? [:]
                let entry = (
                    name: note.name,
                    info: [
                        "added": info[Pasteboard.typesAddedUserInfoKey] as? [String] ?? [],
                        "removed": info[Pasteboard.typesRemovedUserInfoKey] as? [String] ?? [],
                    ],
                    count: info[Pasteboard.changeCountUserInfoKey] as? Int ?? -1,
                    board: info[Pasteboard.nameUserInfoKey] as? String ?? "")
                self?.posted.withLock { $0.append(entry) }
            }
        }
    }

    var entries: [(name: Notification.Name, info: [String: [String]], count: Int, board: String)] { posted.withLock { $0 } }
}

/// A fresh in-memory backend with its own notification center and clock.
struct Fixture {
    let clock: ManualClock
    let log: NotificationLog
    let backend: InMemoryPasteboardBackend
    var general: Pasteboard { Pasteboard.general(of: backend) }

    init(realClock: Bool = false) {
        let clock = ManualClock()
        let log = NotificationLog()
        self.clock = clock
        self.log = log
        let now: @Sendable () -> Date
        if realClock { now = { Date() } } else { now = { clock.now } }
        backend = InMemoryPasteboardBackend(changeCenter: ChangeCenter(notificationCenter: log.center), now: now)
    }
}

extension PasteboardType {
    static let blob = try! PasteboardType("com.example.blob")
}
