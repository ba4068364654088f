/* Prometheus metrics over evhttp (see metrics.h). Everything here runs on the loop thread,
 * so scrapes read daemon state directly and the counters need no locks. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "metrics.h"
#include "util/log.h"
#include "util/sock.h"
#include "npud.h"
#include "session.h"
#include "manage.h"
#include "daemon/exec/cpulat.h"
#include "daemon/exec/lcpoll.h"
#include "daemon/exec/sched.h"
#include "daemon/exec/loopcpu.h"
#include "daemon/exec/tenant.h"

#ifndef NPUD_VERSION
#define NPUD_VERSION "0.1.0"
#endif

#define OTHER_TENANT "other"

static const char *const engine_names[OPS_ENGINE_COUNT] = { "cube", "vector", "aicpu", "dma" };

/* Tenant classes in dispatch priority order; an unknown class counts as "normal". */
static const char *const class_names[] = { "latency-critical", "normal", "best-effort" };
#define NCLASSES (sizeof(class_names) / sizeof(class_names[0]))
#define CLASS_NORMAL 1

/* Latency bucket bounds, 10 µs to 10 s in 1-2.5-5 steps; `le` is written as the text here so
 * the exposition shows round numbers. */
static const struct {
        uint64_t ns;
        const char *le;
} latency_buckets[] = {
        { 10000ull, "1e-05" },          { 25000ull, "2.5e-05" },      { 50000ull, "5e-05" },
        { 100000ull, "0.0001" },        { 250000ull, "0.00025" },     { 500000ull, "0.0005" },
        { 1000000ull, "0.001" },        { 2500000ull, "0.0025" },     { 5000000ull, "0.005" },
        { 10000000ull, "0.01" },        { 25000000ull, "0.025" },     { 50000000ull, "0.05" },
        { 100000000ull, "0.1" },        { 250000000ull, "0.25" },     { 500000000ull, "0.5" },
        { 1000000000ull, "1" },         { 2500000000ull, "2.5" },     { 5000000000ull, "5" },
        { 10000000000ull, "10" },
};
#define NBUCKETS (sizeof(latency_buckets) / sizeof(latency_buckets[0]))

struct metrics_tenant {
        char *name;
        uint64_t *done; /* [device * 3 + outcome (EXEC_TASK_*)] */
};

struct metrics_latency {
        uint64_t buckets[NBUCKETS + 1]; /* per bucket, not cumulative; last is +Inf */
        uint64_t count;
        double sum_seconds; /* a double: a nanosecond sum would wrap within months under load */
};

struct metrics {
        struct npud *npud;
        struct evhttp *http;
        char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* removed at stop */
        int ndevices;
        struct metrics_tenant tenants[METRICS_MAX_TENANTS];
        int ntenants;
        struct metrics_tenant other; /* tenants beyond the limit, and ones that could not be added */
        struct metrics_tenant *last; /* most tasks complete for the tenant of the one before */
        struct metrics_latency latency[NCLASSES];
};

static int parse_port(const char *s, uint16_t *ret_port)
{
        unsigned long v = 0;

        if (!*s || strlen(s) > 5)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long)(*p - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        *ret_port = (uint16_t)v;
        return 0;
}

int metrics_parse_listen(const char *text, struct sockaddr_storage *ret_addr,
                         socklen_t *ret_len, char *err, size_t errlen)
{
        struct sockaddr_storage ss;
        char host[64];
        const char *colon;
        uint16_t port;
        size_t n;

        memset(&ss, 0, sizeof(ss));
        if (text[0] == '/') {
                struct sockaddr_un *un = (struct sockaddr_un *)&ss;

                if (strlen(text) >= sizeof(un->sun_path)) {
                        snprintf(err, errlen, "socket path longer than %zu bytes",
                                 sizeof(un->sun_path) - 1);
                        return -EINVAL;
                }
                un->sun_family = AF_UNIX;
                memcpy(un->sun_path, text, strlen(text) + 1);
                *ret_addr = ss;
                *ret_len = sizeof(*un);
                return 0;
        }
        if (text[0] == '[') {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                const char *rb = strstr(text, "]:");

                n = rb ? (size_t)(rb - text - 1) : 0;
                if (!rb || n == 0 || n >= sizeof(host))
                        goto bad;
                memcpy(host, text + 1, n);
                host[n] = '\0';
                if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1 ||
                    parse_port(rb + 2, &port) < 0)
                        goto bad;
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(port);
                *ret_addr = ss;
                *ret_len = sizeof(*in6);
                return 0;
        }
        colon = strrchr(text, ':');
        n = colon ? (size_t)(colon - text) : 0;
        if (colon && n > 0 && n < sizeof(host)) {
                struct sockaddr_in *in = (struct sockaddr_in *)&ss;

                memcpy(host, text, n);
                host[n] = '\0';
                if (inet_pton(AF_INET, host, &in->sin_addr) == 1 && parse_port(colon + 1, &port) == 0) {
                        in->sin_family = AF_INET;
                        in->sin_port = htons(port);
                        *ret_addr = ss;
                        *ret_len = sizeof(*in);
                        return 0;
                }
        }
