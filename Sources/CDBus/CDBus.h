#ifndef CDBUS_H
#define CDBUS_H

// Shim over libdbus-1 for Swift.
//
// Why it exists: libdbus defines its type codes as `((int) 'a')`-style macros and a few other values as function-like
// or cast macros, which the Swift importer cannot see. They are re-exported here as `static const` values with the
// `CDBus_` prefix. A `.systemLibrary` target cannot compile `.c` files, so everything here is header-only.
// When it can go: when Swift imports parenthesised cast macros (it does not as of Swift 6.3).

#ifdef __linux__
#include <dbus/dbus.h>

static const int CDBus_TYPE_INVALID = DBUS_TYPE_INVALID;
static const int CDBus_TYPE_BYTE = DBUS_TYPE_BYTE;
static const int CDBus_TYPE_BOOLEAN = DBUS_TYPE_BOOLEAN;
static const int CDBus_TYPE_INT16 = DBUS_TYPE_INT16;
static const int CDBus_TYPE_UINT16 = DBUS_TYPE_UINT16;
static const int CDBus_TYPE_INT32 = DBUS_TYPE_INT32;
static const int CDBus_TYPE_UINT32 = DBUS_TYPE_UINT32;
static const int CDBus_TYPE_INT64 = DBUS_TYPE_INT64;
static const int CDBus_TYPE_UINT64 = DBUS_TYPE_UINT64;
static const int CDBus_TYPE_DOUBLE = DBUS_TYPE_DOUBLE;
static const int CDBus_TYPE_STRING = DBUS_TYPE_STRING;
static const int CDBus_TYPE_OBJECT_PATH = DBUS_TYPE_OBJECT_PATH;
static const int CDBus_TYPE_SIGNATURE = DBUS_TYPE_SIGNATURE;
static const int CDBus_TYPE_UNIX_FD = DBUS_TYPE_UNIX_FD;
static const int CDBus_TYPE_ARRAY = DBUS_TYPE_ARRAY;
static const int CDBus_TYPE_VARIANT = DBUS_TYPE_VARIANT;
static const int CDBus_TYPE_STRUCT = DBUS_TYPE_STRUCT;
static const int CDBus_TYPE_DICT_ENTRY = DBUS_TYPE_DICT_ENTRY;

static const int CDBus_TIMEOUT_INFINITE = DBUS_TIMEOUT_INFINITE;

static const unsigned int CDBus_NAME_FLAG_ALLOW_REPLACEMENT = DBUS_NAME_FLAG_ALLOW_REPLACEMENT;
static const unsigned int CDBus_NAME_FLAG_REPLACE_EXISTING = DBUS_NAME_FLAG_REPLACE_EXISTING;
static const unsigned int CDBus_NAME_FLAG_DO_NOT_QUEUE = DBUS_NAME_FLAG_DO_NOT_QUEUE;

/// Appends one basic value; `value` points at storage of the C type the code names (for strings, a `const char *`).
static inline dbus_bool_t CDBus_iter_append_basic(DBusMessageIter *iter, int type, const void *value) {
    return dbus_message_iter_append_basic(iter, type, value);
}

/// Whether `text` is a valid single complete type or a valid signature (`single` chooses which check).
static inline dbus_bool_t CDBus_signature_is_valid(const char *text, dbus_bool_t single) {
    return single ? dbus_signature_validate_single(text, NULL) : dbus_signature_validate(text, NULL);
}

#endif // __linux__
#endif // CDBUS_H
