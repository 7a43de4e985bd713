#ifndef XPB_CDBUS_H
#define XPB_CDBUS_H
// libdbus-1, the reference implementation of D-Bus (Debian's libdbus-1-dev ships libdbus-1.a).
#include <dbus/dbus.h>
#endif
