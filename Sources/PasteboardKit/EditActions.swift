import FoundationEssentials

/// The standard edit actions of a tool that hosts a selection.
public enum EditAction: String, Sendable, CaseIterable {
    /// Put the selection on the pasteboard.
    case copy
    /// Put the selection on the pasteboard and remove it.
    case cut
    /// Remove the selection.
    case delete
    /// Replace the selection with the pasteboard's contents.
    case paste
    /// Select the word at the insertion point.
    case select
    /// Select everything.
    case selectAll
}

/// An object in a responder chain: it says which actions it can perform now and performs them;
/// actions it cannot perform travel on to its next responder.
public protocol Responder: AnyObject {
    /// The responder an action travels to when this one cannot perform it.
    var nextResponder: (any Responder)? { get }
    /// Whether this responder can perform `action` now (for paste: whether the pasteboard holds
    /// a type it handles). Must not read pasteboard data.
    func canPerform(_ action: EditAction) -> Bool
    /// Performs an action that ``canPerform(_:)`` allowed.
    func perform(_ action: EditAction) throws
}

extension Responder {
    /// No next responder unless the conforming type has one.
    public var nextResponder: (any Responder)? { nil }
}

/// Sends edit actions along a responder chain.
public enum ResponderChain {
    /// The first responder, from `first` up the chain, that can perform `action` now.
    public static func target(for action: EditAction, startingAt first: any Responder) -> (any Responder)? {
        var current: (any Responder)? = first
        var visited = Set<ObjectIdentifier>()
        while let responder = current, visited.insert(ObjectIdentifier(responder)).inserted {
            if responder.canPerform(action) { return responder }
            current = responder.nextResponder
        }
        return nil
    }

    /// Sends `action` up the chain from `first`; the first responder that can perform it does.
    ///
    /// - Returns: the responder that performed the action, or nil when none could.
    @discardableResult
    public static func send(_ action: EditAction, from first: any Responder) throws -> (any Responder)? {
        guard let target = target(for: action, startingAt: first) else { return nil }
        try target.perform(action)
        return target
    }
}

/// A ready responder for a text buffer with a selection: copy, cut, delete, paste, select (the
/// word at the insertion point) and select all, through a pasteboard.
///
/// Offsets count characters (extended grapheme clusters).
public final class TextEditingResponder: Responder {
    /// The text.
    public private(set) var text: String
    /// The selected characters; an empty range is the insertion point.
    public private(set) var selectedRange: Range<Int>
    /// Whether the text may change (cut, delete and paste need it).
    public var isEditable: Bool
    /// The pasteboard copy writes to and paste reads from.
    public let pasteboard: Pasteboard
    /// The types paste accepts, in order of preference.
    public var acceptedTypes: [PasteboardType] = ReaderPreference.plainText
    /// The responder actions travel to when this one cannot perform them. Held strongly, so a
    /// responder passed inline (`next: ParentResponder()`) lives as long as this one; a parent
    /// that holds this responder should break the cycle by setting `next` to nil when done.
    public var next: (any Responder)?

    /// A responder over `text` with the insertion point at its end.
    public init(text: String = "", pasteboard: Pasteboard, isEditable: Bool = true, next: (any Responder)? = nil) {
        self.text = text
        self.selectedRange = text.count..<text.count
        self.isEditable = isEditable
        self.pasteboard = pasteboard
        self.next = next
    }

    /// The next responder in the chain.
    public var nextResponder: (any Responder)? { next }

    /// The selected text.
    public var selectedText: String { String(text[stringRange(selectedRange)]) }

    /// Selects a range, clamped to the text.
    public func select(_ range: Range<Int>) {
        let lower = min(max(range.lowerBound, 0), text.count)
        let upper = min(max(range.upperBound, lower), text.count)
        selectedRange = lower..<upper
    }

    /// Whether an action makes sense now: copy needs a selection, cut and delete a selection in
    /// editable text, paste editable text and an accepted type on the pasteboard (no data is read).
    public func canPerform(_ action: EditAction) -> Bool {
        switch action {
        case .copy: return !selectedRange.isEmpty
        case .cut, .delete: return isEditable && !selectedRange.isEmpty
        case .paste: return isEditable && pasteboard.contains(pasteboardTypes: acceptedTypes)
        case .select: return selectedRange.isEmpty && wordRange(around: selectedRange.lowerBound) != nil
        case .selectAll: return !text.isEmpty && selectedRange != 0..<text.count
        }
    }

    /// Performs an action.
    public func perform(_ action: EditAction) throws {
        switch action {
        case .copy:
            try pasteboard.setItems([[PasteboardType.utf8PlainText: selectedText]])
        case .cut:
            try pasteboard.setItems([[PasteboardType.utf8PlainText: selectedText]])
            replaceSelection(with: "")
        case .delete:
            replaceSelection(with: "")
        case .paste:
            guard let wanted = acceptedTypes.first(where: { pasteboard.contains(pasteboardTypes: [$0]) }),
                  let data = try pasteboard.data(forPasteboardType: wanted) else { return }
            replaceSelection(with: ValueCoding.decodeText(data, as: wanted) ?? String(decoding: data, as: UTF8.self))
        case .select:
            if let word = wordRange(around: selectedRange.lowerBound) { selectedRange = word }
        case .selectAll:
            selectedRange = 0..<text.count
        }
    }

    private func replaceSelection(with replacement: String) {
        let start = selectedRange.lowerBound
        text.replaceSubrange(stringRange(selectedRange), with: replacement)
        let caret = start + replacement.count
        selectedRange = caret..<caret
    }

    private func stringRange(_ range: Range<Int>) -> Range<String.Index> {
        let lower = text.index(text.startIndex, offsetBy: range.lowerBound)
        return lower..<text.index(lower, offsetBy: range.count)
    }

    /// The word (letters, digits, `_`) that touches `offset`, if any.
    private func wordRange(around offset: Int) -> Range<Int>? {
        let characters = Array(text)
        func isWord(_ index: Int) -> Bool { characters.indices.contains(index) && (characters[index].isLetter || characters[index].isNumber || characters[index] == "_") }
        var lower = offset
        var upper = offset
        while isWord(lower - 1) { lower -= 1 }
        while isWord(upper) { upper += 1 }
        return lower < upper ? lower..<upper : nil
    }
}
