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

    package init(window: X11Window, name: String?, processID: Int?, executableName: String? = nil, executablePath: String? = nil,
                 windowInstance: String? = nil, windowClass: String? = nil) {
        self.window = window
        self.name = name
        self.processID = processID
        self.executableName = executableName
        self.executablePath = executablePath
        self.windowInstance = windowInstance
        self.windowClass = windowClass
    }

    /// A name for the application: the executable's, else the window class, else the window's name.
    public var appName: String? { executableName ?? windowClass ?? name }
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

    /// The process that holds the X connection `pid` made, when `pid` is gone: a client that
    /// put itself in the background after connecting (xclip, xsel fork and their parent exits)
    /// is known to the server by its parent's pid. The successor is the first process after
    /// `pid` (a fork takes the next free pid) that holds a socket connected to the display's
    /// socket (`/tmp/.X11-unix/XN`, as the kernel's socket diagnostics show). Nil when `pid`
    /// lives, the display is not local, or none is found.
    static func successor(of pid: Int, display number: Int) -> Int? {
        guard pid > 0, !FileManager.default.fileExists(atPath: "/proc/\(pid)") else { return nil }
        var peers = [UInt32](repeating: 0, count: 4096)
        let count = clinux_unix_peers_named("/tmp/.X11-unix/X\(number)", &peers, Int32(peers.count))
        guard count > 0 else { return nil }
        let clientEnds = Set(peers.prefix(Int(count)))
        for candidate in (pid + 1)...(pid + 256) {
            guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(candidate)/fd") else { continue }
            for descriptor in descriptors {
                guard let target = SystemCall.linkTarget("/proc/\(candidate)/fd/\(descriptor)", capacity: 63),
                      target.hasPrefix("socket:["), let inode = UInt32(target.dropFirst(8).dropLast()) else { continue }
                if clientEnds.contains(inode) { return candidate }
            }
        }
        return nil
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
        if fromServer > 0 {
            pid = Int(fromServer)
            isLocal = true
            if let number = LocalProcess.localDisplayNumber(String(cString: XDisplayString(display))),
               let successor = LocalProcess.successor(of: Int(fromServer), display: number) {
                pid = successor
            }
        } else if let claimed = ((try? readProperty(owner, known[.netWMPID], delete: false, limit: 4)) ?? nil)?.longs.first {
            pid = Int(claimed)
            // A pid a window claims names a process of this host only if the window says so.
            let machine = ((try? readProperty(owner, known[.wmClientMachine], delete: false, limit: 256, truncate: true)) ?? nil)
                .map { String(decoding: $0.data, as: UTF8.self) }
            isLocal = machine == LocalProcess.hostName
        }
        let executable: (name: String?, path: String?) = isLocal ? LocalProcess.executable(of: pid ?? 0) : (nil, nil)
        let windowClass = self.windowClass(ofClientOf: owner)
        return SelectionOwnerInfo(window: owner, name: name, processID: pid, executableName: executable.name,
                                  executablePath: executable.path, windowInstance: windowClass?.instance, windowClass: windowClass?.class)
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
