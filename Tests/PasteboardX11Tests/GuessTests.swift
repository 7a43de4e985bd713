import Foundation
import PasteboardKit
import PasteboardSelections
import Testing
@testable import PasteboardX11

/// The guess a paste asks for beside `TARGETS` (``SpeculativeRead``) is taken only where its bytes
/// are what the read would have read (``X11PasteboardBackend/takesGuess(_:of:from:registry:)``).
@Suite("a paste's guess: taken where its bytes are the read's")
struct GuessTests {
    private let registry = TypeRegistry.standard

    private func item(_ types: [PasteboardType]) -> PasteboardItem {
        var item = PasteboardItem()
        for type in types { item.setData(Data(type.identifier.utf8), for: type) }
        return item
    }

    private func plain(_ targets: [String]) -> ForeignOffer {
        ForeignOffer(owner: .none, targets: ["TARGETS"] + targets, manifest: nil)
    }

    /// An xpb owner's offer: its manifest names a target of its own for every representation.
    private func xpb(_ items: [PasteboardItem], manifest: Manifest? = nil) -> ForeignOffer {
        ForeignOffer(owner: .none, targets: ["TARGETS", "UTF8_STRING", "text/html", Manifest.target],
                     manifest: manifest ?? Manifest(items: items, options: PasteboardOptions()))
    }

    private func takes(_ type: PasteboardType, _ offer: ForeignOffer, guess target: String = "UTF8_STRING") -> Bool {
        X11PasteboardBackend.takesGuess(SpeculativeRead(target: target, limit: 1 << 20), of: type, from: offer, registry: registry)
    }

    @Test("from a plain owner: when the guess is the type's best advertised target, whose bytes are the type's")
    func plainOwner() {
        #expect(takes(.utf8PlainText, plain(["UTF8_STRING", "STRING"])))
        // Offered as Latin-1 alone: UTF8_STRING is no read of it.
        #expect(!takes(.utf8PlainText, plain(["STRING"])))
        // The read of HTML would ask text/html.
        #expect(!takes(.html, plain(["UTF8_STRING", "text/html"])))
        #expect(takes(.html, plain(["UTF8_STRING", "text/html"]), guess: "text/html"))
    }

    @Test("from an xpb owner: only for the type its first item target (XPB_ITEM_0_0) serves, the one it answers a guess with")
    func xpbOwner() {
        #expect(takes(.utf8PlainText, xpb([item([.utf8PlainText])])))
        #expect(takes(.utf8PlainText, xpb([item([.utf8PlainText, .html]), item([.png])])))
        #expect(!takes(.html, xpb([item([.utf8PlainText, .html])]), guess: "text/html"))
        // HTML first: a guess of UTF8_STRING (the owner would refuse it) is not taken for the text.
        #expect(!takes(.utf8PlainText, xpb([item([.html, .utf8PlainText])])))
        #expect(takes(.html, xpb([item([.html, .utf8PlainText])]), guess: "text/html"))
        // The first item's first representation only: never a later item's.
        #expect(!takes(.png, xpb([item([.utf8PlainText]), item([.png])]), guess: "image/png"))
        // A manifest cut down to the targets its owner serves, without XPB_ITEM_0_0: no guess is taken.
        let items = [item([.html, .utf8PlainText])]
        let cut = Manifest(items: items, options: PasteboardOptions()).restricted(to: [Manifest.itemTarget(item: 0, index: 1)])
        #expect(!takes(.utf8PlainText, xpb(items, manifest: cut)))
    }
}
