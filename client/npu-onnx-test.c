/* npu-onnx-test: the ONNX backend conformance runner. Finds every backend test directory
 * (model.onnx + test_data_set_*) under the given roots and runs each through npud's graph API
 * (onnx-run.c), printing one line per test in test order, then "N passed, M failed"; --json
 * writes the outcomes, --summary the pass rate, failures by class and the operators missing.
 *
 * Tests run in child processes, --jobs at a time, in batches (a fork and exit per test would
 * cost more than most tests do under ASan), each test on a connection of its own. A child
 * that hangs is killed at --timeout (npud reclaims its session), a corrupt file or a runner
 * bug costs one test, and when npud dies the runner restarts it (if it started it) or waits
 * for it, then runs again, one at a time, every test that lost its connection: only the test
 * that broke npud fails. Exit status: 0 after a complete run whatever the results (the CI
 * gate is tests/onnx/expected-pass.txt), 2 usage, 3 npud unreachable or not started, 128+N
 * on signal N. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "npu.h"
#include "onnx-run.h"

#define EXIT_USAGE 2
#define EXIT_UNREACHABLE 3
#define DEFAULT_TIMEOUT_S 60.0
#define TOP_OPS 15
#define TOP_NAMES 8
#define MAX_JOBS 64
#define MAX_BATCH 32

/* ---- small helpers ---- */

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static int write_all(int fd, const char *s, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, s, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                s += n;
                len -= (size_t)n;
        }
        return 0;
}

/* ---- npud: the one given, the default one, or one the runner starts ---- */

struct daemon {
        const char *socket;    /* NULL: $NPU_SOCKET or the default socket */
        int own;               /* started by the runner */
        pid_t pid;
        char dir[64], sock[128], log[128];
        char bin[PATH_MAX];
        int wstatus;           /* of the last instance that died */
        int restarts;
};

static int reachable(const char *sock)
{
        npu_context_t *ctx;
        int ok;

        if (npu_connect(sock, &ctx) != NPU_OK)
                return 0;
        ok = npu_ping(ctx) == NPU_OK;
        npu_disconnect(ctx);
        return ok;
}

/* npud next to this binary (build/bin/npud), unless NPUD_BIN names another. */
static int find_npud(struct daemon *d)
{
        const char *env = getenv("NPUD_BIN");
        char self[PATH_MAX];
        ssize_t n;
        char *slash;

        if (env && *env) {
                snprintf(d->bin, sizeof(d->bin), "%s", env);
                return 0;
        }
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
                return -1;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (!slash)
                return -1;
        *slash = '\0';
        if ((size_t)snprintf(d->bin, sizeof(d->bin), "%s/npud", self) >= sizeof(d->bin))
                return -1;
        return 0;
}

static int daemon_spawn(struct daemon *d)
{
        const char *argv[] = { d->bin, "--socket", d->sock, "--sim-devices", "1",
                               "--log-level", "warn", NULL };

        d->pid = fork();
        if (d->pid < 0)
                return -1;
        if (d->pid == 0) {
                /* the last instance's log was shown when it died */
                int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                setpgid(0, 0); /* a Ctrl-C at the terminal is the runner's to handle */
                prctl(PR_SET_PDEATHSIG, SIGTERM); /* and if the runner is killed, npud goes too */
                execv(d->bin, (char *const *)argv);
                _exit(127);
        }
        for (int i = 0; i < 1000; i++) { /* up to 10 s: an ASan build starts slowly */
                if (reachable(d->sock))
                        return 0;
                if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return -1;
                }
                usleep(10000);
        }
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
        return -1;
}

