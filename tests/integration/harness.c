/* Integration-test harness (see harness.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "npu.h"
#include "proto/frame.h"
#include "harness.h"

int harness_start(struct npud_proc *p, const char *const *extra)
{
        const char *bin = getenv("NPUD_BIN") ? getenv("NPUD_BIN") : "build/bin/npud";
        const char *argv[32];
        int n = 0;

        memset(p, 0, sizeof(*p));
        snprintf(p->dir, sizeof(p->dir), "/tmp/npud-test-XXXXXX");
        if (!mkdtemp(p->dir))
                return -1;
        snprintf(p->sock, sizeof(p->sock), "%s/npud.sock", p->dir);
        snprintf(p->log, sizeof(p->log), "%s/npud.log", p->dir);
        argv[n++] = bin;
        argv[n++] = "--socket";
        argv[n++] = p->sock;
        argv[n++] = "--sim-devices";
        argv[n++] = "2";
        argv[n++] = "--log-level";
        argv[n++] = "warn";
        snprintf(p->tune, sizeof(p->tune), "%s/tuning.cache", p->dir);
        argv[n++] = "--tuning-cache"; /* extra may name another */
        argv[n++] = p->tune;
        for (int i = 0; extra && extra[i] && n < 30; i++)
                argv[n++] = extra[i];
        argv[n] = NULL;
        p->pid = fork();
        if (p->pid < 0)
                return -1;
        if (p->pid == 0) {
                int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (fd >= 0) {
                        dup2(fd, 2);
                        dup2(fd, 1);
                }
                unsetenv("NPU_SOCKET");
                execv(bin, (char *const *)argv);
                _exit(127);
        }
        for (int i = 0; i < 3000; i++) { /* up to 30 s: a loaded CI host under ASan is slow */
                int fd = harness_raw_connect(p->sock);
                if (fd >= 0) {
                        close(fd);
                        setenv("NPU_SOCKET", p->sock, 1);
                        return 0;
                }
                if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
                        p->pid = 0;
                        return -1;
                }
                usleep(10000);
        }
        return -1;
}

int harness_start_config(struct npud_proc *p, const char *config_text, const char *const *extra)
{
        char conf[sizeof(p->conf)] = "";
        const char *argv[32];
        int n = 0, rc;

        if (config_text) {
                int fd;
                FILE *f;

                snprintf(conf, sizeof(conf), "/tmp/npud-conf-XXXXXX");
                fd = mkstemp(conf);
                if (fd < 0)
                        return -1;
                f = fdopen(fd, "w");
                if (!f) {
                        close(fd);
                        unlink(conf);
                        return -1;
                }
                rc = fputs(config_text, f) < 0;
                if (fclose(f) != 0 || rc) {
                        unlink(conf);
                        return -1;
                }
                argv[n++] = "--config";
                argv[n++] = conf;
        }
        for (int i = 0; extra && extra[i] && n < 31; i++)
                argv[n++] = extra[i];
        argv[n] = NULL;
        rc = harness_start(p, argv); /* clears p: the file's name goes in after */
        if (rc == 0)
                snprintf(p->conf, sizeof(p->conf), "%s", conf);
        else if (conf[0])
                unlink(conf);
        return rc;
}

int harness_alive(const struct npud_proc *p)
{
        return p->pid > 0 && kill(p->pid, 0) == 0 && waitpid(p->pid, NULL, WNOHANG) == 0;
}

int harness_stop(struct npud_proc *p)
{
        int status = -1;
        char cmd[256];

        if (p->pid > 0) {
                kill(p->pid, SIGTERM);
                for (int i = 0; i < 1000; i++) {
                        if (waitpid(p->pid, &status, WNOHANG) == p->pid)
                                break;
                        usleep(10000);
                }
                if (!WIFEXITED(status)) {
                        kill(p->pid, SIGKILL);
                        waitpid(p->pid, &status, 0);
                }
        }
        if (status != 0) { /* show the daemon's log to explain the failure */
                snprintf(cmd, sizeof(cmd), "cat %s >&2", p->log);
                if (system(cmd) < 0)
                        perror("system");
        }
        if (p->conf[0])
                unlink(p->conf);
        p->conf[0] = 0;
        snprintf(cmd, sizeof(cmd), "rm -rf %s", p->dir);
        if (system(cmd) < 0)
                perror("system");
        p->pid = 0;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int harness_raw_connect(const char *sock)
{
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock);
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        return fd;
}

int harness_raw_send(int fd, int kind, uint64_t id, const void *body, size_t len,
                     const int *fds, int nfds)
{
        struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = (uint8_t)kind, .nfds = (uint8_t)nfds,
                                  .body_len = (uint32_t)len, .request_id = id };
        return proto_send_frame(fd, &h, body, fds);
}

static int read_full(int fd, void *buf, size_t len)
{
        size_t done = 0;

        while (done < len) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                if (poll(&pfd, 1, 5000) <= 0)
                        return -1;
                ssize_t n = read(fd, (char *)buf + done, len - done);
                if (n <= 0)
                        return -1;
                done += (size_t)n;
        }
        return 0;
}

void *harness_raw_recv_bytes(int fd, int *ret_kind, uint64_t *ret_id, size_t *ret_len)
{
        uint8_t hdr[PROTO_HEADER_SIZE];
        struct proto_header h;
        char *body;

        if (read_full(fd, hdr, sizeof(hdr)) < 0 || proto_header_decode(hdr, &h) < 0)
                return NULL;
        body = malloc(h.body_len + 1);
        if (!body || read_full(fd, body, h.body_len) < 0) {
                free(body);
                return NULL;
        }
        *ret_kind = h.kind;
        *ret_id = h.request_id;
        *ret_len = h.body_len;
        return body;
}

