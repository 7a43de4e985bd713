internal import CLinux
internal import CX11
internal import CXEvents
import FoundationEssentials
import Glibc
import PasteboardKit

/// Who owns a selection: the window, and the application behind it as far as the X server and
/// this host can tell.
public struct SelectionOwnerInfo: Sendable, Equatable {
    /// The owner's window.
    public let window: X11Window
    /// The window's name, if it has one.
    public let name: String?
    /// The owning client's process id: from the X-Resource extension (the server's own account
    /// of its local clients, so xclip's too, which sets no window properties), else the window's
    /// `_NET_WM_PID`.
    public let processID: Int?
    /// The process's executable name (of `/proc/PID/exe`, else `/proc/PID/comm`) and path, when
    /// it runs on this host.
    public let executableName: String?
    public let executablePath: String?
    /// `WM_CLASS` (instance and class) of the owning client's top-level window, when it has one.
    public let windowInstance: String?
    public let windowClass: String?
    /// Who made the copy, as an xpb owner (`xpb copy`, a stand-in, a clipboard manager serving
    /// what it kept) publishes it (``CopyCredit``): the program that ran it, not xpb. Read only
    /// from an owner whose executable is xpb's.
    public let copiedBy: CopyCredit?

    package init(window: X11Window, name: String?, processID: Int?, executableName: String? = nil, executablePath: String? = nil,
                 windowInstance: String? = nil, windowClass: String? = nil, copiedBy: CopyCredit? = nil) {
        self.window = window
        self.name = name
        self.processID = processID
        self.executableName = executableName
        self.executablePath = executablePath
        self.windowInstance = windowInstance
        self.windowClass = windowClass
        self.copiedBy = copiedBy
    }

    /// A name for the application: the executable's, else the window class, else the window's name.
    public var appName: String? { executableName ?? windowClass ?? name }

    /// The application a copy is credited to: the program that made it where an xpb owner says
    /// (``copiedBy``), else ``appName``.
    public var creditedApp: String? { copiedBy?.name ?? appName }
    /// Its process id (the one it had, if it is gone).
    public var creditedPID: Int? { copiedBy.map(\.pid) ?? processID }

    /// The executables that publish a ``CopyCredit`` (xpbd may be a link to xpb).
    static let crediting: Set<String> = ["xpb", "xpbd"]
}

