import FoundationEssentials
import Glibc
import CommandLineTable
import PasteboardDaemon
import PasteboardKit

/// Where `xpbd-kdeconnect` is: in the directory of this process's executable (where make install
/// and the package put it beside xpb and xpbd), or `$XPB_KDECONNECT_HELPER`. `xpbd --kdeconnect`
/// runs it as a sync link of CLIPBOARD only (KDE Connect has one clipboard); `xpb devices` runs
/// it as `xpbd-kdeconnect devices`.
package enum KDEConnectHelper {
    static let executableName = "xpbd-kdeconnect"

    /// The helper's path.
    package static func path() -> String {
        if let named = getenv("XPB_KDECONNECT_HELPER").map({ String(cString: $0) }), !named.isEmpty { return named }
        return besideThisExecutable()
    }

    static func link(name: String?) throws(UsageError) -> SyncLinkSpec {
        let path = path()
        guard access(path, X_OK) == 0 else {
            throw UsageError("--kdeconnect runs \(path), which is missing: it is installed beside xpbd (make install, or the xpb package)")
        }
        var command = [path]
        if let name {
            guard !name.allSatisfy(\.isWhitespace), !name.contains(where: { $0.isNewline }) else {
                throw UsageError("--kdeconnect-name takes a name of one line")
            }
            command += ["--name", name]
        }
        var spec = SyncLinkSpec(endpoint: .helper(name: "KDE Connect", command: command))
        spec.clipboardOnly = true
        return spec
    }

    /// `xpbd-kdeconnect` in the directory of this process's executable, links resolved (xpbd is
    /// a link to xpb).
    private static func besideThisExecutable() -> String {
        guard let path = SystemCall.linkTarget("/proc/self/exe") else { return "/usr/local/bin/" + executableName }
        return String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) + "/" + executableName
    }
}
