internal import CLinux
internal import CX11
import FoundationEssentials
import Glibc
import PasteboardKit
import PasteboardSelections

/// The same-host fast path between two xpb processes: the bytes move outside the X server.
///
/// An xpb owner listens on a UNIX socket in the abstract namespace (a random name, one per
/// process) and names it in its manifest (`fast-path=NAME`). An xpb reader that finds the name
/// connects, asks for one item target, and receives a file descriptor: the owner's file itself
/// (read-only use; the owner never writes it) or a sealed memory file holding the bytes. Both
/// ends check the other's user id with `SO_PEERCRED` (the kernel's record, not a claim), so data
/// never reaches another user; a connection from another user is closed unanswered. Every failure
/// (another host, another network namespace, another user, an old owner, a refusal) makes the
/// reader fall back to an ordinary conversion through the X server.
///
/// Wire format, one request per connection: the owner speaks first, `XPB2<TAB>window\n` with the
/// id of the window that owns the selection; the reader checks it against the selection's owner
/// (a manifest is another client's word: a name in it that leads to any other socket, even
/// another xpb owner's, gets no request), then sends `XPB2<TAB>selection<TAB>target\n`; the owner
/// answers `ok<TAB>size<TAB>reply-type\n` with the descriptor attached, or `no<TAB>reason\n`.
enum FastPath {
    static let manifestField = Manifest.fastPathField
    static let version = "XPB2"
    /// The most connections an owner serves at once; more wait in the listen backlog.
    static let maxClients = 32
    /// The longest request line an owner accepts.
    static let maxRequest = 4096

    /// Runs `body` with the abstract socket address of `name` (nil for a name that does not fit).
    static func withAddress<T>(_ name: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(name.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            path[0] = 0 // the abstract namespace: no file, gone with the socket
            for (index, byte) in bytes.enumerated() { path[index + 1] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + bytes.count)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// Whether the peer of a connected socket runs as this process's user.
    static func peerIsSameUser(_ socket: Int32) -> Bool {
        var uid: uid_t = 0
        return clinux_peer_uid(socket, &uid) == 0 && uid == geteuid()
    }

    /// A fresh listener name: the process id and 64 random bits.
    static func makeName() -> String {
        "xpb-\(getpid())-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
    }
}

/// The owner's listener and the connections it is answering: the same-host fast path's server
/// part. Lives on the X thread; serves what ``SelectionServer`` owns.
final class FastPathServer {
    private unowned let session: X11Session
    let name: String
    let listener: Int32
    /// Request bytes received so far per connection, and its deadline timer.
    private var clients: [Int32: (buffer: [UInt8], timer: TimerHandle?)] = [:]
    /// Closed: the listener's descriptor is no longer ours.
    private var isClosed = false

    init(session: X11Session) throws {
        self.session = session
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw PasteboardError.backendFailure("fast path: socket: \(String(cString: strerror(errno)))") }
        var name = FastPath.makeName()
        var bound = FastPath.withAddress(name) { bind(fd, $0, $1) } ?? -1
        if bound != 0, errno == EADDRINUSE {
            name = FastPath.makeName()
            bound = FastPath.withAddress(name) { bind(fd, $0, $1) } ?? -1
        }
        guard bound == 0, Glibc.listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw PasteboardError.backendFailure("fast path: cannot listen: \(reason)")
        }
        self.name = name
        listener = fd
    }

    /// Starts answering connections.
    func listen() {
        session.watchDescriptor(listener) { [weak self] in self?.acceptClients() }
    }

