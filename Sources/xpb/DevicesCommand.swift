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
        discussion: "Lists the devices seen and paired (id, name, paired, reachable, asks to pair, asked), or pairs: pair asks the device (accept there within 30 s), accept takes its request (never by itself), unpair ends it. --json for scripts. Run by xpbd-kdeconnect (docs/xpbd.md).",
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
