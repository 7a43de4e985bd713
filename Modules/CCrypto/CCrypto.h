#ifndef XPB_CCRYPTO_H
#define XPB_CCRYPTO_H

// SHA-256 from Debian's libssl-dev (libcrypto): the daemon names large kept payloads by their
// digest (content-addressed files, identical bytes stored once). OpenSSL's block function uses
// the CPU's SHA instructions where present; a Swift implementation would be several times
// slower on 50 MB images.
//
// The low-level SHA256_Init/Update/Final, not the one-shot SHA256(): in OpenSSL 3 the one-shot
// goes through EVP_Q_digest and so draws the whole provider machinery (2.7 MiB) into a static
// binary, while these live in one object with the assembly block function. OpenSSL 3 marks
// them deprecated (in favour of EVP); the warning is silenced here, for this one use.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>

/// The SHA-256 digest of `count` bytes at `bytes` into `digest` (32 bytes); 0 on failure.
static inline int ccrypto_sha256(const void *bytes, size_t count, unsigned char digest[32]) {
    SHA256_CTX context;
    if (!SHA256_Init(&context)) return 0;
    if (count > 0 && !SHA256_Update(&context, bytes, count)) return 0;
    return SHA256_Final(digest, &context);
}

#endif