bad:
        snprintf(err, errlen, "'%s' is not IPV4:PORT, [IPV6]:PORT or an absolute socket path",
                 text);
        return -EINVAL;
}

/* Output with sticky failure, so rendering checks for out-of-memory once at the end. */
struct out {
        struct evbuffer *buf;
        int failed;
};

static void out_printf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(struct out *o, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        if (evbuffer_add_vprintf(o->buf, fmt, ap) < 0)
                o->failed = 1;
        va_end(ap);
}

/* Label values are arbitrary strings (tenant names): escape what the format requires. */
static void out_label_value(struct out *o, const char *v)
{
        for (; *v; v++) {
                if (*v == '\\')
                        out_printf(o, "\\\\");
                else if (*v == '"')
                        out_printf(o, "\\\"");
                else if (*v == '\n')
                        out_printf(o, "\\n");
                else if (evbuffer_add(o->buf, v, 1) < 0)
                        o->failed = 1;
        }
}

static void out_family(struct out *o, const char *name, const char *type, const char *help)
{
        out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Nanoseconds as exact decimal seconds. */
static void out_seconds(struct out *o, uint64_t ns)
{
        const uint64_t second = 1000000000;

        out_printf(o, "%" PRIu64 ".%09" PRIu64 "\n", ns / second, ns % second);
}

static void render_devices(struct out *o, struct npud *d)
{
        struct device_registry *r = &d->ex.devices;
        static const enum device_health states[] = { DEVICE_OK, DEVICE_FAILED };

        out_family(o, "npud_device_memory_used_bytes", "gauge",
                   "Device memory reserved by live buffers.");
        for (int i = 0; i < r->count; i++)
                out_printf(o, "npud_device_memory_used_bytes{device=\"%d\"} %" PRIu64 "\n",
                           r->devices[i].id, r->devices[i].mem_used);
        out_family(o, "npud_device_memory_total_bytes", "gauge", "Device memory size.");
        for (int i = 0; i < r->count; i++)
                out_printf(o, "npud_device_memory_total_bytes{device=\"%d\"} %" PRIu64 "\n",
                           r->devices[i].id, r->devices[i].desc.mem_size);
        out_family(o, "npud_device_health", "gauge",
                   "Device health: 1 for the current state, 0 for the others.");
        for (int i = 0; i < r->count; i++)
                for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++)
                        out_printf(o, "npud_device_health{device=\"%d\",state=\"%s\"} %d\n",
                                   r->devices[i].id, device_health_name(states[k]),
                                   r->devices[i].health == states[k]);
        out_family(o, "npud_device_draining", "gauge",
                   "1 while the device is drained (takes no new streams).");
        for (int i = 0; i < r->count; i++)
                out_printf(o, "npud_device_draining{device=\"%d\"} %d\n", r->devices[i].id,
                           r->devices[i].draining != 0);
        out_family(o, "npud_engine_busy_seconds_total", "counter",
                   "Core-seconds engines spent running completed work.");
        for (int i = 0; i < r->count; i++)
                for (int k = 0; k < OPS_ENGINE_COUNT; k++) {
                        out_printf(o, "npud_engine_busy_seconds_total{device=\"%d\",engine=\"%s\"} ",
                                   r->devices[i].id, engine_names[k]);
                        out_seconds(o, r->devices[i].busy_ns[k]);
                }
        out_family(o, "npud_engine_cores", "gauge", "Cores of each engine kind.");
        for (int i = 0; i < r->count; i++)
                for (int k = 0; k < OPS_ENGINE_COUNT; k++)
                        out_printf(o, "npud_engine_cores{device=\"%d\",engine=\"%s\"} %d\n",
                                   r->devices[i].id, engine_names[k], r->devices[i].desc.cores[k]);
}

