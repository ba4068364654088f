/* Integration-test harness: start the real npud (NPUD_BIN, default build/bin/npud) on a
 * temporary socket, stop it and check it exited cleanly, and talk the raw protocol for
 * tests that must send what libnpu never would. */
#ifndef NPUD_TEST_HARNESS_H
#define NPUD_TEST_HARNESS_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

struct npud_proc {
        pid_t pid;
        char dir[64];
        char sock[128];
        char log[128];
        char tune[128]; /* its tuning cache, in dir (never the host's) */
        char conf[128]; /* the --config file harness_start_config wrote ("" for none) */
};

/* Start npud with --sim-devices 2 and a tuning cache in its directory, plus extra (NULL-terminated, may be NULL). 0 or -1. */
int harness_start(struct npud_proc *p, const char *const *extra);
/* The same with config_text (may be NULL: none) written to a file given as --config before
 * extra; harness_stop removes the file. 0 or -1. */
int harness_start_config(struct npud_proc *p, const char *config_text, const char *const *extra);
/* SIGTERM and wait; returns the exit status (0 = clean, including no leaks under ASan). */
int harness_stop(struct npud_proc *p);
/* Is the daemon process still running? */
int harness_alive(const struct npud_proc *p);

/* Raw protocol helpers. */
int harness_raw_connect(const char *sock);
/* Send a frame with the given kind and body; 0 or -errno. */
int harness_raw_send(int fd, int kind, uint64_t id, const void *body, size_t len,
                     const int *fds, int nfds);
/* Read one frame (blocking, 5 s timeout). Returns the parsed JSON body (NULL for EOF or a
 * non-JSON body); *ret_kind and *ret_id receive header fields. */
json_t *harness_raw_recv(int fd, int *ret_kind, uint64_t *ret_id);
/* One frame of any kind, its body as bytes (malloc'd, *ret_len long); NULL on a read error. */
void *harness_raw_recv_bytes(int fd, int *ret_kind, uint64_t *ret_id, size_t *ret_len);
/* Send a request and wait for its reply (skipping notifications). */
json_t *harness_raw_call(int fd, uint64_t id, const char *json_text);
/* hello on a raw connection; 0 or -1. */
int harness_raw_hello(int fd);
/* Error code of a reply, 0 for a result. */
int harness_reply_code(json_t *reply);
/* Is the peer closed (EOF within 2 s)? */
int harness_raw_closed(int fd);

/* The value of metric name (its first sample without labels) on npud's metrics endpoint, a
 * Unix socket (--metrics-listen PATH). 0, or -1 when it cannot be read or is not there. */
int harness_metric(const char *msock, const char *name, double *ret);

/* A field of /proc/PID/status in KiB ("VmRSS", "VmHWM"); -1 when it cannot be read. */
long harness_proc_kib(pid_t pid, const char *field);

/* Attack tests run the attacker as an unprivileged user. harness_attacker() returns that
 * user's uid and gid, creating the system user "npud-attacker" with useradd when running as
 * root (CI); -1 when it does not exist and cannot be created (the test should then skip). */
int harness_attacker(uid_t *ret_uid, gid_t *ret_gid);
/* Let other users reach the daemon's socket: its directory 0711, the socket 0666. 0 or -1. */
int harness_share_socket(const struct npud_proc *p);
/* Run fn(arg) in a child process that dropped to uid/gid (no supplementary groups) and
 * return its exit status (0 = the attacker's checks passed; 128+N when killed by signal N). */
int harness_run_as(uid_t uid, gid_t gid, int (*fn)(void *arg), void *arg);
/* The same without waiting: the child's pid (reap it with waitpid), or -1. */
pid_t harness_spawn_as(uid_t uid, gid_t gid, int (*fn)(void *arg), void *arg);

/* memory_used of tenant name as the "tenants" admin method reports it on ctx (an admin's
 * connection); -1 when there is no such tenant or the call fails. */
struct npu_context;
long long harness_tenant_memory_used(struct npu_context *ctx, const char *name);

#endif
