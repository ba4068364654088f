/* Unit tests of the execution layer (daemon/exec/) without a socket or npud: a fake backend
 * records the units the scheduler submits instead of running them, and the test completes
 * them by hand through sched_unit_complete (the callback the real backend uses), so every
 * decision of the layer (order, dispatch, tiling, cancellation, failure reporting, lifetime)
 * is observed exactly, with times the test chooses. An observer table records everything
 * the layer reports upward. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "daemon/exec/exec.h"
#include "daemon/exec/handle.h"
#include "daemon/exec/mem.h"
#include "daemon/exec/sched.h"
#include "daemon/exec/stream.h"
#include "daemon/exec/submit.h"
#include "daemon/exec/tenant.h"
#include "policy/policy.h"
#include "proto/dtype.h"
#include "proto/errors.h"
#include "proto/submit.h"

#define FAKE_DEVICES 2
#define FAKE_MEM (32u << 20)
#define FAKE_BW 1e9        /* bytes/s: a memset of n bytes is estimated at about n ns */
#define TILE_NS 1000000ull /* 1 ms */
#define UNIT_LEN 600000    /* a memset of ~0.6 ms: one per unit (two exceed a tile), never tiled */
#define MAX_SUBS 4096
#define MAX_WORKS 8192
#define MAX_CALLS 8192
#define MAX_STREAMS 16

/* ---- fake backend ---------------------------------------------------------------------- */

/* One submission as the backend saw it. The unit belongs to the scheduler once completed,
 * so what the tests look at afterwards is copied here at submit time. */
struct sub {
        struct exec_unit *u; /* NULL once completed */
        int device, engine, nitems;
        struct stream *st;  /* whose work it is (from the work registry) */
        uint64_t seq[8];    /* client task numbers of the first items */
        uint8_t *dst;       /* first item's destination */
        uint64_t len;       /* first item's length */
        int cancelled;      /* the backend was asked to cancel it */
};

struct fake {
        struct backend b; /* first: the layer passes &b */
        int cores[OPS_ENGINE_COUNT];
        uint8_t *mem[FAKE_DEVICES];
        struct sub subs[MAX_SUBS];
        int nsubs;
        int ncancels;
        int reject; /* submit fails */
};

/* Work the test enqueued: [lo, hi) of device memory it writes, so a submitted item (or a
 * tile of it) is traced back to its task number and stream. */
struct work {
        uint8_t *lo, *hi;
        uint64_t seq;
        struct stream *st;
};

static struct fake fk;
static struct work works[MAX_WORKS];
static int nworks;

static struct work *work_of(const uint8_t *p)
{
        for (int i = nworks - 1; i >= 0; i--) /* newest first: ranges may be reused */
                if (p >= works[i].lo && p < works[i].hi)
                        return &works[i];
        return NULL;
}

/* Device d's memory has device addresses [FAKE_ADDR(d), FAKE_ADDR(d) + FAKE_MEM). */
#define FAKE_ADDR(d) ((uint64_t)((d) + 1) << 40)

static uint8_t *fake_host(uint64_t addr)
{
        int d = (int)(addr >> 40) - 1;

        ck_assert_msg(d >= 0 && d < FAKE_DEVICES && addr - FAKE_ADDR(d) < FAKE_MEM,
                      "address %#llx is no fake device's memory", (unsigned long long)addr);
        return fk.mem[d] + (addr - FAKE_ADDR(d));
}

static const uint8_t *item_dst(const struct exec_item *it)
{
        if (it->kind == EXEC_OP)
                return fake_host(exec_tensor_addr(&exec_call_out(it->call)[0]));
        return it->host_end == EXEC_HOST_DST ? (const uint8_t *)(uintptr_t)it->dst : fake_host(it->dst);
}

static int fake_device_count(struct backend *b)
{
        return FAKE_DEVICES;
}

static int fake_device_describe(struct backend *b, int index, struct backend_device_desc *ret)
{
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->profile, sizeof(ret->profile), "fake");
        ret->mem_size = FAKE_MEM;
        ret->mem_addr = FAKE_ADDR(index);
        for (int e = 0; e < OPS_ENGINE_COUNT; e++) {
                ret->cores[e] = fk.cores[e];
                ret->flops_per_core[e] = 1e12;
        }
        ret->mem_bandwidth = FAKE_BW;
        ret->clock_mhz = 1000;
        ret->max_streams = 64;
        return 0;
}

static int fake_submit(struct backend *b, struct exec_unit *u)
{
        struct fake *f = (struct fake *)b;

        if (f->reject)
                return -1;
        ck_assert_int_lt(f->nsubs, MAX_SUBS);
        ck_assert_int_gt(u->nitems, 0);
        struct sub *s = &f->subs[f->nsubs++];
        memset(s, 0, sizeof(*s));
        s->u = u;
        s->device = u->device;
        s->engine = u->engine;
        s->nitems = u->nitems;
        s->dst = (uint8_t *)item_dst(u->items[0]);
        s->len = u->items[0]->len;
        for (int i = 0; i < u->nitems; i++) {
                struct work *w = work_of(item_dst(u->items[i]));
                ck_assert_msg(w != NULL, "submitted item writes memory no task of the test named");
                if (i == 0)
                        s->st = w->st;
                ck_assert_msg(w->st == s->st, "a unit mixes work of two streams");
                if (i < 8)
                        s->seq[i] = w->seq;
        }
        /* tasks of one stream run in order: never two of its units at the backend at once,
         * except tiles of one task (independent parts of it) */
        for (int i = 0; i < f->nsubs - 1; i++)
                ck_assert_msg(!(f->subs[i].u && f->subs[i].st == s->st &&
                                (s->nitems != 1 || f->subs[i].nitems != 1 ||
                                 f->subs[i].seq[0] != s->seq[0])),
                              "a second unit of a stream submitted while its first runs");
        return 0;
}

static void fake_cancel(struct backend *b, struct exec_unit *u)
{
        struct fake *f = (struct fake *)b;

        atomic_store(&u->cancel, 1);
        f->ncancels++;
        for (int i = 0; i < f->nsubs; i++)
                if (f->subs[i].u == u)
                        f->subs[i].cancelled++;
}

static void fake_destroy(struct backend *b)
{
        struct fake *f = (struct fake *)b;

        for (int i = 0; i < FAKE_DEVICES; i++)
                if (f->mem[i])
                        munmap(f->mem[i], FAKE_MEM);
}

static int fake_mem_map(struct backend *b, int device, uint64_t addr, uint64_t size, void **ret)
{
        if (device < 0 || device >= FAKE_DEVICES || addr < FAKE_ADDR(device) ||
            addr - FAKE_ADDR(device) > FAKE_MEM || size > FAKE_MEM - (addr - FAKE_ADDR(device)))
                return -ERANGE;
        *ret = fk.mem[device] + (addr - FAKE_ADDR(device));
        return 0;
}

static void fake_mem_unmap(struct backend *b, int device, void *host, uint64_t size)
{
}

static int fake_health(struct backend *b, int device, struct backend_health *ret)
{
        *ret = (struct backend_health){ .slow = 1.0 };
        return 0;
}

static const struct backend_ops fake_ops = {
        .name = "fake",
        .device_count = fake_device_count,
        .device_describe = fake_device_describe,
        .mem_map = fake_mem_map,
        .mem_unmap = fake_mem_unmap,
        .submit = fake_submit,
        .cancel = fake_cancel,
        .health = fake_health,
        .destroy = fake_destroy,
};

/* ---- observer ---------------------------------------------------------------------------- */

enum call_kind {
        C_TASK_FAILED = 1,
        C_TASK_DONE,
        C_TASK_RETIRED,
        C_STREAM_IDLE,
        C_WAITER_DONE,
        C_STREAM_RELEASED,
        C_UNIT_DONE,
};

struct call {
        enum call_kind kind;
        struct stream *st; /* compared only: it may be freed by now */
        void *ptr;         /* waiter, device */
        uint64_t seq;
        int code;
        int failed;
        char msg[256];
};

static struct call calls[MAX_CALLS];
static int ncalls;

static struct call *record(enum call_kind kind, struct stream *st)
{
        ck_assert_int_lt(ncalls, MAX_CALLS);
        struct call *c = &calls[ncalls++];
        memset(c, 0, sizeof(*c));
        c->kind = kind;
        c->st = st;
        return c;
}

