/* Small socket helpers shared by the daemon's listeners. */
#ifndef NPUD_UTIL_SOCK_H
#define NPUD_UTIL_SOCK_H

#include <sys/un.h>

/* Is something accepting connections on the Unix socket addr? (A socket file nobody
 * listens on is stale and may be replaced.) */
int unix_socket_alive(const struct sockaddr_un *addr);

#endif