static int daemon_start_own(struct daemon *d)
{
        if (find_npud(d) < 0 || access(d->bin, X_OK) < 0) {
                fprintf(stderr, "npu-onnx-test: no npud to start (%s)\n", d->bin[0] ? d->bin : "?");
                return -1;
        }
        snprintf(d->dir, sizeof(d->dir), "/tmp/npu-onnx-test-XXXXXX");
        if (!mkdtemp(d->dir)) {
                fprintf(stderr, "npu-onnx-test: mkdtemp: %s\n", strerror(errno));
                return -1;
        }
        snprintf(d->sock, sizeof(d->sock), "%s/npud.sock", d->dir);
        snprintf(d->log, sizeof(d->log), "%s/npud.log", d->dir);
        d->own = 1;
        d->socket = d->sock;
        if (daemon_spawn(d) < 0) {
                fprintf(stderr, "npu-onnx-test: could not start %s\n", d->bin);
                return -1;
        }
        return 0;
}

static void show_log_tail(const struct daemon *d)
{
        char buf[4096];
        size_t n;
        FILE *f = fopen(d->log, "r");

        if (!f)
                return;
        if (fseek(f, -(long)sizeof(buf), SEEK_END) < 0) /* a short log: from the start */
                rewind(f);
        n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        if (n == 0)
                return;
        fprintf(stderr, "--- npud log (%s) ---\n", d->log);
        fwrite(buf, 1, n, stderr);
        fprintf(stderr, "---\n");
}

