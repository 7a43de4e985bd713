import FoundationEssentials
import Glibc
import KDEConnect
import KDEConnectLink
import Logging
import PasteboardKit
import PasteboardWire
import Synchronization

/// The socket `xpb devices` asks: one request a connection (list, pair, accept, unpair), in the
/// user's runtime directory (mode 700), the socket itself mode 600. A client has 5 s to send its
/// request whole; connections are served one at a time (a person's commands, not a stream).
final class DeviceSocket: Sendable {
    let path: String
    private let listener: Int32
    private let desk: DeviceDesk

    init(path: String, desk: DeviceDesk) throws(LocalSocketError) {
        self.path = path
        self.desk = desk
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !directory.isEmpty { mkdir(directory, 0o700) }
        // A live helper answers there already: this one must not take its socket away.
        if let fd = try? LocalSocket.connect(path) {
            close(fd)
            throw LocalSocketError(code: EADDRINUSE, path: path)
        }
        unlink(path)
        listener = try LocalSocket.listen(path, backlog: 8)
    }

    func start() throws(Errno) {
        try DetachedThread.start(name: "kdeconnect.devices") { [self] in
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    if errno == EMFILE || errno == ENFILE { usleep(100_000); continue }
                    return
                }
                serve(fd)
                close(fd)
            }
        }
    }

    func stop() {
        unlink(path)
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func serve(_ fd: Int32) {
        var channel = FrameChannel(fd: fd)
        channel.setTimeout(5)
        guard let frame = try? channel.receive(within: 5), frame.kind == .request,
              let request = try? ControlCoding.decode(DeviceRequest.self, from: frame.payload) else {
            try? channel.send(.error, ControlFailure("expected a device request"))
            return
        }
        do throws(ControlFailure) {
            let message = try desk.perform(request)
            try? channel.send(.reply, DeviceAnswer(ownId: desk.service.deviceId, ownName: desk.service.identity.deviceName,
                                                   devices: desk.devices, message: message))
        } catch {
            try? channel.send(.error, error)
        }
    }
}
