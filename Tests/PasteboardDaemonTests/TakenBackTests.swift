import FoundationEssentials
import PasteboardKit
import Testing
@testable import PasteboardDaemon

@Suite("copies their app takes back (secrets without a hint)")
struct TakenBackTests {
    let start = Date(timeIntervalSince1970: 1_000_000)

    @Test("an empty copy by the same app within the window takes the copy back, with its entry; later or by another app it does not")
    func emptyCopy() {
        var rule = TakenBackCopies(window: 120)
        rule.kept(.general, app: "buttercup", time: start)
        rule.written(.general, time: start, entry: 7)
        #expect(rule.copied(.general, app: "buttercup", isEmpty: true, at: start.addingTimeInterval(119))
            == .init(selection: .general, app: "buttercup", time: start, entry: 7))
        #expect(rule.recent.isEmpty)

        rule.kept(.general, app: "buttercup", time: start)
        #expect(rule.copied(.general, app: "buttercup", isEmpty: true, at: start.addingTimeInterval(121)) == nil, "past the window")
        rule.kept(.general, app: "buttercup", time: start)
        #expect(rule.copied(.general, app: "xclip", isEmpty: true, at: start.addingTimeInterval(1)) == nil, "another app's empty copy")
        #expect(rule.copied(.general, app: nil, isEmpty: true, at: start.addingTimeInterval(1)) == nil, "an app not known")
        #expect(rule.copied(.general, app: "buttercup", isEmpty: true, at: start.addingTimeInterval(2)) != nil, "an empty copy by another ends nothing")
        rule.kept(.find, app: "buttercup", time: start)
        #expect(rule.copied(.general, app: "buttercup", isEmpty: true, at: start.addingTimeInterval(1)) == nil, "another selection")
    }

    @Test("a later copy, an owner gone, or a window of 0 end the taking back; a clear within the window takes the copy back")
    func clears() {
        var rule = TakenBackCopies(window: 120)
        rule.kept(.general, app: "gtk", time: start)
        guard case let .takenBack(copy) = rule.cleared(.general, at: start.addingTimeInterval(2)) else {
            Issue.record("a clear within the window takes the copy back")
            return
        }
        #expect(copy.app == "gtk")
        #expect(rule.cleared(.general, at: start.addingTimeInterval(3)) == .nothing, "taken back once")

        rule.kept(.general, app: "gtk", time: start)
        #expect(rule.copied(.general, app: "xclip", isEmpty: false, at: start.addingTimeInterval(1)) == nil)
        #expect(rule.cleared(.general, at: start.addingTimeInterval(2)) == .nothing, "the clipboard held another copy")

        rule.kept(.general, app: "gtk", time: start)
        rule.ownerGone(.general)
        #expect(rule.cleared(.general, at: start.addingTimeInterval(2)) == .nothing, "xpbd served it: its app took nothing back")

        rule.kept(.general, app: "gtk", time: start)
        #expect(rule.cleared(.general, at: start.addingTimeInterval(120.5)) == .nothing, "past the window")

        rule.kept(.general, app: "gtk", time: start)
        rule.userCleared(.general)
        #expect(rule.cleared(.general, at: start.addingTimeInterval(1)) == .nothing, "the user's clear: no secret")

        var off = TakenBackCopies(window: 0)
        off.kept(.general, app: "gtk", time: start)
        #expect(off.cleared(.general, at: start) == .nothing)
        #expect(off.recent.isEmpty)
        rule.kept(.general, app: "gtk", time: start)
        rule.written(.general, time: start.addingTimeInterval(-5), entry: 3)
        guard case let .takenBack(other) = rule.cleared(.general, at: start.addingTimeInterval(1)) else {
            Issue.record("taken back")
            return
        }
        #expect(other.entry == nil, "an entry of another copy is not taken for this one's")
    }

    @Test("a clear after two apps' copies within the window could be either's: the newer copy is never forgotten on a guess; the same app twice, or an earlier copy past the window, is no doubt")
    func clearerUnknown() {
        var rule = TakenBackCopies(window: 120)
        // A password manager's copy, then the user's in another app, then a clear.
        rule.kept(.general, app: "keeper", time: start)
        #expect(rule.copied(.general, app: "mousepad", isEmpty: false, at: start.addingTimeInterval(5)) == nil)
        rule.kept(.general, app: "mousepad", time: start.addingTimeInterval(5))
        guard case let .unknownClearer(copy, earlierApp) = rule.cleared(.general, at: start.addingTimeInterval(10)) else {
            Issue.record("the clearer is unknown")
            return
        }
        #expect(copy.app == "mousepad" && earlierApp == "keeper")

        // The same app twice (a user name, then a password): its own clear.
        rule.kept(.general, app: "keeper", time: start)
        rule.kept(.general, app: "keeper", time: start.addingTimeInterval(3))
        guard case .takenBack = rule.cleared(.general, at: start.addingTimeInterval(10)) else {
            Issue.record("one app, its clear")
            return
        }
        // The copy before came past the window.
        rule.kept(.general, app: "browser", time: start)
        rule.kept(.general, app: "keeper", time: start.addingTimeInterval(200))
        guard case .takenBack = rule.cleared(.general, at: start.addingTimeInterval(205)) else {
            Issue.record("the earlier copy is past its window")
            return
        }
        // Its owner gone before the newer copy: xpbd served it, and nobody else's copy is in doubt.
        rule.kept(.general, app: "browser", time: start)
        rule.ownerGone(.general)
        rule.kept(.general, app: "keeper", time: start.addingTimeInterval(5))
        guard case .takenBack = rule.cleared(.general, at: start.addingTimeInterval(10)) else {
            Issue.record("the earlier copy's owner went away")
            return
        }
    }
}
