/* Unix-socket listener (see server.h). */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <libgen.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "util/log.h"
#include "util/sock.h"
#include "npud.h"
#include "server.h"
#include "session.h"

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
        struct npud *d = arg;

        for (int i = 0; i < 16; i++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                struct session *s;

                if (fd < 0) {
                        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                                log_warn("accept: %s", strerror(errno));
                        return;
                }
                /* session_new applies the admission limits (connections, per uid, the
                 * admins' reserve) with the peer's credentials, and closes refused ones */
                session_new(d, fd, &s);
        }
}

static int make_parent_dir(const char *path)
{
        char copy[108];
        struct stat st;

        snprintf(copy, sizeof(copy), "%s", path);
        char *dir = dirname(copy);
        if (stat(dir, &st) == 0)
                return 0;
        return mkdir(dir, geteuid() == 0 ? 0755 : 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

/* Whether the socket file is ours to unlink: not when the service manager passed the socket
 * (socket activation), which owns the file and keeps it across restarts. */
static int listen_owned;

/* The first listening Unix stream socket the service manager passed, or -1. */
static int activated_fd(void)
{
        int n = sd_listen_fds(0);

        for (int i = 0; i < n; i++)
                if (sd_is_socket_unix(SD_LISTEN_FDS_START + i, SOCK_STREAM, 1, NULL, 0) > 0)
                        return SD_LISTEN_FDS_START + i;
        return -1;
}

static int watch_listener(struct npud *d, int fd, char *err, size_t errlen)
{
        d->listen_fd = fd;
        d->listen_event = event_new(d->base, fd, EV_READ | EV_PERSIST, on_accept, d);
        if (!d->listen_event || event_add(d->listen_event, NULL) < 0) {
                snprintf(err, errlen, "cannot watch the listening socket");
                return -ENOMEM;
        }
        return 0;
}

int server_listen_fd(struct npud *d, int fd, char *err, size_t errlen)
{
        struct sockaddr_un addr;
        socklen_t len = sizeof(addr);
        int fl = fcntl(fd, F_GETFL);

        /* on_accept drains with accept4 until EAGAIN: the socket must not block */
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
            fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
                int e = errno;
                snprintf(err, errlen, "passed socket %d: %s", fd, strerror(e));
                return -e;
        }
        /* Report the path clients really use, whatever the configuration says. */
        memset(&addr, 0, sizeof(addr));
        if (getsockname(fd, (struct sockaddr *)&addr, &len) == 0 && addr.sun_family == AF_UNIX &&
            len > offsetof(struct sockaddr_un, sun_path) && addr.sun_path[0]) {
                size_t n = strnlen(addr.sun_path, sizeof(addr.sun_path));
                if (n < sizeof(d->config.socket_path)) {
                        memcpy(d->config.socket_path, addr.sun_path, n);
                        d->config.socket_path[n] = '\0';
                }
        }
        log_info("using the socket passed by the service manager: %s", d->config.socket_path);
        listen_owned = 0;
        return watch_listener(d, fd, err, errlen);
}

int server_listen(struct npud *d, char *err, size_t errlen)
{
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        const char *path = d->config.socket_path;
        struct stat st;
        int fd, e;

        if ((fd = activated_fd()) >= 0)
                return server_listen_fd(d, fd, err, errlen);

        if (strlen(path) >= sizeof(addr.sun_path)) {
                snprintf(err, errlen, "socket path too long: %s", path);
                return -ENAMETOOLONG;
        }
        memcpy(addr.sun_path, path, strlen(path) + 1);
        if ((e = make_parent_dir(path)) < 0) {
                snprintf(err, errlen, "cannot create the directory of %s: %s", path, strerror(-e));
                return e;
        }
        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode)) {
                        snprintf(err, errlen, "%s exists and is not a socket", path);
                        return -EEXIST;
                }
                if (unix_socket_alive(&addr)) {
                        snprintf(err, errlen, "another npud is serving %s", path);
                        return -EADDRINUSE;
                }
                unlink(path); /* stale: nothing answers */
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                goto fail_errno;
        if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || chmod(path, 0660) < 0 ||
            listen(fd, 128) < 0) {
                e = errno;
                close(fd);
                errno = e;
                goto fail_errno;
        }
        listen_owned = 1;
        return watch_listener(d, fd, err, errlen);
fail_errno:
        e = errno;
        snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
        return -e;
}

void server_close(struct npud *d)
{
        if (d->listen_event)
                event_free(d->listen_event);
        d->listen_event = NULL;
        if (d->listen_fd >= 0) {
                close(d->listen_fd);
                if (listen_owned)
                        unlink(d->config.socket_path);
        }
        d->listen_fd = -1;
}
