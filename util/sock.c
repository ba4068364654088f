#include <sys/socket.h>
#include <unistd.h>

#include "sock.h"

int unix_socket_alive(const struct sockaddr_un *addr)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int alive;

        if (fd < 0)
                return 0;
        alive = connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0;
        close(fd);
        return alive;
}
