// The sealing VFS and the sealed payload files (HistorySeal.h). The VFS wraps the default one and
// knows three kinds of file:
//   - a database (main or attached): SQLite reads and writes it in whole pages, but for the
//     header's first bytes, which are read out of the opened first page;
//   - its write-ahead log: a 32-byte header, then frames of a 24-byte header and a page. Only the
//     pages are sealed; the headers (page numbers, salts, checksums) stay as SQLite wrote them;
//   - a rollback, statement or super journal: its pages are sealed, the 4-byte page numbers and
//     checksums around them, and its 512-byte headers, are not.
// Temporary files SQLite names itself (sorts that spill, temporary tables; the history keeps
// temp_store=MEMORY) pass through unchanged: they are unlinked at open and live outside the
// history's directories.
#include "HistorySeal.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/gcm.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define PAGE XPBSEAL_PAGE
#define DATA (XPBSEAL_PAGE - XPBSEAL_RESERVE)
#define NONCE GCM_IV_SIZE
#define TAG GCM_DIGEST_SIZE
#define WAL_HEADER 32
#define FRAME_HEADER 24
#define FRAME (FRAME_HEADER + PAGE)

_Static_assert(NONCE + TAG == XPBSEAL_RESERVE, "a page reserves its nonce and its tag");

static int random_bytes(uint8_t *out, size_t count) {
    while (count > 0) {
        ssize_t got = getrandom(out, count, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        out += got;
        count -= (size_t)got;
    }
    return 0;
}

int xpbseal_random(uint8_t *out, size_t count) { return random_bytes(out, count); }

void xpbseal_sha256(const void *bytes, size_t count, uint8_t digest[32]) {
    struct sha256_ctx context;
    sha256_init(&context);
    if (count > 0) sha256_update(&context, count, bytes);
    sha256_digest(&context, SHA256_DIGEST_SIZE, digest);
}

// A page: DATA bytes sealed into `out`, then the nonce and the tag. `context` holds the key.
static int seal_page(struct gcm_aes256_ctx *context, const uint8_t *page, uint8_t *out) {
    uint8_t *nonce = out + DATA;
    if (random_bytes(nonce, NONCE) != 0) return -1;
    gcm_aes256_set_iv(context, NONCE, nonce);
    gcm_aes256_encrypt(context, DATA, out, page);
    gcm_aes256_digest(context, TAG, out + DATA + NONCE);
    return 0;
}

// Opens a sealed page in place; its reserved bytes become zeros, as SQLite left them. -1 (and a
// page of zeros) when the tag does not match.
static int open_page(struct gcm_aes256_ctx *context, uint8_t *page) {
    uint8_t tag[TAG];
    gcm_aes256_set_iv(context, NONCE, page + DATA);
    gcm_aes256_decrypt(context, DATA, page, page);
    gcm_aes256_digest(context, TAG, tag);
    int matches = memeql_sec(tag, page + DATA + NONCE, TAG);
    memset(page + DATA, 0, XPBSEAL_RESERVE);
    if (!matches) {
        memset(page, 0, PAGE);
        return -1;
    }
    return 0;
}

static int is_zero(const uint8_t *bytes, size_t count) {
    for (size_t i = 0; i < count; i++) if (bytes[i]) return 0;
    return 1;
}

enum kind { PASS = 0, DATABASE = 1, WAL = 2, JOURNAL = 3 };

typedef struct SealedFile {
    sqlite3_file base;
    enum kind kind;
    uint8_t key[XPBSEAL_KEY];
    // The key set once (AES's schedule, GHASH's table), for every page of the file.
    struct gcm_aes256_ctx context;
    uint8_t scratch[PAGE];
    sqlite3_file *real;
} SealedFile;

static sqlite3_vfs sealed_vfs;
static sqlite3_vfs *lower;

#define REAL(f) (((SealedFile *)(f))->real)

static int x_close(sqlite3_file *file) {
    SealedFile *sealed = (SealedFile *)file;
    int rc = sealed->real->pMethods ? sealed->real->pMethods->xClose(sealed->real) : SQLITE_OK;
    memset(sealed->key, 0, sizeof sealed->key);
    memset(&sealed->context, 0, sizeof sealed->context);
    memset(sealed->scratch, 0, sizeof sealed->scratch);
    return rc;
}

// Reads one sealed page at `offset` into `out`: zeros past the end of the file. A page that does
// not open is damage (SQLITE_IOERR_DATA), except where SQLite checks what it reads itself
// (`lenient`: a log's frames as it recovers them, a journal's records as it plays them back): a
// page torn by a crash there becomes zeros, whose checksum fails, so that SQLite ends the log or
// the journal at it as it would without sealing.
static int read_page(SealedFile *sealed, uint8_t *out, sqlite3_int64 offset, int lenient) {
    int rc = sealed->real->pMethods->xRead(sealed->real, out, PAGE, offset);
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
    if (is_zero(out, PAGE)) return rc;
    if (open_page(&sealed->context, out) != 0) return lenient ? rc : SQLITE_IOERR_DATA;
    return rc;
}

static int x_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    SealedFile *sealed = (SealedFile *)file;
    sqlite3_file *real = sealed->real;
    uint8_t *out = buffer;
    switch (sealed->kind) {
    case DATABASE: {
        if (offset % PAGE == 0 && amount % PAGE == 0) {
            int result = SQLITE_OK;
            for (int done = 0; done < amount; done += PAGE) {
                int rc = read_page(sealed, out + done, offset + done, 0);
                if (rc == SQLITE_IOERR_SHORT_READ) result = rc;
                else if (rc != SQLITE_OK) return rc;
            }
            return result;
        }
        // The header's first bytes, or any other part of a page: the page opened, then the part.
        int result = SQLITE_OK;
        while (amount > 0) {
            sqlite3_int64 start = offset - offset % PAGE;
            int rc = read_page(sealed, sealed->scratch, start, 0);
            if (rc == SQLITE_IOERR_SHORT_READ) result = rc;
            else if (rc != SQLITE_OK) return rc;
            int within = (int)(offset - start);
            int count = PAGE - within < amount ? PAGE - within : amount;
            memcpy(out, sealed->scratch + within, (size_t)count);
            out += count;
            offset += count;
            amount -= count;
        }
        memset(sealed->scratch, 0, PAGE);
        return result;
    }
    case WAL:
        if (amount == PAGE && offset >= WAL_HEADER + FRAME_HEADER && (offset - WAL_HEADER - FRAME_HEADER) % FRAME == 0)
            return read_page(sealed, out, offset, 0);
        if (amount == FRAME && offset >= WAL_HEADER && (offset - WAL_HEADER) % FRAME == 0) {
            int rc = real->pMethods->xRead(real, out, FRAME_HEADER, offset);
            if (rc != SQLITE_OK) {
                if (rc == SQLITE_IOERR_SHORT_READ) memset(out, 0, FRAME);
                return rc;
            }
            return read_page(sealed, out + FRAME_HEADER, offset + FRAME_HEADER, 1);
        }
        if (amount <= WAL_HEADER) return real->pMethods->xRead(real, buffer, amount, offset);
        return SQLITE_IOERR_READ;
    case JOURNAL:
        if (amount == PAGE) return read_page(sealed, out, offset, 1);
        if (amount < PAGE) return real->pMethods->xRead(real, buffer, amount, offset);
        return SQLITE_IOERR_READ;
    case PASS:
        break;
    }
    return real->pMethods->xRead(real, buffer, amount, offset);
}