/* Identity and telemetry (backend.h), as of the last utilization period: dcgm-exporter's and
 * npu-exporter's device info, temperature, power, clock and ECC series. */
static void render_telemetry(struct out *o, struct npud *d)
{
        struct device_registry *r = &d->ex.devices;

        out_family(o, "npud_device_info", "gauge", "Always 1; the device's identity in its labels.");
        for (int i = 0; i < r->count; i++) {
                const struct backend_device_desc *dd = &r->devices[i].desc;
                out_printf(o, "npud_device_info{device=\"%d\",uuid=\"", r->devices[i].id);
                out_label_value(o, dd->uuid);
                out_printf(o, "\",serial=\"");
                out_label_value(o, dd->serial);
                out_printf(o, "\",profile=\"");
                out_label_value(o, dd->profile);
                out_printf(o, "\",bus_id=\"");
                out_label_value(o, dd->bus_id);
                out_printf(o, "\",firmware=\"");
                out_label_value(o, dd->firmware);
                out_printf(o, "\",driver=\"");
                out_label_value(o, dd->driver);
                out_printf(o, "\"} 1\n");
        }
        /* sensor figures only when npud reads them ("telemetry": false: none, not zeros) */
        if (!d->config.no_telemetry) {
                out_family(o, "npud_device_temperature_celsius", "gauge", "Die temperature.");
                for (int i = 0; i < r->count; i++)
                        out_printf(o, "npud_device_temperature_celsius{device=\"%d\"} %.2f\n", r->devices[i].id,
                                   r->devices[i].telemetry.temperature_c);
                out_family(o, "npud_device_power_watts", "gauge", "Board power draw.");
                for (int i = 0; i < r->count; i++)
                        out_printf(o, "npud_device_power_watts{device=\"%d\"} %.2f\n", r->devices[i].id,
                                   r->devices[i].telemetry.power_w);
                out_family(o, "npud_device_power_limit_watts", "gauge", "Board power limit.");
                for (int i = 0; i < r->count; i++)
                        out_printf(o, "npud_device_power_limit_watts{device=\"%d\"} %.0f\n", r->devices[i].id,
                                   r->devices[i].desc.power_limit_w);
                out_family(o, "npud_device_clock_mhz", "gauge", "AI core clock.");
                for (int i = 0; i < r->count; i++)
                        out_printf(o, "npud_device_clock_mhz{device=\"%d\"} %.0f\n", r->devices[i].id,
                                   r->devices[i].telemetry.clock_mhz);
                out_family(o, "npud_device_ecc_errors_total", "counter",
                           "HBM ECC errors since the driver loaded, corrected and uncorrected.");
                for (int i = 0; i < r->count; i++) {
                        out_printf(o, "npud_device_ecc_errors_total{device=\"%d\",type=\"corrected\"} %" PRIu64 "\n",
                                   r->devices[i].id, r->devices[i].telemetry.ecc_corrected);
                        out_printf(o, "npud_device_ecc_errors_total{device=\"%d\",type=\"uncorrected\"} %" PRIu64 "\n",
                                   r->devices[i].id, r->devices[i].telemetry.ecc_uncorrected);
                }
        }
        out_family(o, "npud_engine_utilization_ratio", "gauge",
                   "Fraction of an engine's cores busy over the last utilization period (1 s).");
        for (int i = 0; i < r->count; i++)
                for (int k = 0; k < OPS_ENGINE_COUNT; k++)
                        out_printf(o, "npud_engine_utilization_ratio{device=\"%d\",engine=\"%s\"} %.4f\n",
                                   r->devices[i].id, engine_names[k], r->devices[i].util[k]);
}

/* Faults injected by kind, resets and failed tasks by error code, per device: counters
 * that exist from the start (zero until something happens) for the fault kinds and resets,
 * and only for the codes seen for task errors (there are many codes, most never occur). */
