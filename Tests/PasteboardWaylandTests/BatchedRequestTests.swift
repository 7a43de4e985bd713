import CLinux
import Foundation
import Testing
@testable import PasteboardWayland

#if canImport(Glibc)
import Glibc
#endif

/// The compositor's end of a connection, played by the test: a listening socket at a path of
/// its own, and what arrives on the accepted connection.
private final class CompositorEnd {
    let path: String
    private let listener: Int32
    private var accepted: Int32 = -1

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("xpb-wl-batch-\(getpid())-\(UUID().uuidString.prefix(8))").path
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(listener >= 0 && bound == 0 && listen(listener, 1) == 0)
    }

    deinit {
        close(listener)
        if accepted >= 0 { close(accepted) }
        unlink(path)
    }

    func accept() throws {
        accepted = Glibc.accept(listener, nil, nil)
        try #require(accepted >= 0)
    }

    /// Reads until `count` bytes came (5 s at most), with the descriptors that came with them.
    func read(_ count: Int) -> (bytes: [UInt8], fds: [Int32]) {
        var bytes: [UInt8] = []
        var fds: [Int32] = []
        let deadline = Date().addingTimeInterval(5)
        var buffer = [UInt8](repeating: 0, count: 4096)
        var received = [Int32](repeating: -1, count: 8)
        while bytes.count < count, Date() < deadline {
            var ready = pollfd(fd: accepted, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            var got: Int32 = 0
            let size = buffer.withUnsafeMutableBytes { raw in
                received.withUnsafeMutableBufferPointer { clinux_receive_with_fds(accepted, raw.baseAddress, raw.count, $0.baseAddress, 8, &got) }
            }
            guard size > 0 else { break }
            bytes += buffer[0 ..< size]
            fds += received[0 ..< Int(got)]
        }
        return (bytes, fds)
    }
}

@Suite("Wayland requests written together")
struct BatchedRequestTests {
    private struct Refused: Error {}

    @Test("requests written together reach the compositor whole and in order, a descriptor with its request; what was written before a failure goes out too")
    func batches() throws {
        let compositor = try CompositorEnd()
        let connection = try WaylandConnection(display: compositor.path)
        defer { connection.close() }
        try compositor.accept()
        var pipeEnds: [Int32] = [-1, -1]
        try #require(pipe(&pipeEnds) == 0)
        defer { close(pipeEnds[0]) }

        let receive = WaylandRequest.receive(offer: 9, type: Array("text/plain".utf8), fd: pipeEnds[1])
        var registry: UInt32 = 0
        try connection.withWriting {
            registry = try connection.writeNewLocked(.registry) { WaylandRequest.getRegistry($0) }
            try connection.writeLocked(receive)
            try connection.writeLocked(WaylandRequest.sync(callback: 7))
        }
        // The descriptor went out with its request: ours to close now.
        close(pipeEnds[1])
        let expected = try [WaylandRequest.getRegistry(registry), receive, WaylandRequest.sync(callback: 7)].flatMap { try WaylandWire.encode($0).bytes }
        let first = compositor.read(expected.count)
        #expect(first.bytes == expected)
        #expect(first.fds.count == 1)
        // It is the pipe's write end: what goes in comes out of the read end.
        if let sent = first.fds.first {
            #expect(write(sent, "x", 1) == 1)
            close(sent)
            var byte: UInt8 = 0
            #expect(Glibc.read(pipeEnds[0], &byte, 1) == 1 && byte == UInt8(ascii: "x"))
        }

        // A block that fails: what it wrote before goes out, and the error comes back.
        #expect(throws: Refused.self) {
            try connection.withWriting {
                try connection.writeLocked(WaylandRequest.sync(callback: 8))
                throw Refused()
            }
        }
        let sync = try WaylandWire.encode(WaylandRequest.sync(callback: 8)).bytes
        #expect(compositor.read(sync.count).bytes == sync)

        // Outside a block each request goes out at once.
        try connection.send(WaylandRequest.sync(callback: 9))
        let alone = try WaylandWire.encode(WaylandRequest.sync(callback: 9)).bytes
        #expect(compositor.read(alone.count).bytes == alone)
    }
}
