import Foundation
import Synchronization
import Testing
@testable import PasteboardKit

@Suite("The session decided once: SessionPlan, and the library's default backend through it")
struct SessionPlanTests {
    private static func environment(_ values: [String: String]) -> (String) -> String? { { values[$0] } }

    @Test("the order: a named host, a named display, Wayland with XWayland after it, DISPLAY, the headless daemon")
    func order() throws {
        let both = Self.environment(["WAYLAND_DISPLAY": "wayland-1", "DISPLAY": ":1"])
        #expect(try SessionPlan(environment: both).hosts == [.wayland, .x11(display: nil)])
        #expect(try SessionPlan(environment: both).isWaylandWithXWayland)
        #expect(try SessionPlan(environment: Self.environment(["WAYLAND_DISPLAY": "wayland-1"])).hosts == [.wayland])
        #expect(try SessionPlan(environment: Self.environment(["DISPLAY": ":1"])).hosts == [.x11(display: nil)])
        #expect(try SessionPlan(environment: Self.environment([:])).hosts == [.daemon])
        // Empty is unset.
        #expect(try SessionPlan(environment: Self.environment(["WAYLAND_DISPLAY": "", "DISPLAY": ""])).hosts == [.daemon])
        // A display named chooses X; a backend named is the only host tried.
        #expect(try SessionPlan(display: ":7", environment: both).hosts == [.x11(display: ":7")])
        #expect(try SessionPlan(backend: .x11, environment: both).hosts == [.x11(display: nil)])
        #expect(try SessionPlan(backend: .wayland, environment: both).hosts == [.wayland])
        // XPB_BACKEND when nothing is named on the command line; the command line wins.
        let named = Self.environment(["WAYLAND_DISPLAY": "wayland-1", "DISPLAY": ":1", "XPB_BACKEND": "X11"])
        #expect(try SessionPlan(environment: named).hosts == [.x11(display: nil)])
        #expect(try SessionPlan(backend: .wayland, environment: named).hosts == [.wayland])
    }

    @Test("a wrong name and a contradiction are refused, saying where they came from")
    func refusals() {
        #expect(throws: SessionPlan.Refusal("XPB_BACKEND is 'mir': choose x11 or wayland")) {
            try SessionPlan(environment: Self.environment(["XPB_BACKEND": "mir"]))
        }
        #expect(throws: SessionPlan.Refusal("--backend is 'mir': choose x11 or wayland")) {
            try SessionPlan(backend: try SessionHost.Name(naming: "mir", from: "--backend"), environment: Self.environment([:]))
        }
        #expect(throws: SessionPlan.Refusal.self) { try SessionPlan(backend: .wayland, display: ":1", environment: Self.environment([:])) }
    }

    @Test("connect goes on only past a compositor without data-control")
    func connect() throws {
        let plan = SessionPlan(hosts: [.wayland, .x11(display: nil)])
        var tried: [SessionHost] = []
        let (host, value) = try plan.connect { host -> String in
            tried.append(host)
            if host == .wayland { throw PasteboardError.unavailable(SessionPlan.noDataControl) }
            return "x"
        }
        #expect(host == .x11(display: nil) && value == "x")
        #expect(tried == [.wayland, .x11(display: nil)])
        // Any other failure ends the plan: a dead compositor is not passed over.
        #expect(throws: PasteboardError.unavailable("gone")) {
            try plan.connect { host -> String in
                if host == .wayland { throw PasteboardError.unavailable("gone") }
                return "x"
            }
        }
        // The last host's failure is the error, even a missing data-control.
        #expect(throws: PasteboardError.unavailable(SessionPlan.noDataControl)) {
            try SessionPlan(hosts: [.wayland]).connect { _ -> String in throw PasteboardError.unavailable(SessionPlan.noDataControl) }
        }
    }

    @Test("the library's default: the Wayland module where linked, XWayland past a compositor without data-control or without the module")
    func defaultBackend() throws {
        let both = Self.environment(["WAYLAND_DISPLAY": "wayland-1", "DISPLAY": ":1"])
        func served(_ backend: any PasteboardBackend) -> String? {
            if backend === WaylandStandIn.made { return "wayland" }
            if backend === X11StandIn.made { return "x11" }
            return (backend as? UnavailablePasteboardBackend)?.reason
        }
        #expect(served(PasteboardSystem.discover(providers: [WaylandStandIn.self, X11StandIn.self], environment: both)) == "wayland")
        // Only the X module linked: XWayland's display.
        #expect(served(PasteboardSystem.discover(providers: [X11StandIn.self], environment: both)) == "x11")
        // A compositor without data-control: XWayland's display.
        #expect(served(PasteboardSystem.discover(providers: [LockedWaylandStandIn.self, X11StandIn.self], environment: both)) == "x11")
        // No XWayland to go to, or no module for the compositor: unavailable, saying why.
        let wayland = Self.environment(["WAYLAND_DISPLAY": "wayland-1"])
        #expect(served(PasteboardSystem.discover(providers: [LockedWaylandStandIn.self, X11StandIn.self], environment: wayland))
            == "no pasteboard backend: \(SessionPlan.noDataControl)")
        #expect(served(PasteboardSystem.discover(providers: [X11StandIn.self], environment: wayland))?.contains("link PasteboardWayland") == true)
        // XPB_BACKEND is the library's too.
        let named = Self.environment(["WAYLAND_DISPLAY": "wayland-1", "DISPLAY": ":1", "XPB_BACKEND": "x11"])
        #expect(served(PasteboardSystem.discover(providers: [WaylandStandIn.self, X11StandIn.self], environment: named)) == "x11")
    }
}

private final class WaylandStandIn: DefaultBackendProvider {
    static func serves(_ host: SessionHost) -> Bool { host == .wayland }
    static let made = InMemoryPasteboardBackend()
    static func makeBackend(on host: SessionHost) throws -> any PasteboardBackend { made }
}

private final class LockedWaylandStandIn: DefaultBackendProvider {
    static func serves(_ host: SessionHost) -> Bool { host == .wayland }
    static func makeBackend(on host: SessionHost) throws -> any PasteboardBackend { throw PasteboardError.unavailable(SessionPlan.noDataControl) }
}

private final class X11StandIn: DefaultBackendProvider {
    static func serves(_ host: SessionHost) -> Bool {
        if case .x11 = host { return true }
        return false
    }
    static let made = InMemoryPasteboardBackend()
    static func makeBackend(on host: SessionHost) throws -> any PasteboardBackend { made }
}
