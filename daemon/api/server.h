/* The client listener: binds the Unix socket (replacing a stale socket file only when nothing
 * answers on it), accepts connections up to the connection limit and hands them to sessions. */
#ifndef NPUD_SERVER_H
#define NPUD_SERVER_H

#include <stddef.h>

struct npud;

/* Listen on the socket the service manager passed (sd_listen_fds), else bind and listen on
 * d->config.socket_path. 0 or -errno with err filled. */
int server_listen(struct npud *d, char *err, size_t errlen);
/* Serve an already-listening socket; its file is left alone on close. */
int server_listen_fd(struct npud *d, int fd, char *err, size_t errlen);
void server_close(struct npud *d);

#endif