static int write_page(SealedFile *sealed, const uint8_t *page, sqlite3_int64 offset) {
    if (seal_page(&sealed->context, page, sealed->scratch) != 0) return SQLITE_IOERR_WRITE;
    int rc = sealed->real->pMethods->xWrite(sealed->real, sealed->scratch, PAGE, offset);
    memset(sealed->scratch, 0, PAGE);
    return rc;
}

static int x_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    SealedFile *sealed = (SealedFile *)file;
    sqlite3_file *real = sealed->real;
    const uint8_t *in = buffer;
    switch (sealed->kind) {
    case DATABASE:
        // Whole pages only: anything else would go to disk unsealed.
        if (offset % PAGE != 0 || amount % PAGE != 0) return SQLITE_IOERR_WRITE;
        for (int done = 0; done < amount; done += PAGE) {
            int rc = write_page(sealed, in + done, offset + done);
            if (rc != SQLITE_OK) return rc;
        }
        return SQLITE_OK;
    case WAL:
        if (amount == PAGE && offset >= WAL_HEADER + FRAME_HEADER && (offset - WAL_HEADER - FRAME_HEADER) % FRAME == 0)
            return write_page(sealed, in, offset);
        if (amount <= WAL_HEADER) return real->pMethods->xWrite(real, buffer, amount, offset);
        return SQLITE_IOERR_WRITE;
    case JOURNAL:
        if (amount == PAGE) return write_page(sealed, in, offset);
        if (amount < PAGE) return real->pMethods->xWrite(real, buffer, amount, offset);
        return SQLITE_IOERR_WRITE;
    case PASS:
        break;
    }
    return real->pMethods->xWrite(real, buffer, amount, offset);
}

