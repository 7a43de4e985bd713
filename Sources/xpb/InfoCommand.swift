import CommandLineTable
import FoundationEssentials
import PasteboardKit
import PasteboardWire
import Glibc

struct InfoCommand: ReportCommand {
    static let name = "info"
    static let spec = CommandSpec(
        name: name,
        abstract: "Show who owns a pasteboard and what it holds.",
        discussion: "The owner's window and its name, the owning process (its pid from the X server's X-Resource extension, which knows every client on its own host, xclip's too, else the window's _NET_WM_PID), the application (its executable's name and path when it runs on this host, and the WM_CLASS of its top-level window), who made the copy where an xpb owner says so (`copied by`: the program that ran xpb copy or an xclip or xsel stand-in, past shells, env and timeout; for a copy xpbd keeps, the app it was taken from, with the pid it had), the last paste xpbd noted of a copy it serves itself (`last pasted by`: the reading app, its pid and the time; see xpb watch --pastes), the change count seen by this command, the number of items and their types. Exit status 2 when nobody owns the pasteboard (the report is printed all the same), as every other command. Without a display (no --display, no $DISPLAY), the headless xpbd's pasteboard: the owner is where the copy was made (this host's process that wrote it, its pid and executable; or the peer and application it came from).",
        options: ReportOptions.specs)

    let options: ReportOptions

    struct Report: Encodable {
        let pasteboard: String
        let selection: String
        let owner: String?
        let ownerName: String?
        let ownerPID: Int?
        let ownerApp: String?
        let ownerExecutable: String?
        let ownerClass: String?
        /// Who made the copy, where an xpb owner says (the program that ran `xpb copy` or a
        /// stand-in; for a clipboard manager's kept copy, the app it was taken from), its pid
        /// then, and whether that process still runs.
        var copiedBy: String? = nil
        var copiedByPID: Int? = nil
        var copiedByRuns: Bool? = nil
        /// The last paste of a copy xpbd serves (its app gone): who read it, and when.
        var lastPaste: LastPaste? = nil
        let changeCount: Int
        let items: [[String]]
    }

    struct LastPaste: Encodable {
        let time: String
        let app: String?
        let pid: Int?
        let unknown: String?
    }

    func run() throws {
        let backend = try selection.connect(readTimeout: options.timeout)
        defer { backend.close(handOff: false) }
        let owner = try backend.contentsOwner(of: selection.name)
        let board = selection.pasteboard(on: backend)
        let items = owner == nil ? [] : try board.itemTypes()
        var report = Report(
            pasteboard: selection.name.rawValue, selection: selection.selection,
            owner: owner?.id, ownerName: owner?.name, ownerPID: owner?.processID,
            ownerApp: owner?.appName, ownerExecutable: owner?.executablePath, ownerClass: owner?.windowClass,
            changeCount: board.changeCount, items: items.map { $0.map(\.identifier) })
        if let credit = owner?.copiedBy {
            report.copiedBy = credit.name
            report.copiedByPID = credit.pid
            report.copiedByRuns = credit.pid.map(Self.runs)
        }
        if owner != nil, let paste = lastPaste() {
            report.lastPaste = LastPaste(time: Date.ISO8601FormatStyle().format(paste.time), app: paste.app, pid: paste.pid, unknown: paste.unknown)
        }
        try show(report)
    }

    /// The last paste xpbd noted of the copy it serves on the pasteboard; nil where it serves none,
    /// none was noted, or no xpbd answers (an older one included: the report goes without it).
    private func lastPaste() -> PasteRecord? {
        guard var client = try? DaemonAccess.client(session: selection.session, timeout: 2) else { return nil }
        defer { client.close() }
        guard case let .pastes(notes)? = try? client.send(.pastes(pasteboard: selection.selection, follow: false)) else { return nil }
        return notes.first?.paste
    }

    /// Whether a process of this host runs (another user's too).
    static func runs(_ pid: Int) -> Bool {
        kill(pid_t(clamping: pid), 0) == 0 || errno == EPERM
    }

    private func show(_ report: Report) throws {
        // Nothing on the pasteboard exits 2, as paste, types and watch do; the report still says so.
        let status: Exit? = report.owner == nil ? Exit(status: Status.empty.rawValue) : nil
        if options.asJSON {
            writeJSONLine(json(report))
            if let status { throw status }
            return
        }
        writeLine("pasteboard: \(report.pasteboard)")
        writeLine("selection: \(report.selection)")
        writeLine("owner: \(report.owner ?? "none")")
        if let name = report.ownerName { writeLine("owner name: \(name)") }
        if let pid = report.ownerPID { writeLine("owner pid: \(pid)") }
        if let app = report.ownerApp { writeLine("owner app: \(printable(app))\(report.ownerExecutable.map { " (\(printable($0)))" } ?? "")") }
        if let windowClass = report.ownerClass { writeLine("owner class: \(printable(windowClass))") }
        if let maker = report.copiedBy {
            let pid = report.copiedByPID.map { " (pid \($0)\(report.copiedByRuns == false ? ", exited" : ""))" } ?? ""
            writeLine("copied by: \(printable(maker))\(pid)")
        }
        if let paste = report.lastPaste {
            writeLine("last pasted by: \(printable(paste.app ?? "unknown"))\(paste.pid.map { " (pid \($0))" } ?? "") at \(paste.time)")
        }
        writeLine("change count: \(report.changeCount)")
        writeLine("items: \(report.items.count)")
        for (index, types) in report.items.enumerated() {
            writeLine("item \(index): \(types.joined(separator: ", "))")
        }
        if let status { throw status }
    }
}
