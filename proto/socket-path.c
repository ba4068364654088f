/* Default socket path (see socket-path.h). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "socket-path.h"

void proto_default_socket_path(char *buf, size_t len)
{
        const char *env = getenv("NPU_SOCKET"), *xdg = getenv("XDG_RUNTIME_DIR");

        if (env && *env)
                snprintf(buf, len, "%s", env);
        else if (geteuid() == 0)
                snprintf(buf, len, "/run/npud/npud.sock");
        else if (xdg && *xdg)
                snprintf(buf, len, "%s/npud.sock", xdg);
        else
                snprintf(buf, len, "/tmp/npud-%u/npud.sock", (unsigned)geteuid());
}
