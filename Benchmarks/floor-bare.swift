// The start-up floor of a static Swift program with no Foundation at all (the Swift runtime and
// Glibc only), to set beside floor.swift: what FoundationEssentials adds to a process start.
import Glibc

let text = CommandLine.arguments.dropFirst().joined()
_ = text.utf8CString.withUnsafeBufferPointer { write(1, $0.baseAddress, $0.count - 1) }