    private func acceptClients() {
        while true {
            guard clients.count < FastPath.maxClients else {
                // Full: stop listening until a connection ends (the kernel's backlog holds the rest).
                session.unwatchDescriptor(listener)
                return
            }
            let client: Int32
            do throws(Errno) {
                client = try SystemCall.retrying { accept(listener, nil, nil) }
            } catch .wouldBlock {
                return
            } catch {
                // Out of descriptors (EMFILE) or memory: the listener stays readable, so polling
                // it again at once would spin. Look again a little later.
                session.unwatchDescriptor(listener)
                session.after(0.25) { [weak self] in self?.listenAgain() }
                return
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            // Another user's process gets nothing, not even an answer.
            guard FastPath.peerIsSameUser(client) else {
                Glibc.close(client)
                continue
            }
            let timer = session.after(session.configuration.serveTimeout) { [weak self] in self?.dropClient(client) }
            clients[client] = ([], timer)
            let hello = Array("\(FastPath.version)\t\(session.wire.window.rawValue)\n".utf8)
            guard send(client, hello, hello.count, Int32(MSG_NOSIGNAL)) == hello.count else {
                dropClient(client)
                continue
            }
            session.watchDescriptor(client) { [weak self] in self?.readRequest(client) }
        }
    }

    /// Polls the listener again (after a pause, or once a connection ended).
    private func listenAgain() {
        guard !isClosed, session.descriptorHandlers[listener] == nil, clients.count < FastPath.maxClients else { return }
        session.watchDescriptor(listener) { [weak self] in self?.acceptClients() }
    }

    private func readRequest(_ client: Int32) {
        guard var entry = clients[client] else { return }
        var chunk = [UInt8](repeating: 0, count: 1024)
        let count: Int
        do throws(Errno) {
            count = try SystemCall.retrying { recv(client, &chunk, chunk.count, 0) }
        } catch .wouldBlock {
            return
        } catch {
            return dropClient(client)
        }
        guard count > 0 else { return dropClient(client) }
        entry.buffer += chunk[0..<count]
        guard let newline = entry.buffer.firstIndex(of: UInt8(ascii: "\n")) else {
            if entry.buffer.count > FastPath.maxRequest { return dropClient(client) }
            clients[client] = entry
            return
        }
        let line = String(decoding: entry.buffer[..<newline], as: UTF8.self)
        clients[client] = entry
        // One request per connection: nothing more is read; the answer may wait for providers.
        session.unwatchDescriptor(client)
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        // Names from a client are looked up, never interned: atoms are never freed.
        guard fields.count == 3, fields[0] == FastPath.version, let selection = session.wire.existingAtom(fields[1]), let state = session.owner.owned[selection],
              let target = session.wire.existingAtom(fields[2]) else {
            answer(client, fields: fields)
            return dropClient(client)
        }
        // Answered only if this connection is still the one behind the descriptor number.
        let generation = entry.timer
        let finish: @Sendable (X11Session, Bool) -> Void = { session, providersReady in
            guard let server = session.owner.fastPath, let current = server.clients[client], current.timer == generation else { return }
            if providersReady { server.answer(client, fields: fields) } else { server.refuse(client, "the provider timed out") }
            server.dropClient(client)
        }
        session.owner.afterPreparing([target], in: state, answer: { finish($0, true) }, timedOut: { finish($0, false) })
    }

    func refuse(_ client: Int32, _ reason: String) {
        let line = Array("no\t\(reason)\n".utf8)
        _ = clinux_send_with_fd(client, line, line.count, -1)
    }

    /// Answers one request: the descriptor of the target's bytes, or why not.
    func answer(_ client: Int32, fields: [String]) {
        let wire = session.wire
        func refuse(_ reason: String) { self.refuse(client, reason) }
        guard fields.count == 3, fields[0] == FastPath.version else { return refuse("malformed request") }
        guard let selection = wire.existingAtom(fields[1]), let state = session.owner.owned[selection] else { return refuse("not the owner of that selection") }
        guard let target = wire.existingAtom(fields[2]) else { return refuse("no such target") }
        let content: (source: TransferSource, type: X11Atom, served: PasteboardType?)?
        do {
            content = try session.owner.content(of: target, in: state)
        } catch {
            return refuse("the provider failed")
        }
        guard let content else { return refuse("no such target") }
        // Who reads, found before it has the answer (it may exit right after): for the secret
        // rule and a paste report.
        var peer = clinux_ucred()
        let hasPeer = clinux_peer_credentials(client, &peer) == 0
        if state.served[target]?.isPaste == true, session.owner.refusesSecret(in: state, toProcess: { hasPeer ? Int(peer.pid) : nil }) {
            return refuse("refused: a secret, which this reader may not have")
        }
        let descriptor: Int32
        var isTemporary = false
        switch content.source {
        case let .file(file):
            descriptor = file.withDescriptor { $0 }
        case let .data(data):
            descriptor = data.withUnsafeBytes { clinux_sealed_memfd("xpb", $0.baseAddress, $0.count) }
            isTemporary = true
        }
        guard descriptor >= 0 else { return refuse("cannot make a descriptor: \(String(cString: strerror(errno)))") }
        defer { if isTemporary { Glibc.close(descriptor) } }
        let header = Array("ok\t\(content.source.count)\t\(wire.name(of: content.type) ?? "")\n".utf8)
        let paste = session.owner.pasteReports != nil && state.served[target]?.isPaste == true && hasPeer
            ? session.owner.fastPathPaste(of: selection, byProcess: Int(peer.pid)) : nil
        guard clinux_send_with_fd(client, header, header.count, descriptor) == header.count else { return }
        if let served = content.served { session.delegate?.served(selection: selection, type: served) }
        paste?()
    }

    func dropClient(_ client: Int32) {
        guard let entry = clients.removeValue(forKey: client) else { return }
        session.cancelTimer(entry.timer)
        session.unwatchDescriptor(client)
        Glibc.close(client)
        listenAgain()
    }

    /// Closes the listener and every connection (the session is finishing).
    func close() {
        isClosed = true
        for client in Array(clients.keys) { dropClient(client) }
        session.unwatchDescriptor(listener)
        Glibc.close(listener)
    }
}

/// The reader's side: runs on the reading thread, never on the X thread.
enum FastPathClient {
    /// The owner accepted the request but did not answer within the deadline (it is stopped or
    /// stuck): the read fails as a conversion would, rather than waiting a second time through X.
    struct TimedOut: Error {}