static int x_truncate(sqlite3_file *file, sqlite3_int64 size) { return REAL(file)->pMethods->xTruncate(REAL(file), size); }
static int x_sync(sqlite3_file *file, int flags) { return REAL(file)->pMethods->xSync(REAL(file), flags); }
static int x_file_size(sqlite3_file *file, sqlite3_int64 *size) { return REAL(file)->pMethods->xFileSize(REAL(file), size); }
static int x_lock(sqlite3_file *file, int lock) { return REAL(file)->pMethods->xLock(REAL(file), lock); }
static int x_unlock(sqlite3_file *file, int lock) { return REAL(file)->pMethods->xUnlock(REAL(file), lock); }
static int x_check_reserved_lock(sqlite3_file *file, int *out) { return REAL(file)->pMethods->xCheckReservedLock(REAL(file), out); }

static int x_file_control(sqlite3_file *file, int op, void *arg) {
    if (op == SQLITE_FCNTL_MMAP_SIZE) {
        // Pages are opened on read: a mapping would hand SQLite sealed bytes.
        *(sqlite3_int64 *)arg = 0;
        return SQLITE_OK;
    }
    int rc = REAL(file)->pMethods->xFileControl(REAL(file), op, arg);
    if (rc == SQLITE_OK && op == SQLITE_FCNTL_VFSNAME) {
        char *name = sqlite3_mprintf("%s/%z", XPBSEAL_VFS, *(char **)arg);
        *(char **)arg = name;
    }
    return rc;
}

// 512: a journal's header is then never a page's size, so a page-sized write is always a page.
static int x_sector_size(sqlite3_file *file) {
    SealedFile *sealed = (SealedFile *)file;
    if (sealed->kind == PASS) return REAL(file)->pMethods->xSectorSize(REAL(file));
    return 512;
}

static int x_device_characteristics(sqlite3_file *file) {
    // Power-safe overwrite keeps the log's frames whole (no padding frames, no split writes).
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file)) | SQLITE_IOCAP_POWERSAFE_OVERWRITE;
}

static int x_shm_map(sqlite3_file *file, int page, int size, int extend, void volatile **out) {
    return REAL(file)->pMethods->xShmMap(REAL(file), page, size, extend, out);
}
static int x_shm_lock(sqlite3_file *file, int offset, int count, int flags) {
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, count, flags);
}
static void x_shm_barrier(sqlite3_file *file) { REAL(file)->pMethods->xShmBarrier(REAL(file)); }
static int x_shm_unmap(sqlite3_file *file, int delete) { return REAL(file)->pMethods->xShmUnmap(REAL(file), delete); }

