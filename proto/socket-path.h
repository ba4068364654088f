/* Socket paths. npud listens by default on $NPU_SOCKET if set, /run/npud/npud.sock (the
 * system socket) as root, $XDG_RUNTIME_DIR/npud.sock or /tmp/npud-$UID/npud.sock for other
 * users. Clients of any user connect by default to $NPU_SOCKET if set, else the system socket
 * when it exists, else their per-user socket (README, "Configuration"). */
#ifndef NPU_PROTO_SOCKET_PATH_H
#define NPU_PROTO_SOCKET_PATH_H

#include <stddef.h>

#define PROTO_SYSTEM_SOCKET "/run/npud/npud.sock"

/* Where npud listens when given no --socket nor config key. */
void proto_default_socket_path(char *buf, size_t len);
/* Where a client connects when given no path. */
void proto_client_socket_path(char *buf, size_t len);
/* The same with the system socket's path given (tests; NULL: none). */
void proto_client_socket_path_with(char *buf, size_t len, const char *system_socket);

#endif
