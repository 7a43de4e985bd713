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
        #expect(rule.cleared(.general, at: start.addingTimeInterval(2))?.app == "gtk")
        #expect(rule.cleared(.general, at: start.addingTimeInterval(3)) == nil, "taken back once")

        rule.kept(.general, app: "gtk", time: start)
        #expect(rule.copied(.general, app: "xclip", isEmpty: false, at: start.addingTimeInterval(1)) == nil)
        #expect(rule.cleared(.general, at: start.addingTimeInterval(2)) == nil, "the clipboard held another copy")

        rule.kept(.general, app: "gtk", time: start)
        rule.ownerGone(.general)
        #expect(rule.cleared(.general, at: start.addingTimeInterval(2)) == nil, "xpbd served it: its app took nothing back")

        rule.kept(.general, app: "gtk", time: start)
        #expect(rule.cleared(.general, at: start.addingTimeInterval(120.5)) == nil, "past the window")

        var off = TakenBackCopies(window: 0)
        off.kept(.general, app: "gtk", time: start)
        #expect(off.cleared(.general, at: start) == nil)
        #expect(off.recent.isEmpty)
        rule.kept(.general, app: "gtk", time: start)
        rule.written(.general, time: start.addingTimeInterval(-5), entry: 3)
        #expect(rule.cleared(.general, at: start.addingTimeInterval(1))?.entry == nil, "an entry of another copy is not taken for this one's")
    }
}
