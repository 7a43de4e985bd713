import CTLS
import FoundationEssentials
import Glibc
import KDEConnect

/// What a KDE Connect device is known by: an RSA key and a self-signed certificate whose common
/// name is its device id, made as kdeconnect-kde makes its own (`core/kdeconnectconfig.cpp`:
/// RSA 2048, O=KDE, OU=Kde connect, serial 10, ten years). Kept in a directory as
/// `certificate.pem` and `privateKey.pem`, the key readable by its owner only.
package final class DeviceCertificate: @unchecked Sendable {
    // Immutable once made; OpenSSL's objects are only read after that.
    let certificate: OpaquePointer
    let key: OpaquePointer
    /// The device id: the certificate's common name.
    package let deviceId: String
    /// The certificate in DER, as it is pinned.
    package let der: [UInt8]

    package static let certificateFile = "certificate.pem"
    package static let keyFile = "privateKey.pem"

    private init(certificate: OpaquePointer, key: OpaquePointer) throws(TLSFailure) {
        self.certificate = certificate
        self.key = key
        guard let name = commonName(of: certificate), DeviceIdentity.isValid(deviceId: name) else {
            X509_free(certificate)
            EVP_PKEY_free(key)
            throw TLSFailure("the certificate's common name is not a KDE Connect device id")
        }
        deviceId = name
        der = derBytes(of: certificate)
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }

    /// A new key and certificate for `deviceId`.
    package static func make(deviceId: String) throws(TLSFailure) -> DeviceCertificate {
        guard let key = ctls_rsa_key(2048) else { throw TLSFailure.openSSL("making an RSA key") }
        guard let certificate = ctls_self_signed(key, deviceId) else {
            EVP_PKEY_free(key)
            throw TLSFailure.openSSL("signing the device's certificate")
        }
        return try DeviceCertificate(certificate: certificate, key: key)
    }

    /// The device's certificate and key from `directory`; made there first (with a new device id,
    /// 32 hexadecimal digits) when the directory has none.
    package static func loadOrMake(in directory: String) throws(TLSFailure) -> DeviceCertificate {
        let certificatePath = directory + "/" + certificateFile
        let keyPath = directory + "/" + keyFile
        if let certificatePEM = read(certificatePath), let keyPEM = read(keyPath) {
            guard let certificate = ctls_read_certificate(certificatePEM) else { throw TLSFailure("\(certificatePath) holds no certificate") }
            guard let key = ctls_read_key(keyPEM) else {
                X509_free(certificate)
                throw TLSFailure("\(keyPath) holds no private key")
            }
            return try DeviceCertificate(certificate: certificate, key: key)
        }
        let made = try make(deviceId: try newDeviceId())
        guard mkdir(directory, 0o700) == 0 || errno == EEXIST else { throw TLSFailure("cannot make \(directory): \(String(cString: strerror(errno)))") }
        try write(made.pem(key: true), to: keyPath)
        try write(made.pem(key: false), to: certificatePath)
        return made
    }

    /// The certificate's PEM (or the key's).
    package func pem(key wantsKey: Bool) throws(TLSFailure) -> String {
        guard let text = wantsKey ? ctls_pem(nil, key) : ctls_pem(certificate, nil) else { throw TLSFailure.openSSL("writing PEM") }
        defer {
            // The key's text is wiped before it is freed.
            if wantsKey { memset(text, 0, strlen(text)) }
            CRYPTO_free(text, #fileID, #line)
        }
        return String(cString: text)
    }

    /// 32 hexadecimal digits from OpenSSL's random source: a device id as KDE Connect 8 makes them.
    static func newDeviceId() throws(TLSFailure) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&bytes, 16) == 1 else { throw TLSFailure.openSSL("drawing a device id") }
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }

    private static func read(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    private static func write(_ text: String, to path: String) throws(TLSFailure) {
        try writeWhole(Array(text.utf8), to: path)
    }

    /// Written whole under a temporary name, mode 600, then renamed into place: the file is
    /// either what it was or all of `bytes` (a key, a certificate, a pinned device's).
    static func writeWhole(_ bytes: [UInt8], to path: String) throws(TLSFailure) {
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw TLSFailure("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw TLSFailure("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}

func commonName(of certificate: OpaquePointer) -> String? {
    var buffer = [CChar](repeating: 0, count: 256)
    let count = ctls_common_name(certificate, &buffer, Int32(buffer.count))
    guard count > 0 else { return nil }
    return String(decoding: buffer.prefix(Int(count)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func derBytes(of certificate: OpaquePointer) -> [UInt8] {
    var bytes: UnsafeMutablePointer<UInt8>?
    let count = ctls_der(certificate, &bytes)
    guard count > 0, let bytes else { return [] }
    defer { CRYPTO_free(bytes, #fileID, #line) }
    return Array(UnsafeBufferPointer(start: bytes, count: Int(count)))
}

/// Why a key, a certificate or a TLS link failed.
package struct TLSFailure: Error, Equatable, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }

    /// A failure of OpenSSL's while `doing`, with its error queue's first entry.
    static func openSSL(_ doing: String) -> TLSFailure {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return TLSFailure("OpenSSL failed \(doing)") }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return TLSFailure("OpenSSL failed \(doing): \(text)")
    }
}
