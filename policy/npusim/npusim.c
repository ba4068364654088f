/* npusim: a deterministic scheduling simulator. It replays a trace of task arrivals against
 * the daemon's own dispatch policy (policy/dispatch.c) in virtual time, and against a plain
 * first-come-first-served baseline, and reports per tenant what each got: engine time share
 * against the configured share, latency and queue wait percentiles, missed deadlines.
 *
 * Virtual time makes runs exact and repeatable: no clock, no threads, integer nanoseconds;
 * every tie is broken by trace order. A run is the same on every machine, so policies can be
 * compared, and regressions caught, without measurement noise.
 *
 * Model (mirrors the daemon's scheduler, simplified): a device has cores of four engine kinds;
 * a dispatch occupies one core; a stream runs one dispatch at a time, in order. Under the
 * policy a task longer than tile_us runs as consecutive tiles of at most tile_us on the engine
 * its first tile got, and other work may run between its tiles. Estimates are exact (the
 * trace's cost), so the policy sees perfect cost predictions. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/dispatch.h"
#include "util/err.h"
#include "policy/policy.h"

#define MAX_CORES 4096            /* per engine kind */
#define MAX_STREAMS 100000
#define MAX_TASKS 20000000
#define MAX_COST_US 100000000ull  /* 100 s: sums of 20M tasks stay far from overflow */
#define MAX_TIME_US 1000000000000ull
#define MAX_DURATION_MS 60000

static const char *const engine_names[PD_ENGINES] = { "cube", "vector", "aicpu", "dma" };

/* ---- the trace ---- */

struct sim_tenant {
        char name[POLICY_NAME_MAX];
        enum policy_class klass;
        double weight;
};

struct sim_stream {
        int tenant;
        int priority;
        int *tasks; /* indices into trace.tasks, in arrival order */
        int ntasks;
};

struct sim_task {
        uint64_t arrive;           /* ns */
        uint64_t cost[PD_ENGINES]; /* ns; 0 = cannot run there */
        uint64_t deadline;         /* absolute ns; 0 = none */
        int stream;
        int order;                 /* position in the trace file: the tie-break */
};

struct trace {
        char name[128];
        int cores[PD_ENGINES];
        double min_share;
        uint64_t tile_ns;
        struct sim_tenant *tenants;
        int ntenants;
        struct sim_stream *streams;
        int nstreams;
        struct sim_task *tasks; /* sorted by arrival, then trace order */
        int ntasks;
        int *stream_task_ids;   /* storage behind streams[].tasks */
        uint64_t window;        /* ns: shares are measured over [0, last arrival] */
};

static void *xcalloc(size_t n, size_t size)
{
        void *p = calloc(n ? n : 1, size ? size : 1);
        if (!p) {
                fprintf(stderr, "npusim: out of memory\n");
                exit(1);
        }
        return p;
}

static void trace_free(struct trace *tr)
{
        free(tr->tenants);
        free(tr->streams);
        free(tr->tasks);
        free(tr->stream_task_ids);
        memset(tr, 0, sizeof(*tr));
}

static int check_keys(json_t *obj, const char *path, const char *const *keys, char *err,
                      size_t errlen)
{
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return err_set(err, errlen, -EINVAL, "%s: must be an object", path);
        json_object_foreach(obj, key, v) {
                int ok = 0;
                for (const char *const *k = keys; *k; k++)
                        ok |= strcmp(*k, key) == 0;
                if (!ok)
                        return err_set(err, errlen, -EINVAL, "%s%s%s: unknown key", path, *path ? "." : "",
                                   key);
        }
        return 0;
}

/* Integer member in [lo, hi]; absent: *ret = dflt, or an error when dflt is -1. */
static int get_int(json_t *obj, const char *key, const char *path, long long lo, long long hi,
                   long long dflt, long long *ret, char *err, size_t errlen)
{
        json_t *v = json_object_get(obj, key);
        const char *dot = *path ? "." : "";

        if (!v) {
                if (dflt < 0)
                        return err_set(err, errlen, -EINVAL, "%s%s%s: missing", path, dot, key);
                *ret = dflt;
                return 0;
        }
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
                return err_set(err, errlen, -EINVAL, "%s%s%s: must be an integer from %lld to %lld", path, dot,
                           key, lo, hi);
        *ret = json_integer_value(v);
        return 0;
}

static int parse_device(struct trace *tr, json_t *dev, char *err, size_t errlen)
{
        static const char *const keys[] = { "cube", "vector", "aicpu", "dma", NULL };
        int e, any = 0;

        if (!dev)
                return err_set(err, errlen, -EINVAL, "device: missing");
        if ((e = check_keys(dev, "device", keys, err, errlen)))
                return e;
        for (int k = 0; k < PD_ENGINES; k++) {
                long long n;
                if ((e = get_int(dev, engine_names[k], "device", 0, MAX_CORES, 0, &n, err, errlen)))
                        return e;
                tr->cores[k] = (int)n;
                any |= n > 0;
        }
        if (!any)
                return err_set(err, errlen, -EINVAL, "device: needs cores of at least one engine kind");
        return 0;
}

/* Tenants go through the daemon's own configuration parser, so a trace accepts exactly what
 * npud.conf accepts and its errors name the same keys. */
static int parse_tenants(struct trace *tr, json_t *tenants, char *err, size_t errlen)
{
        struct policy_config *cfg;
        json_t *t;
        size_t i;
        int e;

        if (!json_is_array(tenants) || json_array_size(tenants) == 0)
                return err_set(err, errlen, -EINVAL, "tenants: must be a non-empty array");
        cfg = xcalloc(1, sizeof(*cfg));
        policy_config_init(cfg);
        if ((e = policy_config_parse(cfg, tenants, NULL, err, errlen))) {
                free(cfg);
                return e;
        }
        tr->ntenants = (int)json_array_size(tenants);
        tr->tenants = xcalloc((size_t)tr->ntenants, sizeof(*tr->tenants));
        json_array_foreach(tenants, i, t) {
                const char *name = json_string_value(json_object_get(t, "name"));
                const struct policy_tenant *p = &cfg->tenants[policy_tenant_find(cfg, name)];
                snprintf(tr->tenants[i].name, sizeof(tr->tenants[i].name), "%s", p->name);
                tr->tenants[i].klass = p->klass;
                tr->tenants[i].weight = p->weight;
        }
        free(cfg);
        return 0;
}