/* SIGTERM, then SIGKILL after 10 s. Returns the exit status (0 clean). */
static int daemon_stop(struct daemon *d)
{
        int status = 0;

        if (d->pid <= 0)
                return 0;
        kill(d->pid, SIGTERM);
        for (int i = 0; i < 1000; i++) {
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        d->pid = 0;
                        break;
                }
                usleep(10000);
        }
        if (d->pid > 0) {
                kill(d->pid, SIGKILL);
                waitpid(d->pid, &status, 0);
                d->pid = 0;
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Reaps a daemon that has died, keeping its wait status for the message. */
static int daemon_alive(struct daemon *d)
{
        if (d->pid > 0 && waitpid(d->pid, &d->wstatus, WNOHANG) == d->pid)
                d->pid = 0;
        return d->pid > 0;
}

static void daemon_cleanup(struct daemon *d)
{
        if (!d->own)
                return;
        unlink(d->sock);
        unlink(d->log);
        rmdir(d->dir);
}

/* After a test that lost its connection or timed out: make npud usable for the next one.
 * 0, or -1 when it cannot be reached again. */
static int daemon_recover(struct daemon *d, const char *test, int force_restart)
{
        if (d->own) {
                if (!force_restart && daemon_alive(d) && reachable(d->sock))
                        return 0;
                if (!daemon_alive(d)) {
                        fprintf(stderr, "npu-onnx-test: npud %s (noticed by %s); restarting it\n",
                                WIFSIGNALED(d->wstatus) ? "crashed" : "exited", test);
                        show_log_tail(d);
                } else { /* alive but stuck (a timeout) or deaf: start afresh */
                        fprintf(stderr, "npu-onnx-test: restarting npud after %s\n", test);
                        daemon_stop(d);
                }
                d->restarts++;
                return daemon_spawn(d);
        }
        for (int i = 0; i < 50; i++) { /* an external npud may be restarting: wait up to 5 s */
                if (reachable(d->socket))
                        return 0;
                usleep(100000);
        }
        return -1;
}

/* ---- the run ---- */

struct options {
        const char *socket;
        const char *json;
        double timeout;
        int jobs;
        int quiet, summary, start_npud;
        int accumulate; /* enum npu_accumulate */
};

/* A batch of tests in flight in one child (a child per batch, not per test, because a fork
 * and an exit cost more than most tests under ASan): the pipe their outcomes come through,
 * one JSON line each in order, and the deadline of the one running now. */
struct slot {
        pid_t pid;             /* 0: free */
        int fd;
        size_t *tests;
        size_t ntests, ndone;
        double start, deadline; /* of the test running now */
        char *buf;
        size_t len, cap;
};

struct runner {
        struct options opt;
        struct onnx_test_list tests;
        struct daemon d;
        json_t **res;          /* per test: its final outcome, NULL while pending */
        unsigned char *retried;
        size_t next;           /* next test of the first pass */
        size_t *again;         /* tests whose batch ended before them: run in new batches */
        size_t nagain;
        size_t *retry;         /* tests that lost npud: run again, one at a time */
        size_t nretry;
        size_t batch;          /* tests per child */
        size_t printed;        /* outcomes printed so far, in test order */
        struct slot *slots;
        int draining;          /* npud must be recovered once the running tests end */
        int force_restart;     /* ... by restarting it (a test timed out) */
        size_t drain_cause;    /* the test whose outcome started the draining */
        int unreachable;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
        interrupted = sig;
}

static void runner_free(struct runner *r)
{
        for (size_t i = 0; r->res && i < r->tests.n; i++)
                json_decref(r->res[i]);
        free(r->res);
        free(r->retried);
        free(r->again);
        free(r->retry);
        for (int i = 0; r->slots && i < r->opt.jobs; i++) {
                free(r->slots[i].tests);
                free(r->slots[i].buf);
        }
        free(r->slots);
        onnx_tests_free(&r->tests);
}

/* In the child: run the batch, one outcome line per test, and stop early when npud is lost
 * (the parent runs the rest once npud is back). The parent's state is this process's copy
 * to free, so that exit()'s leak check (ASan builds) sees only the tests' memory. */
static void child_main(struct runner *r, const struct slot *self, int fd)
{
        int rc = 0;

        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan tests if the runner dies */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        for (int i = 0; i < r->opt.jobs; i++)
                if (r->slots[i].pid > 0)
                        close(r->slots[i].fd);
        for (size_t i = 0; i < self->ntests && rc == 0; i++) {
                struct onnx_outcome o;
                json_t *j;
                char *text;

                if (onnx_outcome_init(&o) < 0) {
                        rc = 1;
                        break;
                }
                onnx_run_test(&r->tests.v[self->tests[i]], r->d.socket, r->opt.accumulate, &o);
                j = onnx_outcome_json(&o);
                text = j ? json_dumps(j, JSON_COMPACT) : NULL;
                if (!text || write_all(fd, text, strlen(text)) < 0 || write_all(fd, "\n", 1) < 0)
                        rc = 1;
                if (o.lost)
                        rc = 2;
                free(text);
                json_decref(j);
                onnx_outcome_deinit(&o);
        }
        close(fd);
        runner_free(r);
        exit(rc == 1);
}

static json_t *error_outcome(const char *reason, int timeout)
{
        return json_pack("{s:s, s:s, s:s, s:s, s:[], s:[], s:b, s:b}", "status", "fail",
                         "class", "error", "reason", reason, "what", "", "ops",
                         "unsupported_ops", "lost", 0, "timeout", timeout);
}

/* Record a test's outcome. A test that lost its connection is run again, alone, once npud
 * is back: it may only have been in flight next to the test that broke the daemon. */
static void record(struct runner *r, size_t test, json_t *o)
{
        int lost = json_is_true(json_object_get(o, "lost"));
        int timeout = json_is_true(json_object_get(o, "timeout"));

        if (lost || timeout || (r->d.own && !daemon_alive(&r->d))) {
                if (!r->draining)
                        r->drain_cause = test;
                r->draining = 1;
                r->force_restart |= timeout;
        }
        if (lost && !r->retried[test]) {
                r->retried[test] = 1;
                r->retry[r->nretry++] = test;
                json_decref(o);
                return;
        }
        json_object_del(o, "lost");
        json_object_del(o, "timeout");
        json_object_set_new(o, "name", json_string(r->tests.v[test].name));
        r->res[test] = o;
}

static int slot_start(struct runner *r, struct slot *s)
{
        int pfd[2];
        pid_t pid;

        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -1;
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
                close(pfd[0]);
                close(pfd[1]);
                return -1;
        }
        if (pid == 0) {
                close(pfd[0]);
                child_main(r, s, pfd[1]);
        }
        close(pfd[1]);
        s->pid = pid;
        s->fd = pfd[0];
        s->ndone = 0;
        s->len = 0;
        s->start = now_s();
        s->deadline = s->start + r->opt.timeout;
        return 0;
}

