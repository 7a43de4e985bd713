import FoundationEssentials
import PasteboardSelections

/// A password manager's job, as a process that calls xpbd shows it (qdbus, which `pass` runs to
/// clear Klipper's history after its clip time): the job's secret app, and when the job began.
/// What such a job copies goes through a clipboard helper it runs (xclip, xsel, wl-copy), so its
/// copies are those made since it began with no app known or a helper's name.
struct PasswordTool: Equatable {
    /// The password manager's name (one of the secret apps).
    let name: String
    /// Every name of the job's programs.
    let names: [String]
    /// When the job's oldest running process started.
    let started: Date

    /// The programs a command-line password manager copies through.
    static let helpers = ["xclip", "xsel", "wl-copy", "xpb"]

    /// The job of `pid`, if a secret app is one of its programs; nil otherwise.
    init?(calling pid: Int, secretApps: Set<String>) {
        let job = LocalProcess.job(of: pid)
        let names = LocalProcess.names(ofAll: job)
        guard let name = names.first(where: { secretApps.contains($0) }),
              let started = job.compactMap(LocalProcess.startTime(of:)).min() else { return nil }
        self.init(name: name, names: names, started: started)
    }

    init(name: String, names: [String], started: Date) {
        self.name = name
        self.names = names
        self.started = started
    }
}
