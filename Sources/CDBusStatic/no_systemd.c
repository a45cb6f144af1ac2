#include "CDBusStatic.h"

/* sd_listen_fds(3): the number of sockets passed by the service manager; 0 when none was. */
int hr_gateway_no_sd_listen_fds(int unset_environment) {
    (void)unset_environment;
    return 0;
}

/* sd_is_socket(3): only ever asked about a passed socket, and none is; 0 means "not such a socket". */
int hr_gateway_no_sd_is_socket(int fd, int family, int type, int listening) {
    (void)fd; (void)family; (void)type; (void)listening;
    return 0;
}