json_t *harness_raw_recv(int fd, int *ret_kind, uint64_t *ret_id)
{
        int kind;
        uint64_t id;
        size_t len;
        char *body = harness_raw_recv_bytes(fd, &kind, &id, &len);
        json_t *v;

        if (!body)
                return NULL;
        v = json_loadb(body, len, 0, NULL);
        free(body);
        if (ret_kind)
                *ret_kind = kind;
        if (ret_id)
                *ret_id = id;
        return v;
}

json_t *harness_raw_call(int fd, uint64_t id, const char *json_text)
{
        if (harness_raw_send(fd, PROTO_KIND_REQUEST, id, json_text, strlen(json_text), NULL, 0) < 0)
                return NULL;
        for (;;) {
                int kind = 0;
                uint64_t rid = 0;
                json_t *v = harness_raw_recv(fd, &kind, &rid);
                if (!v || (kind == PROTO_KIND_REPLY && rid == id))
                        return v;
                json_decref(v);
        }
}

int harness_raw_hello(int fd)
{
        json_t *r = harness_raw_call(fd, 1, "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":1}}");
        int ok = r && harness_reply_code(r) == 0;
        json_decref(r);
        return ok ? 0 : -1;
}

int harness_reply_code(json_t *reply)
{
        json_t *code = json_object_get(json_object_get(reply, "error"), "code");
        return json_is_integer(code) ? (int)json_integer_value(code) : 0;
}

int harness_raw_closed(int fd)
{
        char buf[4096];

        for (int i = 0; i < 200; i++) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                if (poll(&pfd, 1, 10) > 0) {
                        ssize_t n = read(fd, buf, sizeof(buf));
                        if (n == 0 || (n < 0 && errno == ECONNRESET))
                                return 1;
                        if (n < 0)
                                return 0;
                }
        }
        return 0;
}

int harness_attacker(uid_t *ret_uid, gid_t *ret_gid)
{
        const char *name = "npud-attacker";
        struct passwd *pw = getpwnam(name);

        if (!pw && geteuid() == 0) {
                if (system("useradd --system --no-create-home --shell /usr/sbin/nologin "
                           "npud-attacker >/dev/null 2>&1") < 0)
                        return -1;
                pw = getpwnam(name);
        }
        if (!pw || pw->pw_uid == 0)
                return -1;
        *ret_uid = pw->pw_uid;
        *ret_gid = pw->pw_gid;
        return 0;
}

int harness_share_socket(const struct npud_proc *p)
{
        return chmod(p->dir, 0711) == 0 && chmod(p->sock, 0666) == 0 ? 0 : -1;
}

pid_t harness_spawn_as(uid_t uid, gid_t gid, int (*fn)(void *arg), void *arg)
{
        pid_t pid = fork();

        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
                    setresuid(uid, uid, uid) < 0 || geteuid() != uid)
                        _exit(126);
                _exit(fn(arg) ? 1 : 0);
        }
        return pid;
}

int harness_run_as(uid_t uid, gid_t gid, int (*fn)(void *arg), void *arg)
{
        int status = -1;
        pid_t pid = harness_spawn_as(uid, gid, fn, arg);

        if (pid < 0 || waitpid(pid, &status, 0) != pid)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

long harness_proc_kib(pid_t pid, const char *field)
{
        char path[64], line[256];
        size_t n = strlen(field);
        long kib = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (!(f = fopen(path, "r")))
                return -1;
        while (kib < 0 && fgets(line, sizeof(line), f))
                if (strncmp(line, field, n) == 0 && line[n] == ':')
                        kib = strtol(line + n + 1, NULL, 10);
        fclose(f);
        return kib;
}

long long harness_tenant_memory_used(struct npu_context *ctx, const char *name)
{
        char *text = NULL;
        long long used = -1;
        json_t *root, *t;
        size_t i;

        if (npu_admin_call(ctx, "tenants", NULL, &text) != NPU_OK)
                return -1;
        root = json_loads(text, 0, NULL);
        free(text);
        json_array_foreach(json_object_get(root, "tenants"), i, t)
                if (json_is_string(json_object_get(t, "name")) &&
                    strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
                        used = json_integer_value(json_object_get(t, "memory_used"));
        json_decref(root);
        return used;
}

int harness_metric(const char *msock, const char *name, double *ret)
{
        const size_t cap = 1 << 20;
        static const char get[] = "GET /metrics HTTP/1.0\r\n\r\n";
        char key[160];
        size_t len = 0;
        ssize_t r;
        int rc = -1;

        if (snprintf(key, sizeof(key), "\n%s ", name) >= (int)sizeof(key))
                return -1;
        char *buf = malloc(cap);
        int fd = harness_raw_connect(msock);
        if (!buf || fd < 0 || write(fd, get, sizeof(get) - 1) != (ssize_t)sizeof(get) - 1)
                goto out;
        while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0)
                len += (size_t)r;
        buf[len] = 0;
        const char *at = strstr(buf, key);
        if (at) {
                *ret = strtod(at + strlen(key), NULL);
                rc = 0;
        }
out:
        if (fd >= 0)
                close(fd);
        free(buf);
        return rc;
}