/* The complete outcome lines received so far. */
static void slot_take_lines(struct runner *r, struct slot *s)
{
        char *line = s->buf, *nl;

        while (s->ndone < s->ntests && (nl = memchr(line, '\n', s->len - (size_t)(line - s->buf)))) {
                json_t *o;
                double now = now_s();
                *nl = '\0';
                o = json_loads(line, 0, NULL);
                if (!json_is_object(o)) {
                        json_decref(o);
                        o = error_outcome("runner sent an unreadable result", 0);
                }
                if (o) {
                        json_object_set_new(o, "seconds", json_real(floor((now - s->start) * 1000) / 1000));
                        record(r, s->tests[s->ndone], o);
                }
                s->ndone++;
                s->start = now;
                s->deadline = now + r->opt.timeout;
                line = nl + 1;
        }
        s->len -= (size_t)(line - s->buf);
        memmove(s->buf, line, s->len);
}

/* The child has closed its pipe or its current test is past the deadline: reap it. Its
 * current test, if it had one, failed (timeout, crash); the rest of its batch is run again
 * in another. */
static void slot_finish(struct runner *r, struct slot *s, int timed_out)
{
        int status = 0;
        char reason[128];

        close(s->fd);
        if (timed_out)
                kill(s->pid, SIGKILL);
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
                ;
        s->pid = 0;
        if (!timed_out)
                slot_take_lines(r, s);
        if (s->ndone < s->ntests && (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
                                     s->ndone == 0)) {
                if (timed_out)
                        snprintf(reason, sizeof(reason), "timeout after %g s", r->opt.timeout);
                else if (WIFSIGNALED(status))
                        snprintf(reason, sizeof(reason), "runner crashed (signal %d)", WTERMSIG(status));
                else
                        snprintf(reason, sizeof(reason), "runner exited with status %d without a result",
                                 WEXITSTATUS(status));
                json_t *o = error_outcome(reason, timed_out);
                if (o) {
                        json_object_set_new(o, "seconds", json_real(floor((now_s() - s->start) * 1000) / 1000));
                        record(r, s->tests[s->ndone], o);
                }
                s->ndone++;
        }
        while (s->ndone < s->ntests)
                r->again[r->nagain++] = s->tests[s->ndone++];
        s->ntests = 0;
}

/* Read what a child has written; 1 when it has closed its end. */
static int slot_read(struct runner *r, struct slot *s)
{
        ssize_t n;

        if (s->len + 4096 > s->cap) {
                char *nb = realloc(s->buf, s->cap + 65536);
                if (!nb)
                        return 1; /* its outcomes are lost: reported as a runner failure */
                s->buf = nb;
                s->cap += 65536;
        }
        n = read(s->fd, s->buf + s->len, s->cap - s->len - 1);
        if (n < 0)
                return errno != EINTR && errno != EAGAIN;
        if (n == 0)
                return 1;
        s->len += (size_t)n;
        slot_take_lines(r, s);
        return 0;
}

static void print_line(json_t *o)
{
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *status = json_string_value(json_object_get(o, "status"));

        if (strcmp(status, "pass") == 0)
                printf("%s: pass\n", name);
        else if (strcmp(status, "unsupported") == 0)
                printf("%s: unsupported: %s\n", name, json_string_value(json_object_get(o, "what")));
        else
                printf("%s: fail: %s\n", name, json_string_value(json_object_get(o, "reason")));
}

/* Print, in test order, the outcomes that are final. */
static void print_ready(struct runner *r)
{
        while (r->printed < r->tests.n && r->res[r->printed]) {
                if (!r->opt.quiet)
                        print_line(r->res[r->printed]);
                r->printed++;
        }
}

static int running(const struct runner *r)
{
        int n = 0;

        for (int i = 0; i < r->opt.jobs; i++)
                n += r->slots[i].pid > 0;
        return n;
}

static struct slot *free_slot(struct runner *r)
{
        for (int i = 0; i < r->opt.jobs; i++)
                if (r->slots[i].pid == 0)
                        return &r->slots[i];
        return NULL;
}

/* Start what may start now: retries one at a time on a quiet daemon, else batches of the
 * tests left over from ended batches, then of new tests, up to --jobs children. Nothing
 * while npud waits to be recovered. */
