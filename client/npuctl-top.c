/* npuctl top: a live view of the devices (health, memory, engine use, task rate), the
 * tenants on each device (tasks, engine time, share against the configured share, queue
 * wait) and the busiest sessions. Refreshes every --watch seconds (default 1) in place; q or
 * Ctrl-C quits, --count N stops after N refreshes. With --json it prints one JSON object per
 * refresh, one per line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npuctl.h"

static json_int_t get_int(json_t *o, const char *key)
{
        return json_integer_value(json_object_get(o, key));
}

static const char *get_str(json_t *o, const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : "?";
}

static double get_num(json_t *o, const char *key)
{
        return json_number_value(json_object_get(o, key));
}

static json_t *find_by(json_t *list, const char *key, json_t *match)
{
        json_t *e;
        size_t i;

        json_array_foreach(list, i, e)
                if (json_equal(json_object_get(e, key), match))
                        return e;
        return NULL;
}

/* Completed tasks per second since the previous refresh, as text ("-" on the first). */
static void rate(char *buf, size_t len, json_int_t now, json_t *prev_obj, const char *key, double dt)
{
        if (!prev_obj || dt <= 0)
                snprintf(buf, len, "-");
        else
                snprintf(buf, len, "%.0f", (double)(now - get_int(prev_obj, key)) / dt);
}

static const struct npuctl_col dev_cols[] = {
        { "id", "NPU", COL_DEFAULT },
        { "profile", "NAME", COL_DEFAULT },
        { "health", "HEALTH", COL_DEFAULT },
        { "memory", "MEMORY USED / TOTAL", COL_DEFAULT },
        { "cube", "CUBE%", COL_RIGHT | COL_DEFAULT },
        { "vector", "VECTOR%", COL_RIGHT | COL_DEFAULT },
        { "aicpu", "AICPU%", COL_RIGHT | COL_DEFAULT },
        { "dma", "DMA%", COL_RIGHT | COL_DEFAULT },
        { "streams", "STREAMS", COL_RIGHT | COL_DEFAULT },
        { "rate", "TASKS/S", COL_RIGHT | COL_DEFAULT },
        { "failed", "FAILED", COL_RIGHT | COL_DEFAULT },
        { NULL, NULL, 0 },
};

static const struct npuctl_col tenant_cols[] = {
        { "tenant", "TENANT", COL_DEFAULT },
        { "class", "CLASS", COL_DEFAULT },
        { "device", "NPU", COL_RIGHT | COL_DEFAULT },
        { "tasks", "TASKS", COL_RIGHT | COL_DEFAULT },
        { "rate", "TASKS/S", COL_RIGHT | COL_DEFAULT },
        { "engine", "ENGINE-S", COL_RIGHT | COL_DEFAULT },
        { "share", "SHARE", COL_RIGHT | COL_DEFAULT },
        { "target", "TARGET", COL_RIGHT | COL_DEFAULT },
        { "p50", "WAIT P50", COL_RIGHT | COL_DEFAULT },
        { "p99", "WAIT P99", COL_RIGHT | COL_DEFAULT },
        { NULL, NULL, 0 },
};

static const struct npuctl_col session_cols[] = {
        { "id", "SESSION", COL_DEFAULT },
        { "pid", "PID", COL_DEFAULT },
        { "comm", "COMMAND", COL_DEFAULT },
        { "mem", "DEVICE MEM", COL_RIGHT | COL_DEFAULT },
        { "streams", "STREAMS", COL_RIGHT | COL_DEFAULT },
        { "queued", "QUEUED", COL_RIGHT | COL_DEFAULT },
        { "rate", "TASKS/S", COL_RIGHT | COL_DEFAULT },
        { NULL, NULL, 0 },
};

#define TOP_SESSIONS 10

static int by_activity(const void *a, const void *b)
{
        json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
        json_int_t qx = get_int(x, "queued_tasks"), qy = get_int(y, "queued_tasks");
        json_int_t mx = get_int(x, "buffer_bytes"), my = get_int(y, "buffer_bytes");

        if (qx != qy)
                return qx < qy ? 1 : -1;
        return mx < my ? 1 : mx > my ? -1 : 0;
}