static void render_faults(struct out *o, struct npud *d)
{
        const struct device_registry *r = &d->ex.devices;

        out_family(o, "npud_device_faults_total", "counter",
                   "Faults injected into the device, by kind (simulator fault hooks).");
        for (int i = 0; i < r->count; i++)
                for (int k = FAULT_FAIL_NEXT; k <= FAULT_ECC_UNCORRECTED; k++)
                        out_printf(o, "npud_device_faults_total{device=\"%d\",kind=\"%s\"} %" PRIu64 "\n",
                                   r->devices[i].id, manage_fault_name(k), r->devices[i].faults[k]);
        out_family(o, "npud_device_resets_total", "counter", "Device resets begun (npuctl reset, D-Bus).");
        for (int i = 0; i < r->count; i++)
                out_printf(o, "npud_device_resets_total{device=\"%d\"} %" PRIu64 "\n", r->devices[i].id,
                           r->devices[i].resets);
        out_family(o, "npud_task_errors_total", "counter",
                   "Tasks that failed on the device, by error kind (the protocol's error names).");
        for (int i = 0; i < r->count; i++)
                for (int c = 1; c <= PROTO_E_COUNT; c++)
                        if (r->devices[i].task_errors[c])
                                out_printf(o, "npud_task_errors_total{device=\"%d\",kind=\"%s\"} %" PRIu64 "\n",
                                           r->devices[i].id, c < PROTO_E_COUNT ? proto_error_name(c) : "unknown",
                                           r->devices[i].task_errors[c]);
}

/* Memory of the current tenants: what their sessions hold over all devices, and the quota
 * in force (the file's or one set at run time); no quota series for an unlimited tenant. */
static void render_tenants(struct out *o, struct npud *d)
{
        const struct tenant_registry *r = &d->tenants;

        out_family(o, "npud_tenant_memory_used_bytes", "gauge",
                   "Device memory held by the tenant's sessions, all devices.");
        for (int i = 0; i < r->ntenants; i++) {
                out_printf(o, "npud_tenant_memory_used_bytes{tenant=\"");
                out_label_value(o, r->tenants[i]->pol.name);
                out_printf(o, "\"} %" PRIu64 "\n", r->tenants[i]->mem_used);
        }
        out_family(o, "npud_tenant_memory_quota_bytes", "gauge",
                   "The tenant's device-memory quota over all devices (absent: unlimited).");
        for (int i = 0; i < r->ntenants; i++) {
                if (!r->tenants[i]->pol.quota_total)
                        continue;
                out_printf(o, "npud_tenant_memory_quota_bytes{tenant=\"");
                out_label_value(o, r->tenants[i]->pol.name);
                out_printf(o, "\"} %" PRIu64 "\n", r->tenants[i]->pol.quota_total);
        }
        out_family(o, "npud_tenant_sessions", "gauge", "Connected sessions of the tenant.");
        for (int i = 0; i < r->ntenants; i++) {
                out_printf(o, "npud_tenant_sessions{tenant=\"");
                out_label_value(o, r->tenants[i]->pol.name);
                out_printf(o, "\"} %" PRIu32 "\n", r->tenants[i]->sessions);
        }
}

/* Queued tasks are counted where they wait, on the streams of live sessions. */
static void render_queues(struct out *o, struct npud *d)
{
        uint64_t *depth = calloc((size_t)d->ex.devices.count + 1, sizeof(*depth));
        struct session *s;
        struct stream *st;

        if (!depth) {
                o->failed = 1;
                return;
        }
        TAILQ_FOREACH(s, &d->sessions, link)
                TAILQ_FOREACH(st, &s->streams, session_link)
                        if (st->dev && st->dev->id >= 0 && st->dev->id < d->ex.devices.count)
                                depth[st->dev->id] += st->ntasks;
        out_family(o, "npud_queue_depth", "gauge",
                   "Tasks queued on the device's streams, not yet running.");
        for (int i = 0; i < d->ex.devices.count; i++)
                out_printf(o, "npud_queue_depth{device=\"%d\"} %" PRIu64 "\n",
                           d->ex.devices.devices[i].id, depth[i]);
        free(depth);
}

static void render_tenant_tasks(struct out *o, struct metrics *m, const struct metrics_tenant *t)
{
        static const char *const status[3] = { "completed", "failed", "cancelled" };

        for (int dev = 0; dev < m->ndevices; dev++)
                for (int f = 0; f < 3; f++) {
                        if (!t->done[dev * 3] && !t->done[dev * 3 + 1] && !t->done[dev * 3 + 2])
                                continue; /* no series for devices the tenant never used */
                        out_printf(o, "npud_tasks_total{tenant=\"");
                        out_label_value(o, t->name);
                        out_printf(o, "\",device=\"%d\",status=\"%s\"} %" PRIu64 "\n", dev,
                                   status[f], t->done[dev * 3 + f]);
                }
}