static void start_tests(struct runner *r)
{
        struct slot *s;

        while (!r->draining && (s = free_slot(r))) {
                s->ntests = 0;
                if (r->nretry > 0) {
                        if (running(r) > 0)
                                return;
                        s->tests[s->ntests++] = r->retry[0];
                        memmove(r->retry, r->retry + 1, --r->nretry * sizeof(*r->retry));
                } else if (r->nagain > 0) {
                        while (r->nagain > 0 && s->ntests < r->batch)
                                s->tests[s->ntests++] = r->again[--r->nagain];
                } else {
                        while (r->next < r->tests.n && s->ntests < r->batch)
                                s->tests[s->ntests++] = r->next++;
                }
                if (s->ntests == 0)
                        return;
                if (slot_start(r, s) < 0) {
                        char reason[128];
                        snprintf(reason, sizeof(reason), "fork: %s", strerror(errno));
                        for (size_t i = 0; i < s->ntests; i++)
                                record(r, s->tests[i], error_outcome(reason, 0));
                        s->ntests = 0;
                }
        }
}

/* Wait for outcomes, ended children or a deadline (or a signal), handling each. */
static void wait_tests(struct runner *r)
{
        struct pollfd pfd[MAX_JOBS];
        int idx[MAX_JOBS], n = 0;
        double now = now_s(), first = now + 3600;

        for (int i = 0; i < r->opt.jobs; i++) {
                struct slot *s = &r->slots[i];
                if (s->pid <= 0)
                        continue;
                pfd[n] = (struct pollfd){ .fd = s->fd, .events = POLLIN };
                idx[n++] = i;
                if (s->deadline < first)
                        first = s->deadline;
        }
        if (n == 0)
                return;
        if (poll(pfd, (nfds_t)n, first > now ? (int)((first - now) * 1000) + 1 : 0) > 0) {
                for (int k = 0; k < n; k++)
                        if ((pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) &&
                            slot_read(r, &r->slots[idx[k]]))
                                slot_finish(r, &r->slots[idx[k]], 0);
        }
        now = now_s();
        for (int k = 0; k < n; k++) {
                struct slot *s = &r->slots[idx[k]];
                if (s->pid > 0 && now >= s->deadline)
                        slot_finish(r, s, 1);
        }
}

static void stop_tests(struct runner *r)
{
        for (int i = 0; i < r->opt.jobs; i++) {
                struct slot *s = &r->slots[i];
                if (s->pid <= 0)
                        continue;
                kill(s->pid, SIGKILL);
                close(s->fd);
                while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                s->pid = 0;
        }
}

/* The whole run. 0, or -1 when npud became unreachable (the rest is reported not run). */
static int run_all(struct runner *r)
{
        for (;;) {
                start_tests(r);
                if (running(r) == 0) {
                        if (r->draining) {
                                const char *after = r->tests.v[r->drain_cause].name;
                                if (daemon_recover(&r->d, after, r->force_restart) < 0) {
                                        fprintf(stderr, "npu-onnx-test: npud unreachable after %s; "
                                                "stopping\n", after);
                                        r->unreachable = 1;
                                        break;
                                }
                                r->draining = r->force_restart = 0;
                                continue;
                        }
                        if (r->nretry == 0 && r->nagain == 0 && r->next >= r->tests.n)
                                break;
                }
                wait_tests(r);
                print_ready(r);
                if (interrupted) {
                        stop_tests(r);
                        return -1;
                }
        }
        for (size_t i = 0; i < r->tests.n; i++)
                if (!r->res[i]) {
                        json_t *o = error_outcome("not run: npud unreachable", 0);
                        json_object_del(o, "lost");
                        json_object_del(o, "timeout");
                        json_object_set_new(o, "name", json_string(r->tests.v[i].name));
                        r->res[i] = o;
                }
        print_ready(r);
        return r->unreachable ? -1 : 0;
}

