import CommandLineTable
import FoundationEssentials
import Glibc
import PasteboardWire

/// `xpb devices`: the KDE Connect devices `xpbd --kdeconnect` sees and has paired, and pairing.
/// Asks `xpbd-kdeconnect` on its socket (``DeviceProtocol``).
struct DevicesCommand: Command {
    static let name = "devices"
    static let spec = CommandSpec(
        name: name,
        abstract: "List and pair the KDE Connect devices (phones, desktops) that share the clipboard with xpbd --kdeconnect.",
        discussion: "'xpb devices' lists the devices seen on the local network and those paired: id, name, and whether each is paired, reachable now, asks to pair or was asked. 'xpb devices pair ID' asks a device to pair (accept on the device within 30 s); 'xpb devices accept ID' accepts a device's request (a request is never accepted by itself); 'xpb devices unpair ID' unpairs a device or refuses its request. Paired devices get the clipboard's text (never a secret) and their copies become this machine's. With --json: {\"id\", \"name\", \"paired\", \"reachable\", \"asks\", \"asked\"} for each device, with this machine's own id and name. Exit status 0 when done, 1 when xpbd --kdeconnect does not run or the device cannot be paired now, 2 on a usage error.",
        options: [CommonOptions.json],
        positional: PositionalSpec(valueName: "action", help: "list (the default), pair ID, accept ID or unpair ID.", completion: .words(DeviceRequest.Verb.allCases.map(\.rawValue))))

    let asJSON: Bool
    let request: DeviceRequest

    init(_ arguments: ParsedArguments) throws(UsageError) {
        asJSON = arguments.flag(CommonOptions.json)
        let words = arguments.positionals
        guard let verb = DeviceRequest.Verb(rawValue: words.first ?? "list") else {
            throw UsageError("unknown devices action '\(words.first ?? "")' (list, pair, accept, unpair)")
        }
        switch verb {
        case .list:
            guard words.count <= 1 else { throw UsageError("'xpb devices list' takes no device") }
            request = DeviceRequest(verb: .list)
        case .pair, .accept, .unpair:
            guard words.count == 2, !words[1].isEmpty else { throw UsageError("'xpb devices \(verb.rawValue)' takes one device id (xpb devices lists them)") }
            request = DeviceRequest(verb: verb, id: words[1])
        }
    }

    func run() throws {
        let path = DeviceProtocol.socketPath(environment: ControlEndpoint.environment, uid: getuid())
        let fd: Int32
        do {
            fd = try LocalSocket.connect(path)
        } catch {
            throw Failure(error.code == ENOENT || error.code == ECONNREFUSED
                ? "KDE Connect is off: no xpbd --kdeconnect runs for this user (nothing listens on \(path))" : "\(error)")
        }
        defer { close(fd) }
        var channel = FrameChannel(fd: fd)
        channel.setTimeout(10)
        let frame: Frame?
        do {
            try channel.send(.request, request)
            frame = try channel.receive(within: 10)
        } catch {
            throw Failure("xpbd-kdeconnect did not answer: \(error)")
        }
        guard let frame else { throw Failure("xpbd-kdeconnect closed the connection without an answer") }
        if frame.kind == .error {
            throw Failure((try? ControlCoding.decode(ControlFailure.self, from: frame.payload))?.message ?? "xpbd-kdeconnect refused")
        }
        guard frame.kind == .reply, let answer = try? ControlCoding.decode(DeviceAnswer.self, from: frame.payload) else {
            throw Failure("xpbd-kdeconnect's answer is not one xpb reads")
        }
        if asJSON {
            writeJSONLine(String(decoding: try ControlCoding.encode(answer), as: UTF8.self))
            return
        }
        if let message = answer.message {
            writeLine(message)
            return
        }
        writeLine("this device: \(answer.ownName) (\(answer.ownId))")
        if answer.devices.isEmpty {
            writeLine("no device seen yet: open KDE Connect on the phone, on the same network")
        }
        for device in answer.devices {
            var state = [device.paired ? "paired" : "not paired", device.reachable ? "reachable" : "not reachable"]
            if device.asks { state.append("asks to pair: xpb devices accept \(device.id)") }
            if device.asked { state.append("asked to pair, waiting for the device") }
            writeLine("\(device.id)  \(device.name)  (\(state.joined(separator: ", ")))")
        }
    }
}
