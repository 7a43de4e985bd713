import Foundation
import Synchronization
import Testing
@testable import PasteboardKit
@testable import PasteboardX11

#if canImport(Glibc)
import Glibc
#endif

/// Where a program lives on PATH; a missing peer fails the test loudly instead of skipping it.
func which(_ program: String) throws -> String {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(directory)/\(program)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw TestFailure("\(program) is not installed; the X11 tests need it (apt-get install xvfb xclip xsel)")
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A private Xvfb for one test: never the user's display. A watchdog shell kills the server
/// when the test process dies, so no server outlives a crashed run.
final class Xvfb: Sendable {
    let process: Process
    let display: String
    let serverPID: Int32

    init() throws {
        let path = try which("Xvfb")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // Xvfb writes the display number it picked to fd 3, here our pipe; the shell reports the
        // server's pid and then watches both the test process and the server.
        let script = """
            "$0" -displayfd 3 -screen 0 320x240x24 -nolisten tcp -noreset 3>&1 >/dev/null 2>&1 &
            x=$!
            echo "pid $x"
            while kill -0 "$1" 2>/dev/null && kill -0 "$x" 2>/dev/null; do sleep 0.3; done
            kill -9 "$x" 2>/dev/null
            """
        process.arguments = ["-c", script, path, String(getpid())]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var collected = ""
        var display: String?
        var pid: Int32?
        let deadline = Date().addingTimeInterval(20)
        while display == nil || pid == nil {
            guard Date() < deadline, process.isRunning else {
                if let pid { Glibc.kill(pid, SIGKILL) }
                throw TestFailure("Xvfb did not start")
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { Thread.sleep(forTimeInterval: 0.01) }
            collected += String(decoding: chunk, as: UTF8.self)
            for line in collected.split(separator: "\n") {
                if line.hasPrefix("pid ") { pid = Int32(line.dropFirst(4)) } else if let number = Int(line) { display = ":\(number)" }
            }
        }
        self.process = process
        self.display = display!
        self.serverPID = pid!
    }

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = display
        return environment
    }

    /// A backend on this display.
    func backend(_ configure: (inout X11Configuration) -> Void = { _ in }) throws -> X11PasteboardBackend {
        var configuration = X11Configuration()
        configure(&configuration)
        return try X11PasteboardBackend(display: display, changeCenter: ChangeCenter(notificationCenter: nil), configuration: configuration)
    }

    /// Kills the server at once (the watchdog shell then ends by itself).
    func kill() {
        Glibc.kill(serverPID, SIGKILL)
    }

    deinit { kill() }
}

/// The outcome of a finished program.
struct Outcome {
    let status: Int32
    let output: Data
    let error: String
    var text: String { String(decoding: output, as: UTF8.self) }
}

/// A program running on the test display; its output is collected on a background thread so a
/// large paste cannot block on a full pipe.
final class Peer: Sendable {
    let process: Process
    private let collected = Collector()
    private let collectedError = Collector()
    private let done = DispatchSemaphore(value: 0)
    private let doneError = DispatchSemaphore(value: 0)

    init(_ program: String, _ arguments: [String], display: Xvfb, input: Data? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try which(program))
        process.arguments = arguments
        process.environment = display.environment
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        let inputPipe = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
        self.process = process
        try process.run()
        let collected = self.collected
        let collectedError = self.collectedError
        let done = self.done
        let doneError = self.doneError
        let reader = output.fileHandleForReading
        let errorReader = error.fileHandleForReading
        Thread.detachNewThread {
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                collected.append(chunk)
            }
            done.signal()
        }
        Thread.detachNewThread {
            while true {
                let chunk = errorReader.availableData
                if chunk.isEmpty { break }
                collectedError.append(chunk)
            }
            doneError.signal()
        }
        if let input {
            let writer = inputPipe.fileHandleForWriting
            Thread.detachNewThread {
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }
    }

    /// Waits for the program to end (killing it after `timeout` seconds).
    func finish(timeout: Double = 30) throws -> Outcome {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                throw TestFailure("\(process.executableURL!.lastPathComponent) \(process.arguments!.joined(separator: " ")) did not finish within \(timeout) s")
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        _ = done.wait(timeout: .now() + 5)
        _ = doneError.wait(timeout: .now() + 5)
        return Outcome(status: process.terminationStatus, output: collected.data,
                       error: String(decoding: collectedError.data, as: UTF8.self))
    }

    func signal(_ signal: Int32) { Glibc.kill(process.processIdentifier, signal) }

    func stop() {
        if process.isRunning {
            signal(SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}

/// Bytes collected from another thread.
final class Collector: Sendable {
    private let storage = Mutex(Data())
    func append(_ chunk: Data) { storage.withLock { $0.append(chunk) } }
    var data: Data { storage.withLock { $0 } }
}

/// Runs a program to the end.
@discardableResult
func run(_ program: String, _ arguments: [String], display: Xvfb, input: Data? = nil, timeout: Double = 30) throws -> Outcome {
    try Peer(program, arguments, display: display, input: input).finish(timeout: timeout)
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(timeout: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return try condition()
}

/// Deterministic bytes of a given size (every byte value occurs, so encodings would show).
func payload(_ size: Int, seed: UInt8 = 7) -> Data {
    var data = Data(count: size)
    data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
        var state = UInt32(seed) &* 2_654_435_761
        for index in 0..<size {
            state = state &* 1_664_525 &+ 1_013_904_223
            buffer[index] = UInt8(truncatingIfNeeded: state >> 24)
        }
    }
    return data
}

/// UTF-8 text of exactly `size` bytes with non-ASCII characters.
func utf8Text(_ size: Int) -> Data {
    let unit = Array("héllo wörld ✓ ".utf8)
    var bytes = [UInt8]()
    bytes.reserveCapacity(size)
    while bytes.count < size {
        let remaining = size - bytes.count
        if remaining >= unit.count { bytes += unit } else { bytes += Array(repeating: UInt8(ascii: "x"), count: remaining) }
    }
    return Data(bytes)
}

/// Latin-1 text of exactly `size` bytes (bytes above 0x7F included).
func latin1Text(_ size: Int) -> Data {
    Data((0..<size).map { index in
        let value = UInt8(truncatingIfNeeded: index % 190 + 32)
        return value == 127 ? 0xE9 : (value < 127 ? value : value + 33)
    })
}