/* Calls of a kind about stream st (NULL: any stream); failed >= 0 also matches that. */
static int count_calls(enum call_kind kind, const struct stream *st, int failed)
{
        int n = 0;
        for (int i = 0; i < ncalls; i++)
                if (calls[i].kind == kind && (!st || calls[i].st == st) &&
                    (failed < 0 || calls[i].failed == failed))
                        n++;
        return n;
}

static struct call *last_call(enum call_kind kind)
{
        for (int i = ncalls - 1; i >= 0; i--)
                if (calls[i].kind == kind)
                        return &calls[i];
        return NULL;
}

static void obs_task_failed(void *data, struct stream *st, uint64_t seq, int code, const char *msg)
{
        struct call *c = record(C_TASK_FAILED, st);
        c->seq = seq;
        c->code = code;
        snprintf(c->msg, sizeof(c->msg), "%s", msg);
        ck_assert_ptr_nonnull(st->session); /* owner-less streams tell no one */
}

static void obs_task_done(void *data, struct stream *st, int failed, uint64_t latency_ns)
{
        record(C_TASK_DONE, st)->failed = failed != 0;
}

static void obs_task_retired(void *data, struct stream *st, int failed)
{
        record(C_TASK_RETIRED, st)->failed = failed != 0; /* a PROTO_E_* code or 1 */
}

static void obs_stream_idle(void *data, struct stream *st)
{
        record(C_STREAM_IDLE, st);
        ck_assert(stream_idle(st));
}

/* Like the API: the observer owns the satisfied waiter and frees it. */
static void obs_waiter_done(void *data, struct waiter *w, const struct stream_error *e)
{
        struct call *c = record(C_WAITER_DONE, NULL);
        c->ptr = w;
        c->code = e ? e->code : 0;
        c->seq = e ? e->seq : 0;
        snprintf(c->msg, sizeof(c->msg), "%s", e ? e->message : "");
        ck_assert_ptr_null(w->target); /* the layer dropped its reference */
        free(w);
}

static void obs_stream_released(void *data, struct stream *st)
{
        struct call *c = record(C_STREAM_RELEASED, st);
        c->code = st->error.code;
        c->seq = st->error.seq;
        snprintf(c->msg, sizeof(c->msg), "%s", st->error.message);
        ck_assert_int_eq(st->refs, 0);
        ck_assert(stream_idle(st));
}

static void obs_unit_done(void *data, struct device *dev)
{
        record(C_UNIT_DONE, NULL)->ptr = dev;
}

/* ---- the layer under test ------------------------------------------------------------- */

static struct exec x;
static struct tenant_registry tenants;
static struct handle_table ht;
static struct stream *owned[MAX_STREAMS]; /* the owner's reference, until the test drops it */
static int nstreams;
static char owner_token[MAX_STREAMS]; /* dummy owners: opaque, never dereferenced */

/* default (normal, 1), lc (latency-critical), be (best-effort), heavy and light (normal 3:1) */
static const char *const tenants_json =
        "[{\"name\": \"lc\", \"class\": \"latency-critical\"},"
        " {\"name\": \"be\", \"class\": \"best-effort\"},"
        " {\"name\": \"heavy\", \"class\": \"normal\", \"weight\": 3},"
        " {\"name\": \"light\", \"class\": \"normal\", \"weight\": 1}]";

static void on_sched(evutil_socket_t fd, short what, void *arg)
{
        sched_run(arg);
}

static struct tenant *tenant_named(const char *name)
{
        for (int i = 0; i < tenants.ntenants; i++)
                if (strcmp(tenants.tenants[i]->pol.name, name) == 0)
                        return tenants.tenants[i];
        ck_abort_msg("no tenant %s", name);
        return NULL;
}