static const sqlite3_io_methods sealed_methods = {
    2, x_close, x_read, x_write, x_truncate, x_sync, x_file_size, x_lock, x_unlock,
    x_check_reserved_lock, x_file_control, x_sector_size, x_device_characteristics,
    x_shm_map, x_shm_lock, x_shm_barrier, x_shm_unmap, 0, 0,
};

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int key_from_hex(const char *hex, uint8_t *key) {
    if (!hex || strlen(hex) != 2 * XPBSEAL_KEY) return -1;
    for (int i = 0; i < XPBSEAL_KEY; i++) {
        int high = hex_value(hex[2 * i]), low = hex_value(hex[2 * i + 1]);
        if (high < 0 || low < 0) return -1;
        key[i] = (uint8_t)(high << 4 | low);
    }
    return 0;
}

static int x_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags, int *out_flags) {
    (void)vfs;
    SealedFile *sealed = (SealedFile *)file;
    memset(sealed, 0, sizeof *sealed);
    sealed->real = (sqlite3_file *)&sealed[1];
    if (name && (flags & SQLITE_OPEN_MAIN_DB)) {
        // The key is the database's own: a database opened here without one is refused, never
        // written plain.
        if (key_from_hex(sqlite3_uri_parameter(name, "xpbkey"), sealed->key) != 0) return SQLITE_CANTOPEN;
        sealed->kind = DATABASE;
    } else if (name && (flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_SUPER_JOURNAL))) {
        sqlite3_file *database = sqlite3_database_file_object(name);
        if (!database || database->pMethods != &sealed_methods || ((SealedFile *)database)->kind != DATABASE) return SQLITE_CANTOPEN;
        memcpy(sealed->key, ((SealedFile *)database)->key, XPBSEAL_KEY);
        sealed->kind = (flags & SQLITE_OPEN_WAL) ? WAL : JOURNAL;
    } else if (flags & (SQLITE_OPEN_SUBJOURNAL | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TRANSIENT_DB)) {
        sealed->kind = PASS;
    } else {
        return SQLITE_CANTOPEN;
    }
    if (sealed->kind != PASS) gcm_aes256_set_key(&sealed->context, sealed->key);
    int rc = lower->xOpen(lower, name, sealed->real, flags, out_flags);
    if (sealed->real->pMethods) sealed->base.pMethods = &sealed_methods;
    return rc;
}

static int x_delete(sqlite3_vfs *vfs, const char *name, int sync) { (void)vfs; return lower->xDelete(lower, name, sync); }
static int x_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) { (void)vfs; return lower->xAccess(lower, name, flags, out); }
static int x_full_pathname(sqlite3_vfs *vfs, const char *name, int count, char *out) { (void)vfs; return lower->xFullPathname(lower, name, count, out); }
static void *x_dl_open(sqlite3_vfs *vfs, const char *name) { (void)vfs; return lower->xDlOpen(lower, name); }
static void x_dl_error(sqlite3_vfs *vfs, int count, char *out) { (void)vfs; lower->xDlError(lower, count, out); }
static void (*x_dl_sym(sqlite3_vfs *vfs, void *handle, const char *name))(void) { (void)vfs; return lower->xDlSym(lower, handle, name); }
static void x_dl_close(sqlite3_vfs *vfs, void *handle) { (void)vfs; lower->xDlClose(lower, handle); }
static int x_randomness(sqlite3_vfs *vfs, int count, char *out) { (void)vfs; return lower->xRandomness(lower, count, out); }
static int x_sleep(sqlite3_vfs *vfs, int micro) { (void)vfs; return lower->xSleep(lower, micro); }
static int x_current_time(sqlite3_vfs *vfs, double *out) { (void)vfs; return lower->xCurrentTime(lower, out); }
static int x_last_error(sqlite3_vfs *vfs, int count, char *out) { (void)vfs; return lower->xGetLastError(lower, count, out); }
static int x_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out) { (void)vfs; return lower->xCurrentTimeInt64(lower, out); }

static int registered = SQLITE_ERROR;

