internal import CLinux
internal import CX11
internal import CXEvents
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections

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
    /// When the process that connected is gone and several processes hold connections handed
    /// down from gone ones: those processes, one of which holds the owner's
    /// (``LocalProcess/Successor/candidates(_:)``). Empty otherwise.
    package let candidates: [Int]

    package init(window: X11Window, name: String?, processID: Int?, executableName: String? = nil, executablePath: String? = nil,
                 windowInstance: String? = nil, windowClass: String? = nil, copiedBy: CopyCredit? = nil, candidates: [Int] = []) {
        self.window = window
        self.name = name
        self.processID = processID
        self.executableName = executableName
        self.executablePath = executablePath
        self.windowInstance = windowInstance
        self.windowClass = windowClass
        self.copiedBy = copiedBy
        self.candidates = candidates
    }

    /// The same owner, known to be served by the process `pid` (one of ``candidates``).
    package func served(by pid: Int) -> SelectionOwnerInfo {
        let executable = LocalProcess.executable(of: pid)
        return SelectionOwnerInfo(window: window, name: name, processID: pid, executableName: executable.name, executablePath: executable.path,
                                  windowInstance: windowInstance, windowClass: windowClass, copiedBy: copiedBy)
    }

    /// The same owner with the process that serves it told apart from the other ``candidates``
    /// where the rule of ``LocalProcess/serving(_:exitWait:ask:)`` can (`ask` requests something
    /// of the owner); as it is otherwise.
    package func resolved(exitWait: Double = candidatesExit, asking ask: () -> Void) -> SelectionOwnerInfo {
        guard !candidates.isEmpty else { return self }
        return LocalProcess.serving(candidates, exitWait: exitWait, ask: ask).map(served(by:)) ?? self
    }

    /// How long the candidates are asked again, and those exiting get to go, when a request does
    /// not tell which serves the owner (seconds).
    package static let candidatesExit = 0.5

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


/// Who pasted what we own: the requestor's window (none over the fast path), and its process and
/// executable where the X server (or the fast path's socket) names it, looked up before the reader
/// had its answer.
struct PasteReader: Sendable, Equatable {
    /// Our window that owns what was pasted.
    let owner: X11Window
    let window: X11Window
    let processID: Int?
    let executableName: String?
}

/// Who owns a selection, as far as the server and the kernel can tell: the owner window's
/// properties, the X-Resource client id, a look through the top-level windows, and the process
/// behind the connection.
struct OwnerAttribution {
    let wire: X11Wire