static void setup_cores(int dma_cores)
{
        struct policy_config *pol = calloc(1, sizeof(*pol));
        char err[256];

        memset(&fk, 0, sizeof(fk));
        memset(&x, 0, sizeof(x));
        nworks = ncalls = nstreams = 0;
        memset(owned, 0, sizeof(owned));
        fk.b.ops = &fake_ops;
        fk.cores[OPS_ENGINE_CUBE] = 2;
        fk.cores[OPS_ENGINE_VECTOR] = 2;
        fk.cores[OPS_ENGINE_AICPU] = 1;
        fk.cores[OPS_ENGINE_DMA] = dma_cores;
        for (int i = 0; i < FAKE_DEVICES; i++) {
                /* mapped, not malloc'd: freed buffers are handed back with MADV_DONTNEED */
                fk.mem[i] = mmap(NULL, FAKE_MEM, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                ck_assert(fk.mem[i] != MAP_FAILED);
        }

        x.base = event_base_new();
        ck_assert_ptr_nonnull(x.base);
        x.sched_event = event_new(x.base, -1, 0, on_sched, &x);
        ck_assert_ptr_nonnull(x.sched_event);
        x.backend = &fk.b;
        TAILQ_INIT(&x.settle);
        x.tile_ns = TILE_NS;
        x.obs = (struct exec_observer){
                .task_failed = obs_task_failed,
                .task_done = obs_task_done,
                .task_retired = obs_task_retired,
                .stream_idle = obs_stream_idle,
                .waiter_done = obs_waiter_done,
                .stream_released = obs_stream_released,
                .unit_done = obs_unit_done,
        };
        /* min share 0: the class order is strict (the best-effort floor is tested apart) */
        ck_assert_int_eq(device_registry_init(&x.devices, x.backend, 0.0, err, sizeof(err)), 0);
        ck_assert_int_eq(x.devices.count, FAKE_DEVICES);

        policy_config_init(pol);
        json_t *tj = json_loads(tenants_json, 0, NULL);
        ck_assert_ptr_nonnull(tj);
        ck_assert_msg(policy_config_parse(pol, tj, NULL, err, sizeof(err)) == 0, "%s", err);
        json_decref(tj);
        ck_assert_int_eq(tenant_registry_init(&tenants, pol, x.devices.count), 0);
        free(pol);
        handle_table_init(&ht);
}

static void setup(void)
{
        setup_cores(2);
}

static void setup_one_core(void)
{
        setup_cores(1);
}

/* One pass of the loop: the scheduling pass runs only if the layer asked for one. */
static void pass(void)
{
        event_base_loop(x.base, EVLOOP_NONBLOCK);
}

static struct stream *new_stream(int dev, int prio, const char *tenant)
{
        ck_assert_int_lt(nstreams, MAX_STREAMS);
        struct stream *st = stream_new(&x, (struct session *)&owner_token[nstreams],
                                       device_get(&x.devices, dev), prio, tenant_named(tenant));
        ck_assert_ptr_nonnull(st);
        owned[nstreams++] = st;
        return st;
}

/* The owner lets go of its stream (its handle is closed). */
static void drop_stream(struct stream *st)
{
        for (int i = 0; i < nstreams; i++)
                if (owned[i] == st) {
                        owned[i] = NULL;
                        stream_unref(st);
                        return;
                }
        ck_abort_msg("stream not owned");
}

static uint32_t new_buffer(int dev, uint64_t size)
{
        struct buffer *b;
        uint32_t h;

        ck_assert_int_eq(buffer_new(device_get(&x.devices, dev), size, &b), 0);
        ck_assert_int_eq(handle_insert(&ht, HANDLE_BUFFER, b, &h), 0);
        return h;
}

static uint8_t *handle_ptr(uint32_t h)
{
        struct buffer *b = handle_lookup(&ht, HANDLE_BUFFER, h);
        ck_assert_ptr_nonnull(b);
        return buffer_ptr(b);
}

static void note_work(uint8_t *lo, uint64_t len, uint64_t seq, struct stream *st)
{
        ck_assert_int_lt(nworks, MAX_WORKS);
        works[nworks++] = (struct work){ .lo = lo, .hi = lo + len, .seq = seq, .st = st };
}

/* Prepare a record into a task of st and queue it, as the API's submit does. */
static void enqueue_kind(struct stream *st, enum task_kind kind, const struct proto_rec *r)
{
        char msg[256];
        struct task *t = task_new(kind, st, r->seq);

        ck_assert_ptr_nonnull(t);
        int rc = submit_prepare(&ht, st, r, t, msg, sizeof(msg));
        ck_assert_msg(rc == 0, "submit_prepare: %d %s", rc, msg);
        sched_enqueue(&x, t);
}

static void enqueue_rec(struct stream *st, const struct proto_rec *r)
{
        enqueue_kind(st, TASK_EXEC, r);
}

static void enqueue_event(struct stream *st, int record, uint32_t evt, uint64_t seq)
{
        struct proto_rec r = { .type = record ? PROTO_REC_EVENT_RECORD : PROTO_REC_STREAM_WAIT,
                               .seq = seq };

        r.event.event = evt;
        enqueue_kind(st, record ? TASK_EVENT_RECORD : TASK_STREAM_WAIT, &r);
}

static void enqueue_memset(struct stream *st, uint32_t buf, uint64_t off, uint64_t len, uint64_t seq)
{
        struct proto_rec r = { .type = PROTO_REC_MEMSET, .seq = seq };

        r.memset.buf = buf;
        r.memset.off = off;
        r.memset.len = len;
        r.memset.value = (uint8_t)seq;
        note_work(handle_ptr(buf) + off, len, seq, st);
        enqueue_rec(st, &r);
}

static void enqueue_copy(struct stream *st, uint32_t dst, uint32_t src, uint64_t len, uint64_t seq)
{
        struct proto_rec r = { .type = PROTO_REC_COPY, .seq = seq };

        r.copy.dst_kind = r.copy.src_kind = PROTO_MEM_BUFFER;
        r.copy.dst = dst;
        r.copy.src = src;
        r.copy.len = len;
        note_work(handle_ptr(dst), len, seq, st);
        enqueue_rec(st, &r);
}

/* Submitted units not completed yet, of st (NULL: all). */
static int npending(const struct stream *st)
{
        int n = 0;
        for (int i = 0; i < fk.nsubs; i++)
                if (fk.subs[i].u && (!st || fk.subs[i].st == st))
                        n++;
        return n;
}

static struct sub *pending(const struct stream *st)
{
        for (int i = 0; i < fk.nsubs; i++)
                if (fk.subs[i].u && (!st || fk.subs[i].st == st))
                        return &fk.subs[i];
        return NULL;
}

/* The backend reports unit s back: item fail_at (-1: none) failed with code and msg, the
 * items after it cancelled (a chain stops at its first failure); it ran dur_ns. */
static void complete_unit(struct sub *s, int fail_at, int code, const char *msg, uint64_t dur_ns)
{
        struct exec_unit *u = s->u;

        ck_assert_ptr_nonnull(u);
        for (int i = 0; i < u->nitems; i++) {
                struct exec_item *it = u->items[i];
                it->status = fail_at < 0 || i < fail_at ? 0 : i == fail_at ? code : PROTO_E_CANCELLED;
                snprintf(it->err, sizeof(it->err), "%s",
                         it->status == 0 ? "" : i == fail_at ? msg : "cancelled");
        }
        u->start_ns = now_ns();
        u->end_ns = u->start_ns + dur_ns;
        s->u = NULL;
        sched_unit_complete(u, &x);
}

static void complete_ok(struct sub *s, uint64_t dur_ns)
{
        complete_unit(s, -1, 0, NULL, dur_ns);
}

static void complete_cancelled(struct sub *s)
{
        complete_unit(s, 0, PROTO_E_CANCELLED, "cancelled", 1000);
}

static void free_handle(enum handle_type type, void *obj, void *userdata)
{
        if (type == HANDLE_BUFFER)
                buffer_unref(obj);
        else if (type == HANDLE_EVENT)
                evt_unref(obj);
}

/* Whatever a test left: cancel and drain it, then check that every stream, task and buffer
 * went away and every count returned to zero. */
static void teardown(void)
{
        for (int i = 0; i < nstreams; i++)
                if (owned[i]) {
                        owned[i]->session = NULL;
                        sched_stream_cancel(&x, owned[i]);
                }
        for (int round = 0; round < 100 && npending(NULL); round++) {
                struct sub *s;
                while ((s = pending(NULL)))
                        complete_cancelled(s);
                pass();
        }
        ck_assert_int_eq(npending(NULL), 0);
        for (int i = 0; i < nstreams; i++)
                if (owned[i])
                        drop_stream(owned[i]);
        pass();
        sched_run(&x);
        ck_assert_int_eq(count_calls(C_STREAM_RELEASED, NULL, -1), nstreams);
        for (int i = 0; i < tenants.ntenants; i++)
                ck_assert_uint_eq(tenants.tenants[i]->queued, 0);
        for (int d = 0; d < x.devices.count; d++) {
                struct pd_device *pd = &x.devices.devices[d].pd;
                ck_assert_uint_eq(x.devices.devices[d].streams, 0);
                /* every dispatch came back */
                ck_assert_int_eq(pd->host_busy[0] + pd->host_busy[1], 0);
                for (int e = 0; e < OPS_ENGINE_COUNT; e++)
                        ck_assert_int_eq(pd->free[e], pd->cores[e]);
        }

        handle_foreach(&ht, free_handle, NULL);
        handle_table_deinit(&ht);
        for (int d = 0; d < x.devices.count; d++)
                ck_assert_uint_eq(x.devices.devices[d].mem_used, 0);
        sched_pool_drain(); /* before task_pool_drain: pooled units hold pooled calls */
        task_pool_drain();
        device_registry_deinit(&x.devices);
        tenant_registry_deinit(&tenants);
        x.backend->ops->destroy(x.backend);
        event_free(x.sched_event);
        event_base_free(x.base);
}

/* ---- 1. stream ordering ------------------------------------------------------------------ */

START_TEST(test_stream_order)
{
        struct stream *a = new_stream(0, 0, "default"), *b = new_stream(0, 0, "default");
        uint32_t ba = new_buffer(0, 4 * UNIT_LEN), bb = new_buffer(0, 4 * UNIT_LEN);
        for (int i = 0; i < 4; i++)
                enqueue_memset(a, ba, (uint64_t)i * UNIT_LEN, UNIT_LEN, 10 + i);
        for (int i = 0; i < 2; i++)
                enqueue_memset(b, bb, (uint64_t)i * UNIT_LEN, UNIT_LEN, 20 + i);
        ck_assert_int_eq(fk.nsubs, 0); /* nothing before the scheduling pass */
        pass();
        /* one unit per stream, both streams at once (two DMA cores) */
        ck_assert_int_eq(npending(a), 1);
        ck_assert_int_eq(npending(b), 1);
        ck_assert_int_eq(fk.nsubs, 2);

        /* a's tasks reach the backend in order, one unit at a time, whatever b does */
        for (int i = 0; i < 4; i++) {
                struct sub *s = pending(a);
                ck_assert_ptr_nonnull(s);
                ck_assert_int_eq(s->nitems, 1);
                ck_assert_uint_eq(s->seq[0], 10 + (uint64_t)i);
                ck_assert_int_eq(s->engine, OPS_ENGINE_DMA);
                ck_assert_int_eq(s->device, 0);
                ck_assert_int_eq(npending(a), 1);
                pass(); /* nothing changes without a completion */
                ck_assert_int_eq(npending(a), 1);
                complete_ok(s, 500000);
                ck_assert_int_eq(npending(a), 0);
                ck_assert_int_eq(count_calls(C_TASK_RETIRED, a, 0), i + 1);
                pass();
        }
        ck_assert_int_eq(npending(a), 0);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, a, -1), 1);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, b, -1), 0);
        /* b's first unit ran all along; its second follows it */
        ck_assert_uint_eq(pending(b)->seq[0], 20);
        complete_ok(pending(b), 500000);
        pass();
        ck_assert_uint_eq(pending(b)->seq[0], 21);
        complete_ok(pending(b), 500000);
        pass();
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, b, -1), 1);
        ck_assert_int_eq(count_calls(C_TASK_DONE, NULL, 1), 0);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), 0);
        ck_assert_int_eq(count_calls(C_UNIT_DONE, NULL, -1), 6);

        /* short tasks go as one chain of about a tile, still in stream order */
        for (int i = 0; i < 5; i++)
                enqueue_memset(a, ba, (uint64_t)i * 4096, 4096, 30 + i);
        pass();
        ck_assert_int_eq(npending(a), 1);
        struct sub *s = pending(a);
        ck_assert_int_eq(s->nitems, 5);
        for (int i = 0; i < 5; i++)
                ck_assert_uint_eq(s->seq[i], 30 + (uint64_t)i);
        complete_ok(s, 50000);
        pass();
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, a, 0), 9);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, a, -1), 2);

        /* work queued while the stream runs waits for the running unit */
        enqueue_memset(a, ba, 0, UNIT_LEN, 40);
        pass();
        s = pending(a);
        enqueue_memset(a, ba, UNIT_LEN, UNIT_LEN, 41);
        pass();
        ck_assert_int_eq(npending(a), 1);
        complete_ok(s, 1000);
        pass();
        ck_assert_uint_eq(pending(a)->seq[0], 41);
}
END_TEST

