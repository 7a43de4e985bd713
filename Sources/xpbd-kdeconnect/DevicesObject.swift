import FoundationEssentials
import PasteboardDaemon
import PasteboardWire

/// The KDE Connect devices on the session bus, for desktop tools (an applet that lists the
/// phones, a pairing dialog): the same verbs as `xpb devices` (``DeviceDesk``).
///
/// Bus name `org.xpb.KDEConnect1`, object `/org/xpb/KDEConnect1`, interface `org.xpb.KDEConnect1`:
/// - `Devices() → a(ssbbbb)`: id, name, paired, reachable, asks (to pair), asked (by this side);
/// - `Self() → (ss)`: this machine's device id and name;
/// - `Pair(s id) → s`, `Accept(s id) → s`, `Unpair(s id) → s`: what was done, or an error
///   `org.freedesktop.DBus.Error.Failed` saying why not.
final class DevicesObject: DBusObject {
    let busName = "org.xpb.KDEConnect1"
    let path = "/org/xpb/KDEConnect1"
    let interface = "org.xpb.KDEConnect1"
    let maxArgumentBytes = 4096
    let signatures = ["Devices": "", "Self": "", "Pair": "s", "Accept": "s", "Unpair": "s"]
    let introspection = """
          <interface name="org.xpb.KDEConnect1">
            <method name="Devices"><arg name="devices" type="a(ssbbbb)" direction="out"/></method>
            <method name="Self"><arg name="device" type="(ss)" direction="out"/></method>
            <method name="Pair"><arg name="id" type="s" direction="in"/><arg name="done" type="s" direction="out"/></method>
            <method name="Accept"><arg name="id" type="s" direction="in"/><arg name="done" type="s" direction="out"/></method>
            <method name="Unpair"><arg name="id" type="s" direction="in"/><arg name="done" type="s" direction="out"/></method>
          </interface>
        """

    private let desk: DeviceDesk

    init(desk: DeviceDesk) {
        self.desk = desk
    }

    func call(_ member: String, _ arguments: [DBusValue], caller: DBusCaller) -> Result<[DBusValue], DBusFailure> {
        switch member {
        case "Devices":
            let rows = desk.devices.map { device -> DBusValue in
                .structure([.string(device.id), .string(device.name), .bool(device.paired), .bool(device.reachable), .bool(device.asks), .bool(device.asked)])
            }
            return .success([.array("(ssbbbb)", rows)])
        case "Self":
            return .success([.structure([.string(desk.service.deviceId), .string(desk.service.identity.deviceName)])])
        case "Pair", "Accept", "Unpair":
            guard case let .string(id)? = arguments.first else { return .failure(.invalidArguments("\(member) takes a device id")) }
            let verb: DeviceRequest.Verb = member == "Pair" ? .pair : member == "Accept" ? .accept : .unpair
            do throws(ControlFailure) {
                return .success([.string(try desk.perform(DeviceRequest(verb: verb, id: id)) ?? "")])
            } catch {
                return .failure(.failed(error.message))
            }
        default:
            return .failure(.unknownMethod("no method \(member) in \(interface)"))
        }
    }
}