/// A process of this host, as `/proc` shows it.
package enum LocalProcess {
    /// The executable's name and path (`/proc/PID/exe`, which another user's process may not
    /// show: then `comm` alone names it).
    package static func executable(of pid: Int) -> (name: String?, path: String?) {
        guard pid > 0 else { return (nil, nil) }
        var path = SystemCall.linkTarget("/proc/\(pid)/exe")
        // A replaced binary reads "/usr/bin/app (deleted)".
        if let trimmed = path, trimmed.hasSuffix(" (deleted)") { path = String(trimmed.dropLast(10)) }
        let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
            .trimming(while: \.isNewline)
        let name = path.flatMap { $0.split(separator: "/").last.map(String.init) } ?? comm.flatMap { $0.isEmpty ? nil : $0 }
        return (name, path)
    }

    /// Who holds an X connection whose maker is gone. A client that put itself in the
    /// background after connecting (xclip and xsel fork, and their parent exits; so may any
    /// owner) is known to the server by the dead parent's pid. What the kernel still knows: the
    /// client-side end of every connection to the display's socket (socket diagnostics), which
    /// process holds each (`/proc/N/fd` of the processes `/proc` lists: thread ids are not
    /// processes), and which of those connections the server accounts to a living process
    /// (X-Resource's pid of every client). A connection held only by processes the server does
    /// not account it to was handed down; its holders are the successors. Nothing is guessed:
    /// one holder names the process; several that run one executable name the executable alone;
    /// anything else is unknown.
    package enum Successor: Equatable, Sendable {
        case process(Int)
        case executable(name: String, path: String?)
        case unknown
    }

    static func successor(of pid: Int, display number: Int, clientPIDs: [Int]) -> Successor {
        guard pid > 0, !isRunning(pid) else { return .unknown }
        var peers = [UInt32](repeating: 0, count: 4096)
        let count = clinux_unix_peers_named("/tmp/.X11-unix/X\(number)", &peers, Int32(peers.count))
        guard count > 0 else { return .unknown }
        let clientEnds = Set(peers.prefix(Int(count)))
        var held: [Int: Set<UInt32>] = [:]
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap(Int.init) ?? []
        for process in processes.prefix(65536) {
            guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/fd") else { continue }
            for descriptor in descriptors.prefix(4096) {
                guard let target = SystemCall.linkTarget("/proc/\(process)/fd/\(descriptor)", capacity: 63),
                      target.hasPrefix("socket:["), let inode = UInt32(target.dropFirst(8).dropLast()),
                      clientEnds.contains(inode) else { continue }
                held[process, default: []].insert(inode)
            }
        }
        let holders = handedDown(held: held, clientPIDs: clientPIDs)
        if holders.count == 1 { return .process(holders[0]) }
        let executables = Set(holders.map { executable(of: $0).path ?? "" })
        if holders.count > 1, executables.count == 1, let path = executables.first, !path.isEmpty,
           let name = path.split(separator: "/").last.map(String.init) {
            return .executable(name: name, path: path)
        }
        return .unknown
    }

    /// The processes that hold a connection the server accounts to no process holding it
    /// (``successor(of:display:clientPIDs:)``): `held` is each process's client-side sockets
    /// to the display, `clientPIDs` the server's pid of each client. A process that holds no more
    /// connections than the server accounts to it explains them all, for every holder; one
    /// that holds more explains none (which of them it made cannot be told).
    static func handedDown(held: [Int: Set<UInt32>], clientPIDs: [Int]) -> [Int] {
        var accounted: [Int: Int] = [:]
        for pid in clientPIDs where pid > 0 { accounted[pid, default: 0] += 1 }
        var explained = Set<UInt32>()
        for (process, sockets) in held where sockets.count <= accounted[process, default: 0] {
            explained.formUnion(sockets)
        }
        return held.filter { !$0.value.isSubset(of: explained) }.map(\.key).sorted()
    }

    /// Whether `pid` is a process that runs: not gone, and not a zombie (an exited process its
    /// parent has not reaped yet still has its `/proc/N`, but no files and no connection).
    static func isRunning(_ pid: Int) -> Bool {
        status(of: pid)?.isRunning ?? false
    }

    /// A process's state and process group, from `/proc/N/stat` (nil when it is gone). The
    /// fields after the command, which may hold spaces and parentheses itself, are read after
    /// its last `)`: state, parent, process group.
    package static func status(of pid: Int) -> (isRunning: Bool, processGroup: Int)? {
        guard pid > 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 2, let group = Int(fields[2]) else { return nil }
        return (fields[0] != "Z" && fields[0] != "X", group)
    }

    /// The display number of a local display name (`:0`, `:1.0`, `unix:2`); nil for a display
    /// on another host or over TCP.
    static func localDisplayNumber(_ name: String) -> Int? {
        guard let colon = name.lastIndex(of: ":") else { return nil }
        let host = name[..<colon]
        guard host.isEmpty || host == "unix" else { return nil }
        return Int(name[name.index(after: colon)...].prefix { $0.isNumber })
    }

    /// This host's name, as X clients put it in `WM_CLIENT_MACHINE` (gethostname, not
    /// ProcessInfo.hostName, which may ask DNS and wait).
    package static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension X11Session {
    /// Who owns a selection (``SelectionOwnerInfo``); nil when nobody does. A few round trips:
    /// the owner window's properties, the X-Resource client id, and where the window has no
    /// `WM_CLASS`, a look through the top-level windows for one of the same client.
    func ownerInfo(_ selection: X11Atom) -> SelectionOwnerInfo? {
        let owner = selectionOwner(selection)
        guard !owner.isNone else { return nil }
        var name: String?
        if let value = (try? readProperty(owner, known[.netWMName], delete: false, limit: 4096, truncate: true)) ?? nil
            ?? (try? readProperty(owner, known[.wmName], delete: false, limit: 4096, truncate: true)) ?? nil,
           value.format == 8 {
            name = String(decoding: value.data, as: UTF8.self)
        }
        var pid: Int?
        var isLocal = false
        let fromServer = cx11_client_pid(display, owner.rawValue)
        var handedDown: (name: String, path: String?)?
        if fromServer > 0 {
            pid = Int(fromServer)
            isLocal = true
            if !LocalProcess.isRunning(Int(fromServer)) {
                // The process that connected is gone: whoever it handed the connection to, if
                // the kernel can tell; else unknown, never a guess.
                pid = nil
                if let number = LocalProcess.localDisplayNumber(String(cString: XDisplayString(display))) {
                    switch LocalProcess.successor(of: Int(fromServer), display: number, clientPIDs: allClientPIDs()) {
                    case .process(let successor): pid = successor
                    case .executable(let name, let path): handedDown = (name, path)
                    case .unknown: break
                    }
                }
            }
        } else if let claimed = ((try? readProperty(owner, known[.netWMPID], delete: false, limit: 4)) ?? nil)?.longs.first {
            pid = Int(claimed)
            // A pid a window claims names a process of this host only if the window says so.
            let machine = ((try? readProperty(owner, known[.wmClientMachine], delete: false, limit: 256, truncate: true)) ?? nil)
                .map { String(decoding: $0.data, as: UTF8.self) }
            isLocal = machine == LocalProcess.hostName
        }
        let executable: (name: String?, path: String?) = handedDown.map { ($0.name, $0.path) }
            ?? (isLocal ? LocalProcess.executable(of: pid ?? 0) : (nil, nil))
        let windowClass = self.windowClass(ofClientOf: owner)
        var credit: CopyCredit?
        if let executable = executable.name, SelectionOwnerInfo.crediting.contains(executable), let property = creditProperty(selection),
           let value = (try? readProperty(owner, property, delete: false, limit: 1024, truncate: true)) ?? nil, value.format == 8 {
            credit = CopyCredit(decoding: value.data)
        }
        return SelectionOwnerInfo(window: owner, name: name, processID: pid, executableName: executable.name,
                                  executablePath: executable.path, windowInstance: windowClass?.instance, windowClass: windowClass?.class,
                                  copiedBy: credit)
    }

    /// The server's pid of each of its clients (X-Resource), those it knows.
    private func allClientPIDs() -> [Int] {
        var pids = [Int](repeating: -1, count: 4096)
        let count = pids.withUnsafeMutableBufferPointer { cx11_all_client_pids(display, $0.baseAddress, $0.count) }
        return count > 0 ? Array(pids.prefix(min(Int(count), pids.count))) : []
    }

    /// `WM_CLASS` of `window`, else of a top-level window of the same client (the server gives
    /// every client its own range of ids): the root's children, and the children of those (a
    /// reparenting window manager's frames), up to a bound.
    func windowClass(ofClientOf window: X11Window) -> (instance: String, class: String)? {
        if let own = wmClass(of: window) { return own }
        var looked = 0
        for top in children(of: root) {
            guard looked < 512 else { break }
            looked += 1
            if isSameClient(top, window) {
                if let found = wmClass(of: top) { return found }
                continue
            }
            for child in children(of: top) where isSameClient(child, window) {
                if let found = wmClass(of: child) { return found }
            }
        }
        return nil
    }

    private func wmClass(of window: X11Window) -> (instance: String, class: String)? {
        guard let value = (try? readProperty(window, known[.wmClass], delete: false, limit: 1024, truncate: true)) ?? nil,
              value.format == 8 else { return nil }
        let parts = value.data.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard parts.count >= 2, !parts[1].isEmpty else { return nil }
        return (parts[0], parts[1])
    }

    /// A window's children (none when it is gone).
    private func children(of window: X11Window) -> [X11Window] {
        var root: Window = 0
        var parent: Window = 0
        var list: UnsafeMutablePointer<Window>?
        var count: UInt32 = 0
        guard XQueryTree(display, window.rawValue, &root, &parent, &list, &count) != 0, let list else { return [] }
        defer { XFree(list) }
        return (0..<Int(count)).map { X11Window(rawValue: list[$0]) }
    }
}