/* ---- 2. classes and weights ---------------------------------------------------------------- */

START_TEST(test_class_order)
{
        struct stream *blocker = new_stream(0, 0, "default");
        struct stream *be = new_stream(0, 0, "be"), *lc = new_stream(0, 7, "lc");
        uint32_t buf = new_buffer(0, 4 * UNIT_LEN);

        enqueue_memset(blocker, buf, 0, UNIT_LEN, 1);
        pass();
        ck_assert_int_eq(npending(blocker), 1);
        /* the single DMA core is busy: both wait, best-effort queued first */
        enqueue_memset(be, buf, UNIT_LEN, UNIT_LEN, 2);
        pass();
        enqueue_memset(lc, buf, 2 * UNIT_LEN, UNIT_LEN, 3);
        pass();
        ck_assert_int_eq(npending(NULL), 1);
        complete_ok(pending(blocker), 600000);
        pass();
        ck_assert_int_eq(npending(NULL), 1);
        ck_assert_msg(pending(lc) != NULL, "latency-critical work waits behind best-effort work");
        complete_ok(pending(lc), 600000);
        pass();
        ck_assert_ptr_nonnull(pending(be));
        complete_ok(pending(be), 600000);
        pass();
        ck_assert_int_eq(npending(NULL), 0);
}
END_TEST

START_TEST(test_best_effort_floor)
{
        /* with a minimum share, best-effort work that got less than it goes first */
        struct stream *blocker = new_stream(0, 0, "default");
        struct stream *be = new_stream(0, 0, "be"), *lc = new_stream(0, 0, "lc");
        uint32_t buf = new_buffer(0, 4 * UNIT_LEN);

        x.devices.devices[0].pd.min_share = 0.05;
        enqueue_memset(blocker, buf, 0, UNIT_LEN, 1);
        pass();
        enqueue_memset(be, buf, UNIT_LEN, UNIT_LEN, 2);
        enqueue_memset(lc, buf, 2 * UNIT_LEN, UNIT_LEN, 3);
        pass();
        complete_ok(pending(blocker), 600000);
        pass();
        ck_assert_msg(pending(be) != NULL, "starved best-effort work did not get its share");
}
END_TEST

START_TEST(test_weighted_share)
{
        struct stream *h = new_stream(0, 0, "heavy"), *l = new_stream(0, 0, "light");
        uint32_t bh = new_buffer(0, 8 * UNIT_LEN), bl = new_buffer(0, 8 * UNIT_LEN);
        uint64_t seq = 1, used_h = 0, used_l = 0;
        int slot_h = 0, slot_l = 0, nh = 0, nl = 0;

        /* queues stay full: four tasks each, one more for every one that completes */
        for (int i = 0; i < 4; i++) {
                enqueue_memset(h, bh, (uint64_t)(slot_h++ % 8) * UNIT_LEN, UNIT_LEN, seq++);
                enqueue_memset(l, bl, (uint64_t)(slot_l++ % 8) * UNIT_LEN, UNIT_LEN, seq++);
        }
        for (int n = 0; n < 400; n++) {
                pass();
                ck_assert_int_eq(npending(NULL), 1); /* one DMA core */
                struct sub *s = pending(NULL);
                /* engine time differs from the estimate: the share is of what was used */
                uint64_t dur = 800000 + (uint64_t)(n % 5) * 100000;
                if (s->st == h) {
                        used_h += dur;
                        nh++;
                        complete_ok(s, dur);
                        enqueue_memset(h, bh, (uint64_t)(slot_h++ % 8) * UNIT_LEN, UNIT_LEN, seq++);
                } else {
                        ck_assert_ptr_eq(s->st, l);
                        used_l += dur;
                        nl++;
                        complete_ok(s, dur);
                        enqueue_memset(l, bl, (uint64_t)(slot_l++ % 8) * UNIT_LEN, UNIT_LEN, seq++);
                }
        }
        double ratio = (double)used_h / (double)used_l;
        ck_assert_msg(ratio > 2.8 && ratio < 3.2, "engine time heavy:light = %.3f (%d:%d units)",
                      ratio, nh, nl);
        /* the tenants were charged what the units used */
        ck_assert_uint_eq(tenant_named("heavy")->dev[0].engine_ns, used_h);
        ck_assert_uint_eq(tenant_named("light")->dev[0].engine_ns, used_l);
}
END_TEST

/* ---- 3. tiles ---------------------------------------------------------------------------------- */

START_TEST(test_tiles)
{
        const uint64_t len = 4u << 20; /* ~8.4 ms at half of 1 GB/s: well above a tile */
        struct stream *st = new_stream(0, 0, "default");
        uint32_t src = new_buffer(0, len), dst = new_buffer(0, len);
        uint8_t *base = handle_ptr(dst);
        uint64_t covered = 0;
        int ntiles = 0;

        enqueue_copy(st, dst, src, len, 1);
        pass();
        while (npending(st)) {
                struct sub *s = pending(st);
                ck_assert_int_eq(npending(st), 1);
                ck_assert_int_eq(s->nitems, 1);
                ck_assert_uint_eq(s->seq[0], 1);
                ck_assert_int_eq(s->engine, OPS_ENGINE_DMA);
                /* tiles cover the copy in order, without gaps */
                ck_assert_ptr_eq(s->dst, base + covered);
                ck_assert_uint_gt(s->len, 0);
                covered += s->len;
                ntiles++;
                ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, -1), 0);
                complete_ok(s, TILE_NS);
                pass();
                ck_assert_int_lt(ntiles, 100);
        }
        ck_assert_uint_eq(covered, len);
        ck_assert_int_ge(ntiles, 4);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 0), 1);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 0);
        ck_assert_int_eq(count_calls(C_TASK_DONE, st, 0), 1);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, st, -1), 1);
        ck_assert_uint_eq(tenant_named("default")->dev[0].engine_ns, (uint64_t)ntiles * TILE_NS);

        /* a failed tile: no further tiles, the task fails once, the stream's error is set and
         * the work queued behind it is cancelled */
        enqueue_copy(st, dst, src, len, 2);
        enqueue_memset(st, src, 0, 4096, 3);
        pass();
        complete_ok(pending(st), TILE_NS);
        pass();
        complete_ok(pending(st), TILE_NS);
        pass();
        int before = fk.nsubs;
        complete_unit(pending(st), 0, PROTO_E_EXEC, "tile fault", TILE_NS);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, st, -1), 1);
        ck_assert_uint_eq(last_call(C_TASK_FAILED)->seq, 2);
        ck_assert_int_eq(last_call(C_TASK_FAILED)->code, PROTO_E_EXEC);
        ck_assert_str_eq(last_call(C_TASK_FAILED)->msg, "tile fault");
        ck_assert_int_eq(st->error.code, PROTO_E_EXEC);
        ck_assert_uint_eq(st->error.seq, 2);
        pass();
        ck_assert_int_eq(fk.nsubs, before); /* nothing more went to the backend */
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 2); /* the copy and the memset */
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 0), 1);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, st, -1), 1);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, st, -1), 2);
}
END_TEST

START_TEST(test_tile_cancel)
{
        /* cancelling a stream in the middle of a tiled task: the running tile comes back,
         * no further tile starts, the task retires once as failed */
        const uint64_t len = 4u << 20;
        struct stream *st = new_stream(0, 0, "default");
        uint32_t src = new_buffer(0, len), dst = new_buffer(0, len);

        enqueue_copy(st, dst, src, len, 1);
        pass();
        complete_ok(pending(st), TILE_NS);
        pass();
        struct sub *s = pending(st);
        sched_stream_cancel(&x, st);
        ck_assert_int_eq(s->cancelled, 1);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, -1), 0);
        complete_cancelled(s);
        pass();
        ck_assert_int_eq(npending(st), 0);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 1);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, st, -1), 0);
        ck_assert_int_eq(st->error.code, 0);
        ck_assert(stream_idle(st));

        /* the tile finishes anyway (the cancel came too late): still no further tile */
        enqueue_copy(st, dst, src, len, 2);
        pass();
        s = pending(st);
        sched_stream_cancel(&x, st);
        complete_ok(s, TILE_NS);
        pass();
        ck_assert_int_eq(npending(st), 0);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 2);
        ck_assert_int_eq(count_calls(C_TASK_DONE, st, 1), 2);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, st, -1), 0);
}
END_TEST

