import FoundationEssentials

/// One target of a selection as its owner converted it (format 8): what a clipboard manager keeps.
package struct CapturedTarget: Sendable, Equatable {
    /// The target's name (`UTF8_STRING`, `image/png`, …).
    package let target: String
    /// The reply's type name (often the target itself; `INCR` never).
    package let type: String
    package let data: Data

    package init(target: String, type: String, data: Data) {
        self.target = target
        self.type = type
        self.data = data
    }
}
