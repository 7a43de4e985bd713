#ifndef XPB_HISTORY_SEAL_H
#define XPB_HISTORY_SEAL_H
// The history sealed at rest: an SQLite VFS that encrypts every page of the database, of its
// write-ahead log and of its rollback journals, and the sealed payload files. AES-256-GCM from
// Debian's nettle-dev: AES-NI and PCLMULQDQ where the CPU has them (2 µs a page here, where
// nettle's ChaCha20-Poly1305 took 10 µs), 37 KB in the static binary (libcrypto's AEADs go
// through OpenSSL 3's provider machinery, 2.7 MiB; its low-level GCM is not in the shared
// library). Nonces are random, 96 bits: at 2^28 page writes under one key, a repeat has odds of
// 2^-41. Each page's last 28 bytes, reserved through
// SQLITE_FCNTL_RESERVE_BYTES, hold its nonce (12 random bytes) and its tag (16), so that a page
// is a page on disk as in memory and every offset SQLite computes stays true.

#include <stddef.h>
#include <stdint.h>

/// The VFS's name, for a URI's `vfs=`; the key goes as `xpbkey=` (64 hex digits).
#define XPBSEAL_VFS "xpb-sealed"
/// The page size of a sealed database (the VFS refuses any other).
#define XPBSEAL_PAGE 4096
/// The bytes each page reserves: nonce and tag.
#define XPBSEAL_RESERVE 28
#define XPBSEAL_KEY 32

/// Registers the VFS (once; later calls do nothing). 0 (SQLITE_OK) on success.
int xpbseal_register(void);

/// What a database file holds, as `xpbseal_probe` finds it.
enum {
    /// No page yet (a new file, or none).
    XPBSEAL_EMPTY = 0,
    /// Its first page opens with the key.
    XPBSEAL_OPENS = 1,
    /// A plain SQLite database.
    XPBSEAL_PLAIN = 2,
    /// Sealed with another key, or damaged where the key is checked.
    XPBSEAL_WRONG_KEY = 3,
    /// It could not be read.
    XPBSEAL_UNREADABLE = -1,
};

/// Looks at the database at `path` (and its `-wal` when the file has no page yet) with `key`.
int xpbseal_probe(const char *path, const uint8_t key[XPBSEAL_KEY]);

/// Payload files: "XPBSEAL1", 8 random bytes, the plain length (8, little-endian), then the
/// contents in chunks of 64 KiB, each followed by its tag (the header is each chunk's associated
/// data; the chunk's number is in its nonce), so that a file's first bytes are read without the
/// rest.
#define XPBSEAL_FILE_HEADER 24
#define XPBSEAL_CHUNK 65536

/// The sealed size of `count` plain bytes.
uint64_t xpbseal_sealed_size(uint64_t count);

/// Seals `count` bytes into `out` (xpbseal_sealed_size(count) bytes). 0 on success.
int xpbseal_seal(const uint8_t key[XPBSEAL_KEY], const void *plain, uint64_t count, void *out);

/// The plain length a sealed file of `size` bytes claims; -1 when it is not one or is cut short.
int64_t xpbseal_plain_length(const void *sealed, uint64_t size);

/// Opens plain bytes [offset, offset + count) of a sealed file into `out`. Returns the bytes
/// given (fewer at the end), -1 when a chunk does not open (another key, or changed).
int64_t xpbseal_open(const uint8_t key[XPBSEAL_KEY], const void *sealed, uint64_t size,
                     uint64_t offset, uint64_t count, void *out);

/// Fills `out` with `count` random bytes from the kernel. 0 on success.
int xpbseal_random(uint8_t *out, size_t count);

/// Whether `bytes` start as a sealed payload file does.
int xpbseal_is_sealed(const void *bytes, uint64_t size);

/// The SHA-256 of `count` bytes at `bytes` into `digest`: the name of a kept payload (its file,
/// identical bytes stored once). nettle's, with the CPU's SHA instructions where present (as
/// fast as libcrypto's: 64 MiB in 43 ms here, against 38). From nettle, not libcrypto, so that
/// the static xpb links no libcrypto, whose constructor asks the CPU for its features at every
/// start of every command (CPUID traps to the hypervisor in a VM: 5.6 µs each here).
void xpbseal_sha256(const void *bytes, size_t count, uint8_t digest[32]);

#endif
