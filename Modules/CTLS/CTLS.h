#ifndef XPB_CTLS_H
#define XPB_CTLS_H

// TLS, keys and certificates from Debian's libssl-dev, for KDE Connect's link (self-signed
// certificates whose common name is the device id, pinned once paired). Kept out of the xpb
// binary: statically linked, TLS with X.509 and RSA draws about 4 MB of OpenSSL in, where the
// binary links only libcrypto's SHA-256 block function (see Modules/CCrypto).
//
// Inline helpers stand in for OpenSSL's function-like macros, which Swift cannot call.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/rand.h>
#include <string.h>

static inline int ctls_set_min_tls12(SSL_CTX *context) {
    return (int)SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
}

/// Takes any certificate the peer shows: whether it is the pinned one is checked after the
/// handshake, against the bytes pinned (a self-signed certificate never verifies otherwise).
static int ctls_accept_any(int preverified, X509_STORE_CTX *store) {
    (void)preverified;
    (void)store;
    return 1;
}

/// Asks the peer for its certificate and requires one, whichever role this side has.
static inline void ctls_require_peer_certificate(SSL_CTX *context) {
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, ctls_accept_any);
}

/// The PEM text of a memory BIO: its bytes and their count.
static inline long ctls_bio_bytes(BIO *bio, char **bytes) {
    return BIO_get_mem_data(bio, bytes);
}

/// A new RSA key of `bits` (EVP_RSA_gen is a variadic macro).
static inline EVP_PKEY *ctls_rsa_key(unsigned int bits) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)bits);
}

/// PEM of a certificate or a key, in a buffer the caller frees with OPENSSL_free; NULL on failure.
static inline char *ctls_pem(X509 *certificate, EVP_PKEY *key) {
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio) return NULL;
    int written = certificate ? PEM_write_bio_X509(bio, certificate) : PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL);
    char *bytes = NULL;
    long count = written ? BIO_get_mem_data(bio, &bytes) : 0;
    char *copy = count > 0 ? OPENSSL_malloc((size_t)count + 1) : NULL;
    if (copy) {
        memcpy(copy, bytes, (size_t)count);
        copy[count] = 0;
    }
    BIO_free(bio);
    return copy;
}

/// A self-signed certificate as kdeconnect-kde makes its own: subject O=KDE, OU=Kde connect,
/// CN=`commonName` (the device id), serial 10, valid from a year ago for ten years, signed
/// with SHA-256. NULL on failure.
static inline X509 *ctls_self_signed(EVP_PKEY *key, const char *commonName) {
    X509 *certificate = X509_new();
    if (!certificate) return NULL;
    X509_NAME *name = X509_get_subject_name(certificate);
    int ok = X509_set_version(certificate, 2)
        && ASN1_INTEGER_set(X509_get_serialNumber(certificate), 10)
        && X509_gmtime_adj(X509_getm_notBefore(certificate), -365L * 86400)
        && X509_gmtime_adj(X509_getm_notAfter(certificate), 10L * 365 * 86400)
        && X509_set_pubkey(certificate, key)
        && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"KDE", -1, -1, 0)
        && X509_NAME_add_entry_by_txt(name, "OU", MBSTRING_ASC, (const unsigned char *)"Kde connect", -1, -1, 0)
        && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)commonName, -1, -1, 0)
        && X509_set_issuer_name(certificate, name)
        && X509_sign(certificate, key, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}

/// A certificate or a key read from PEM text; NULL when it is not one.
static inline X509 *ctls_read_certificate(const char *pem) {
    BIO *bio = BIO_new_mem_buf(pem, -1);
    X509 *certificate = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    return certificate;
}

static inline EVP_PKEY *ctls_read_key(const char *pem) {
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    return key;
}

/// A TLS context for one role (`server` nonzero: the TLS server) with this device's certificate
/// and key, TLS 1.2 at least, and the peer's certificate required. NULL on failure.
static inline SSL_CTX *ctls_context(int server, X509 *certificate, EVP_PKEY *key) {
    SSL_CTX *context = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!context) return NULL;
    if (!ctls_set_min_tls12(context) || SSL_CTX_use_certificate(context, certificate) != 1
        || SSL_CTX_use_PrivateKey(context, key) != 1 || SSL_CTX_check_private_key(context) != 1) {
        SSL_CTX_free(context);
        return NULL;
    }
    ctls_require_peer_certificate(context);
    // A write that waited for the socket is tried again from wherever its bytes are now.
    SSL_CTX_set_mode(context, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return context;
}

/// The DER bytes of a certificate, in a buffer the caller frees with OPENSSL_free.
static inline int ctls_der(X509 *certificate, unsigned char **bytes) {
    *bytes = NULL;
    return i2d_X509(certificate, bytes);
}

/// The subject's common name of a certificate into `name` (at most `capacity` bytes with its
/// NUL); its length, or -1 when it has none.
static inline int ctls_common_name(X509 *certificate, char *name, int capacity) {
    return X509_NAME_get_text_by_NID(X509_get_subject_name(certificate), NID_commonName, name, capacity);
}

#endif
