#ifndef XPB_CCRYPTO_H
#define XPB_CCRYPTO_H

// SHA-256 from Debian's libssl-dev (libcrypto): the daemon names large kept payloads by their
// digest (content-addressed files, identical bytes stored once). OpenSSL's one-shot call uses the
// CPU's SHA instructions where present; a Swift implementation would be several times slower on
// 50 MB images.
#include <openssl/sha.h>

#endif
