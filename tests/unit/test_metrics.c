/* Unit tests of the Prometheus metrics (daemon/api/metrics.c): listen address parsing, the
 * tenant bound (later tenants count as "other"), label escaping, tenant-class mapping,
 * histogram bucket edges, and that completions are ignored while metrics are off. The
 * daemon is a hand-built struct npud with two devices and a Unix-socket listener. */
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/api/metrics.h"
#include "daemon/api/npud.h"

struct fixture {
        struct npud d;
        char dir[64];
};

static void fixture_start(struct fixture *f)
{
        char err[256] = "";

        memset(f, 0, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "/tmp/npud-metrics-unit-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(f->dir));
        f->d.base = event_base_new();
        ck_assert_ptr_nonnull(f->d.base);
        TAILQ_INIT(&f->d.sessions);
        f->d.started_ns = now_ns();
        f->d.ex.devices.count = 2;
        f->d.ex.devices.devices = calloc(2, sizeof(struct device));
        for (int i = 0; i < 2; i++) {
                f->d.ex.devices.devices[i].id = i;
                f->d.ex.devices.devices[i].desc.mem_size = 64ull << 30;
        }
        snprintf(f->d.config.metrics_listen, sizeof(f->d.config.metrics_listen), "%s/m.sock",
                 f->dir);
        ck_assert_msg(metrics_start(&f->d, err, sizeof(err)) == 0, "metrics_start: %s", err);
        ck_assert_ptr_nonnull(f->d.metrics);
}

static void fixture_stop(struct fixture *f)
{
        char path[128];

        metrics_stop(&f->d);
        ck_assert_ptr_null(f->d.metrics);
        snprintf(path, sizeof(path), "%s/m.sock", f->dir);
        ck_assert_int_ne(access(path, F_OK), 0); /* the socket file is removed */
        free(f->d.ex.devices.devices);
        event_base_free(f->d.base);
        rmdir(f->dir);
}

/* The rendered exposition as a NUL-terminated string (caller frees). */
static char *render(struct npud *d)
{
        struct evbuffer *b = evbuffer_new();
        size_t n;
        char *s;

        ck_assert_int_eq(metrics_render(d, b), 0);
        n = evbuffer_get_length(b);
        s = malloc(n + 1);
        evbuffer_remove(b, s, n);
        s[n] = '\0';
        evbuffer_free(b);
        ck_assert_msg(n > 0 && s[n - 1] == '\n', "no final newline");
        return s;
}

static void assert_line(const char *text, const char *line)
{
        char *want = malloc(strlen(line) + 3);

        sprintf(want, "\n%s\n", line);
        ck_assert_msg(strstr(text, want) != NULL, "missing line: %s", line);
        free(want);
}

START_TEST(test_parse_listen)
{
        static const char *const good[] = { "127.0.0.1:9464", "0.0.0.0:1", "[::1]:65535",
                                            "[fe80::1]:80", "/run/npud/metrics.sock" };
        static const char *const bad[] = { "", "localhost:9464", "127.0.0.1", "127.0.0.1:",
                                           "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:9x",
                                           "[::1]", "[::1]:", "::1:9464", "[nope]:80",
                                           "relative.sock", "1.2.3.4:+80" };
        struct sockaddr_storage ss;
        socklen_t len;
        char err[256], longpath[200];

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                ck_assert_msg(metrics_parse_listen(good[i], &ss, &len, err, sizeof(err)) == 0,
                              "%s rejected: %s", good[i], err);
        ck_assert_int_eq(metrics_parse_listen("[::1]:9464", &ss, &len, err, sizeof(err)), 0);
        ck_assert_int_eq(ss.ss_family, AF_INET6);
        ck_assert_int_eq(metrics_parse_listen("/x.sock", &ss, &len, err, sizeof(err)), 0);
        ck_assert_int_eq(ss.ss_family, AF_UNIX);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(metrics_parse_listen(bad[i], &ss, &len, err, sizeof(err)) == -EINVAL,
                              "'%s' accepted", bad[i]);
        memset(longpath, 'a', sizeof(longpath) - 1);
        longpath[0] = '/';
        longpath[sizeof(longpath) - 1] = '\0';
        ck_assert_int_eq(metrics_parse_listen(longpath, &ss, &len, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(test_off_is_noop)
{
        struct npud d;
        char err[64];

        memset(&d, 0, sizeof(d));
        ck_assert_int_eq(metrics_start(&d, err, sizeof(err)), 0); /* no listen address */
        ck_assert_ptr_null(d.metrics);
        metrics_task_done(&d, "a", "normal", 0, 0, 1000);
        ck_assert_int_eq(metrics_render(&d, NULL), -EINVAL);
        metrics_stop(&d);
}
END_TEST

START_TEST(test_tenant_bound)
{
        struct fixture f;
        char name[32], line[160], *text;

        fixture_start(&f);
        /* 300 tenants: the first METRICS_MAX_TENANTS get series, the rest are "other" */
        for (int i = 0; i < 300; i++) {
                snprintf(name, sizeof(name), "t%d", i);
                metrics_task_done(&f.d, name, "normal", 0, 0, 1000);
                metrics_task_done(&f.d, name, "normal", 0, 0, 1000);
        }
        metrics_task_done(&f.d, "t0", "normal", 1, 1, 1000);
        metrics_task_done(&f.d, "other", "normal", 0, 0, 1000); /* a real "other" joins it */
        metrics_task_done(&f.d, "t0", "normal", 2, 0, 1000);   /* no such device: ignored */
        metrics_task_done(&f.d, "t0", "normal", -1, 0, 1000);
        text = render(&f.d);
        assert_line(text, "npud_tasks_total{tenant=\"t0\",device=\"0\",status=\"completed\"} 2");
        assert_line(text, "npud_tasks_total{tenant=\"t0\",device=\"1\",status=\"failed\"} 1");
        assert_line(text, "npud_tasks_total{tenant=\"t255\",device=\"0\",status=\"completed\"} 2");
        ck_assert_ptr_null(strstr(text, "tenant=\"t256\""));
        snprintf(line, sizeof(line),
                 "npud_tasks_total{tenant=\"other\",device=\"0\",status=\"completed\"} %d",
                 (300 - METRICS_MAX_TENANTS) * 2 + 1);
        assert_line(text, line);
        ck_assert_ptr_null(strstr(text, "tenant=\"t1\",device=\"1\"")); /* unused devices: none */
        assert_line(text, "npud_task_latency_seconds_count{class=\"normal\"} 602");
        free(text);
        fixture_stop(&f);
}
END_TEST

START_TEST(test_escaping_and_classes)
{
        struct fixture f;
        char *text;

        fixture_start(&f);
        metrics_task_done(&f.d, "we\"ird\\te\nnant", "latency-critical", 1, 0, 10000);
        metrics_task_done(&f.d, "a", "best-effort", 0, 0, 10000000000ull);  /* exactly 10 s */
        metrics_task_done(&f.d, "a", "best-effort", 0, 0, 10000000001ull);  /* beyond */
        metrics_task_done(&f.d, "a", "no-such-class", 0, 0, 10001);
        metrics_task_done(&f.d, "a", NULL, 0, 0, 0);
        text = render(&f.d);
        assert_line(text, "npud_tasks_total{tenant=\"we\\\"ird\\\\te\\nnant\",device=\"1\","
                          "status=\"completed\"} 1");
        /* a bound is inclusive (le) */
        assert_line(text, "npud_task_latency_seconds_bucket{class=\"latency-critical\",le=\"1e-05\"} 1");
        assert_line(text, "npud_task_latency_seconds_bucket{class=\"best-effort\",le=\"5\"} 0");
        assert_line(text, "npud_task_latency_seconds_bucket{class=\"best-effort\",le=\"10\"} 1");
        assert_line(text, "npud_task_latency_seconds_bucket{class=\"best-effort\",le=\"+Inf\"} 2");
        assert_line(text, "npud_task_latency_seconds_sum{class=\"best-effort\"} 20.000000001");
        /* unknown or missing classes count as normal */
        assert_line(text, "npud_task_latency_seconds_bucket{class=\"normal\",le=\"1e-05\"} 1");
        assert_line(text, "npud_task_latency_seconds_bucket{class=\"normal\",le=\"2.5e-05\"} 2");
        assert_line(text, "npud_task_latency_seconds_count{class=\"normal\"} 2");
        assert_line(text, "npud_device_memory_total_bytes{device=\"1\"} 68719476736");
        assert_line(text, "npud_device_health{device=\"0\",state=\"ok\"} 1");
        assert_line(text, "npud_queue_depth{device=\"0\"} 0");
        assert_line(text, "npud_sessions 0");
        assert_line(text, "npud_cpu_wake_latency_held 0"); /* no latency-critical task came */
        free(text);
        fixture_stop(&f);
}
END_TEST

static Suite *metrics_suite(void)
{
        Suite *s = suite_create("metrics");
        TCase *tc = tcase_create("metrics");

        tcase_add_test(tc, test_parse_listen);
        tcase_add_test(tc, test_off_is_noop);
        tcase_add_test(tc, test_tenant_bound);
        tcase_add_test(tc, test_escaping_and_classes);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(metrics_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
