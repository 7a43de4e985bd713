import CTLS
import Glibc

/// TLS over a connected TCP socket, in the role KDE Connect's handshake gives this side
/// (``KDEConnect/Handshake/Action/startTLS(asServer:pinned:)``): both sides show a certificate;
/// any self-signed one is taken during the handshake, then the device's is checked here against
/// the one pinned at pairing, and its common name is handed back for the handshake to check
/// against the id the device gave.
///
/// Blocking, with a deadline on every read and write (`SO_RCVTIMEO`/`SO_SNDTIMEO`): a device that
/// connects and sends nothing is let go. One thread uses a channel at a time.
package final class TLSChannel {
    private let ssl: OpaquePointer
    private let context: OpaquePointer
    /// The socket (owned: closed with the channel).
    package let fd: Int32
    /// The device's certificate, in DER.
    package let peerCertificate: [UInt8]
    /// Its subject's common name.
    package let peerCommonName: String
    private var isClosed = false

    /// Runs the TLS handshake on `fd` (the channel owns it from here, and closes it on failure).
    /// `pinned`: the DER of the certificate the device must show (a paired device's).
    package init(fd: Int32, asServer: Bool, certificate: DeviceCertificate, pinned: [UInt8]?, timeout seconds: Int = 10) throws(TLSFailure) {
        self.fd = fd
        var limit = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard let context = ctls_context(asServer ? 1 : 0, certificate.certificate, certificate.key) else {
            Glibc.close(fd)
            throw TLSFailure.openSSL("setting up TLS")
        }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            Glibc.close(fd)
            throw TLSFailure.openSSL("setting up TLS")
        }
        self.context = context
        self.ssl = ssl
        func fail(_ failure: TLSFailure) -> TLSFailure {
            SSL_free(ssl)
            SSL_CTX_free(context)
            Glibc.close(fd)
            return failure
        }
        SSL_set_fd(ssl, fd)
        let shaken = asServer ? SSL_accept(ssl) : SSL_connect(ssl)
        guard shaken == 1 else {
            throw fail(TLSFailure.openSSL("in the TLS handshake (as its \(asServer ? "server" : "client"))"))
        }
        guard let peer = SSL_get1_peer_certificate(ssl) else {
            throw fail(TLSFailure("the device showed no certificate"))
        }
        defer { X509_free(peer) }
        // Every check before the last stored property is set: a throw after that would run
        // deinit too, which frees what `fail` freed.
        let shown = derBytes(of: peer)
        if let pinned, pinned != shown {
            throw fail(TLSFailure("the device showed another certificate than the one pinned when it was paired"))
        }
        guard let name = commonName(of: peer) else {
            throw fail(TLSFailure("the device's certificate has no common name"))
        }
        peerCertificate = shown
        peerCommonName = name
    }

    deinit {
        close()
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    /// Writes all of `bytes`.
    package func write(_ bytes: [UInt8]) throws(TLSFailure) {
        var offset = 0
        while offset < bytes.count {
            var written = 0
            let ok = bytes.withUnsafeBytes { SSL_write_ex(ssl, $0.baseAddress! + offset, $0.count - offset, &written) }
            guard ok == 1 else { throw TLSFailure.openSSL("writing to the device") }
            offset += written
        }
    }

    /// Reads what has come, up to `capacity` bytes; empty at the device's end of the link.
    package func read(capacity: Int = 16 << 10) throws(TLSFailure) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: capacity)
        var count = 0
        let ok = buffer.withUnsafeMutableBytes { SSL_read_ex(ssl, $0.baseAddress, $0.count, &count) }
        if ok == 1 { return Array(buffer.prefix(count)) }
        let reason = SSL_get_error(ssl, 0)
        if reason == SSL_ERROR_ZERO_RETURN { return [] }
        if reason == SSL_ERROR_SYSCALL && errno == 0 { return [] }
        if reason == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK) { throw TLSFailure("the device sent nothing in time") }
        throw TLSFailure.openSSL("reading from the device")
    }

    /// What a read without waiting found.
    package enum Arrival: Equatable {
        case bytes([UInt8])
        /// Nothing yet: wait for the socket (`forWrite`: to be writable, as TLS may need).
        case wait(forWrite: Bool)
        /// The device ended the link.
        case end
    }

    /// From here on, reads and writes never wait: ``readNow()`` and ``writeNow(_:)``.
    package func stopWaiting() {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// Whether TLS holds bytes already read from the socket (a poll of the socket would not show them).
    package var hasPending: Bool { SSL_pending(ssl) > 0 }

    /// Reads what has come, without waiting.
    package func readNow(capacity: Int = 16 << 10) throws(TLSFailure) -> Arrival {
        var buffer = [UInt8](repeating: 0, count: capacity)
        var count = 0
        let ok = buffer.withUnsafeMutableBytes { SSL_read_ex(ssl, $0.baseAddress, $0.count, &count) }
        if ok == 1 { return .bytes(Array(buffer.prefix(count))) }
        switch SSL_get_error(ssl, 0) {
        case SSL_ERROR_WANT_READ: return .wait(forWrite: false)
        case SSL_ERROR_WANT_WRITE: return .wait(forWrite: true)
        case SSL_ERROR_ZERO_RETURN: return .end
        case SSL_ERROR_SYSCALL where errno == 0 || errno == ECONNRESET: return .end
        default: throw TLSFailure.openSSL("reading from the device")
        }
    }

    /// Writes all of `bytes` or nothing (TLS takes a whole record or none); false when the socket
    /// is full, to be called again with the same bytes once it is writable.
    package func writeNow(_ bytes: [UInt8]) throws(TLSFailure) -> Bool {
        var written = 0
        let ok = bytes.withUnsafeBytes { SSL_write_ex(ssl, $0.baseAddress, $0.count, &written) }
        if ok == 1 { return true }
        switch SSL_get_error(ssl, 0) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return false
        default: throw TLSFailure.openSSL("writing to the device")
        }
    }

    /// Ends TLS and closes the socket.
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        _ = SSL_shutdown(ssl)
        Glibc.close(fd)
    }
}
