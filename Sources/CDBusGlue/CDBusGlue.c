// libdbus-1.a calls sd_listen_fds and sd_is_socket from its socket-activation code (a bus daemon
// started by systemd); a client never runs it, and Debian has no static libsystemd. These say
// "no sockets were passed", which is what a client started by anything but systemd's socket
// activation gets from the real ones. Weak: where the real libsystemd is linked, it wins.
#include "CDBusGlue.h"

__attribute__((weak)) int sd_listen_fds(int unset_environment) {
    (void)unset_environment;
    return 0;
}

__attribute__((weak)) int sd_is_socket(int fd, int family, int type, int listening) {
    (void)fd; (void)family; (void)type; (void)listening;
    return 0;
}

int cdbusglue_linked(void) { return 1; }