static void render_tasks(struct out *o, struct metrics *m)
{
        out_family(o, "npud_tasks_total", "counter", "Tasks that finished on an engine: completed, failed, or cancelled behind a failure in the same stream.");
        for (int i = 0; i < m->ntenants; i++)
                render_tenant_tasks(o, m, &m->tenants[i]);
        render_tenant_tasks(o, m, &m->other);
        out_family(o, "npud_task_latency_seconds", "histogram",
                   "Time from enqueue to completion of tasks that finished on an engine.");
        for (size_t c = 0; c < NCLASSES; c++) {
                const struct metrics_latency *l = &m->latency[c];
                uint64_t cum = 0;

                for (size_t b = 0; b <= NBUCKETS; b++) {
                        cum += l->buckets[b];
                        out_printf(o, "npud_task_latency_seconds_bucket{class=\"%s\",le=\"%s\"} %" PRIu64 "\n",
                                   class_names[c], b < NBUCKETS ? latency_buckets[b].le : "+Inf", cum);
                }
                out_printf(o, "npud_task_latency_seconds_sum{class=\"%s\"} %.9f\n", class_names[c],
                           l->sum_seconds);
                out_printf(o, "npud_task_latency_seconds_count{class=\"%s\"} %" PRIu64 "\n",
                           class_names[c], l->count);
        }
}

int metrics_render(struct npud *d, struct evbuffer *buf)
{
        struct out out = { buf, 0 }, *o = &out;
        struct metrics *m = d->metrics;
        uint64_t now = now_ns();

        if (!m)
                return -EINVAL;

        out_family(o, "npud_build_info", "gauge", "npud build information; always 1.");
        out_printf(o, "npud_build_info{version=\"");
        out_label_value(o, NPUD_VERSION);
        out_printf(o, "\"} 1\n");
        out_family(o, "npud_uptime_seconds", "gauge", "Time since npud started.");
        out_printf(o, "npud_uptime_seconds ");
        out_seconds(o, now > d->started_ns ? now - d->started_ns : 0);
        out_family(o, "npud_sessions", "gauge", "Connected client sessions.");
        out_printf(o, "npud_sessions %" PRIu32 "\n", d->nsessions);
        out_family(o, "npud_cpu_wake_latency_held", "gauge",
                   "1 while npud holds a CPU wake-up latency request (PM QoS) for latency-critical work.");
        out_printf(o, "npud_cpu_wake_latency_held %d\n", cpulat_held() >= 0);
        out_family(o, "npud_cpu_wake_latency_requests_total", "counter",
                   "CPU wake-up latency requests made (each after a time without latency-critical work).");
        out_printf(o, "npud_cpu_wake_latency_requests_total %" PRIu64 "\n", cpulat_requests());
        out_family(o, "npud_loop_thread_cpu", "gauge",
                   "The CPU npud's event loop thread is kept on, following its latency-critical clients; -1 when free.");
        out_printf(o, "npud_loop_thread_cpu %d\n", loopcpu_pinned());
        out_family(o, "npud_loop_thread_moves_total", "counter",
                   "Times the event loop thread moved onto a latency-critical client's CPU.");
        out_printf(o, "npud_loop_thread_moves_total %" PRIu64 "\n", loopcpu_moves());
        out_family(o, "npud_loop_thread_avoid_moves_total", "counter",
                   "Times the event loop thread was moved off, or back onto, the CPUs running best-effort work.");
        out_printf(o, "npud_loop_thread_avoid_moves_total %" PRIu64 "\n", loopcpu_avoid_moves());
        struct lcpoll_stats lps;
        lcpoll_stats(&lps);
        out_family(o, "npud_lc_poll_windows_total", "counter",
                   "Windows in which a latency-critical client's cadence predicted its next request (the loop thread polls then).");
        out_printf(o, "npud_lc_poll_windows_total %" PRIu64 "\n", lps.windows);
        out_family(o, "npud_lc_poll_in_window_total", "counter",
                   "Latency-critical requests that came in their predicted window.");
        out_printf(o, "npud_lc_poll_in_window_total %" PRIu64 "\n", lps.in_window);
        out_family(o, "npud_lc_poll_caught_total", "counter",
                   "Latency-critical requests that found the event loop thread polling, not asleep.");
        out_printf(o, "npud_lc_poll_caught_total %" PRIu64 "\n", lps.caught);
        out_family(o, "npud_lc_poll_seconds_total", "counter",
                   "Time the event loop thread spent polling for latency-critical requests.");
        out_printf(o, "npud_lc_poll_seconds_total ");
        out_seconds(o, lps.poll_ns);
        out_family(o, "npud_lc_poll_held_units_total", "counter",
                   "Best-effort units whose completion waited while the event loop thread polled for a latency-critical request.");
        out_printf(o, "npud_lc_poll_held_units_total %" PRIu64 "\n", sched_held_background());
        render_devices(o, d);
        render_telemetry(o, d);
        render_faults(o, d);
        render_queues(o, d);
        render_tenants(o, d);
        render_tasks(o, m);
        return o->failed ? -ENOMEM : 0;
}