    /// The bytes of `target` from the owner listening on `name`, in memory; nil when the fast
    /// path cannot be used (the caller then converts through the X server).
    static func read(name: String, owner: UInt, selection: String, target: String, timeout: Double, limit: Int) throws(TimedOut) -> Data? {
        guard let (descriptor, size) = try request(name: name, owner: owner, selection: selection, target: target, timeout: timeout, limit: limit) else { return nil }
        defer { Glibc.close(descriptor) }
        return clinux_cannot_shrink(descriptor) != 0 ? mapSealed(descriptor, size) : readExactly(descriptor, size)
    }

    /// The bytes of `target` as a file, read when asked for (a caller can stream it, for example
    /// with `sendfile`, without the bytes ever entering its memory); nil as for ``read``.
    static func open(name: String, owner: UInt, selection: String, target: String, timeout: Double, limit: Int) throws(TimedOut) -> FileContents? {
        guard let (descriptor, size) = try request(name: name, owner: owner, selection: selection, target: target, timeout: timeout, limit: limit) else { return nil }
        return try? FileContents(adopting: descriptor, size: size, path: "\(target) from the owner of \(selection)")
    }

    /// Asks the owner for `target`: a descriptor (the caller's to close) of a regular file whose
    /// first `size` bytes are the contents. Nothing is sent unless the listener first names
    /// `owner`, the selection owner's window.
    private static func request(name: String, owner: UInt, selection: String, target: String, timeout: Double, limit: Int) throws(TimedOut) -> (descriptor: Int32, size: Int)? {
        guard !selection.contains(where: { $0 == "\t" || $0 == "\n" }), !target.contains(where: { $0 == "\t" || $0 == "\n" }) else { return nil }
        let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { return nil }
        defer { Glibc.close(socket) }
        func setTimeout(_ seconds: Double, _ option: Int32) {
            let seconds = min(max(seconds, 0.001), 1e6)
            var wait = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
            setsockopt(socket, SOL_SOCKET, option, &wait, socklen_t(MemoryLayout<timeval>.size))
        }
        setTimeout(timeout, SO_SNDTIMEO)
        // The greeting comes at once from a real owner; a socket that stays silent is not one,
        // and the read goes through X after a short wait (nothing was sent to it).
        setTimeout(min(timeout, 2), SO_RCVTIMEO)
        guard FastPath.withAddress(name, { connect(socket, $0, $1) }) == 0 else { return nil }
        // The listener must be ours too: a name squatted by another user is not trusted.
        guard FastPath.peerIsSameUser(socket) else { return nil }
        guard let hello = try? readLine(socket, descriptor: nil), hello == "\(FastPath.version)\t\(owner)" else { return nil }
        setTimeout(timeout, SO_RCVTIMEO)
        let request = Array("\(FastPath.version)\t\(selection)\t\(target)\n".utf8)
        guard send(socket, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else { return nil }

        var descriptor: Int32 = -1
        var handedOver = false
        defer { if descriptor >= 0, !handedOver { Glibc.close(descriptor) } }
        guard let line = try readLine(socket, descriptor: &descriptor) else { return nil }
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0] == "ok", let size = Int(fields[1]), size >= 0, size <= limit,
              descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, Int(status.st_size) >= size else { return nil }
        handedOver = true
        return (descriptor, size)
    }

    /// One line from the owner (without its newline), with the descriptor that came with it;
    /// nil for a line too long or a closed connection. Reads byte by byte up to the newline:
    /// nothing after it is consumed.
    private static func readLine(_ socket: Int32, descriptor: UnsafeMutablePointer<Int32>?) throws(TimedOut) -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        var received: Int32 = -1
        while true {
            let count = clinux_receive_with_fd(socket, &byte, 1, &received)
            if received >= 0 {
                // Only the answer line may bring a descriptor; any other is closed at once.
                if let descriptor, descriptor.pointee < 0 { descriptor.pointee = received } else { Glibc.close(received) }
                received = -1
            }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { throw TimedOut() }
            guard count == 1, line.count < FastPath.maxRequest else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// A sealed memory file, mapped: no copy at all. Page tables are filled in one call
    /// (`MAP_POPULATE`): one fault per page costs more than the copy it avoids.
    private static func mapSealed(_ fd: Int32, _ size: Int) -> Data? {
        guard size > 0 else { return Data() }
        guard let address = mmap(nil, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0), address != MAP_FAILED else { return nil }
        return Data(bytesNoCopy: address, count: size, deallocator: .custom { pointer, count in munmap(pointer, count) })
    }

    /// `size` bytes from the start of a file the owner may still change (its own file): copied
    /// into memory mapped at once, never mapped itself (a file cut short under a mapping kills
    /// the reader with SIGBUS; a short read here is a clean failure).
    private static func readExactly(_ fd: Int32, _ size: Int) -> Data? {
        guard size > 0 else { return Data() }
        guard let buffer = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0),
              buffer != MAP_FAILED else { return nil }
        var offset = 0
        while offset < size {
            let count = (try? SystemCall.retrying { pread(fd, buffer + offset, size - offset, off_t(offset)) }) ?? -1
            guard count > 0 else {
                munmap(buffer, size)
                return nil
            }
            offset += count
        }
        return Data(bytesNoCopy: buffer, count: size, deallocator: .custom { pointer, count in munmap(pointer, count) })
    }
}