static void register_once(void) {
    lower = sqlite3_vfs_find(0);
    if (!lower) return;
    sealed_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(SealedFile) + lower->szOsFile,
        .mxPathname = lower->mxPathname,
        .zName = XPBSEAL_VFS,
        .xOpen = x_open,
        .xDelete = x_delete,
        .xAccess = x_access,
        .xFullPathname = x_full_pathname,
        .xDlOpen = x_dl_open,
        .xDlError = x_dl_error,
        .xDlSym = x_dl_sym,
        .xDlClose = x_dl_close,
        .xRandomness = x_randomness,
        .xSleep = x_sleep,
        .xCurrentTime = x_current_time,
        .xGetLastError = x_last_error,
        .xCurrentTimeInt64 = x_current_time_int64,
    };
    registered = sqlite3_vfs_register(&sealed_vfs, 0);
}

int xpbseal_register(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_once);
    return registered;
}

static int read_at(int fd, uint8_t *out, size_t count, off_t offset) {
    size_t done = 0;
    while (done < count) {
        ssize_t got = pread(fd, out + done, count - done, offset + (off_t)done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) break;
        done += (size_t)got;
    }
    return (int)done;
}

int xpbseal_probe(const char *path, const uint8_t key[XPBSEAL_KEY]) {
    static const char plain[16] = "SQLite format 3";
    uint8_t page[PAGE];
    int result = XPBSEAL_UNREADABLE;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? XPBSEAL_EMPTY : XPBSEAL_UNREADABLE;
    int got = read_at(fd, page, PAGE, 0);
    close(fd);
    if (got < 0) return XPBSEAL_UNREADABLE;
    if (got >= 16 && memcmp(page, plain, 16) == 0) return XPBSEAL_PLAIN;
    struct gcm_aes256_ctx context;
    gcm_aes256_set_key(&context, key);
    if (got == PAGE) {
        result = open_page(&context, page) == 0 && memcmp(page, plain, 16) == 0 ? XPBSEAL_OPENS : XPBSEAL_WRONG_KEY;
    } else if (got == 0) {
        // No page in the file yet: the log's first frame, if any, tells.
        char *log = malloc(strlen(path) + 5);
        if (!log) return XPBSEAL_UNREADABLE;
        strcpy(log, path);
        strcat(log, "-wal");
        fd = open(log, O_RDONLY | O_CLOEXEC);
        free(log);
        if (fd < 0) return errno == ENOENT ? XPBSEAL_EMPTY : XPBSEAL_UNREADABLE;
        got = read_at(fd, page, PAGE, WAL_HEADER + FRAME_HEADER);
        close(fd);
        if (got < 0) result = XPBSEAL_UNREADABLE;
        else if (got < PAGE) result = XPBSEAL_EMPTY;
        else result = open_page(&context, page) == 0 ? XPBSEAL_OPENS : XPBSEAL_WRONG_KEY;
    } else {
        result = XPBSEAL_WRONG_KEY;
    }
    memset(page, 0, sizeof page);
    memset(&context, 0, sizeof context);
    return result;
}

static const char file_magic[8] = {'X', 'P', 'B', 'S', 'E', 'A', 'L', '1'};

uint64_t xpbseal_sealed_size(uint64_t count) {
    uint64_t chunks = (count + XPBSEAL_CHUNK - 1) / XPBSEAL_CHUNK;
    return XPBSEAL_FILE_HEADER + count + chunks * TAG;
}

static void chunk_nonce(const uint8_t *header, uint64_t chunk, uint8_t *nonce) {
    memcpy(nonce, header + 8, 8);
    nonce[8] = (uint8_t)(chunk >> 24);
    nonce[9] = (uint8_t)(chunk >> 16);
    nonce[10] = (uint8_t)(chunk >> 8);
    nonce[11] = (uint8_t)chunk;
}