/* Tiles of one task run at once on the engine's free cores, each picked by the policy:
 * the task completes when the last returns; host slots bound what is out at once. */
START_TEST(test_tiles_parallel)
{
        const uint64_t len = 4u << 20;
        struct stream *st = new_stream(0, 0, "be");
        uint32_t src = new_buffer(0, len), dst = new_buffer(0, len);
        uint8_t *base = handle_ptr(dst);
        int ntiles = 0;

        enqueue_copy(st, dst, src, len, 1);
        pass();
        ck_assert_int_eq(npending(st), 2); /* both DMA cores of the device */
        while (npending(st)) {
                struct sub *s = pending(st);
                ck_assert_int_eq(s->nitems, 1);
                ck_assert_uint_eq(s->seq[0], 1);
                /* tiles are near-equal, aligned parts: each starts a part of its own */
                uint64_t off = (uint64_t)(s->dst - base);
                ck_assert_uint_lt(off, len);
                ck_assert_uint_gt(s->len, 0);
                ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, -1), 0);
                ntiles++;
                ck_assert_int_lt(ntiles, 64);
                complete_ok(s, TILE_NS);
                pass();
                ck_assert_int_le(npending(st), 2);
        }
        ck_assert_int_ge(ntiles, 4);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 0), 1);
        ck_assert_int_eq(count_calls(C_TASK_DONE, st, 0), 1);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, st, -1), 1);
        /* fairness is kept per tile: every tile charged on its own */
        ck_assert_uint_eq(tenant_named("be")->dev[0].engine_ns, (uint64_t)ntiles * TILE_NS);
        ck_assert_int_eq(device_get(&x.devices, 0)->pd.host_busy[1], 0);

        /* a latency-critical launch that arrives while best-effort tiles hold every core
         * takes the next core that frees, ahead of the remaining tiles */
        struct stream *lc = new_stream(0, 0, "lc");
        uint32_t lbuf = new_buffer(0, 4096);
        enqueue_copy(st, dst, src, len, 2);
        pass();
        ck_assert_int_eq(npending(st), 2);
        enqueue_memset(lc, lbuf, 0, 4096, 9);
        pass();
        ck_assert_int_eq(npending(lc), 0);
        complete_ok(pending(st), TILE_NS);
        pass();
        ck_assert_int_eq(npending(lc), 1);
        ck_assert_int_eq(npending(st), 1);
        complete_ok(pending(lc), 1000);
        pass();
        ck_assert_int_eq(npending(st), 2);

        /* a failed tile while another runs: no further tiles, the task retires once, after
         * the other returned */
        int before = fk.nsubs;
        complete_unit(pending(st), 0, PROTO_E_EXEC, "tile fault", TILE_NS);
        pass();
        ck_assert_int_eq(fk.nsubs, before);
        ck_assert_int_eq(npending(st), 1);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, -1), 1);
        complete_ok(pending(st), TILE_NS);
        pass();
        ck_assert_int_eq(fk.nsubs, before);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 1);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, st, -1), 1);
        ck_assert_str_eq(last_call(C_TASK_FAILED)->msg, "tile fault");
        ck_assert(stream_idle(st));
        st->error.code = 0; /* as the owner's synchronize does */

        /* host slots: the device sends at most that many units out, cores notwithstanding */
        pd_set_host_slots(&device_get(&x.devices, 0)->pd, 1);
        enqueue_copy(st, dst, src, len, 3);
        pass();
        ck_assert_int_eq(npending(st), 1);
        /* best-effort work has host slots of its own (background workers): a latency-critical
         * launch still finds one */
        enqueue_memset(lc, lbuf, 0, 4096, 10);
        pass();
        ck_assert_int_eq(npending(lc), 1);
        ck_assert_int_eq(npending(st), 1);
        complete_ok(pending(lc), 1000);
        while (npending(st)) {
                complete_ok(pending(st), TILE_NS);
                pass();
                ck_assert_int_le(npending(st), 1);
        }
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 0), 2);
}
END_TEST

/* Cancelling a task whose tiles run on several cores cancels every one; it retires once. */
START_TEST(test_tiles_parallel_cancel)
{
        const uint64_t len = 4u << 20;
        struct stream *st = new_stream(0, 0, "default");
        uint32_t src = new_buffer(0, len), dst = new_buffer(0, len);

        enqueue_copy(st, dst, src, len, 1);
        pass();
        ck_assert_int_eq(npending(st), 2);
        int before = fk.ncancels;
        sched_stream_cancel(&x, st);
        ck_assert_int_eq(fk.ncancels, before + 2);
        struct sub *s;
        while ((s = pending(st))) {
                ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, -1), 0);
                complete_cancelled(s);
                pass();
        }
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 1);
        ck_assert(stream_idle(st));

        /* the owner's task_cancel: both tiles cut, no further tile, one failure */
        char msg[128];
        enqueue_copy(st, dst, src, len, 2);
        pass();
        ck_assert_int_eq(npending(st), 2);
        before = fk.nsubs;
        ck_assert_int_eq(sched_task_cancel(&x, st, 2, msg, sizeof(msg)), 0);
        while ((s = pending(st))) {
                ck_assert_int_eq(s->cancelled, 1);
                complete_cancelled(s);
                pass();
        }
        ck_assert_int_eq(fk.nsubs, before);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 2);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, st, -1), 1);
}
END_TEST

/* ---- 4. submission validation -------------------------------------------------------------- */

static struct proto_rec add_rec(uint32_t a, uint32_t b, uint32_t out, int64_t n)
{
        struct proto_rec r = { .type = PROTO_REC_LAUNCH, .seq = 7 };
        uint32_t bufs[3] = { a, b, out };

        snprintf(r.launch.op, sizeof(r.launch.op), "Add");
        r.launch.nin = 2;
        r.launch.nout = 1;
        for (int i = 0; i < 3; i++) {
                r.launch.t[i].buf = bufs[i];
                r.launch.t[i].dtype = PROTO_DTYPE_FLOAT32;
                r.launch.t[i].ndim = 1;
                r.launch.t[i].dims[0] = n;
        }
        return r;
}

/* submit_prepare's verdict on r; the message is copied to msg. */
static int prepare(struct stream *st, const struct proto_rec *r, char *msg, size_t len)
{
        struct task *t = task_new(TASK_EXEC, st, r->seq);

        ck_assert_ptr_nonnull(t);
        int rc = submit_prepare(&ht, st, r, t, msg, len);
        task_free(t); /* the caller frees the task whatever the outcome */
        return rc;
}

#define ck_prepare(st, r, code, text)                                                         \
        do {                                                                               \
                char m_[256];                                                              \
                int rc_ = prepare(st, r, m_, sizeof(m_));                                  \
                ck_assert_msg(rc_ == (code), "code %d, expected %d (%s)", rc_, (code), m_); \
                ck_assert_msg(strstr(m_, text) != NULL, "message '%s' lacks '%s'", m_, text); \
        } while (0)