static int parse_streams(struct trace *tr, json_t *streams, char *err, size_t errlen)
{
        static const char *const keys[] = { "tenant", "priority", NULL };
        json_t *s;
        size_t i;
        int e;

        if (!json_is_array(streams) || json_array_size(streams) == 0 ||
            json_array_size(streams) > MAX_STREAMS)
                return err_set(err, errlen, -EINVAL, "streams: must be an array of 1 to %d streams",
                           MAX_STREAMS);
        tr->nstreams = (int)json_array_size(streams);
        tr->streams = xcalloc((size_t)tr->nstreams, sizeof(*tr->streams));
        json_array_foreach(streams, i, s) {
                char path[48];
                long long prio;
                json_t *t;

                snprintf(path, sizeof(path), "streams[%zu]", i);
                if ((e = check_keys(s, path, keys, err, errlen)))
                        return e;
                t = json_object_get(s, "tenant");
                tr->streams[i].tenant = -1;
                if (json_is_integer(t) && json_integer_value(t) >= 0 &&
                    json_integer_value(t) < tr->ntenants)
                        tr->streams[i].tenant = (int)json_integer_value(t);
                for (int k = 0; json_is_string(t) && k < tr->ntenants; k++)
                        if (strcmp(tr->tenants[k].name, json_string_value(t)) == 0)
                                tr->streams[i].tenant = k;
                if (tr->streams[i].tenant < 0)
                        return err_set(err, errlen, -EINVAL,
                                   "%s.tenant: must name a tenant of the trace (or be its index)",
                                   path);
                if ((e = get_int(s, "priority", path, 0, 7, 0, &prio, err, errlen)))
                        return e;
                tr->streams[i].priority = (int)prio;
        }
        return 0;
}

static int parse_task(struct trace *tr, struct sim_task *t, json_t *obj, size_t i, char *err,
                      size_t errlen)
{
        static const char *const keys[] = { "t_us", "stream", "cost_us", "deadline_us", NULL };
        static const char *const ekeys[] = { "cube", "vector", "aicpu", "dma", NULL };
        char path[48], cpath[64];
        long long v;
        json_t *cost, *c;
        const char *key;
        int e, runnable = 0;

        snprintf(path, sizeof(path), "tasks[%zu]", i);
        if ((e = check_keys(obj, path, keys, err, errlen)))
                return e;
        if ((e = get_int(obj, "t_us", path, 0, (long long)MAX_TIME_US, -1, &v, err, errlen)))
                return e;
        t->arrive = (uint64_t)v * 1000;
        if ((e = get_int(obj, "stream", path, 0, tr->nstreams - 1, -1, &v, err, errlen)))
                return e;
        t->stream = (int)v;
        if ((e = get_int(obj, "deadline_us", path, 1, (long long)MAX_TIME_US, 0, &v, err,
                         errlen)))
                return e;
        t->deadline = v ? t->arrive + (uint64_t)v * 1000 : 0;
        snprintf(cpath, sizeof(cpath), "%s.cost_us", path);
        cost = json_object_get(obj, "cost_us");
        if (!cost)
                return err_set(err, errlen, -EINVAL, "%s: missing", cpath);
        if ((e = check_keys(cost, cpath, ekeys, err, errlen)))
                return e;
        json_object_foreach(cost, key, c) {
                int k = 0;
                while (strcmp(engine_names[k], key) != 0)
                        k++;
                if (!json_is_integer(c) || json_integer_value(c) < 1 ||
                    (uint64_t)json_integer_value(c) > MAX_COST_US)
                        return err_set(err, errlen, -EINVAL, "%s.%s: must be an integer from 1 to %llu",
                                   cpath, key, MAX_COST_US);
                t->cost[k] = (uint64_t)json_integer_value(c) * 1000;
                runnable |= tr->cores[k] > 0;
        }
        if (!runnable)
                return err_set(err, errlen, -EINVAL, "%s: names no engine the device has cores of", cpath);
        t->order = (int)i;
        return 0;
}

static int task_cmp(const void *a, const void *b)
{
        const struct sim_task *x = a, *y = b;
        if (x->arrive != y->arrive)
                return x->arrive < y->arrive ? -1 : 1;
        return x->order < y->order ? -1 : x->order > y->order;
}

/* Fill tr from a parsed trace document; 0, or -EINVAL with err naming the field. */
static int trace_from_json(struct trace *tr, json_t *doc, char *err, size_t errlen)
{
        static const char *const keys[] = { "name", "device", "min_share", "tile_us", "tenants",
                                            "streams", "tasks", NULL };
        json_t *v, *tasks;
        long long tile;
        size_t i;
        int e;

        memset(tr, 0, sizeof(*tr));
        if (!json_is_object(doc))
                return err_set(err, errlen, -EINVAL, "trace: must be a JSON object");
        if ((e = check_keys(doc, "", keys, err, errlen)))
                return e;
        if ((v = json_object_get(doc, "name"))) {
                if (!json_is_string(v))
                        return err_set(err, errlen, -EINVAL, "name: must be a string");
                snprintf(tr->name, sizeof(tr->name), "%s", json_string_value(v));
        }
        if ((e = parse_device(tr, json_object_get(doc, "device"), err, errlen)))
                return e;
        tr->min_share = 0.05;
        if ((v = json_object_get(doc, "min_share"))) {
                if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 0.5)
                        return err_set(err, errlen, -EINVAL, "min_share: must be a number from 0 to 0.5");
                tr->min_share = json_number_value(v);
        }
        if ((e = get_int(doc, "tile_us", "", 10, 1000000, 1000, &tile, err, errlen)))
                return e;
        tr->tile_ns = (uint64_t)tile * 1000;
        if ((e = parse_tenants(tr, json_object_get(doc, "tenants"), err, errlen)) ||
            (e = parse_streams(tr, json_object_get(doc, "streams"), err, errlen)))
                return e;
        tasks = json_object_get(doc, "tasks");
        if (!json_is_array(tasks) || json_array_size(tasks) > MAX_TASKS)
                return err_set(err, errlen, -EINVAL, "tasks: must be an array of at most %d tasks", MAX_TASKS);
        tr->ntasks = (int)json_array_size(tasks);
        tr->tasks = xcalloc((size_t)tr->ntasks, sizeof(*tr->tasks));
        json_array_foreach(tasks, i, v)
                if ((e = parse_task(tr, &tr->tasks[i], v, i, err, errlen)))
                        return e;
        qsort(tr->tasks, (size_t)tr->ntasks, sizeof(*tr->tasks), task_cmp);

        /* each stream's tasks, in arrival order */
        tr->stream_task_ids = xcalloc((size_t)tr->ntasks, sizeof(int));
        for (int t = 0; t < tr->ntasks; t++)
                tr->streams[tr->tasks[t].stream].ntasks++;
        int off = 0;
        for (int s = 0; s < tr->nstreams; s++) {
                tr->streams[s].tasks = tr->stream_task_ids + off;
                off += tr->streams[s].ntasks;
                tr->streams[s].ntasks = 0;
        }
        for (int t = 0; t < tr->ntasks; t++) {
                struct sim_stream *s = &tr->streams[tr->tasks[t].stream];
                s->tasks[s->ntasks++] = t;
        }
        tr->window = tr->ntasks ? tr->tasks[tr->ntasks - 1].arrive : 0;
        return 0;
}