int xpbseal_seal(const uint8_t key[XPBSEAL_KEY], const void *plain, uint64_t count, void *out) {
    uint8_t *header = out;
    if (count / XPBSEAL_CHUNK >= UINT32_MAX) return -1;
    memcpy(header, file_magic, 8);
    if (random_bytes(header + 8, 8) != 0) return -1;
    for (int i = 0; i < 8; i++) header[16 + i] = (uint8_t)(count >> (8 * i));
    const uint8_t *in = plain;
    uint8_t *next = header + XPBSEAL_FILE_HEADER;
    struct gcm_aes256_ctx context;
    gcm_aes256_set_key(&context, key);
    for (uint64_t chunk = 0, done = 0; done < count; chunk++) {
        uint64_t size = count - done < XPBSEAL_CHUNK ? count - done : XPBSEAL_CHUNK;
        uint8_t nonce[NONCE];
        chunk_nonce(header, chunk, nonce);
        gcm_aes256_set_iv(&context, NONCE, nonce);
        gcm_aes256_update(&context, XPBSEAL_FILE_HEADER, header);
        gcm_aes256_encrypt(&context, size, next, in + done);
        gcm_aes256_digest(&context, TAG, next + size);
        next += size + TAG;
        done += size;
    }
    memset(&context, 0, sizeof context);
    return 0;
}

int xpbseal_is_sealed(const void *bytes, uint64_t size) {
    return size >= XPBSEAL_FILE_HEADER && memcmp(bytes, file_magic, 8) == 0;
}

int64_t xpbseal_plain_length(const void *sealed, uint64_t size) {
    const uint8_t *header = sealed;
    if (!xpbseal_is_sealed(sealed, size)) return -1;
    uint64_t count = 0;
    for (int i = 0; i < 8; i++) count |= (uint64_t)header[16 + i] << (8 * i);
    if (count > INT64_MAX / 2 || xpbseal_sealed_size(count) != size) return -1;
    return (int64_t)count;
}

int64_t xpbseal_open(const uint8_t key[XPBSEAL_KEY], const void *sealed, uint64_t size,
                     uint64_t offset, uint64_t count, void *out) {
    int64_t length = xpbseal_plain_length(sealed, size);
    if (length < 0) return -1;
    if (offset >= (uint64_t)length) return 0;
    if (count > (uint64_t)length - offset) count = (uint64_t)length - offset;
    const uint8_t *header = sealed;
    uint8_t *chunk_plain = malloc(XPBSEAL_CHUNK);
    if (!chunk_plain) return -1;
    struct gcm_aes256_ctx context;
    gcm_aes256_set_key(&context, key);
    uint8_t *to = out;
    uint64_t given = 0;
    int64_t result = 0;
    for (uint64_t chunk = offset / XPBSEAL_CHUNK; given < count; chunk++) {
        uint64_t start = chunk * XPBSEAL_CHUNK;
        uint64_t plain_size = (uint64_t)length - start < XPBSEAL_CHUNK ? (uint64_t)length - start : XPBSEAL_CHUNK;
        const uint8_t *at = header + XPBSEAL_FILE_HEADER + chunk * (XPBSEAL_CHUNK + TAG);
        uint8_t nonce[NONCE], tag[TAG];
        chunk_nonce(header, chunk, nonce);
        gcm_aes256_set_iv(&context, NONCE, nonce);
        gcm_aes256_update(&context, XPBSEAL_FILE_HEADER, header);
        gcm_aes256_decrypt(&context, plain_size, chunk_plain, at);
        gcm_aes256_digest(&context, TAG, tag);
        if (!memeql_sec(tag, at + plain_size, TAG)) {
            result = -1;
            break;
        }
        uint64_t within = offset + given - start;
        uint64_t take = plain_size - within < count - given ? plain_size - within : count - given;
        memcpy(to + given, chunk_plain + within, take);
        given += take;
        result = (int64_t)given;
    }
    memset(chunk_plain, 0, XPBSEAL_CHUNK);
    memset(&context, 0, sizeof context);
    free(chunk_plain);
    if (result < 0) memset(out, 0, count);
    return result;
}
