/*
 * A hostile session-bus client for xpbd's tests (issue 57): it calls a method many times and
 * never reads a reply.
 *
 *   dbushostile unread COUNT DEST PATH INTERFACE MEMBER [INT32]
 *
 * sends COUNT calls of MEMBER (with one int32 argument when given), writes them all out, prints
 * "sent COUNT" and then sleeps until killed, holding its connection open and reading nothing: the
 * replies pile up in its socket and in the bus.
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 7 || strcmp(argv[1], "unread") != 0) {
        fprintf(stderr, "usage: dbushostile unread COUNT DEST PATH INTERFACE MEMBER [INT32]\n");
        return 2;
    }
    long count = strtol(argv[2], NULL, 10);
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_bus_get_private(DBUS_BUS_SESSION, &error);
    if (!connection) {
        fprintf(stderr, "dbushostile: no session bus: %s\n", error.message);
        return 1;
    }
    dbus_connection_set_exit_on_disconnect(connection, FALSE);
    for (long i = 0; i < count; i++) {
        DBusMessage *call = dbus_message_new_method_call(argv[3], argv[4], argv[5], argv[6]);
        if (!call) return 1;
        if (argc > 7) {
            dbus_int32_t value = (dbus_int32_t)strtol(argv[7], NULL, 10);
            dbus_message_append_args(call, DBUS_TYPE_INT32, &value, DBUS_TYPE_INVALID);
        }
        dbus_connection_send(connection, call, NULL);
        dbus_message_unref(call);
    }
    dbus_connection_flush(connection);
    printf("sent %ld\n", count);
    fflush(stdout);
    for (;;) pause();
}
