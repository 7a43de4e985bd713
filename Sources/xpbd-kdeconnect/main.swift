import Dispatch
import FoundationEssentials
import Glibc
import KDEConnect
import KDEConnectLink
import Logging
import PasteboardDaemon
import PasteboardKit
import PasteboardSelections
import PasteboardWire

// xpbd-kdeconnect: this machine as a KDE Connect device, for the clipboard. `xpbd --kdeconnect`
// runs it and speaks xpb-sync with it on its standard input and output: a copy made on a paired
// device reaches xpbd as a sync peer's copy does, and xpbd's copies (never its secrets) reach the
// paired devices. A separate program because TLS with X.509 draws about 4 MB of OpenSSL into a
// static binary, which xpb (every copy and paste) must not carry. Its log goes to standard error,
// which xpbd logs.

let usage = """
    usage: xpbd-kdeconnect [--name NAME] [--directory DIR] [--socket PATH]
           xpbd-kdeconnect devices [--json] [list | pair ID | accept ID | unpair ID]

    Run by 'xpbd --kdeconnect', which speaks xpb-sync with it on standard input and output;
    not a command to run by hand. Pair devices with 'xpb devices' (which runs the second form),
    or on the session bus: org.xpb.KDEConnect1 /org/xpb/KDEConnect1 (docs/xpbd.md).

      --name NAME      the name devices show for this one (default: the host name)
      --directory DIR  the device's key, certificate and paired devices' certificates
                       (default: $XDG_CONFIG_HOME/xpb/kdeconnect)
      --socket PATH    the socket 'xpb devices' asks (default: $XDG_RUNTIME_DIR/xpb/kdeconnect.socket)
    """

/// What SIGTERM does: `stop`, then the exit. Off the main actor (the main thread waits on the
/// link); the handler runs on a queue of its own.
enum Termination {
    static func handle(_ stop: @escaping @Sendable () -> Void) -> any DispatchSourceSignal {
        signal(SIGTERM, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .global())
        source.setEventHandler {
            stop()
            exit(0)
        }
        source.resume()
        return source
    }
}

/// Lines on standard error: `info: …`, which xpbd logs as they come.
struct LineLogHandler: LogHandler {
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        writeLine(event.level >= .warning ? "\(event.level): \(event.message)" : "\(event.message)", to: 2)
    }
}

/// `line` and a newline, written whole to `fd` (standard output or error).
func writeLine(_ line: String, to fd: Int32) {
    _ = Array((line + "\n").utf8).withUnsafeBytes { writeAll(fd, $0) }
}

func fail(_ message: String) -> Never {
    writeLine("xpbd-kdeconnect: \(message)", to: 2)
    exit(2)
}

if CommandLine.arguments.dropFirst().first == "devices" { DevicesClient.run(Array(CommandLine.arguments.dropFirst(2))) }

let environment = ProcessInfo.processInfo.environment
var name = LocalProcess.hostName
var directory = (environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? ((environment["HOME"] ?? "/") + "/.config")) + "/xpb/kdeconnect"
var socketPath = DeviceProtocol.socketPath(environment: environment, uid: getuid())
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--help", "-h":
        print(usage)
        exit(0)
    case "--name", "--directory", "--socket":
        guard let value = arguments.popFirst(), !value.isEmpty else { fail("\(argument) takes a value\n\n\(usage)") }
        switch argument {
        case "--name": name = value
        case "--directory": directory = value
        default: socketPath = value
        }
    default:
        fail("unknown argument '\(argument)'\n\n\(usage)")
    }
}
if isatty(0) == 1 || isatty(1) == 1 { fail("run by 'xpbd --kdeconnect', not by hand\n\n\(usage)") }

LoggingSystem.bootstrap { _ in LineLogHandler() }
let logger = Logger(label: "xpbd-kdeconnect")
// Writes to a daemon that went away fail with EPIPE, not kill this process.
signal(SIGPIPE, SIG_IGN)

/// The longest text taken from xpbd for a device, and from a device (the link's packet cap).
let maxTextBytes = 4 << 20 - 4096
let node = SyncNode(name: "KDE Connect", maxTextBytes: maxTextBytes, logger: logger)
// A device's copies reach xpbd at most one each 50 ms (a person copies slower; a flood has the
// newest of each interval taken, never a queue of them).
let paced = PacedCopies(interval: 0.05, logger: logger) { copy in
    // The newest here now, announced to xpbd, which owns the clipboard for it and records it
    // as this app's.
    node.copy(copy.text, origin: "KDE Connect: \(copy.device)")
}
// xpbd's hello first: run by hand, or by anything but xpbd, this stops here, before a key is
// made or a packet sent.
let accepted: SyncNode.Accepted
switch node.accept(readFD: 0, writeFD: 1) {
case let .success(link): accepted = link
case let .failure(failure): fail("\(failure.message) (this is run by 'xpbd --kdeconnect')\n\n\(usage)")
}
let service: KDEConnectService
do {
    service = try KDEConnectService(configuration: KDEConnectService.Configuration(name: name, directory: directory)) { event in
        switch event {
        case let .copied(text, time, _, deviceName):
            paced.arrived(CopyPacing.Copy(text: text, time: time, device: deviceName))
        case let .told(line):
            logger.info("\(line)")
        }
    }
} catch {
    fail("cannot make or read this device's key in \(directory): \(error)")
}
node.onCopy { text, time in
    service.copied(ClipboardRule.Copy(text: text, time: Int64(time.timeIntervalSince1970 * 1000)))
}
let desk = DeviceDesk(service: service)
let devices: DeviceSocket
do {
    devices = try DeviceSocket(path: socketPath, desk: desk)
} catch {
    fail(error.code == EADDRINUSE ? "another xpbd-kdeconnect answers on \(socketPath)" : "cannot listen on \(error)")
}
do {
    try service.start()
    try devices.start()
} catch {
    devices.stop()
    fail("cannot start: \(error)")
}
// On the session bus for desktop tools, when there is one (its absence is said at debug level).
let bus = DBusService.start([DevicesObject(desk: desk)], logger: logger)
// xpbd stops it with SIGTERM (its link's process ends so): the socket goes with it, and the
// devices are let go of.
let terminated = Termination.handle { [bus, devices, service] in
    bus?.stop()
    devices.stop()
    service.stop()
}
logger.info("KDE Connect device “\(service.identity.deviceName)” (\(service.deviceId)) on TCP port \(service.tcpPort); 'xpb devices' pairs")
let reason = node.run(accepted)
bus?.stop()
devices.stop()
service.stop()
logger.info("stopped: \(reason)")
exit(0)