static void on_request(struct evhttp_request *req, void *arg)
{
        struct metrics *m = arg;
        struct evbuffer *buf;
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        struct evkeyvalq *headers = evhttp_request_get_output_headers(req);

        if (!path || strcmp(path, "/metrics") != 0) {
                evhttp_send_error(req, HTTP_NOTFOUND, NULL);
                return;
        }
        if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
                evhttp_add_header(headers, "Allow", "GET, HEAD");
                evhttp_send_error(req, HTTP_BADMETHOD, NULL);
                return;
        }
        buf = evbuffer_new();
        if (!buf || metrics_render(m->npud, buf) < 0) {
                evhttp_send_error(req, HTTP_INTERNAL, NULL);
        } else {
                evhttp_add_header(headers, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
                evhttp_send_reply(req, HTTP_OK, "OK", buf);
        }
        if (buf)
                evbuffer_free(buf);
}

/* Is something accepting connections on this Unix socket path? */
/* A listening, non-blocking socket on addr, or -errno with err filled. A stale Unix socket
 * file (nothing listening) is replaced; a live one or any other file is left alone. */
static int listen_socket(const struct sockaddr_storage *addr, socklen_t len, const char *what,
                         char *err, size_t errlen)
{
        const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
        struct stat st;
        int fd, e, one = 1;

        if (addr->ss_family == AF_UNIX && lstat(un->sun_path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode) || unix_socket_alive(un)) {
                        snprintf(err, errlen, "metrics listener %s: %s", what,
                                 S_ISSOCK(st.st_mode) ? "already in use" : "exists and is not a socket");
                        return -EADDRINUSE;
                }
                unlink(un->sun_path);
        }
        fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                goto fail;
        if (addr->ss_family != AF_UNIX &&
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
                goto fail;
        if (addr->ss_family == AF_INET6 &&
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
                goto fail;
        if (bind(fd, (const struct sockaddr *)addr, len) < 0 || listen(fd, 16) < 0)
                goto fail;
        /* Connecting needs write permission on the socket. Under the shipped unit's UMask=0077
         * it would be 0600, for the npud user alone; 0660 lets the scraper in when it is in
         * npud's group (npu), and the directory's mode decides the rest. */
        if (addr->ss_family == AF_UNIX && chmod(un->sun_path, 0660) < 0)
                goto fail;
        return fd;
fail:
        e = -errno;
        if (fd >= 0)
                close(fd);
        snprintf(err, errlen, "metrics listener %s: %s", what, strerror(-e));
        return e;
}

static void tenant_free(struct metrics_tenant *t)
{
        free(t->name);
        free(t->done);
}

static int tenant_init(struct metrics_tenant *t, const char *name, int ndevices)
{
        t->name = strdup(name);
        t->done = calloc((size_t)ndevices * 3 + 3, sizeof(*t->done));
        if (!t->name || !t->done) {
                tenant_free(t);
                return -ENOMEM;
        }
        return 0;
}

static void metrics_free(struct metrics *m)
{
        if (!m)
                return;
        if (m->http)
                evhttp_free(m->http);
        if (m->unix_path[0])
                unlink(m->unix_path);
        for (int i = 0; i < m->ntenants; i++)
                tenant_free(&m->tenants[i]);
        tenant_free(&m->other);
        free(m);
}

/* Name the address the listener really has (a port 0 in the config picks one), so an
 * operator reading the log knows where to point the scraper. */
static void log_listen_address(int fd, const char *where)
{
        struct sockaddr_storage a;
        socklen_t alen = sizeof(a);
        char host[INET6_ADDRSTRLEN] = "?";

        if (getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
                log_info("metrics: listening on %s", where);
                return;
        }
        if (a.ss_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)&a;
                inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
                log_info("metrics: listening on http://%s:%u/metrics", host, ntohs(in->sin_port));
        } else if (a.ss_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a;
                inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
                log_info("metrics: listening on http://[%s]:%u/metrics", host, ntohs(in6->sin6_port));
        } else {
                log_info("metrics: listening on %s", where); /* a socket path */
        }
}

