import CLinux
import FoundationEssentials
import Glibc
import KDEConnect
import PasteboardKit
import Synchronization

/// One TCP link to a device, from its first byte to its close, on a thread of its own: the
/// handshake (``Handshake``: identity in clear, TLS, in 8 the identity again), then packets both
/// ways. Everything read goes through the line framer and the packet decoder; the packets are
/// handed to the service, which decides (pairing, the clipboard rule). What the service sends is
/// queued here and written by this thread: OpenSSL's objects are used by one thread only.
final class DeviceLink: @unchecked Sendable {
    /// Packets waiting to be written, and whether the link is to be closed.
    private let outbox = Mutex<(packets: [[UInt8]], closing: String?)>(([], nil))
    /// Wakes the link's thread for the outbox (a pipe: read end, write end).
    private let wake: (read: Int32, write: Int32)
    private let fd: Int32
    private let handshakeRole: Handshake.Role
    private weak var service: KDEConnectService?
    /// The device, once the handshake is done.
    let device = Mutex<DeviceIdentity?>(nil)
    /// The device's certificate (DER), once TLS is up.
    let certificate = Mutex<[UInt8]>([])

    init(fd: Int32, role: Handshake.Role, service: KDEConnectService) throws(TLSFailure) {
        self.fd = fd
        handshakeRole = role
        self.service = service
        var ends: [Int32] = [-1, -1]
        guard clinux_wake_pipe(&ends) == 0 else {
            Glibc.close(fd)
            throw TLSFailure("cannot make a pipe: \(Errno.current)")
        }
        wake = (ends[0], ends[1])
    }

    deinit {
        Glibc.close(wake.read)
        Glibc.close(wake.write)
    }

    /// Queues a packet for the device.
    func send(_ packet: Packet) {
        let line = packet.encoded(id: Int64(Date().timeIntervalSince1970 * 1000))
        outbox.withLock { $0.packets.append(line) }
        poke()
    }

    /// Closes the link from another thread, with the reason logged.
    func close(_ why: String) {
        outbox.withLock { if $0.closing == nil { $0.closing = why } }
        poke()
    }

    private func poke() {
        var one: UInt8 = 1
        _ = Glibc.write(wake.write, &one, 1)
    }

    /// Runs the link on the calling thread until it ends; `heard` is the device's broadcast for a dialer.
    func run(ours: DeviceIdentity, heard: DeviceIdentity?, certificate ownCertificate: DeviceCertificate) {
        guard let service else {
            Glibc.close(fd)
            return
        }
        var handshake = Handshake(role: handshakeRole, ours: ours, heard: heard, isPaired: { service.pinned($0) != nil })
        var channel: TLSChannel?
        var pending: [Handshake.Action] = handshakeRole == .dialer ? handshake.connected() : []
        var framer = LineFramer(limit: handshake.lineLimit)
        var why = "the link ended"
        // A TLS channel that failed closed the socket itself.
        var socketClosed = false
        defer {
            if let channel { channel.close() } else if !socketClosed { Glibc.close(fd) }
            service.linkEnded(self, why: why)
        }
        // The handshake: blocking, each read and write within the link's time limit, and the
        // identity in clear within it in all (a device that sends it a byte at a time is let go).
        let seconds = service.configuration.handshakeSeconds
        let started = Date()
        var limit = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        while !handshake.isReady || !pending.isEmpty {
            if pending.isEmpty {
                // The next packet: before TLS from the socket itself, exactly one line (what follows
                // it is TLS's), and inside TLS through it.
                do {
                    let line = try channel.map { try Self.readLine(from: $0, framer: &framer) }
                        ?? Self.readClearLine(fd, limit: framer.limit, until: started.addingTimeInterval(Double(seconds)))
                    pending = handshake.received(try Packet.decode(line))
                } catch {
                    why = "\(error)"
                    return
                }
                if pending.isEmpty { return }
            }
            let action = pending.removeFirst()
            switch action {
            case .send(let packet):
                let line = packet.encoded(id: Int64(Date().timeIntervalSince1970 * 1000))
                do {
                    if let channel {
                        try channel.write(line)
                    } else {
                        guard Self.writeAll(fd, line) else { why = "could not send our identity: \(Errno.current)"; return }
                    }
                } catch {
                    why = "\(error)"
                    return
                }
            case .startTLS(let asServer, let pinned):
                let expected = handshake.peer.flatMap { service.pinned($0.deviceId) }
                do {
                    let made = try TLSChannel(fd: fd, asServer: asServer, certificate: ownCertificate, pinned: pinned ? expected : nil, timeout: seconds)
                    channel = made
                    certificate.withLock { $0 = made.peerCertificate }
                    pending.append(contentsOf: handshake.encrypted(commonName: made.peerCommonName))
                } catch {
                    socketClosed = true
                    why = "TLS with \(handshake.peer.map { "“\($0.deviceName)”" } ?? "a device") failed: \(error)"
                    return
                }
            case .ready(let identity, _):
                device.withLock { $0 = identity }
            case .close(let reason):
                why = reason
                return
            }
        }
        guard let channel, let identity = device.withLock({ $0 }) else { return }
        framer.limit = service.configuration.maxPacketBytes
        if let refusal = service.linkReady(self, identity: identity) {
            why = refusal
            return
        }
        channel.stopWaiting()
        why = loop(channel, framer: &framer, identity: identity, service: service)
    }

