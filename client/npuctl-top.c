/* npuctl top: a live view of the devices (health, memory, engine use, task rate), the
 * tenants on each device (tasks, engine time, share against the configured share, queue
 * wait) and the busiest sessions. Refreshes every --watch seconds (default 1) in place; q or
 * Ctrl-C quits, --count N stops after N refreshes. With --json it prints one JSON object per
 * refresh, one per line.
 *
 * Temperature and power come from npud's telemetry, and the one-minute cube average from its
 * history. An npud run with "telemetry": false (or one older than the history method) has
 * neither: the sensor columns then show n/a, the average is taken over top's own polls of
 * the plain status (so it covers only the time top has run), the task rates are deltas
 * between polls as always, and a line under the table says which columns are affected. */
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
        { "cube1m", "CUBE% 1M", COL_RIGHT | COL_DEFAULT },
        { "temp", "TEMP", COL_RIGHT | COL_DEFAULT },
        { "power", "POWER", COL_RIGHT | COL_DEFAULT },
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

/* The one-minute cube average when npud has no history: top's own polls, per device. */
#define OWN_WINDOW_S 60.0
#define OWN_SAMPLES 256
#define OWN_DEVICES 64
struct own_history {
        double t[OWN_DEVICES][OWN_SAMPLES], cube[OWN_DEVICES][OWN_SAMPLES];
        int head[OWN_DEVICES], count[OWN_DEVICES];
};

static void own_add(struct own_history *h, int dev, double now, double cube)
{
        if (dev < 0 || dev >= OWN_DEVICES)
                return;
        h->t[dev][h->head[dev]] = now;
        h->cube[dev][h->head[dev]] = cube;
        h->head[dev] = (h->head[dev] + 1) % OWN_SAMPLES;
        if (h->count[dev] < OWN_SAMPLES)
                h->count[dev]++;
}

/* Mean of the samples of the last minute; -1 when there are none. */
static double own_mean(const struct own_history *h, int dev, double now)
{
        double sum = 0;
        int n = 0;

        if (dev < 0 || dev >= OWN_DEVICES)
                return -1;
        for (int i = 0; i < h->count[dev]; i++) {
                int k = (h->head[dev] - 1 - i + OWN_SAMPLES) % OWN_SAMPLES;
                if (now - h->t[dev][k] > OWN_WINDOW_S)
                        break;
                sum += h->cube[dev][k];
                n++;
        }
        return n ? sum / n : -1;
}

/* Mean of npud's history series "cube" of device id (the last minute); -1 without one. */
static double hist_mean(json_t *hist, json_t *id)
{
        json_t *dh = find_by(json_object_get(hist, "devices"), "id", id), *v;
        double sum = 0;
        size_t i, n = 0;

        json_array_foreach(json_object_get(dh, "cube"), i, v) {
                sum += json_number_value(v);
                n++;
        }
        return n ? sum / (double)n : -1;
}

static int by_activity(const void *a, const void *b)
{
        json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
        json_int_t qx = get_int(x, "queued_tasks"), qy = get_int(y, "queued_tasks");
        json_int_t mx = get_int(x, "buffer_bytes"), my = get_int(y, "buffer_bytes");

        if (qx != qy)
                return qx < qy ? 1 : -1;
        return mx < my ? 1 : mx > my ? -1 : 0;
}

/* What this npud does not report, for the line under the device table. */
struct top_missing {
        int telemetry; /* no temperature/power in "devices" */
        int history;   /* no "history" method (or "telemetry": false) */
};