static void render(const struct npuctl *c, json_t *devs, json_t *sched, json_t *sess,
                   json_t *pdevs, json_t *psched, json_t *psess, double dt, const char *version)
{
        struct npuctl plain = *c; /* the sections are tables in their default form */
        struct npuctl_table *t;
        json_t *d, *e;
        size_t i, k, nsess = json_array_size(sess);
        time_t now = time(NULL);
        char when[32], b1[32], b2[32], buf[96];

        plain.fields = NULL;
        plain.csv = 0;
        strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
        printf("npuctl top - %s - npud %s - %zu device%s, %zu session%s    (q or Ctrl-C quits)\n\n",
               when, npuctl_esc(version), json_array_size(devs), json_array_size(devs) == 1 ? "" : "s", nsess,
               nsess == 1 ? "" : "s");

        t = npuctl_table_new(dev_cols);
        json_array_foreach(devs, i, d) {
                json_t *util = json_object_get(d, "utilization");
                npuctl_table_row(t);
                npuctl_table_int(t, "id", get_int(d, "id"));
                npuctl_table_str(t, "profile", get_str(d, "profile"));
                snprintf(buf, sizeof(buf), "%s%s", get_str(d, "health"),
                         json_is_true(json_object_get(d, "draining")) ? ", draining" : "");
                npuctl_table_str(t, "health", buf);
                npuctl_format_bytes((double)get_int(d, "memory_used"), b1, sizeof(b1));
                npuctl_format_bytes((double)get_int(d, "memory_total"), b2, sizeof(b2));
                snprintf(buf, sizeof(buf), "%s / %s", b1, b2);
                npuctl_table_str(t, "memory", buf);
                npuctl_table_num(t, "cube", "%.1f", get_num(util, "cube"));
                npuctl_table_num(t, "vector", "%.1f", get_num(util, "vector"));
                npuctl_table_num(t, "aicpu", "%.1f", get_num(util, "aicpu"));
                npuctl_table_num(t, "dma", "%.1f", get_num(util, "dma"));
                npuctl_table_int(t, "streams", get_int(d, "streams"));
                rate(buf, sizeof(buf), get_int(d, "tasks_completed"),
                     find_by(pdevs, "id", json_object_get(d, "id")), "tasks_completed", dt);
                npuctl_table_str(t, "rate", buf);
                npuctl_table_int(t, "failed", get_int(d, "tasks_failed"));
        }
        npuctl_table_print(&plain, t);
        npuctl_table_free(t);

        /* tenants that have run something; an idle tenant would only add noise here */
        t = npuctl_table_new(tenant_cols);
        json_array_foreach(sched, i, d) {
                json_t *pd = find_by(psched, "id", json_object_get(d, "id"));
                json_array_foreach(json_object_get(d, "tenants"), k, e) {
                        if (!get_int(e, "tasks"))
                                continue;
                        npuctl_table_row(t);
                        npuctl_table_str(t, "tenant", get_str(e, "name"));
                        npuctl_table_str(t, "class", get_str(e, "class"));
                        npuctl_table_int(t, "device", get_int(d, "id"));
                        npuctl_table_int(t, "tasks", get_int(e, "tasks"));
                        rate(buf, sizeof(buf), get_int(e, "tasks"),
                             find_by(json_object_get(pd, "tenants"), "name", json_object_get(e, "name")),
                             "tasks", dt);
                        npuctl_table_str(t, "rate", buf);
                        npuctl_table_num(t, "engine", "%.3f", get_num(e, "engine_seconds"));
                        npuctl_table_num(t, "share", "%.1f%%", 100 * get_num(e, "share"));
                        npuctl_table_num(t, "target", "%.1f%%", 100 * get_num(e, "target_share"));
                        npuctl_table_num(t, "p50", "%.0f us", get_num(e, "wait_p50_us"));
                        npuctl_table_num(t, "p99", "%.0f us", get_num(e, "wait_p99_us"));
                }
        }
        printf("\n");
        npuctl_table_print(&plain, t);
        npuctl_table_free(t);

        json_t **order = calloc(nsess + 1, sizeof(*order));
        if (!order)
                return;
        json_array_foreach(sess, i, e)
                order[i] = e;
        qsort(order, nsess, sizeof(*order), by_activity);
        t = npuctl_table_new(session_cols);
        for (i = 0; i < nsess && i < TOP_SESSIONS; i++) {
                e = order[i];
                npuctl_table_row(t);
                npuctl_table_int(t, "id", get_int(e, "id"));
                npuctl_table_int(t, "pid", get_int(e, "pid"));
                npuctl_table_str(t, "comm", get_str(e, "comm"));
                npuctl_table_bytes(t, "mem", (uint64_t)get_int(e, "buffer_bytes"));
                npuctl_table_int(t, "streams", get_int(e, "streams"));
                npuctl_table_int(t, "queued", get_int(e, "queued_tasks"));
                rate(buf, sizeof(buf), get_int(e, "tasks_completed"),
                     find_by(psess, "id", json_object_get(e, "id")), "tasks_completed", dt);
                npuctl_table_str(t, "rate", buf);
        }
        printf("\n");
        npuctl_table_print(&plain, t);
        npuctl_table_free(t);
        if (nsess > TOP_SESSIONS)
                printf("(%zu more sessions; npuctl sessions lists them all)\n", nsess - TOP_SESSIONS);
        free(order);
}