START_TEST(test_validation)
{
        struct stream *st = new_stream(0, 0, "default");
        uint32_t a = new_buffer(0, 64), b = new_buffer(0, 64), out = new_buffer(0, 64);
        uint32_t other = new_buffer(1, 64), ro;
        struct buffer *view;
        struct proto_rec r;
        char m[256];

        ck_assert_int_eq(buffer_view_new(handle_lookup(&ht, HANDLE_BUFFER, out), 0, 64, 1, &view), 0);
        ck_assert_int_eq(handle_insert(&ht, HANDLE_BUFFER, view, &ro), 0);

        r = add_rec(a, b, out, 16);
        ck_assert_int_eq(prepare(st, &r, m, sizeof(m)), 0);

        r = add_rec(a, 4242, out, 16);
        ck_prepare(st, &r, PROTO_E_BAD_HANDLE, "Add: input 1: unknown buffer handle 4242");

        r = add_rec(a, b, ro, 16);
        ck_prepare(st, &r, PROTO_E_PERMISSION, "Add: output 0: buffer");
        ck_prepare(st, &r, PROTO_E_PERMISSION, "read-only");

        r = add_rec(a, b, out, 17); /* 68 bytes in 64 */
        ck_prepare(st, &r, PROTO_E_OUT_OF_RANGE, "Add: input 0: 68 bytes at offset 0");

        r = add_rec(a, b, out, 4);
        r.launch.t[2].offset = UINT64_MAX - 3; /* offset + length wraps around */
        ck_prepare(st, &r, PROTO_E_OUT_OF_RANGE, "Add: output 0:");
        r.launch.t[2].offset = 52; /* 16 bytes at 52 end past 64 */
        ck_prepare(st, &r, PROTO_E_OUT_OF_RANGE, "Add: output 0: 16 bytes at offset 52");

        r = add_rec(a, b, out, 4);
        r.launch.t[1].offset = 2;
        ck_prepare(st, &r, PROTO_E_INVALID,
                   "Add: input 1: offset 2 is not a multiple of the element size");

        r = add_rec(a, other, out, 4);
        ck_prepare(st, &r, PROTO_E_INVALID, "Add: input 1: buffer is on device 1");

        r = add_rec(a, b, out, 4);
        snprintf(r.launch.op, sizeof(r.launch.op), "NoSuchOp");
        ck_prepare(st, &r, PROTO_E_UNSUPPORTED, "unknown operator 'NoSuchOp'");

        r = add_rec(a, b, out, 4);
        r.launch.t[2].dims[0] = 3; /* Add of [4] and [4] into [3] */
        ck_prepare(st, &r, PROTO_E_SHAPE, "Add: output");

        r = add_rec(a, b, out, 4);
        r.launch.t[0].dtype = 200;
        ck_prepare(st, &r, PROTO_E_UNSUPPORTED, "Add: input 0: unknown dtype 200");

        /* copies and memsets name the endpoint */
        struct proto_rec c = { .type = PROTO_REC_COPY, .seq = 8 };
        c.copy.dst = out;
        c.copy.src = a;
        c.copy.len = 65;
        ck_prepare(st, &c, PROTO_E_OUT_OF_RANGE, "copy destination: range 0+65");
        c.copy.len = 64;
        c.copy.dst = ro;
        ck_prepare(st, &c, PROTO_E_PERMISSION, "copy destination: buffer");
        c.copy.dst = out;
        c.copy.src = 999;
        ck_prepare(st, &c, PROTO_E_BAD_HANDLE, "copy source: unknown buffer handle 999");

        struct proto_rec ms = { .type = PROTO_REC_MEMSET, .seq = 9 };
        ms.memset.buf = out;
        ms.memset.off = 60;
        ms.memset.len = 8;
        ck_prepare(st, &ms, PROTO_E_OUT_OF_RANGE, "memset: range 60+8");

        struct proto_rec bad = { .type = 99, .seq = 10 };
        ck_prepare(st, &bad, PROTO_E_INVALID, "unknown record type 99");

        /* failed preparations hold nothing: every buffer is back to its handle's reference */
        ck_assert_int_eq(((struct buffer *)handle_lookup(&ht, HANDLE_BUFFER, a))->refs, 1);
        ck_assert_int_eq(((struct buffer *)handle_lookup(&ht, HANDLE_BUFFER, b))->refs, 1);
        ck_assert_int_eq(fk.nsubs, 0);
}
END_TEST

/* Verdicts of launches that passed are remembered by signature (submit.c): a repeat gets
 * the same costs without the operator's validation, and nothing about a call that differs in
 * what validation reads (shape, dtype, attribute, device) or in its binding slips through. */
static int prepare_cost(struct stream *st, const struct proto_rec *r, uint64_t *cost, char *msg,
                        size_t len)
{
        struct task *t = task_new(TASK_EXEC, st, r->seq);

        ck_assert_ptr_nonnull(t);
        int rc = submit_prepare(&ht, st, r, t, msg, len);
        memcpy(cost, t->cost, sizeof(t->cost));
        task_free(t);
        return rc;
}

START_TEST(test_launch_memo)
{
        struct stream *st = new_stream(0, 0, "default"), *st1 = new_stream(1, 0, "default");
        uint32_t a = new_buffer(0, 256), b = new_buffer(0, 256), out = new_buffer(0, 256);
        uint32_t a1 = new_buffer(1, 256), b1 = new_buffer(1, 256), o1 = new_buffer(1, 256), ro;
        uint64_t c1[OPS_ENGINE_COUNT], c2[OPS_ENGINE_COUNT], c3[OPS_ENGINE_COUNT];
        struct buffer *view;
        struct proto_rec r;
        char m[256];

        ck_assert_int_eq(buffer_view_new(handle_lookup(&ht, HANDLE_BUFFER, out), 0, 256, 1, &view), 0);
        ck_assert_int_eq(handle_insert(&ht, HANDLE_BUFFER, view, &ro), 0);
        for (int rep = 0; rep < 3; rep++) { /* the first fills the memo, the others hit it */
                r = add_rec(a, b, out, 37);
                ck_assert_int_eq(prepare_cost(st, &r, rep ? c2 : c1, m, sizeof(m)), 0);
                if (rep)
                        ck_assert_mem_eq(c1, c2, sizeof(c1));
        }
        ck_assert_uint_gt(c1[OPS_ENGINE_VECTOR] + c1[OPS_ENGINE_AICPU], 0);
        /* the same signature with a bad binding: bound before the memo is consulted */
        r = add_rec(a, b, ro, 37);
        ck_prepare(st, &r, PROTO_E_PERMISSION, "read-only");
        r = add_rec(a, b, out, 37);
        r.launch.t[2].offset = 256 - 4; /* 148 bytes at 252 */
        ck_prepare(st, &r, PROTO_E_OUT_OF_RANGE, "Add: output 0: 148 bytes at offset 252");
        /* a call that differs in what validation reads is validated */
        r = add_rec(a, b, out, 37);
        r.launch.t[2].dims[0] = 36;
        ck_prepare(st, &r, PROTO_E_SHAPE, "Add: output");
        r = add_rec(a, b, out, 37);
        r.launch.t[2].dtype = PROTO_DTYPE_INT32;
        ck_prepare(st, &r, PROTO_E_SHAPE, "Add: output");
        r = add_rec(a, b, out, 37);
        r.launch.nattr = 1;
        snprintf(r.launch.attr[0].name, sizeof(r.launch.attr[0].name), "alpha");
        r.launch.attr[0].type = 1;
        for (int rep = 0; rep < 2; rep++) /* failures are not remembered */
                ck_prepare(st, &r, PROTO_E_SHAPE, "alpha");
        /* a different device is its own signature; costs follow that device's rates */
        r = add_rec(a1, b1, o1, 37);
        ck_assert_int_eq(prepare_cost(st1, &r, c3, m, sizeof(m)), 0);
        /* and the first call still hits with its own costs */
        r = add_rec(a, b, out, 37);
        ck_assert_int_eq(prepare_cost(st, &r, c2, m, sizeof(m)), 0);
        ck_assert_mem_eq(c1, c2, sizeof(c1));
}
END_TEST

/* Queue waits go to log2 buckets ([2^b, 2^(b+1)) ns) that npuctl sched's quantiles read. */
START_TEST(test_wait_buckets)
{
        struct tenant *t = tenant_named("lc");
        static const struct { uint64_t ns; int bucket; } cases[] = {
                { 0, 0 }, { 1, 0 }, { 2, 1 }, { 3, 1 }, { 4, 2 }, { 1023, 9 }, { 1024, 10 },
                { 1000000, 19 }, { 1ull << 47, 47 }, { UINT64_MAX, WAIT_BUCKETS - 1 },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint64_t before[WAIT_BUCKETS];
                memcpy(before, t->dev[1].wait_hist, sizeof(before));
                tenant_note_wait(t, 1, cases[i].ns);
                for (int b = 0; b < WAIT_BUCKETS; b++)
                        ck_assert_msg(t->dev[1].wait_hist[b] == before[b] + (b == cases[i].bucket),
                                      "wait %llu ns: bucket %d", (unsigned long long)cases[i].ns, b);
        }
        tenant_note_wait(t, 7, 5); /* no such device: ignored */
        memset(t->dev[1].wait_hist, 0, sizeof(t->dev[1].wait_hist));
        for (int i = 0; i < 100; i++)
                tenant_note_wait(t, 1, 1000000); /* 1 ms: bucket 19, midpoint 3 << 18 */
        ck_assert_uint_eq(tenant_wait_quantile(t, 1, 0.5), 3ull << 18);
}
END_TEST