/* ---- trace generators ---- */

/* splitmix64: tiny, fast, and the same sequence on every platform */
static uint64_t rng_next(uint64_t *s)
{
        uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

/* Uniform integer in [lo, hi]. */
static long long rng_range(uint64_t *s, long long lo, long long hi)
{
        return lo + (long long)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static void gen_tenant(json_t *tenants, const char *name, const char *klass, double weight)
{
        json_array_append_new(tenants, json_pack("{s:s, s:s, s:f}", "name", name, "class", klass,
                                                 "weight", weight));
}

/* n streams of tenant `name` at `prio`; returns the index of the first. */
static int gen_streams(json_t *streams, const char *name, int prio, int n)
{
        int first = (int)json_array_size(streams);
        for (int i = 0; i < n; i++)
                json_array_append_new(streams, json_pack("{s:s, s:i}", "tenant", name,
                                                         "priority", prio));
        return first;
}

/* Periodic tasks on stream s: every period_us (plus up to jitter_us) from phase_us until
 * duration; cube cost in [cube_lo, cube_hi], the AI CPU fallback aicpu_x times slower. */
static void gen_periodic(json_t *tasks, uint64_t *rng, int s, long long phase_us,
                         long long period_us, long long jitter_us, long long cube_lo,
                         long long cube_hi, int aicpu_x, long long deadline_us,
                         long long duration_us)
{
        for (long long t = phase_us; t < duration_us; t += period_us) {
                long long at = t + (jitter_us ? rng_range(rng, 0, jitter_us) : 0);
                long long c = rng_range(rng, cube_lo, cube_hi);
                json_t *cost = json_pack("{s:I}", "cube", (json_int_t)c);
                if (aicpu_x)
                        json_object_set_new(cost, "aicpu", json_integer(c * aicpu_x));
                json_t *task = json_pack("{s:I, s:i, s:o}", "t_us", (json_int_t)at, "stream", s,
                                         "cost_us", cost);
                if (deadline_us)
                        json_object_set_new(task, "deadline_us", json_integer(deadline_us));
                if (at < duration_us)
                        json_array_append_new(tasks, task);
                else
                        json_decref(task);
        }
}

/* A standard trace; NULL for an unknown kind. */
static json_t *generate(const char *kind, uint64_t seed, long long duration_ms)
{
        uint64_t rng = seed;
        long long d = duration_ms * 1000;
        json_t *tenants = json_array(), *streams = json_array(), *tasks = json_array();
        json_t *device;
        double min_share = 0.05;
        int s;

        if (strcmp(kind, "mixed") == 0) {
                /* One latency-critical tenant with small periodic tasks; two normal tenants,
                 * weights 3:1, each with more medium tasks than its share of the cube cores
                 * can run (so the shares show the weights); one best-effort tenant flooding
                 * long tasks. The cube engine is oversubscribed about 2.4 times. */
                device = json_pack("{s:i, s:i, s:i, s:i}", "cube", 20, "vector", 40, "aicpu", 6,
                                   "dma", 8);
                gen_tenant(tenants, "inference", "latency-critical", 1);
                gen_tenant(tenants, "train-a", "normal", 3);
                gen_tenant(tenants, "train-b", "normal", 1);
                gen_tenant(tenants, "batch", "best-effort", 1);
                s = gen_streams(streams, "inference", 0, 2);
                for (int i = 0; i < 2; i++)
                        gen_periodic(tasks, &rng, s + i, 1000 * i + rng_range(&rng, 0, 999), 2000,
                                     100, 150, 250, 20, 2000, d);
                s = gen_streams(streams, "train-a", 4, 16);
                for (int i = 0; i < 16; i++)
                        gen_periodic(tasks, &rng, s + i, rng_range(&rng, 0, 1999), 2000, 400,
                                     1500, 2500, 20, 0, d);
                s = gen_streams(streams, "train-b", 4, 8);
                for (int i = 0; i < 8; i++)
                        gen_periodic(tasks, &rng, s + i, rng_range(&rng, 0, 1999), 2000, 400,
                                     1500, 2500, 20, 0, d);
                s = gen_streams(streams, "batch", 7, 24);
                for (int i = 0; i < 24; i++)
                        gen_periodic(tasks, &rng, s + i, rng_range(&rng, 0, 49999), 50000, 0,
                                     40000, 60000, 10, 0, d);
        } else if (strcmp(kind, "weights") == 0) {
                /* Two normal tenants, weights 3:1, both always backlogged on 8 cube cores. */
                device = json_pack("{s:i, s:i, s:i, s:i}", "cube", 8, "vector", 0, "aicpu", 0,
                                   "dma", 0);
                gen_tenant(tenants, "heavy", "normal", 3);
                gen_tenant(tenants, "light", "normal", 1);
                s = gen_streams(streams, "heavy", 4, 8);
                for (int i = 0; i < 8; i++)
                        gen_periodic(tasks, &rng, s + i, rng_range(&rng, 0, 999), 1000, 200, 700,
                                     1300, 0, 0, d);
                s = gen_streams(streams, "light", 4, 8);
                for (int i = 0; i < 8; i++)
                        gen_periodic(tasks, &rng, s + i, rng_range(&rng, 0, 999), 1000, 200, 700,
                                     1300, 0, 0, d);
        } else if (strcmp(kind, "flood") == 0) {
                /* A latency-critical tenant against a best-effort flood of 100 ms tasks on 4
                 * cube cores: tiling bounds the wait, the minimum share keeps the flood going. */
                device = json_pack("{s:i, s:i, s:i, s:i}", "cube", 4, "vector", 0, "aicpu", 2,
                                   "dma", 0);
                min_share = 0.1;
                gen_tenant(tenants, "inference", "latency-critical", 1);
                gen_tenant(tenants, "batch", "best-effort", 1);
                s = gen_streams(streams, "inference", 0, 1);
                gen_periodic(tasks, &rng, s, 0, 1000, 300, 200, 400, 20, 1000, d);
                s = gen_streams(streams, "batch", 7, 8);
                for (int i = 0; i < 8; i++)
                        gen_periodic(tasks, &rng, s + i, rng_range(&rng, 0, 9999), 100000, 0,
                                     80000, 120000, 10, 0, d);
        } else {
                json_decref(tenants);
                json_decref(streams);
                json_decref(tasks);
                return NULL;
        }
        char name[128];
        snprintf(name, sizeof(name), "%s seed %" PRIu64 ", %lld ms", kind, seed, duration_ms);
        return json_pack("{s:s, s:o, s:f, s:i, s:o, s:o, s:o}", "name", name, "device", device,
                         "min_share", min_share, "tile_us", 1000, "tenants", tenants, "streams",
                         streams, "tasks", tasks);
}

/* ---- event heap: (time, sequence) order, so equal times resolve the same way each run ---- */

struct ev {
        uint64_t t, seq;
        uint64_t start; /* when the dispatch started */
        int stream, task, engine;
};

struct heap {
        struct ev *v;
        size_t n, cap;
};

static int ev_before(const struct ev *a, const struct ev *b)
{
        return a->t != b->t ? a->t < b->t : a->seq < b->seq;
}

static void heap_push(struct heap *h, struct ev e)
{
        if (h->n == h->cap) {
                h->cap = h->cap ? h->cap * 2 : 64;
                h->v = realloc(h->v, h->cap * sizeof(*h->v));
                if (!h->v) {
                        fprintf(stderr, "npusim: out of memory\n");
                        exit(1);
                }
        }
        size_t i = h->n++;
        while (i > 0 && ev_before(&e, &h->v[(i - 1) / 2])) {
                h->v[i] = h->v[(i - 1) / 2];
                i = (i - 1) / 2;
        }
        h->v[i] = e;
}

static struct ev heap_pop(struct heap *h)
{
        struct ev top = h->v[0], last = h->v[--h->n];
        size_t i = 0;

        for (;;) {
                size_t c = 2 * i + 1;
                if (c >= h->n)
                        break;
                if (c + 1 < h->n && ev_before(&h->v[c + 1], &h->v[c]))
                        c++;
                if (!ev_before(&h->v[c], &last))
                        break;
                h->v[i] = h->v[c];
                i = c;
        }
        if (h->n)
                h->v[i] = last;
        return top;
}

/* ---- runs ---- */

#define UNSET UINT64_MAX

struct run {
        const char *policy;
        uint64_t *start;         /* per task: first dispatch, ns */
        uint64_t *end;           /* per task: completion, ns */
        uint64_t *engine_ns;     /* per tenant, whole run */
        uint64_t *window_ns;     /* per tenant, within the trace's arrival window */
        uint64_t makespan;
        uint64_t dispatches;
};

static void run_init(struct run *r, const struct trace *tr, const char *policy)
{
        memset(r, 0, sizeof(*r));
        r->policy = policy;
        r->start = xcalloc((size_t)tr->ntasks, sizeof(uint64_t));
        r->end = xcalloc((size_t)tr->ntasks, sizeof(uint64_t));
        for (int i = 0; i < tr->ntasks; i++)
                r->start[i] = r->end[i] = UNSET;
        r->engine_ns = xcalloc((size_t)tr->ntenants, sizeof(uint64_t));
        r->window_ns = xcalloc((size_t)tr->ntenants, sizeof(uint64_t));
}

static void run_free(struct run *r)
{
        free(r->start);
        free(r->end);
        free(r->engine_ns);
        free(r->window_ns);
}

/* Charge a finished dispatch [start, end) of a tenant's work. */
static void run_account(struct run *r, const struct trace *tr, int tenant, uint64_t start,
                        uint64_t end)
{
        uint64_t wend = tr->window ? tr->window : UINT64_MAX;
        r->engine_ns[tenant] += end - start;
        if (start < wend)
                r->window_ns[tenant] += (end < wend ? end : wend) - start;
        r->dispatches++;
        r->makespan = end;
}

/* Per-stream state of a run. */
struct rstream {
        struct pd_queue q;  /* the policy's view; pd_pick hands it back */
        int head;           /* next task (index into the stream's task list) to run */
        int arrived;        /* tasks of the stream that have arrived */
        int running;
        int waiting;        /* FIFO: its head is in an engine's queue */
        int dirty;
        uint64_t tiles, tiles_done, tile_left;
        int tile_engine;
};

struct sim {
        const struct trace *tr;
        struct run *r;
        struct rstream *st;
        struct heap running;
        int *dirty;
        int ndirty;
        int next_arrival;
        uint64_t now, seq;
};

static void sim_init(struct sim *s, const struct trace *tr, struct run *r)
{
        memset(s, 0, sizeof(*s));
        s->tr = tr;
        s->r = r;
        s->st = xcalloc((size_t)tr->nstreams, sizeof(*s->st));
        s->dirty = xcalloc((size_t)tr->nstreams, sizeof(int));
}

static void sim_deinit(struct sim *s)
{
        free(s->st);
        free(s->dirty);
        free(s->running.v);
}

static void sim_touch(struct sim *s, int stream)
{
        if (!s->st[stream].dirty) {
                s->st[stream].dirty = 1;
                s->dirty[s->ndirty++] = stream;
        }
}

/* Advance to the next event: completions first, then arrivals at that instant. Calls done()
 * for each completion. 0 when nothing is left to happen. */
static int sim_advance(struct sim *s, void (*done)(struct sim *s, const struct ev *e, void *arg),
                       void *arg)
{
        const struct trace *tr = s->tr;
        uint64_t next = UNSET;

        if (s->running.n)
                next = s->running.v[0].t;
        if (s->next_arrival < tr->ntasks && tr->tasks[s->next_arrival].arrive < next)
                next = tr->tasks[s->next_arrival].arrive;
        if (next == UNSET)
                return 0;
        s->now = next;
        while (s->running.n && s->running.v[0].t == s->now) {
                struct ev e = heap_pop(&s->running);
                struct rstream *rs = &s->st[e.stream];
                rs->running = 0;
                run_account(s->r, tr, tr->streams[e.stream].tenant, e.start, e.t);
                done(s, &e, arg);
                sim_touch(s, e.stream);
        }
        while (s->next_arrival < tr->ntasks && tr->tasks[s->next_arrival].arrive == s->now) {
                int st = tr->tasks[s->next_arrival++].stream;
                s->st[st].arrived++;
                sim_touch(s, st);
        }
        return 1;
}

static void sim_run_dispatch(struct sim *s, int stream, int task, int engine, uint64_t dur)
{
        struct ev e = { .t = s->now + dur, .seq = s->seq++, .start = s->now, .stream = stream,
                        .task = task, .engine = engine };

        if (s->r->start[task] == UNSET)
                s->r->start[task] = s->now;
        s->st[stream].running = 1;
        heap_push(&s->running, e);
}

static void task_done(struct sim *s, int stream, int task)
{
        s->r->end[task] = s->now;
        s->st[stream].head++;
}

/* -- the policy: policy/dispatch.c, as the daemon uses it -- */

struct fair {
        struct pd_device dev;
        struct pd_tenant *tenants;
};

static void fair_done(struct sim *s, const struct ev *e, void *arg)
{
        struct fair *f = arg;
        struct rstream *rs = &s->st[e->stream];
        uint64_t dur = e->t - e->start;

        pd_finish(&f->dev, rs->q.tenant, e->engine, 1, dur, dur, s->now);
        if (rs->tiles && ++rs->tiles_done < rs->tiles)
                return;
        rs->tiles = 0;
        task_done(s, e->stream, e->task);
}

/* A stream whose head has arrived and is not running becomes a ready queue. */
static void fair_settle(struct sim *s, struct fair *f, int stream)
{
        struct rstream *rs = &s->st[stream];
        const struct sim_stream *ss = &s->tr->streams[stream];

        if (rs->running || rs->q.ready || rs->head == rs->arrived)
                return;
        const struct sim_task *t = &s->tr->tasks[ss->tasks[rs->head]];
        for (int e = 0; e < PD_ENGINES; e++)
                rs->q.cost[e] = s->tr->cores[e] > 0 ? t->cost[e] : 0;
        if (rs->tiles) { /* a tiled task stays on its engine; what is left of it */
                memset(rs->q.cost, 0, sizeof(rs->q.cost));
                rs->q.cost[rs->tile_engine] = rs->tile_left;
        }
        rs->q.deadline = t->deadline;
        if (pd_queue_ready(&f->dev, &rs->q, s->now) < 0) {
                fprintf(stderr, "npusim: out of memory\n");
                exit(1);
        }
}

static void fair_dispatch(struct sim *s, struct fair *f)
{
        struct pd_queue *q;
        int e;

        while ((q = pd_pick(&f->dev, s->now, &e))) {
                struct rstream *rs = (struct rstream *)((char *)q - offsetof(struct rstream, q));
                int stream = (int)(rs - s->st);
                int task = s->tr->streams[stream].tasks[rs->head];
                uint64_t dur = q->cost[e];

                if (!rs->tiles && dur > s->tr->tile_ns) {
                        rs->tiles = (dur + s->tr->tile_ns - 1) / s->tr->tile_ns;
                        rs->tiles_done = 0;
                        rs->tile_left = dur;
                        rs->tile_engine = e;
                }
                if (rs->tiles) {
                        /* equal tiles, the rounding spread so that they add up exactly */
                        e = rs->tile_engine;
                        dur = rs->tile_left / (rs->tiles - rs->tiles_done);
                        rs->tile_left -= dur;
                }
                pd_start(&f->dev, q, e, 1, dur);
                sim_run_dispatch(s, stream, task, e, dur);
        }
}

static void run_fair(const struct trace *tr, struct run *r)
{
        struct sim s;
        struct fair f;

        run_init(r, tr, "fair");
        sim_init(&s, tr, r);
        pd_device_init(&f.dev, tr->cores, tr->min_share);
        f.tenants = xcalloc((size_t)tr->ntenants, sizeof(*f.tenants));
        for (int i = 0; i < tr->ntenants; i++) {
                f.tenants[i].klass = tr->tenants[i].klass;
                f.tenants[i].weight = tr->tenants[i].weight;
        }
        for (int i = 0; i < tr->nstreams; i++) {
                s.st[i].q.tenant = &f.tenants[tr->streams[i].tenant];
                s.st[i].q.priority = tr->streams[i].priority;
        }
        while (sim_advance(&s, fair_done, &f)) {
                for (int i = 0; i < s.ndirty; i++) {
                        s.st[s.dirty[i]].dirty = 0;
                        fair_settle(&s, &f, s.dirty[i]);
                }
                s.ndirty = 0;
                fair_dispatch(&s, &f);
        }
        pd_device_deinit(&f.dev);
        free(f.tenants);
        sim_deinit(&s);
}

/* -- the baseline: first come, first served -- */

/* The engine a FIFO dispatcher runs a task on: its cheapest one (no cost model, no waiting
 * for a better engine), the first of equals. */
static int fifo_engine(const struct trace *tr, const struct sim_task *t)
{
        int best = -1;
        for (int e = 0; e < PD_ENGINES; e++)
                if (tr->cores[e] > 0 && t->cost[e] && (best < 0 || t->cost[e] < t->cost[best]))
                        best = e;
        return best;
}

struct fifo {
        struct heap wait[PD_ENGINES]; /* stream heads by arrival, per engine */
        int free[PD_ENGINES];
};

static void fifo_done(struct sim *s, const struct ev *e, void *arg)
{
        struct fifo *f = arg;
        f->free[e->engine]++;
        task_done(s, e->stream, e->task);
}

/* All streams in arrival order, no classes, no tiling: each stream's head queues for its
 * engine in order of arrival and runs whole when a core of it is free. */
static void run_fifo(const struct trace *tr, struct run *r)
{
        struct sim s;
        struct fifo f;

        run_init(r, tr, "fifo");
        sim_init(&s, tr, r);
        memset(&f, 0, sizeof(f));
        memcpy(f.free, tr->cores, sizeof(f.free));
        while (sim_advance(&s, fifo_done, &f)) {
                for (int i = 0; i < s.ndirty; i++) {
                        int st = s.dirty[i];
                        struct rstream *rs = &s.st[st];
                        rs->dirty = 0;
                        if (rs->running || rs->waiting || rs->head == rs->arrived)
                                continue;
                        int task = tr->streams[st].tasks[rs->head];
                        struct ev w = { .t = tr->tasks[task].arrive,
                                        .seq = (uint64_t)tr->tasks[task].order, .stream = st,
                                        .task = task };
                        rs->waiting = 1;
                        heap_push(&f.wait[fifo_engine(tr, &tr->tasks[task])], w);
                }
                s.ndirty = 0;
                for (int e = 0; e < PD_ENGINES; e++) {
                        while (f.free[e] > 0 && f.wait[e].n) {
                                struct ev w = heap_pop(&f.wait[e]);
                                s.st[w.stream].waiting = 0;
                                f.free[e]--;
                                sim_run_dispatch(&s, w.stream, w.task, e,
                                                 tr->tasks[w.task].cost[e]);
                        }
                }
        }
        for (int e = 0; e < PD_ENGINES; e++)
                free(f.wait[e].v);
        sim_deinit(&s);
}

/* ---- report ---- */

struct dist {
        uint64_t p50, p99, max;
        int n;
};

static int u64_cmp(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Nearest-rank percentiles of v[0..n) (sorted in place). */
static struct dist dist_of(uint64_t *v, int n)
{
        struct dist d = { .n = n };

        if (n == 0)
                return d;
        qsort(v, (size_t)n, sizeof(*v), u64_cmp);
        d.p50 = v[(int)ceil(0.50 * n) - 1];
        d.p99 = v[(int)ceil(0.99 * n) - 1];
        d.max = v[n - 1];
        return d;
}

struct tstats {
        int tasks, missed;
        struct dist latency, wait;
        double share, class_share, cfg_class_share;
};

/* Latency and wait of the tasks of tenant `tenant`, or of class `klass` when tenant < 0. */
static void collect(const struct trace *tr, const struct run *r, int tenant, int klass,
                    struct tstats *ts)
{
        uint64_t *lat = xcalloc((size_t)tr->ntasks, sizeof(uint64_t));
        uint64_t *wait = xcalloc((size_t)tr->ntasks, sizeof(uint64_t));
        int n = 0;

        memset(ts, 0, sizeof(*ts));
        for (int i = 0; i < tr->ntasks; i++) {
                const struct sim_task *t = &tr->tasks[i];
                int tn = tr->streams[t->stream].tenant;
                if (tenant >= 0 ? tn != tenant : (int)tr->tenants[tn].klass != klass)
                        continue;
                lat[n] = r->end[i] - t->arrive;
                wait[n] = r->start[i] - t->arrive;
                ts->missed += t->deadline && r->end[i] > t->deadline;
                n++;
        }
        ts->tasks = n;
        ts->latency = dist_of(lat, n);
        ts->wait = dist_of(wait, n);
        free(lat);
        free(wait);
}

static void tenant_stats(const struct trace *tr, const struct run *r, int i, struct tstats *ts)
{
        uint64_t total = 0, klass = 0;
        double wsum = 0;
        enum policy_class k = tr->tenants[i].klass;

        collect(tr, r, i, -1, ts);
        for (int j = 0; j < tr->ntenants; j++) {
                total += r->window_ns[j];
                if (tr->tenants[j].klass == k) {
                        klass += r->window_ns[j];
                        wsum += tr->tenants[j].weight;
                }
        }
        ts->share = total ? (double)r->window_ns[i] / (double)total : 0;
        ts->class_share = klass ? (double)r->window_ns[i] / (double)klass : 0;
        ts->cfg_class_share = tr->tenants[i].weight / wsum;
}

static double ms(uint64_t ns)
{
        return (double)ns / 1e6;
}

/* Three significant figures or so, without exponents: 0.213, 48.3, 1234. */
static const char *fmt_ms(char *buf, size_t len, uint64_t ns)
{
        double v = ms(ns);
        snprintf(buf, len, v < 1 ? "%.3f" : v < 10 ? "%.2f" : v < 100 ? "%.1f" : "%.0f", v);
        return buf;
}

static void print_run(const struct trace *tr, const struct run *r)
{
        char b[5][32];

        printf("\npolicy %s: makespan %.1f ms, %" PRIu64 " dispatches\n", r->policy,
               ms(r->makespan), r->dispatches);
        printf("  %-14s %-16s %6s %7s %6s %16s %25s %17s %6s\n", "tenant", "class", "weight",
               "tasks", "share", "in-class (cfg)", "latency ms p50/p99/max", "wait ms p50/p99",
               "missed");
        for (int i = 0; i < tr->ntenants; i++) {
                struct tstats ts;
                char cls[32];
                tenant_stats(tr, r, i, &ts);
                snprintf(cls, sizeof(cls), "%.3f (%.3f)", ts.class_share, ts.cfg_class_share);
                if (tr->tenants[i].klass == POLICY_CLASS_BEST_EFFORT)
                        snprintf(cls, sizeof(cls), "%.3f (min %.2f)", ts.class_share,
                                 tr->min_share);
                char lat[112], wait[72];
                snprintf(lat, sizeof(lat), "%s / %s / %s",
                         fmt_ms(b[0], sizeof(b[0]), ts.latency.p50),
                         fmt_ms(b[1], sizeof(b[1]), ts.latency.p99),
                         fmt_ms(b[2], sizeof(b[2]), ts.latency.max));
                snprintf(wait, sizeof(wait), "%s / %s", fmt_ms(b[3], sizeof(b[3]), ts.wait.p50),
                         fmt_ms(b[4], sizeof(b[4]), ts.wait.p99));
                printf("  %-14s %-16s %6g %7d %6.3f %16s %25s %17s %6d\n", tr->tenants[i].name,
                       policy_class_name(tr->tenants[i].klass), tr->tenants[i].weight, ts.tasks,
                       ts.share, cls, lat, wait, ts.missed);
        }
}

static int class_present(const struct trace *tr, int k)
{
        for (int i = 0; i < tr->ntenants; i++)
                if ((int)tr->tenants[i].klass == k)
                        return 1;
        return 0;
}

static void print_comparison(const struct trace *tr, const struct run *fair,
                             const struct run *fifo)
{
        char a[32], b[32];

        printf("\ncomparison with first-come-first-served:\n");
        for (int k = 0; k < POLICY_CLASS_COUNT; k++) {
                struct tstats p, q;
                if (!class_present(tr, k))
                        continue;
                collect(tr, fair, -1, k, &p);
                collect(tr, fifo, -1, k, &q);
                if (!p.tasks)
                        continue;
                printf("  %s p99: policy %s ms, fifo %s ms, ratio %.3g\n",
                       policy_class_name((enum policy_class)k),
                       fmt_ms(a, sizeof(a), p.latency.p99), fmt_ms(b, sizeof(b), q.latency.p99),
                       q.latency.p99 ? (double)p.latency.p99 / (double)q.latency.p99 : 0.0);
        }
}

static void print_text(const struct trace *tr, const struct run *fair, const struct run *fifo)
{
        printf("npusim: %s: device cube %d, vector %d, aicpu %d, dma %d; tile %" PRIu64
               " us, best-effort min share %.2f\n",
               tr->name, tr->cores[0], tr->cores[1], tr->cores[2], tr->cores[3],
               tr->tile_ns / 1000, tr->min_share);
        printf("  %d tenants, %d streams, %d tasks; shares over the arrival window 0-%.1f ms\n",
               tr->ntenants, tr->nstreams, tr->ntasks, ms(tr->window));
        if (fair)
                print_run(tr, fair);
        if (fifo)
                print_run(tr, fifo);
        if (fair && fifo)
                print_comparison(tr, fair, fifo);
}

static json_t *dist_json(const struct dist *d, int with_max)
{
        json_t *o = json_pack("{s:f, s:f}", "p50", (double)d->p50 / 1e3, "p99",
                              (double)d->p99 / 1e3);
        if (with_max)
                json_object_set_new(o, "max", json_real((double)d->max / 1e3));
        return o;
}

static json_t *run_json(const struct trace *tr, const struct run *r)
{
        json_t *tenants = json_array(), *classes = json_object();

        for (int i = 0; i < tr->ntenants; i++) {
                struct tstats ts;
                tenant_stats(tr, r, i, &ts);
                json_array_append_new(
                        tenants,
                        json_pack("{s:s, s:s, s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:o, s:o, s:i}",
                                  "name", tr->tenants[i].name, "class",
                                  policy_class_name(tr->tenants[i].klass), "weight",
                                  tr->tenants[i].weight, "tasks", ts.tasks, "engine_us",
                                  (double)r->engine_ns[i] / 1e3, "engine_us_window",
                                  (double)r->window_ns[i] / 1e3, "share", ts.share, "class_share",
                                  ts.class_share, "configured_class_share", ts.cfg_class_share,
                                  "latency_us", dist_json(&ts.latency, 1), "wait_us",
                                  dist_json(&ts.wait, 0), "deadline_missed", ts.missed));
        }
        for (int k = 0; k < POLICY_CLASS_COUNT; k++) {
                struct tstats ts;
                if (!class_present(tr, k))
                        continue;
                collect(tr, r, -1, k, &ts);
                json_object_set_new(classes, policy_class_name((enum policy_class)k),
                                    json_pack("{s:i, s:o, s:o, s:i}", "tasks", ts.tasks,
                                              "latency_us", dist_json(&ts.latency, 1), "wait_us",
                                              dist_json(&ts.wait, 0), "deadline_missed",
                                              ts.missed));
        }
        return json_pack("{s:f, s:I, s:o, s:o}", "makespan_us", (double)r->makespan / 1e3,
                         "dispatches", (json_int_t)r->dispatches, "tenants", tenants, "classes",
                         classes);
}

static void print_json(const struct trace *tr, const struct run *fair, const struct run *fifo)
{
        json_t *runs = json_object(), *cmp = json_object();
        char *s;

        if (fair)
                json_object_set_new(runs, "fair", run_json(tr, fair));
        if (fifo)
                json_object_set_new(runs, "fifo", run_json(tr, fifo));
        for (int k = 0; fair && fifo && k < POLICY_CLASS_COUNT; k++) {
                struct tstats p, q;
                if (!class_present(tr, k))
                        continue;
                collect(tr, fair, -1, k, &p);
                collect(tr, fifo, -1, k, &q);
                json_object_set_new(
                        cmp, policy_class_name((enum policy_class)k),
                        json_pack("{s:f, s:f, s:f}", "policy_p99_us", (double)p.latency.p99 / 1e3,
                                  "fifo_p99_us", (double)q.latency.p99 / 1e3, "ratio",
                                  q.latency.p99 ? (double)p.latency.p99 / (double)q.latency.p99
                                                : 0.0));
        }
        json_t *cores = json_object();
        for (int e = 0; e < PD_ENGINES; e++)
                json_object_set_new(cores, engine_names[e], json_integer(tr->cores[e]));
        json_t *doc = json_pack("{s:{s:s, s:o, s:f, s:I, s:i, s:i, s:i, s:f}, s:o, s:o}",
                                "trace", "name", tr->name, "device", cores, "min_share",
                                tr->min_share, "tile_us", (json_int_t)(tr->tile_ns / 1000),
                                "tenants", tr->ntenants, "streams", tr->nstreams, "tasks",
                                tr->ntasks, "window_us", (double)tr->window / 1e3, "runs", runs,
                                "comparison", cmp);
        s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        printf("%s\n", s);
        free(s);
        json_decref(doc);
}

/* ---- command line ---- */

static void usage(FILE *f)
{
        fprintf(f,
                "usage: npusim [options] TRACE.json\n"
                "       npusim [options] --generate KIND [--seed N] [--duration-ms N]\n"
                "Replays a trace in virtual time against npud's dispatch policy and a FIFO\n"
                "baseline; prints per tenant engine time shares, latency and queue wait.\n"
                "  --generate KIND     make a standard trace: mixed, weights, flood\n"
                "  --seed N            generator seed (default 1)\n"
                "  --duration-ms N     generated arrivals span (default 1000, at most %d)\n"
                "  --save-trace FILE   also write the (generated) trace to FILE\n"
                "  --policy P          fair, fifo or both (default both)\n"
                "  --json              machine-readable output\n"
                "  -h, --help          this text\n"
                "Trace: {\"device\": {\"cube\": 20, ...}, \"min_share\": 0.05, \"tile_us\": 1000,\n"
                "  \"tenants\": [{\"name\", \"class\", \"weight\"}], \"streams\": [{\"tenant\", "
                "\"priority\"}],\n"
                "  \"tasks\": [{\"t_us\", \"stream\", \"cost_us\": {\"cube\": 500, ...}, "
                "\"deadline_us\" (after t_us)}]}\n",
                MAX_DURATION_MS);
}

/* The trace document: generated (kind set) or read from the file `source`; NULL after
 * printing why. */
static json_t *load(const char *kind, uint64_t seed, long long duration_ms, const char *source)
{
        json_error_t je;
        json_t *doc;

        if (kind) {
                if (!(doc = generate(kind, seed, duration_ms)))
                        fprintf(stderr, "npusim: --generate: unknown kind %s (mixed, weights, "
                                        "flood)\n", kind);
                return doc;
        }
        if (!(doc = json_load_file(source, 0, &je))) {
                if (je.line > 0)
                        fprintf(stderr, "npusim: %s:%d:%d: %s\n", source, je.line, je.column,
                                je.text);
                else /* could not read it at all: jansson's text names the file */
                        fprintf(stderr, "npusim: %s\n", je.text);
        }
        return doc;
}

static int parse_number(const char *opt, const char *arg, unsigned long long max,
                        unsigned long long *ret)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        if (!*arg || *end || errno || v > max || arg[0] == '-') {
                fprintf(stderr, "npusim: %s: not a number from 0 to %llu: %s\n", opt, max, arg);
                return -1;
        }
        *ret = v;
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "generate", required_argument, NULL, 'g' },
                { "seed", required_argument, NULL, 's' },
                { "duration-ms", required_argument, NULL, 'd' },
                { "save-trace", required_argument, NULL, 'o' },
                { "policy", required_argument, NULL, 'p' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        const char *kind = NULL, *save = NULL, *policy = "both", *source;
        unsigned long long seed = 1, duration = 1000;
        int as_json = 0, c;
        char err[512];
        json_t *doc;
        struct trace tr;

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'g':
                        kind = optarg;
                        break;
                case 's':
                        if (parse_number("--seed", optarg, UINT64_MAX, &seed))
                                return 2;
                        break;
                case 'd':
                        if (parse_number("--duration-ms", optarg, MAX_DURATION_MS, &duration))
                                return 2;
                        if (duration == 0) {
                                fprintf(stderr, "npusim: --duration-ms: must be at least 1\n");
                                return 2;
                        }
                        break;
                case 'o':
                        save = optarg;
                        break;
                case 'p':
                        policy = optarg;
                        if (strcmp(policy, "fair") && strcmp(policy, "fifo") &&
                            strcmp(policy, "both")) {
                                fprintf(stderr,
                                        "npusim: --policy: must be fair, fifo or both: %s\n",
                                        policy);
                                return 2;
                        }
                        break;
                case 'j':
                        as_json = 1;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if ((kind != NULL) == (optind < argc) || argc - optind > 1) {
                fprintf(stderr, "npusim: give either one trace file or --generate KIND\n");
                usage(stderr);
                return 2;
        }
        source = kind ? kind : argv[optind];
        if (!(doc = load(kind, seed, (long long)duration, source)))
                return 2;
        if (save && json_dump_file(doc, save, JSON_COMPACT | JSON_PRESERVE_ORDER |
                                                      JSON_REAL_PRECISION(15)) < 0) {
                fprintf(stderr, "npusim: --save-trace: cannot write %s\n", save);
                json_decref(doc);
                return 1;
        }
        if (trace_from_json(&tr, doc, err, sizeof(err))) {
                fprintf(stderr, "npusim: %s: %s\n", source, err);
                json_decref(doc);
                trace_free(&tr);
                return 2;
        }
        json_decref(doc);
        if (!tr.name[0])
                snprintf(tr.name, sizeof(tr.name), "%s", source);

        struct run fair, fifo;
        int do_fair = strcmp(policy, "fifo") != 0, do_fifo = strcmp(policy, "fair") != 0;
        if (do_fair)
                run_fair(&tr, &fair);
        if (do_fifo)
                run_fifo(&tr, &fifo);
        for (int i = 0; i < tr.ntasks; i++)
                if ((do_fair && fair.end[i] == UNSET) || (do_fifo && fifo.end[i] == UNSET)) {
                        fprintf(stderr, "npusim: internal error: task %d never completed\n",
                                tr.tasks[i].order);
                        return 1;
                }

        if (as_json) {
                print_json(&tr, do_fair ? &fair : NULL, do_fifo ? &fifo : NULL);
        } else {
                print_text(&tr, do_fair ? &fair : NULL, do_fifo ? &fifo : NULL);
        }
        if (do_fair)
                run_free(&fair);
        if (do_fifo)
                run_free(&fifo);
        trace_free(&tr);
        return 0;
}