    /// Who owns a selection (``SelectionOwnerInfo``); nil when nobody does. A few round trips:
    /// the owner window's properties, the X-Resource client id, and where the window has no
    /// `WM_CLASS`, a look through the top-level windows for one of the same client.
    /// `census` keeps what the processes held between look-ups (``HolderCensus``).
    func ownerInfo(_ selection: X11Atom, census: inout HolderCensus) -> SelectionOwnerInfo? {
        let owner = wire.selectionOwner(selection)
        guard !owner.isNone else { return nil }
        var name: String?
        if let value = (try? wire.readProperty(owner, wire.known[.netWMName], delete: false, limit: 4096, truncate: true)) ?? nil
            ?? (try? wire.readProperty(owner, wire.known[.wmName], delete: false, limit: 4096, truncate: true)) ?? nil,
           value.format == 8 {
            name = String(decoding: value.data, as: UTF8.self)
        }
        var pid: Int?
        var isLocal = false
        let fromServer = cx11_client_pid(wire.display, owner.rawValue)
        var handedDown: (name: String, path: String?)?
        var candidates: [Int] = []
        if fromServer > 0 {
            pid = Int(fromServer)
            isLocal = true
            if !LocalProcess.isRunning(Int(fromServer)) {
                // The process that connected is gone: whoever it handed the connection to, if
                // the kernel can tell; else unknown, never a guess.
                pid = nil
                if let number = LocalProcess.localDisplayNumber(String(cString: XDisplayString(wire.display))) {
                    switch LocalProcess.successor(of: Int(fromServer), display: number, clientPIDs: allClientPIDs(), census: &census) {
                    case .process(let successor): pid = successor
                    case .executable(let name, let path): handedDown = (name, path)
                    case .candidates(let pids): candidates = pids
                    case .unknown: break
                    }
                }
            }
        } else if let claimed = ((try? wire.readProperty(owner, wire.known[.netWMPID], delete: false, limit: 4)) ?? nil)?.longs.first {
            pid = Int(claimed)
            // A pid a window claims names a process of this host only if the window says so.
            let machine = ((try? wire.readProperty(owner, wire.known[.wmClientMachine], delete: false, limit: 256, truncate: true)) ?? nil)
                .map { String(decoding: $0.data, as: UTF8.self) }
            isLocal = machine == LocalProcess.hostName
        }
        let executable: (name: String?, path: String?) = handedDown.map { ($0.name, $0.path) }
            ?? (isLocal ? LocalProcess.executable(of: pid ?? 0) : (nil, nil))
        let windowClass = self.windowClass(ofClientOf: owner)
        var credit: CopyCredit?
        // An xpb owner under any name (xpbd, the xclip and xsel stand-ins are links to it).
        let program = executable.path.flatMap(LocalProcess.realPath).flatMap { $0.split(separator: "/").last.map(String.init) } ?? executable.name
        if let program, SelectionOwnerInfo.crediting.contains(program), let property = wire.creditProperty(selection),
           let value = (try? wire.readProperty(owner, property, delete: false, limit: 1024, truncate: true)) ?? nil, value.format == 8 {
            credit = CopyCredit(decoding: value.data)
        }
        return SelectionOwnerInfo(window: owner, name: name, processID: pid, executableName: executable.name,
                                  executablePath: executable.path, windowInstance: windowClass?.instance, windowClass: windowClass?.class,
                                  copiedBy: credit, candidates: candidates)
    }

    /// The window manager's check window (`_NET_SUPPORTING_WM_CHECK` on the root) and the pid
    /// the X-Resource extension gives its client; nil when no window manager says it runs.
    func windowManager() -> (window: X11Window, processID: Int?)? {
        guard let value = (try? wire.readProperty(wire.root, wire.atom("_NET_SUPPORTING_WM_CHECK"), delete: false, limit: 4)) ?? nil,
              let raw = value.longs.first, raw != 0 else { return nil }
        let window = X11Window(rawValue: UInt(raw))
        let pid = cx11_client_pid(wire.display, window.rawValue)
        return (window, pid > 0 ? Int(pid) : nil)
    }

    /// The server's pid of each of its clients (X-Resource), those it knows.
    private func allClientPIDs() -> [Int] {
        var pids = [Int](repeating: -1, count: 4096)
        let count = pids.withUnsafeMutableBufferPointer { cx11_all_client_pids(wire.display, $0.baseAddress, $0.count) }
        return count > 0 ? Array(pids.prefix(min(Int(count), pids.count))) : []
    }

    /// `WM_CLASS` of `window`, else of a top-level window of the same client (the server gives
    /// every client its own range of ids): the root's children, and the children of those (a
    /// reparenting window manager's frames), up to a bound.
    func windowClass(ofClientOf window: X11Window) -> (instance: String, class: String)? {
        if let own = wmClass(of: window) { return own }
        var looked = 0
        for top in children(of: wire.root) {
            guard looked < 512 else { break }
            looked += 1
            if wire.isSameClient(top, window) {
                if let found = wmClass(of: top) { return found }
                continue
            }
            for child in children(of: top) where wire.isSameClient(child, window) {
                if let found = wmClass(of: child) { return found }
            }
        }
        return nil
    }

    private func wmClass(of window: X11Window) -> (instance: String, class: String)? {
        guard let value = (try? wire.readProperty(window, wire.known[.wmClass], delete: false, limit: 1024, truncate: true)) ?? nil,
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
        guard XQueryTree(wire.display, window.rawValue, &root, &parent, &list, &count) != 0, let list else { return [] }
        defer { XFree(list) }
        return (0..<Int(count)).map { X11Window(rawValue: list[$0]) }
    }
}