static int count_cmp(const void *a, const void *b)
{
        json_int_t x = json_integer_value(json_array_get(*(json_t *const *)a, 1));
        json_int_t y = json_integer_value(json_array_get(*(json_t *const *)b, 1));

        if (x != y)
                return x > y ? -1 : 1;
        return strcmp(json_string_value(json_array_get(*(json_t *const *)a, 0)),
                      json_string_value(json_array_get(*(json_t *const *)b, 0)));
}

/* The unsupported operators, by the number of tests each blocks, most first. */
static void print_top_ops(json_t *tests)
{
        json_t *ops = json_object(), *o, *val, *op;
        json_t **sorted;
        const char *key;
        size_t i, j, nops;

        json_array_foreach(tests, i, o) {
                json_array_foreach(json_object_get(o, "unsupported_ops"), j, op) {
                        json_t *cnt = json_object_get(ops, json_string_value(op));
                        json_object_set_new(ops, json_string_value(op),
                                            json_integer(cnt ? json_integer_value(cnt) + 1 : 1));
                }
        }
        nops = json_object_size(ops);
        sorted = nops ? calloc(nops, sizeof(*sorted)) : NULL;
        if (sorted) {
                i = 0;
                json_object_foreach(ops, key, val)
                        sorted[i++] = json_pack("[s, I]", key, json_integer_value(val));
                qsort(sorted, nops, sizeof(*sorted), count_cmp);
                printf("  unsupported operators: %zu; blocking the most tests:", nops);
                for (i = 0; i < nops && i < TOP_OPS; i++)
                        printf("%s %s %lld", i ? "," : "",
                               json_string_value(json_array_get(sorted[i], 0)),
                               (long long)json_integer_value(json_array_get(sorted[i], 1)));
                printf("%s\n", nops > TOP_OPS ? ", ..." : "");
                for (i = 0; i < nops; i++)
                        json_decref(sorted[i]);
                free(sorted);
        }
        json_decref(ops);
}

/* Pass rate, failures by class (naming the tests of the rarer classes, which are the ones
 * to look at: wrong results and errors), and the operators worth writing next. */
static void print_summary(json_t *tests, size_t passed, int restarts)
{
        static const char *const classes[] = { "unsupported-op", "unsupported-dtype", "mismatch",
                                               "error" };
        size_t i, total = json_array_size(tests);
        json_t *o;

        printf("conformance: %zu / %zu passed (%.1f%%)\n", passed, total,
               total ? 100.0 * (double)passed / (double)total : 0.0);
        for (size_t c = 0; c < sizeof(classes) / sizeof(classes[0]); c++) {
                size_t n = 0, shown = 0;
                json_array_foreach(tests, i, o) {
                        const char *k = json_string_value(json_object_get(o, "class"));
                        n += k && strcmp(k, classes[c]) == 0;
                }
                printf("  %-18s %4zu", classes[c], n);
                if (c > 0) {
                        json_array_foreach(tests, i, o) {
                                const char *k = json_string_value(json_object_get(o, "class"));
                                if (!k || strcmp(k, classes[c]) != 0)
                                        continue;
                                if (shown++ == TOP_NAMES) {
                                        printf(", ...");
                                        break;
                                }
                                printf("%s%s", shown > 1 ? ", " : "  ",
                                       json_string_value(json_object_get(o, "name")));
                        }
                }
                printf("\n");
        }
        print_top_ops(tests);
        if (restarts)
                printf("  npud restarted %d times (crashes or timeouts; see stderr)\n", restarts);
}

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: npu-onnx-test [OPTIONS] DIR...\n"
                "Run the ONNX backend tests found under each DIR (directories holding model.onnx\n"
                "and test_data_set_*) through npud's graph API and compare the results.\n\n"
                "  --socket PATH   npud to use (default: $NPU_SOCKET or the per-user socket;\n"
                "                  when none answers there, start a private npud)\n"
                "  --start-npud    always start a private npud (the one next to this binary,\n"
                "                  or $NPUD_BIN) on a temporary socket with 1 device\n"
                "  --json FILE     write the results as JSON\n"
                "  --timeout S     per-test time limit in seconds (default %g)\n"
                "  --jobs N        tests run at once (default: the number of CPUs, at most %d)\n"
                "  --quiet         no per-test lines\n"
                "  --summary       after the run: pass rate, failures by class, top unsupported ops\n"
                "  --accumulate float32|float64|mixed\n"
                "                  how the models' products sum (npu_graph_load_with; default float32)\n"
                "  --help\n\n"
                "Exit: 0 after a complete run (whatever the results), 2 usage, 3 npud unreachable,\n"
                "130 interrupted.\n",
                DEFAULT_TIMEOUT_S, MAX_JOBS);
}