/* ---- 5. cancellation -------------------------------------------------------------------------- */

START_TEST(test_cancel)
{
        struct stream *a = new_stream(0, 0, "default");
        uint32_t buf = new_buffer(0, 4 * UNIT_LEN);

        for (int i = 0; i < 3; i++)
                enqueue_memset(a, buf, (uint64_t)i * UNIT_LEN, UNIT_LEN, 1 + i);
        pass();
        struct sub *s = pending(a);
        ck_assert_uint_eq(s->seq[0], 1);
        sched_stream_cancel(&x, a);
        /* the queued tasks are gone, as cancelled; the running one is asked to stop */
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, a, 1), 2);
        ck_assert_int_eq(s->cancelled, 1);
        ck_assert_int_eq(fk.ncancels, 1);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, a, -1), 0); /* still running */
        complete_cancelled(s);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, a, 1), 3);
        pass();
        ck_assert_int_eq(npending(NULL), 0);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, a, -1), 1);
        /* cancellation is not a failure */
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), 0);
        ck_assert_int_eq(a->error.code, 0);

        /* the stream takes work again afterwards */
        enqueue_memset(a, buf, 0, UNIT_LEN, 4);
        pass();
        ck_assert_uint_eq(pending(a)->seq[0], 4);
        complete_ok(pending(a), 1000);
        pass();
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, a, 0), 1);

        /* cancelling a device's running units touches no other device */
        struct stream *b = new_stream(0, 0, "default"), *c = new_stream(1, 0, "default");
        uint32_t buf1 = new_buffer(1, UNIT_LEN);
        enqueue_memset(b, buf, 0, UNIT_LEN, 5);
        enqueue_memset(c, buf1, 0, UNIT_LEN, 6);
        pass();
        struct sub *sb = pending(b), *sc = pending(c);
        ck_assert_int_eq(sb->device, 0);
        ck_assert_int_eq(sc->device, 1);
        sched_cancel_running(&x, device_get(&x.devices, 1));
        ck_assert_int_eq(sb->cancelled, 0);
        ck_assert_int_eq(sc->cancelled, 1);
        ck_assert_int_eq(atomic_load(&sb->u->cancel), 0);
        sched_cancel_running(&x, NULL);
        ck_assert_int_eq(sb->cancelled, 1);
        ck_assert_int_eq(sc->cancelled, 2);
        complete_cancelled(sb);
        complete_cancelled(sc);
        pass();
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, b, 1), 1);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, c, 1), 1);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), 0);
}
END_TEST

/* ---- 6. reclaim of a dead owner's work ------------------------------------------------------ */

START_TEST(test_reclaim)
{
        struct stream *st = new_stream(0, 0, "default");
        uint32_t buf = new_buffer(0, 4 * UNIT_LEN);
        struct buffer *b = handle_lookup(&ht, HANDLE_BUFFER, buf);

        for (int i = 0; i < 3; i++)
                enqueue_memset(st, buf, (uint64_t)i * UNIT_LEN, UNIT_LEN, 1 + i);
        pass();
        struct sub *s = pending(st);
        ck_assert_int_eq(b->refs, 4); /* the handle and three tasks */
        ck_assert_uint_eq(tenant_named("default")->queued, 3);

        /* the owner goes (session_close): no owner, queued work cancelled, handle closed */
        st->session = NULL;
        sched_stream_cancel(&x, st);
        drop_stream(st);
        ck_assert_int_eq(count_calls(C_STREAM_RELEASED, NULL, -1), 0); /* the unit holds it */
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 2);
        ck_assert_int_eq(b->refs, 2);

        /* the running unit comes back failed: recorded on the stream, told to no one */
        complete_unit(s, 0, PROTO_E_EXEC, "kernel fault", 1000);
        pass();
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), 0);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, NULL, -1), 0);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 3);
        ck_assert_int_eq(count_calls(C_STREAM_RELEASED, st, -1), 1);
        struct call *rel = last_call(C_STREAM_RELEASED);
        ck_assert_int_eq(rel->code, PROTO_E_EXEC);
        ck_assert_uint_eq(rel->seq, 1);
        ck_assert_str_eq(rel->msg, "task 1: kernel fault");
        ck_assert_int_eq(b->refs, 1);
        ck_assert_uint_eq(tenant_named("default")->queued, 0);
        ck_assert_uint_eq(device_get(&x.devices, 0)->streams, 0);
        pass();
        ck_assert_int_eq(count_calls(C_STREAM_RELEASED, NULL, -1), 1);
}
END_TEST

START_TEST(test_reclaim_idle)
{
        /* an idle stream whose owner goes is released at once, a queued one after cancel */
        struct stream *idle = new_stream(0, 0, "default"), *q = new_stream(1, 0, "default");
        uint32_t buf = new_buffer(1, UNIT_LEN);

        idle->session = NULL;
        sched_stream_cancel(&x, idle);
        drop_stream(idle);
        ck_assert_int_eq(count_calls(C_STREAM_RELEASED, idle, -1), 1);

        /* queued behind nothing yet: no scheduling pass ran */
        enqueue_memset(q, buf, 0, UNIT_LEN, 1);
        q->session = NULL;
        sched_stream_cancel(&x, q);
        drop_stream(q);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, q, 1), 1);
        pass(); /* the settle list still held it */
        ck_assert_int_eq(count_calls(C_STREAM_RELEASED, q, -1), 1);
        ck_assert_int_eq(fk.nsubs, 0);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), 0);
}
END_TEST

/* ---- 7. failure reporting and waiters --------------------------------------------------------- */

static struct waiter *wait_stream(struct stream *st, uint64_t request_id)
{
        struct waiter *w = calloc(1, sizeof(*w));

        ck_assert_ptr_nonnull(w);
        w->session = st->session;
        w->request_id = request_id;
        w->kind = WAIT_STREAM;
        w->target = stream_ref(st);
        TAILQ_INSERT_TAIL(&st->waiters, w, obj_link);
        return w;
}

START_TEST(test_failure)
{
        struct stream *st = new_stream(0, 0, "default"), *other = new_stream(0, 0, "default");
        uint32_t buf = new_buffer(0, 4 * UNIT_LEN), ob = new_buffer(0, UNIT_LEN);

        for (int i = 0; i < 3; i++)
                enqueue_memset(st, buf, (uint64_t)i * UNIT_LEN, UNIT_LEN, 1 + i);
        enqueue_memset(other, ob, 0, UNIT_LEN, 50);
        pass();
        struct waiter *w = wait_stream(st, 77);
        ck_assert_int_eq(count_calls(C_WAITER_DONE, NULL, -1), 0);

        complete_unit(pending(st), 0, PROTO_E_EXEC, "division by zero", 1000);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), 1);
        struct call *f = last_call(C_TASK_FAILED);
        ck_assert_ptr_eq(f->st, st);
        ck_assert_uint_eq(f->seq, 1);
        ck_assert_int_eq(f->code, PROTO_E_EXEC);
        ck_assert_str_eq(f->msg, "division by zero");
        ck_assert_int_eq(count_calls(C_TASK_DONE, st, 1), 1);
        ck_assert_int_eq(st->error.code, PROTO_E_EXEC);
        ck_assert_int_eq(count_calls(C_WAITER_DONE, NULL, -1), 0); /* work still queued */

        pass();
        /* the rest of the stream is cancelled, quietly; the other stream runs on */
        ck_assert_int_eq(npending(st), 0);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 3);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), 1);
        ck_assert_int_eq(npending(other), 1);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, st, -1), 1);
        ck_assert_int_eq(count_calls(C_WAITER_DONE, NULL, -1), 1);
        struct call *wd = last_call(C_WAITER_DONE);
        ck_assert_ptr_eq(wd->ptr, w);
        ck_assert_int_eq(wd->code, PROTO_E_EXEC);
        ck_assert_uint_eq(wd->seq, 1);
        ck_assert_str_eq(wd->msg, "task 1: division by zero");
        /* the synchronize reported it: the stream starts afresh */
        ck_assert_int_eq(st->error.code, 0);
        ck_assert(TAILQ_EMPTY(&st->waiters));

        /* a waiter on an idle stream that no pass looks at stays until checked */
        wait_stream(st, 78);
        sched_check_stream_waiters(&x, st);
        ck_assert_int_eq(count_calls(C_WAITER_DONE, NULL, -1), 2);
        ck_assert_int_eq(last_call(C_WAITER_DONE)->code, 0);

        /* new work runs again, and a failure without a message still names its code */
        enqueue_memset(st, buf, 0, UNIT_LEN, 4);
        pass();
        complete_unit(pending(st), 0, PROTO_E_DEVICE, "", 1000);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), 2);
        f = last_call(C_TASK_FAILED);
        ck_assert_uint_eq(f->seq, 4);
        ck_assert_int_eq(f->code, PROTO_E_DEVICE);
        ck_assert_msg(strstr(f->msg, "no detail from device 0") != NULL, "message: %s", f->msg);

        /* a synchronize reports it and clears it */
        pass();
        wait_stream(st, 79);
        sched_check_stream_waiters(&x, st);
        ck_assert_int_eq(last_call(C_WAITER_DONE)->code, PROTO_E_DEVICE);
        ck_assert_int_eq(st->error.code, 0);

        /* the first failure of a chain wins; the items after it are cancelled, not failed */
        for (int i = 0; i < 4; i++)
                enqueue_memset(st, buf, (uint64_t)i * 4096, 4096, 10 + i);
        pass();
        ck_assert_int_eq(pending(st)->nitems, 4);
        int failed_before = count_calls(C_TASK_FAILED, NULL, -1);
        complete_unit(pending(st), 1, PROTO_E_EXEC, "second", 1000);
        ck_assert_int_eq(count_calls(C_TASK_FAILED, NULL, -1), failed_before + 1);
        ck_assert_uint_eq(last_call(C_TASK_FAILED)->seq, 11);
        ck_assert_uint_eq(st->error.seq, 11);
        complete_ok(pending(other), 1000);
        pass();
}
END_TEST

