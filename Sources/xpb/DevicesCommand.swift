import CommandLineTable
import DaemonTool
import FoundationEssentials
import Glibc

/// `xpb devices`: the KDE Connect devices `xpbd --kdeconnect` sees and has paired, and pairing.
/// Run by `xpbd-kdeconnect devices` (installed beside xpb), which asks the running one on its
/// socket: what knows KDE Connect stays out of xpb, which every copy and paste starts.
struct DevicesCommand: Command {
    static let name = "devices"
    static let spec = CommandSpec(
        name: name,
        abstract: "List and pair the KDE Connect devices (phones, desktops) that share the clipboard with xpbd --kdeconnect.",
        discussion: "'xpb devices' lists the devices seen on the local network and those paired: id, name, and whether each is paired, reachable now, asks to pair or was asked. 'xpb devices pair ID' asks a device to pair (accept on the device within 30 s); 'xpb devices accept ID' accepts a device's request (a request is never accepted by itself); 'xpb devices unpair ID' unpairs a device or refuses its request. Paired devices get the clipboard's text (never a secret) and their copies become this machine's. With --json: this machine's ownId and ownName, and for each device id, name, paired, reachable, asks and asked. Run by xpbd-kdeconnect, installed beside xpb. Exit status 0 when done, 1 when xpbd --kdeconnect does not run or the device cannot be paired now, 2 on a usage error.",
        options: [CommonOptions.json],
        positional: PositionalSpec(valueName: "action", help: "list (the default), pair ID, accept ID or unpair ID.", completion: .words(["list", "pair", "accept", "unpair"])))

    let arguments: [String]

    init(_ arguments: ParsedArguments) throws(UsageError) {
        let words = arguments.positionals
        let verb = words.first ?? "list"
        switch verb {
        case "list":
            guard words.count <= 1 else { throw UsageError("'xpb devices list' takes no device") }
        case "pair", "accept", "unpair":
            guard words.count == 2, !words[1].isEmpty else { throw UsageError("'xpb devices \(verb)' takes one device id (xpb devices lists them)") }
        default:
            throw UsageError("unknown devices action '\(verb)' (list, pair, accept, unpair)")
        }
        self.arguments = (arguments.flag(CommonOptions.json) ? ["--json"] : []) + words
    }

    func run() throws {
        let helper = KDEConnectHelper.path()
        guard access(helper, X_OK) == 0 else {
            throw Failure("KDE Connect is not installed: \(helper) is missing (make install puts it beside xpb)")
        }
        let argv = [helper, "devices"] + arguments
        let cStrings = argv.map { strdup($0) } + [nil]
        defer { cStrings.forEach { free($0) } }
        execv(helper, cStrings)
        throw Failure("cannot run \(helper): \(String(cString: strerror(errno)))")
    }
}
