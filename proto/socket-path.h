/* Where npud listens by default, shared by the daemon and its clients: $NPU_SOCKET if set,
 * /run/npud/npud.sock for root, $XDG_RUNTIME_DIR/npud.sock or /tmp/npud-$UID/npud.sock for
 * other users. */
#ifndef NPU_PROTO_SOCKET_PATH_H
#define NPU_PROTO_SOCKET_PATH_H

#include <stddef.h>

void proto_default_socket_path(char *buf, size_t len);

#endif
