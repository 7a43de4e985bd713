// The start-up floor of a Swift program linked like the benchmarked xpb (static Swift runtime,
// Foundation, not position-independent): what any Swift paste costs before it does any work.
import Foundation

FileHandle.standardOutput.write(Data(CommandLine.arguments.dropFirst().joined().utf8))