static int parse_options(int argc, char **argv, struct options *o)
{
        enum { O_SOCKET = 1, O_JSON, O_TIMEOUT, O_JOBS, O_QUIET, O_SUMMARY, O_START, O_ACC, O_HELP };
        static const struct option longopts[] = {
                { "socket", required_argument, NULL, O_SOCKET },
                { "json", required_argument, NULL, O_JSON },
                { "timeout", required_argument, NULL, O_TIMEOUT },
                { "jobs", required_argument, NULL, O_JOBS },
                { "quiet", no_argument, NULL, O_QUIET },
                { "summary", no_argument, NULL, O_SUMMARY },
                { "start-npud", no_argument, NULL, O_START },
                { "accumulate", required_argument, NULL, O_ACC },
                { "help", no_argument, NULL, O_HELP },
                { NULL, 0, NULL, 0 },
        };
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int opt;
        char *end;
        long v;

        o->timeout = DEFAULT_TIMEOUT_S;
        o->jobs = cpus < 1 ? 1 : cpus > MAX_JOBS ? MAX_JOBS : (int)cpus;
        while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
                switch (opt) {
                case O_SOCKET:
                        o->socket = optarg;
                        break;
                case O_ACC:
                        if (strcmp(optarg, "float32") && strcmp(optarg, "float64") && strcmp(optarg, "mixed")) {
                                fprintf(stderr, "npu-onnx-test: bad --accumulate '%s' (float32, float64 or mixed)\n",
                                        optarg);
                                return -1;
                        }
                        o->accumulate = strcmp(optarg, "float64") == 0 ? NPU_ACCUMULATE_FLOAT64
                                        : strcmp(optarg, "mixed") == 0 ? NPU_ACCUMULATE_MIXED
                                                                       : NPU_ACCUMULATE_FLOAT32;
                        break;
                case O_JSON:
                        o->json = optarg;
                        break;
                case O_TIMEOUT:
                        errno = 0;
                        o->timeout = strtod(optarg, &end);
                        if (errno || end == optarg || *end || !(o->timeout > 0) || o->timeout > 1e6) {
                                fprintf(stderr, "npu-onnx-test: bad --timeout '%s'\n", optarg);
                                return -1;
                        }
                        break;
                case O_JOBS:
                        errno = 0;
                        v = strtol(optarg, &end, 10);
                        if (errno || end == optarg || *end || v < 1 || v > MAX_JOBS) {
                                fprintf(stderr, "npu-onnx-test: bad --jobs '%s' (1 to %d)\n", optarg,
                                        MAX_JOBS);
                                return -1;
                        }
                        o->jobs = (int)v;
                        break;
                case O_QUIET:
                        o->quiet = 1;
                        break;
                case O_SUMMARY:
                        o->summary = 1;
                        break;
                case O_START:
                        o->start_npud = 1;
                        break;
                case O_HELP:
                        usage(stdout);
                        exit(0);
                default:
                        usage(stderr);
                        return -1;
                }
        }
        if (o->socket && o->start_npud) {
                fprintf(stderr, "npu-onnx-test: --socket and --start-npud exclude each other\n");
                return -1;
        }
        if (optind >= argc) {
                usage(stderr);
                return -1;
        }
        return 0;
}

static int write_report(const char *path, json_t *tests, size_t passed, size_t failed)
{
        json_t *doc = json_pack("{s:O, s:I, s:I}", "tests", tests, "passed", (json_int_t)passed,
                                "failed", (json_int_t)failed);
        int rc = doc ? json_dump_file(doc, path, JSON_INDENT(1)) : -1;

        json_decref(doc);
        if (rc < 0)
                fprintf(stderr, "npu-onnx-test: cannot write %s\n", path);
        return rc;
}

