import Foundation
import Testing
@testable import PasteboardKit

/// A container in the chain that handles select-all for the whole window.
final class WindowResponder: Responder {
    var performed: [EditAction] = []
    func canPerform(_ action: EditAction) -> Bool { action == .selectAll }
    func perform(_ action: EditAction) throws { performed.append(action) }
}

@Suite("Edit actions and the responder chain")
struct EditActionTests {
    @Test("copy, cut, paste and delete through the pasteboard")
    func copyCutPaste() throws {
        let board = Fixture().general
        let field = TextEditingResponder(text: "hello world", pasteboard: board)
        #expect(!field.canPerform(.copy))
        field.select(0..<5)
        #expect(field.canPerform(.copy) && field.canPerform(.cut) && field.canPerform(.delete))
        try ResponderChain.send(.copy, from: field)
        #expect(board.string == "hello")
        field.select(5..<11)
        try ResponderChain.send(.cut, from: field)
        #expect(field.text == "hello")
        #expect(board.string == " world")
        field.select(0..<0)
        try ResponderChain.send(.paste, from: field)
        #expect(field.text == " worldhello")
        #expect(field.selectedRange == 6..<6)
        field.select(0..<1)
        try ResponderChain.send(.delete, from: field)
        #expect(field.text == "worldhello")
    }

    @Test("paste is offered only when the pasteboard holds an accepted type, without reading it")
    func pasteNeedsAcceptedType() throws {
        let runs = RunCounter()
        let board = Fixture().general
        let field = TextEditingResponder(text: "x", pasteboard: board)
        #expect(!field.canPerform(.paste))
        try board.setItemProviders([ItemProvider(type: .png) { runs.hit("png"); return Data([1]) }])
        #expect(!field.canPerform(.paste))
        try board.setItemProviders([ItemProvider(type: .utf8PlainText) { runs.hit("text"); return Data("y".utf8) }])
        #expect(field.canPerform(.paste))
        #expect(runs.total == 0)
        field.isEditable = false
        #expect(!field.canPerform(.paste) && !field.canPerform(.cut))
    }

    @Test("select takes the word at the insertion point; select all takes everything")
    func selection() throws {
        let board = Fixture().general
        let field = TextEditingResponder(text: "one two three", pasteboard: board)
        field.select(5..<5)
        try ResponderChain.send(.select, from: field)
        #expect(field.selectedText == "two")
        try ResponderChain.send(.selectAll, from: field)
        #expect(field.selectedText == "one two three")
        #expect(!field.canPerform(.selectAll))
    }

    @Test("an action travels up the chain to the first responder that can perform it")
    func chain() throws {
        let board = Fixture().general
        let window = WindowResponder()
        let field = TextEditingResponder(text: "", pasteboard: board, next: window)
        #expect(ResponderChain.target(for: .selectAll, startingAt: field) === window)
        let handler = try ResponderChain.send(.selectAll, from: field)
        #expect(handler === window)
        #expect(window.performed == [.selectAll])
        #expect(try ResponderChain.send(.paste, from: field) == nil)
        field.select(0..<0)
        board.string = "text"
        #expect(try ResponderChain.send(.paste, from: field) === field)
        #expect(field.text == "text")
        #expect(try ResponderChain.send(.selectAll, from: field) === field)
        #expect(window.performed == [.selectAll])
    }

    @Test("a next responder passed inline stays alive as long as the responder")
    func inlineNextResponder() throws {
        let field = TextEditingResponder(text: "abc", pasteboard: Fixture().general, next: WindowResponder())
        #expect(field.nextResponder != nil)
        field.select(1..<1)
        try ResponderChain.send(.selectAll, from: field)
        #expect(field.selectedRange == 0..<3)
        field.isEditable = false
        field.select(0..<3)
        // Select-all is the field's own while it has less than everything selected; now the window's.
        try ResponderChain.send(.selectAll, from: field)
        #expect((field.nextResponder as? WindowResponder)?.performed == [.selectAll])
    }
}