static void render(const struct npuctl *c, json_t *devs, json_t *sched, json_t *sess,
                   json_t *pdevs, json_t *psched, json_t *psess, double dt, const char *version,
                   json_t *hist, const struct own_history *own, double mono, struct top_missing *miss)
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
                double avg = hist ? hist_mean(hist, json_object_get(d, "id"))
                                  : own_mean(own, (int)get_int(d, "id"), mono);
                if (avg < 0)
                        npuctl_table_str(t, "cube1m", "-");
                else
                        npuctl_table_num(t, "cube1m", hist ? "%.1f" : "~%.1f", avg);
                if (json_is_number(json_object_get(d, "temperature"))) {
                        npuctl_table_num(t, "temp", "%.0f C", get_num(d, "temperature"));
                        npuctl_table_num(t, "power", "%.0f W", get_num(d, "power"));
                } else {
                        miss->telemetry = 1;
                        npuctl_table_str(t, "temp", "n/a");
                        npuctl_table_str(t, "power", "n/a");
                }
                npuctl_table_int(t, "streams", get_int(d, "streams"));
                rate(buf, sizeof(buf), get_int(d, "tasks_completed"),
                     find_by(pdevs, "id", json_object_get(d, "id")), "tasks_completed", dt);
                npuctl_table_str(t, "rate", buf);
                npuctl_table_int(t, "failed", get_int(d, "tasks_failed"));
        }
        npuctl_table_print(&plain, t);
        npuctl_table_free(t);
        miss->history = !hist;
        if (miss->telemetry || miss->history)
                printf("%s%s%s\n",
                       miss->telemetry ? "TEMP, POWER: n/a (npud reports no telemetry)" : "",
                       miss->telemetry && miss->history ? "; " : "",
                       miss->history ? "CUBE% 1M: ~ averages top's own polls (npud keeps no history)" : "");

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
        int code = 0, have_history = 1;
        struct own_history *own = calloc(1, sizeof(*own));

        if (!own) {
                fprintf(stderr, "npuctl top: out of memory\n");
                return NPUCTL_ERROR;
        }

        if (npuctl_nargs("top", argc, argv, 0, 0) < 0) {
                free(own);
                return NPUCTL_USAGE;
        }
        if (c->csv || c->fields) {
                fprintf(stderr, "npuctl top: --csv and --fields apply to listings (devices, sched, ...), not top\n");
                free(own);
                return NPUCTL_USAGE;
        }
        if (!(ver = npuctl_call(c, "version", NULL, &code))) {
                free(own);
                return code;
        }
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
                /* npud's history when it keeps one; an npud that answers "unsupported" (telemetry
                 * off) or does not know the method is not asked again */
                json_t *hist = NULL;
                if (have_history) {
                        char *text = NULL;
                        npu_status_t st = npu_admin_call(c->ctx, "history", "{\"samples\": 60}", &text);
                        if (st == NPU_OK)
                                hist = json_loads(text, 0, NULL);
                        else if (st == NPU_ERR_UNSUPPORTED || st == NPU_ERR_PROTOCOL || st == NPU_ERR_INVALID)
                                have_history = 0;
                        free(text);
                }
                json_t *d;
                size_t di;
                json_array_foreach(json_object_get(devs, "devices"), di, d)
                        own_add(own, (int)get_int(d, "id"), now,
                                get_num(json_object_get(d, "utilization"), "cube"));
                struct top_missing miss = { 0, 0 };
                if (c->json) {
                        json_t *o = json_pack("{s:I, s:O, s:O, s:O}", "time", (json_int_t)time(NULL),
                                              "devices", json_object_get(devs, "devices"),
                                              "sched", json_object_get(sched, "devices"),
                                              "sessions", json_object_get(sess, "sessions"));
                        json_t *un = json_array();
                        json_array_foreach(json_object_get(devs, "devices"), di, d)
                                if (!json_is_number(json_object_get(d, "temperature")))
                                        miss.telemetry = 1;
                        if (miss.telemetry) {
                                json_array_append_new(un, json_string("temperature"));
                                json_array_append_new(un, json_string("power"));
                        }
                        if (!hist)
                                json_array_append_new(un, json_string("history"));
                        if (hist)
                                json_object_set(o, "history", json_object_get(hist, "devices"));
                        json_object_set_new(o, "unavailable", un);
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
                               last ? now - last : 0, version, hist, own, now, &miss);
                }
                json_decref(hist);
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
        free(own);
        return code;
}
