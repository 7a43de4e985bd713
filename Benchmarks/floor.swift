// The start-up floor of a Swift program linked like the benchmarked xpb (static Swift runtime,
// FoundationEssentials, not position-independent): what any Swift paste costs before it does
// any work.
import FoundationEssentials
import Glibc

let bytes = Data(CommandLine.arguments.dropFirst().joined().utf8)
_ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
