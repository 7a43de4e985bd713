#ifndef XPB_CSQLITE_H
#define XPB_CSQLITE_H

// SQLite's C API from Debian's libsqlite3-dev, for the daemon's history store.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import as a
// constant: binding a blob or text with it makes SQLite copy the bytes before the call returns.
static inline int csqlite_bind_blob_copy(sqlite3_stmt *statement, int index, const void *bytes, int count) {
    return sqlite3_bind_blob(statement, index, bytes, count, SQLITE_TRANSIENT);
}

static inline int csqlite_bind_text_copy(sqlite3_stmt *statement, int index, const char *text) {
    return sqlite3_bind_text(statement, index, text, -1, SQLITE_TRANSIENT);
}

#endif