START_TEST(test_events)
{
        /* b waits for an event a records after its work; a waiter on the event is answered
         * when the record runs, with the failure before it if there was one */
        struct stream *a = new_stream(0, 0, "default"), *b = new_stream(0, 0, "default");
        uint32_t buf = new_buffer(0, 4 * UNIT_LEN), h;
        struct npu_evt *e = evt_new();

        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(handle_insert(&ht, HANDLE_EVENT, e, &h), 0);
        enqueue_memset(a, buf, 0, UNIT_LEN, 1);
        enqueue_event(a, 1, h, 2);
        enqueue_event(b, 0, h, 3);
        enqueue_memset(b, buf, UNIT_LEN, UNIT_LEN, 4);
        pass();
        ck_assert_int_eq(npending(a), 1);
        ck_assert_int_eq(npending(b), 0); /* blocked on the event, with a DMA core free */
        ck_assert(!evt_complete(e));

        struct waiter *w = calloc(1, sizeof(*w));
        ck_assert_ptr_nonnull(w);
        w->kind = WAIT_EVENT;
        w->target = evt_ref(e);
        TAILQ_INSERT_TAIL(&e->waiters, w, obj_link);

        complete_ok(pending(a), 1000);
        pass();
        ck_assert(evt_complete(e));
        ck_assert_int_eq(count_calls(C_WAITER_DONE, NULL, -1), 1);
        ck_assert_ptr_eq(last_call(C_WAITER_DONE)->ptr, w);
        ck_assert_int_eq(last_call(C_WAITER_DONE)->code, 0);
        ck_assert_int_eq(npending(b), 1);
        ck_assert_uint_eq(pending(b)->seq[0], 4);
        complete_ok(pending(b), 1000);
        pass();

        /* a failure before the record travels with the event */
        enqueue_memset(a, buf, 0, UNIT_LEN, 5);
        enqueue_event(a, 1, h, 6);
        pass();
        w = calloc(1, sizeof(*w));
        ck_assert_ptr_nonnull(w);
        w->kind = WAIT_EVENT;
        w->target = evt_ref(e);
        TAILQ_INSERT_TAIL(&e->waiters, w, obj_link);
        complete_unit(pending(a), 0, PROTO_E_EXEC, "bad input", 1000);
        pass();
        ck_assert_int_eq(count_calls(C_WAITER_DONE, NULL, -1), 2);
        ck_assert_int_eq(last_call(C_WAITER_DONE)->code, PROTO_E_EXEC);
        ck_assert_uint_eq(last_call(C_WAITER_DONE)->seq, 5);
        ck_assert_str_eq(last_call(C_WAITER_DONE)->msg, "task 5: bad input");
        /* records retire as done even behind a failure; only the failed memset failed */
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, a, 0), 3);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, a, 1), 1);

        /* a cancelled stream still fires its queued records: streams waiting on them go on,
         * and a stream cancelled while blocked leaves the event's list */
        struct stream *c = new_stream(0, 0, "default");
        pass();
        wait_stream(a, 90);
        sched_check_stream_waiters(&x, a); /* clears a's error */
        enqueue_memset(a, buf, 0, UNIT_LEN, 7);
        enqueue_event(a, 1, h, 8);
        enqueue_event(b, 0, h, 9);
        enqueue_memset(b, buf, UNIT_LEN, UNIT_LEN, 10);
        enqueue_event(c, 0, h, 11);
        enqueue_memset(c, buf, 2 * UNIT_LEN, UNIT_LEN, 12);
        pass();
        ck_assert_int_eq(npending(a), 1);
        ck_assert_int_eq(npending(b) + npending(c), 0);
        sched_stream_cancel(&x, c); /* blocked: its wait and memset go */
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, c, 1), 1);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, c, 0), 1);
        struct sub *sa = pending(a);
        sched_stream_cancel(&x, a); /* the record fires now */
        ck_assert(evt_complete(e));
        pass();
        ck_assert_int_eq(npending(b), 1);
        ck_assert_uint_eq(pending(b)->seq[0], 10);
        ck_assert_int_eq(npending(c), 0);
        complete_cancelled(sa);
        complete_ok(pending(b), 1000);
        pass();
        ck_assert_int_eq(npending(NULL), 0);
}
END_TEST

START_TEST(test_submit_rejected)
{
        /* a backend that refuses a unit fails its tasks as a device error, in order */
        struct stream *st = new_stream(0, 0, "default");
        uint32_t buf = new_buffer(0, 2 * UNIT_LEN);

        fk.reject = 1;
        enqueue_memset(st, buf, 0, UNIT_LEN, 1);
        enqueue_memset(st, buf, UNIT_LEN, UNIT_LEN, 2);
        pass();
        pass();
        ck_assert_int_eq(count_calls(C_TASK_FAILED, st, -1), 1);
        ck_assert_uint_eq(last_call(C_TASK_FAILED)->seq, 1);
        ck_assert_int_eq(last_call(C_TASK_FAILED)->code, PROTO_E_DEVICE);
        ck_assert_int_eq(count_calls(C_TASK_RETIRED, st, 1), 2);
        ck_assert_int_eq(count_calls(C_STREAM_IDLE, st, -1), 1);
}
END_TEST

static Suite *exec_suite(void)
{
        Suite *s = suite_create("exec");
        TCase *tc = tcase_create("exec");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_stream_order);
        tcase_add_test(tc, test_tiles_parallel);
        tcase_add_test(tc, test_tiles_parallel_cancel);
        tcase_add_test(tc, test_validation);
        tcase_add_test(tc, test_launch_memo);
        tcase_add_test(tc, test_wait_buckets);
        tcase_add_test(tc, test_cancel);
        tcase_add_test(tc, test_reclaim);
        tcase_add_test(tc, test_reclaim_idle);
        tcase_add_test(tc, test_failure);
        tcase_add_test(tc, test_submit_rejected);
        tcase_add_test(tc, test_events);
        suite_add_tcase(s, tc);

        tc = tcase_create("sched");
        tcase_add_checked_fixture(tc, setup_one_core, teardown);
        tcase_add_test(tc, test_tiles); /* one DMA core: tiles one after another */
        tcase_add_test(tc, test_tile_cancel);
        tcase_add_test(tc, test_class_order);
        tcase_add_test(tc, test_best_effort_floor);
        tcase_add_test(tc, test_weighted_share);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(exec_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
