import FoundationEssentials
import Glibc
import PasteboardWire

/// `xpbd-kdeconnect devices [--json] [list | pair ID | accept ID | unpair ID]`: what `xpb devices`
/// runs (xpb has checked the words). Asks the running xpbd-kdeconnect on its socket and prints
/// the answer; exits 0 when done, 1 when it does not run or refuses, 2 on a usage error.
enum DevicesClient {
    static func run(_ words: [String]) -> Never {
        var words = words
        let asJSON = words.first == "--json"
        if asJSON { words.removeFirst() }
        guard let verb = DeviceRequest.Verb(rawValue: words.first ?? "list"),
              verb == .list ? words.count <= 1 : words.count == 2 && !words[1].isEmpty else {
            fail("usage: xpb devices [--json] [list | pair ID | accept ID | unpair ID]", status: 2)
        }
        let request = DeviceRequest(verb: verb, id: verb == .list ? nil : words[1])
        let path = DeviceProtocol.socketPath(environment: ProcessInfo.processInfo.environment, uid: getuid())
        let fd: Int32
        do {
            fd = try LocalSocket.connect(path)
        } catch {
            fail(error.code == ENOENT || error.code == ECONNREFUSED
                ? "KDE Connect is off: no xpbd --kdeconnect runs for this user (nothing listens on \(path))" : "\(error)")
        }
        var channel = FrameChannel(fd: fd)
        channel.setTimeout(10)
        let frame: Frame?
        do {
            try channel.send(.request, request)
            frame = try channel.receive(within: 10)
        } catch {
            fail("xpbd-kdeconnect did not answer: \(error)")
        }
        close(fd)
        guard let frame else { fail("xpbd-kdeconnect closed the connection without an answer") }
        if frame.kind == .error {
            fail((try? ControlCoding.decode(ControlFailure.self, from: frame.payload))?.message ?? "xpbd-kdeconnect refused")
        }
        guard frame.kind == .reply, let answer = try? ControlCoding.decode(DeviceAnswer.self, from: frame.payload) else {
            fail("xpbd-kdeconnect's answer is not one this version reads")
        }
        if asJSON {
            guard let data = try? ControlCoding.encode(answer) else { fail("cannot write the answer as JSON") }
            output(String(decoding: data, as: UTF8.self))
        } else if let message = answer.message {
            output(message)
        } else {
            output("this device: \(answer.ownName) (\(answer.ownId))")
            if answer.devices.isEmpty { output("no device seen yet: open KDE Connect on the phone, on the same network") }
            for device in answer.devices {
                var state = [device.paired ? "paired" : "not paired", device.reachable ? "reachable" : "not reachable"]
                if device.asks { state.append("asks to pair: xpb devices accept \(device.id)") }
                if device.asked { state.append("asked to pair, waiting for the device") }
                output("\(device.id)  \(device.name)  (\(state.joined(separator: ", ")))")
            }
        }
        exit(0)
    }

    private static func output(_ line: String) {
        writeLine(line, to: 1)
    }

    /// As xpb says it: the person ran `xpb devices`.
    private static func fail(_ message: String, status: Int32 = 1) -> Never {
        writeLine("xpb: \(message)", to: 2)
        exit(status)
    }
}
