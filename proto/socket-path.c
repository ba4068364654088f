/* Default socket paths (see socket-path.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "socket-path.h"

void proto_default_socket_path(char *buf, size_t len)
{
        const char *env = getenv("NPU_SOCKET"), *xdg = getenv("XDG_RUNTIME_DIR");

        if (env && *env)
                snprintf(buf, len, "%s", env);
        else if (geteuid() == 0)
                snprintf(buf, len, "%s", PROTO_SYSTEM_SOCKET);
        else if (xdg && *xdg)
                snprintf(buf, len, "%s/npud.sock", xdg);
        else
                snprintf(buf, len, "/tmp/npud-%u/npud.sock", (unsigned)geteuid());
}

void proto_client_socket_path_with(char *buf, size_t len, const char *system_socket)
{
        const char *env = getenv("NPU_SOCKET");
        struct stat sb;

        /* A path this user may not even look up is tried too: connecting then says
         * "permission denied", which is the truth, instead of naming a per-user socket. */
        if (!(env && *env) && system_socket &&
            (lstat(system_socket, &sb) == 0 || errno == EACCES))
                snprintf(buf, len, "%s", system_socket);
        else
                proto_default_socket_path(buf, len);
}

void proto_client_socket_path(char *buf, size_t len)
{
        proto_client_socket_path_with(buf, len, PROTO_SYSTEM_SOCKET);
}
