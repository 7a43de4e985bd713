import Foundation
import PasteboardKit
@testable import PasteboardX11
@_exported import X11TestSupport

extension Xvfb {
    /// A backend on this display.
    func backend(_ configure: (inout X11Configuration) -> Void = { _ in }) throws -> X11PasteboardBackend {
        var configuration = X11Configuration()
        configure(&configuration)
        return try X11PasteboardBackend(display: display, changeCenter: ChangeCenter(notificationCenter: nil), configuration: configuration)
    }
}