    /// Packets both ways until the link ends; returns why it ended.
    private func loop(_ channel: TLSChannel, framer: inout LineFramer, identity: DeviceIdentity, service: KDEConnectService) -> String {
        var unsent: [UInt8]?
        // TLS asked to write while reading (a key update's answer, with the socket full).
        var readWantsWrite = false
        while true {
            let (queued, closing) = outbox.withLock { box -> ([[UInt8]], String?) in
                defer { box.packets.removeAll() }
                return (box.packets, box.closing)
            }
            if let closing { return closing }
            var toWrite = (unsent.map { [$0] } ?? []) + queued
            unsent = nil
            var wantsWrite = readWantsWrite
            readWantsWrite = false
            do {
                while let next = toWrite.first {
                    guard try channel.writeNow(next) else {
                        unsent = next
                        wantsWrite = true
                        break
                    }
                    toWrite.removeFirst()
                }
            } catch {
                return "\(error)"
            }
            if !toWrite.dropFirst().isEmpty {
                // Kept in order, behind the one that waits for the socket.
                let rest = Array(toWrite.dropFirst())
                outbox.withLock { $0.packets.insert(contentsOf: rest, at: 0) }
            }
            if !channel.hasPending {
                var fds = [pollfd(fd: fd, events: Int16(POLLIN | (wantsWrite ? POLLOUT : 0)), revents: 0),
                           pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
                let timeout = service.millisecondsToNextTick()
                if poll(&fds, 2, timeout) < 0, errno != EINTR { return "poll failed: \(Errno.current)" }
                if fds[1].revents != 0 {
                    var drained = [UInt8](repeating: 0, count: 64)
                    while Glibc.read(wake.read, &drained, drained.count) > 0 {}
                }
                service.tick()
                if fds[0].revents & Int16(POLLIN | POLLOUT | POLLHUP | POLLERR) == 0 { continue }
            }
            // Everything that has come, then back to the outbox.
            while true {
                let arrival: TLSChannel.Arrival
                do {
                    arrival = try channel.readNow()
                } catch {
                    return "\(error)"
                }
                switch arrival {
                case .end:
                    return "“\(identity.deviceName)” closed the link"
                case .wait(let forWrite):
                    readWantsWrite = forWrite
                case .bytes(let bytes):
                    framer.append(bytes)
                    do {
                        while let line = try framer.next() {
                            let packet = try Packet.decode(line)
                            if let refusal = service.received(packet, on: self, from: identity) { return refusal }
                        }
                    } catch {
                        return "“\(identity.deviceName)” sent \(error)"
                    }
                    continue
                }
                break
            }
        }
    }

    /// One line from the socket before TLS, and not a byte more (what follows it is TLS's): what
    /// has come is looked at first (`MSG_PEEK`); bytes before any newline are all the line's and
    /// are taken, then the rest is waited for (within the socket's time limit).
    private static func readClearLine(_ fd: Int32, limit: Int, until deadline: Date) throws -> [UInt8] {
        var line: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            guard Date() < deadline else { throw TLSFailure("the device sent no identity in time") }
            let seen = recv(fd, &buffer, buffer.count, Int32(MSG_PEEK))
            if seen == 0 { throw TLSFailure("the device closed the link before its identity") }
            if seen < 0 {
                throw TLSFailure(errno == EAGAIN ? "the device sent no identity in time" : "reading the device's identity: \(Errno.current)")
            }
            let end = buffer[..<seen].firstIndex(of: 0x0A)
            let take = end.map { $0 + 1 } ?? seen
            guard recv(fd, &buffer, take, 0) == take else { throw TLSFailure("reading the device's identity: \(Errno.current)") }
            line.append(contentsOf: buffer[..<(end ?? take)])
            guard line.count <= limit else { throw PacketError.lineTooLong(limit: limit) }
            if end != nil { return line.last == 0x0D ? Array(line.dropLast()) : line }
        }
    }

    /// One line through TLS during the handshake (blocking).
    private static func readLine(from channel: TLSChannel, framer: inout LineFramer) throws -> [UInt8] {
        while true {
            if let line = try framer.next() { return Array(line) }
            let bytes = try channel.read()
            guard !bytes.isEmpty else { throw TLSFailure("the device closed the link during the handshake") }
            framer.append(bytes)
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
