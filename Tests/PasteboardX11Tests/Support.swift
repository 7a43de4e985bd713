internal import CX11
import Foundation
import PasteboardKit
@testable import PasteboardX11
@_exported import X11TestSupport

extension Xvfb {
    /// A backend on this display, its XFixes watches in place at the server: the backend's start
    /// does not wait for them (a paste need not pay the round trip), so an owner a test starts
    /// at once could take a selection before the server had them, and its change would go
    /// uncounted (a loaded run's "the find pasteboard counts PRIMARY only").
    func backend(_ configure: (inout X11Configuration) -> Void = { _ in }) throws -> X11PasteboardBackend {
        var configuration = X11Configuration()
        configure(&configuration)
        let backend = try X11PasteboardBackend(display: display, changeCenter: ChangeCenter(), configuration: configuration)
        try backend.connection.sync(timeout: 30) { session, done in
            XSync(session.wire.display, 0)
            session.wire.collectErrors()
            done(.success(()))
        }
        return backend
    }
}

extension X11PasteboardBackend {
    /// Runs a conversion of the general pasteboard's selection on this backend's X thread with raw
    /// protocol options, for tests of how an owner answers odd requests.
    func rawConvert(_ selection: String = "CLIPBOARD", target: String, parameters: [String]? = nil,
                    legacyNoProperty: Bool = false) throws -> PropertyValue? {
        try connection.sync(timeout: 30) { session, done in
            let parameterAtoms = parameters.map { session.wire.atoms($0) }
            session.reader.convert(session.wire.atom(selection), to: session.wire.atom(target), parameters: parameterAtoms,
                            parameterType: session.wire.atom("ATOM_PAIR"), legacyNoProperty: legacyNoProperty) { done($0) }
        }
    }

    /// The names of format-32 atoms.
    func atomNames(_ atoms: [X11Atom]) throws -> [String?] {
        try connection.sync(timeout: 30) { session, done in done(.success(session.wire.names(of: atoms))) }
    }

    /// How many INCR transfers this backend is receiving.
    func receivingCount() throws -> Int {
        try connection.sync(timeout: 30) { session, done in done(.success(session.reader.incomingCount)) }
    }
}
