#ifndef XPB_CDBUS_H
#define XPB_CDBUS_H
// libdbus-1, the reference implementation of D-Bus (Debian's libdbus-1-dev ships libdbus-1.a).
#include <dbus/dbus.h>

// The process of a connection on the bus, as the bus tells it
// (org.freedesktop.DBus.GetConnectionUnixProcessID); -1 when it does not within `timeout_ms`.
// One call, since libdbus's DBusError and its variadic argument readers do not cross into Swift.
static inline long cdbus_connection_pid(DBusConnection *connection, const char *name, int timeout_ms) {
    DBusMessage *call = dbus_message_new_method_call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                     "GetConnectionUnixProcessID");
    if (!call) return -1;
    if (!dbus_message_append_args(call, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID)) {
        dbus_message_unref(call);
        return -1;
    }
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, timeout_ms, &error);
    dbus_message_unref(call);
    if (!reply) {
        dbus_error_free(&error);
        return -1;
    }
    dbus_uint32_t pid = 0;
    long result = dbus_message_get_args(reply, &error, DBUS_TYPE_UINT32, &pid, DBUS_TYPE_INVALID) ? (long)pid : -1;
    dbus_error_free(&error);
    dbus_message_unref(reply);
    return result;
}
#endif
