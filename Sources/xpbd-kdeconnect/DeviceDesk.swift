import FoundationEssentials
import KDEConnect
import KDEConnectLink
import PasteboardDaemon
import PasteboardWire

/// What a person does with devices, whichever door it comes by (`xpb devices` on the socket,
/// ``DevicesObject`` on D-Bus): the list, and pair, accept, unpair.
struct DeviceDesk: Sendable {
    let service: KDEConnectService

    var devices: [DeviceEntry] {
        service.devices.map { DeviceEntry(id: $0.id, name: $0.name, paired: $0.paired, reachable: $0.reachable, asks: $0.asks, asked: $0.asked) }
    }

    /// Carries out a verb; what it did, for the person.
    func perform(_ request: DeviceRequest) throws(ControlFailure) -> String? {
        guard request.verb != .list else { return nil }
        guard let id = request.id, !id.isEmpty else { throw ControlFailure("'\(request.verb.rawValue)' needs a device id (xpb devices lists them)") }
        let known = service.devices.first { $0.id == id }
        guard let device = known else { throw ControlFailure("no device \(LogThrottle.printable(id, limit: 64)) was seen (xpb devices lists them)") }
        do {
            switch request.verb {
            case .list:
                return nil
            case .pair:
                if device.paired { return "“\(device.name)” is paired already" }
                try service.pair(id)
                return "asked “\(device.name)” to pair: accept the request on the device within 30 s"
            case .accept:
                guard device.asks else {
                    throw ControlFailure("“\(device.name)” has not asked to pair (or its request timed out): 'xpb devices pair \(id)' asks it")
                }
                try service.accept(id)
                return "paired with “\(device.name)”"
            case .unpair:
                try service.unpair(id)
                return "unpaired “\(device.name)”"
            }
        } catch let refusal as Pairing.Refusal {
            throw ControlFailure(refusal.description)
        } catch let failure as ControlFailure {
            throw failure
        } catch {
            throw ControlFailure("\(error)")
        }
    }
}