/* The npud to use: --socket, else the default one if it answers, else a private one. */
static int connect_daemon(struct runner *r)
{
        r->d.socket = r->opt.socket;
        if (r->opt.start_npud || (!r->opt.socket && !reachable(NULL)))
                return daemon_start_own(&r->d);
        if (!reachable(r->opt.socket)) {
                fprintf(stderr, "npu-onnx-test: npud unreachable at %s: %s\n",
                        r->opt.socket ? r->opt.socket : "the default socket", npu_error_message());
                return -1;
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct runner r = { 0 };
        struct sigaction sa = { .sa_handler = on_signal };
        size_t passed = 0, failed = 0;
        json_t *all;
        char err[512];
        int rc = 0;

        if (parse_options(argc, argv, &r.opt) < 0)
                return EXIT_USAGE;
        if (onnx_tests_find(&r.tests, argv + optind, argc - optind, err, sizeof(err)) < 0) {
                fprintf(stderr, "npu-onnx-test: %s\n", err);
                runner_free(&r);
                return EXIT_USAGE;
        }
        if (r.opt.json) { /* a bad path is a usage error, found before the run, not after */
                FILE *f = fopen(r.opt.json, "w");
                if (!f) {
                        fprintf(stderr, "npu-onnx-test: %s: %s\n", r.opt.json, strerror(errno));
                        runner_free(&r);
                        return EXIT_USAGE;
                }
                fclose(f);
        }
        r.res = calloc(r.tests.n, sizeof(*r.res));
        r.retried = calloc(r.tests.n, 1);
        r.again = calloc(r.tests.n, sizeof(*r.again));
        r.retry = calloc(r.tests.n, sizeof(*r.retry));
        r.slots = calloc((size_t)r.opt.jobs, sizeof(*r.slots));
        /* batches small enough that every child gets several, so one slow batch does not
         * hold the end of the run */
        r.batch = r.tests.n / ((size_t)r.opt.jobs * 4);
        r.batch = r.batch < 1 ? 1 : r.batch > MAX_BATCH ? MAX_BATCH : r.batch;
        for (int i = 0; r.slots && i < r.opt.jobs; i++)
                if (!(r.slots[i].tests = calloc(r.batch, sizeof(size_t))))
                        r.batch = 0;
        if (!r.res || !r.retried || !r.again || !r.retry || !r.slots || !r.batch) {
                fprintf(stderr, "npu-onnx-test: out of memory\n");
                runner_free(&r);
                return EXIT_UNREACHABLE;
        }
        signal(SIGPIPE, SIG_IGN);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (connect_daemon(&r) < 0) {
                daemon_cleanup(&r.d);
                runner_free(&r);
                return EXIT_UNREACHABLE;
        }

        if (run_all(&r) < 0)
                rc = interrupted ? 128 + (int)interrupted : EXIT_UNREACHABLE;
        if (!interrupted) {
                all = json_array();
                for (size_t i = 0; i < r.tests.n; i++) {
                        if (strcmp(json_string_value(json_object_get(r.res[i], "status")), "pass") == 0)
                                passed++;
                        else
                                failed++;
                        json_object_del(r.res[i], "what"); /* for the line, not the report */
                        json_array_append(all, r.res[i]);
                }
                printf("%zu passed, %zu failed\n", passed, failed);
                if (r.opt.summary)
                        print_summary(all, passed, r.d.restarts);
                if (r.opt.json && write_report(r.opt.json, all, passed, failed) < 0 && rc == 0)
                        rc = EXIT_USAGE;
                json_decref(all);
        }
        if (r.d.own) {
                int st = daemon_stop(&r.d);
                if (st != 0 && !interrupted) {
                        fprintf(stderr, "npu-onnx-test: warning: npud exited with status %d\n", st);
                        show_log_tail(&r.d);
                }
                daemon_cleanup(&r.d);
        }
        runner_free(&r);
        return rc;
}