int npuctl_cmd_top(struct npuctl *c, int argc, char **argv)
{
        double interval = c->watch > 0 ? c->watch : 1.0, last = 0;
        json_t *prev[3] = { NULL, NULL, NULL }, *ver;
        char version[64] = "?";
        int code = 0;

        if (npuctl_nargs("top", argc, argv, 0, 0) < 0)
                return NPUCTL_USAGE;
        if (c->csv || c->fields) {
                fprintf(stderr, "npuctl top: --csv and --fields apply to listings (devices, sched, ...), not top\n");
                return NPUCTL_USAGE;
        }
        if (!(ver = npuctl_call(c, "version", NULL, &code)))
                return code;
        snprintf(version, sizeof(version), "%s", get_str(ver, "version"));
        json_decref(ver);
        for (long n = 1;; n++) {
                json_t *devs, *sched = NULL, *sess = NULL;
                struct timespec ts;
                double now;

                if (!(devs = npuctl_call(c, "devices", NULL, &code)) ||
                    !(sched = npuctl_call(c, "sched", NULL, &code)) ||
                    !(sess = npuctl_call(c, "sessions", NULL, &code))) {
                        json_decref(devs);
                        json_decref(sched);
                        break;
                }
                clock_gettime(CLOCK_MONOTONIC, &ts);
                now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
                if (c->json) {
                        json_t *o = json_pack("{s:I, s:O, s:O, s:O}", "time", (json_int_t)time(NULL),
                                              "devices", json_object_get(devs, "devices"),
                                              "sched", json_object_get(sched, "devices"),
                                              "sessions", json_object_get(sess, "sessions"));
                        char *s = npuctl_json_text(o, 0);
                        if (s)
                                printf("%s\n", s);
                        free(s);
                        json_decref(o);
                } else {
                        npuctl_clear(c);
                        if (!c->tty && n > 1)
                                printf("\n"); /* frames one after another in a file or pipe */
                        render(c, json_object_get(devs, "devices"), json_object_get(sched, "devices"),
                               json_object_get(sess, "sessions"), json_object_get(prev[0], "devices"),
                               json_object_get(prev[1], "devices"), json_object_get(prev[2], "sessions"),
                               last ? now - last : 0, version);
                }
                fflush(stdout);
                npuctl_esc_release();
                for (int i = 0; i < 3; i++)
                        json_decref(prev[i]);
                prev[0] = devs;
                prev[1] = sched;
                prev[2] = sess;
                last = now;
                if ((c->count && n >= c->count) || npuctl_wait(interval))
                        break;
        }
        for (int i = 0; i < 3; i++)
                json_decref(prev[i]);
        return code;
}