int metrics_start(struct npud *d, char *err, size_t errlen)
{
        const char *where = d->config.metrics_listen;
        struct sockaddr_storage addr;
        struct evconnlistener *lev;
        struct metrics *m;
        socklen_t len;
        int fd, e;

        if (!where[0])
                return 0;
        if ((e = metrics_parse_listen(where, &addr, &len, err, errlen)) < 0)
                return e;
        m = calloc(1, sizeof(*m));
        if (!m || tenant_init(&m->other, OTHER_TENANT, d->ex.devices.count) < 0) {
                free(m);
                snprintf(err, errlen, "metrics: out of memory");
                return -ENOMEM;
        }
        m->npud = d;
        m->ndevices = d->ex.devices.count;
        m->http = evhttp_new(d->base);
        if (!m->http) {
                snprintf(err, errlen, "metrics: cannot create the HTTP server");
                e = -ENOMEM;
                goto fail;
        }
        /* Answer every method ourselves (405), not libevent's 501; bound what a scraper may
         * send and how long an idle connection stays. */
        evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                   EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
        evhttp_set_max_headers_size(m->http, 8192);
        evhttp_set_max_body_size(m->http, 4096);
        evhttp_set_timeout(m->http, 10);
        evhttp_set_gencb(m->http, on_request, m);
        fd = listen_socket(&addr, len, where, err, errlen);
        if (fd < 0) {
                e = fd;
                goto fail;
        }
        if (addr.ss_family == AF_UNIX)
                memcpy(m->unix_path, ((struct sockaddr_un *)&addr)->sun_path, sizeof(m->unix_path));
        /* backlog 0: the socket already listens */
        lev = evconnlistener_new(d->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                                 0, fd);
        if (!lev)
                close(fd);
        if (!lev || !evhttp_bind_listener(m->http, lev)) {
                if (lev)
                        evconnlistener_free(lev);
                snprintf(err, errlen, "metrics listener %s: cannot start serving", where);
                e = -ENOMEM;
                goto fail;
        }
        d->metrics = m;
        log_listen_address(fd, where);
        return 0;
fail:
        metrics_free(m);
        return e;
}

void metrics_stop(struct npud *d)
{
        metrics_free(d->metrics);
        d->metrics = NULL;
}

static struct metrics_tenant *tenant_get(struct metrics *m, const char *name)
{
        struct metrics_tenant *t;

        if (m->last && strcmp(m->last->name, name) == 0)
                return m->last;
        if (strcmp(name, OTHER_TENANT) == 0)
                return m->last = &m->other;
        for (int i = 0; i < m->ntenants; i++)
                if (strcmp(m->tenants[i].name, name) == 0)
                        return m->last = &m->tenants[i];
        if (m->ntenants >= METRICS_MAX_TENANTS)
                return &m->other;
        t = &m->tenants[m->ntenants];
        if (tenant_init(t, name, m->ndevices) < 0)
                return &m->other;
        m->ntenants++;
        return m->last = t;
}

void metrics_task_done(struct npud *d, const char *tenant, const char *tenant_class, int device,
                       int outcome, uint64_t latency_ns)
{
        struct metrics *m = d->metrics;
        struct metrics_latency *l;
        size_t c, b;

        if (!m || device < 0 || device >= m->ndevices)
                return;
        if (outcome < 0 || outcome > 2)
                outcome = 1;
        tenant_get(m, tenant ? tenant : "default")->done[device * 3 + outcome]++;
        for (c = 0; c < NCLASSES; c++)
                if (tenant_class && strcmp(tenant_class, class_names[c]) == 0)
                        break;
        l = &m->latency[c < NCLASSES ? c : CLASS_NORMAL];
        for (b = 0; b < NBUCKETS && latency_ns > latency_buckets[b].ns; b++)
                ;
        l->buckets[b]++;
        l->count++;
        l->sum_seconds += (double)latency_ns / 1e9;
}
