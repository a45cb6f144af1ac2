#ifndef CDBUSSTATIC_H
#define CDBUSSTATIC_H

/* What a statically linked libdbus needs from libsystemd, for the release link only (docs/architecture.md, "Memory").
   libdbus-1.a calls sd_listen_fds and sd_is_socket in one place: a D-Bus *server* listening on a "systemd:" address
   (socket activation). hr-gateway is a D-Bus client and never listens, so these answer "no socket was passed", which
   is what libsystemd itself answers outside socket activation. Sources/hr-gateway/link/libdbus-1.so maps the sd_
   names to these; other builds link the shared libdbus and libsystemd, and these are unused. */

int hr_gateway_no_sd_listen_fds(int unset_environment);
int hr_gateway_no_sd_is_socket(int fd, int family, int type, int listening);

#endif
