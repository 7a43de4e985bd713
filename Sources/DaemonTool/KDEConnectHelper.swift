import FoundationEssentials
import Glibc
import CommandLineTable
import PasteboardDaemon

/// How `xpbd --kdeconnect` runs `xpbd-kdeconnect`: from the directory of xpbd's own executable
/// (where make install and the package put both), or `$XPB_KDECONNECT_HELPER`, as a sync link of
/// CLIPBOARD only (KDE Connect has one clipboard).
enum KDEConnectHelper {
    static let executableName = "xpbd-kdeconnect"

    static func link(name: String?) throws(UsageError) -> SyncLinkSpec {
        let path = ProcessInfo.processInfo.environment["XPB_KDECONNECT_HELPER"].flatMap { $0.isEmpty ? nil : $0 } ?? besideThisExecutable()
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
        guard let resolved = realpath("/proc/self/exe", nil) else { return "/usr/local/bin/" + executableName }
        defer { free(resolved) }
        let path = String(cString: resolved)
        return String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) + "/" + executableName
    }
}
