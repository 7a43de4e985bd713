import CommandLineTable
import FoundationEssentials
import PasteboardKit

struct DetectCommand: ReportCommand {
    static let name = "detect"
    static let spec = CommandSpec(
        name: name,
        abstract: "Detect patterns in the first item: probable URL, search or number; links, emails, phone numbers, numbers.",
        discussion: "Reads only the item's URL or plain text, never its other representations.",
        options: ReportOptions.specs)

    let options: ReportOptions

    struct Report: Encodable {
        let patterns: [String]
        let links: [String]
        let emailAddresses: [String]
        let phoneNumbers: [String]
        let numbers: [Double]
    }

    func run() throws {
        let backend = try selection.connect(readTimeout: options.timeout, readsOnce: true)
        defer { backend.close(handOff: false) }
        let board = selection.pasteboard(on: backend)
        guard try !board.itemTypes().isEmpty else {
            throw selection.emptyFailure
        }
        let patterns = try board.detectPatterns(for: Set(DetectionPattern.allCases))
        let values = try board.detectValues(for: Set(ValueDetectionPattern.allCases))
        let report = Report(
            patterns: DetectionPattern.allCases.filter(patterns.contains).map(\.rawValue),
            links: values.links.map(\.absoluteString), emailAddresses: values.emailAddresses,
            phoneNumbers: values.phoneNumbers, numbers: values.numbers)
        if options.asJSON {
            writeJSONLine(json(report))
            return
        }
        writeLine("patterns: \(report.patterns.joined(separator: ", "))")
        writeLine("links: \(report.links.joined(separator: " "))")
        writeLine("emails: \(report.emailAddresses.joined(separator: " "))")
        writeLine("phone numbers: \(report.phoneNumbers.joined(separator: ", "))")
        writeLine("numbers: \(report.numbers.map { $0 == $0.rounded() && abs($0) < 1e15 ? String(Int($0)) : String($0) }.joined(separator: " "))")
    }
}
