/* Soak test of npud (issue 9): many client processes for a long time, mixing allocations,
 * frees (immediate and stream-ordered), verified copies (synchronous, device to device,
 * through host regions, memsets), operator launches checked against the CPU (Add, MatMul,
 * Relu), an in-place counter that shows every task ran exactly once, graph runs of an ONNX
 * model, buffer export and import between clients, stream re-creation, and random SIGKILLs.
 * The supervisor starts its own npud (tests/integration/harness.c), forks the clients,
 * replaces the ones that die, injects device faults now and then, and samples npud's RSS
 * and fd count, printing the curve.
 *
 * The checker: every operation either completes with correct results or fails with a
 * reported error (a status and a message; for a failed synchronize, the task it names is
 * one the client submitted). Wrong data, an error without a message, a status no operation
 * here can cause (bad handle, protocol, ...), or a client that makes no progress for 60 s
 * fail the run. At the end: npud is alive, every session is gone, every device and tenant
 * has 0 bytes in use, npud's fd count is back to its baseline, RSS did not grow over the
 * second half of the run beyond the allowance printed, and npud exits cleanly on SIGTERM.
 *
 * Usage: soak [--clients N] [--seconds S] [--seed N] [--model FILE] [--npuctl PATH]
 *             [--no-faults] [-- NPUD-ARGS...]      (NPUD_BIN: the npud to start)
 * Exit status 0 when every check holds, 1 otherwise. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <npu.h>

#include "tests/integration/harness.h"

#define MAX_CLIENTS 256
#define BOARD 64         /* export tokens on offer */
#define MAX_BUFS 8       /* device buffers a client keeps, with a host shadow */
#define REGION_SIZE (64 << 10)
#define STUCK_SECONDS 60
#define DEFAULT_MODEL "/usr/share/libonnx-testdata/data/node/test_add/model.onnx"

enum op {
        OP_ALLOC, OP_FREE, OP_VERIFY, OP_COPY, OP_REGION, OP_ADD, OP_MATMUL, OP_RELU,
        OP_COUNTER, OP_GRAPH, OP_EXPORT, OP_IMPORT, OP_STREAM, OP_CONNECT, NOPS
};
static const char *const op_names[NOPS] = {
        "alloc", "free", "verify", "copy", "region", "add", "matmul", "relu",
        "counter", "graph", "export", "import", "stream", "connect",
};
/* relative frequencies of the operations a client picks (connect is not picked) */
static const int op_weight[NOPS] = { 10, 6, 8, 8, 6, 8, 6, 5, 6, 6, 3, 4, 1, 0 };

struct token_entry {
        uint32_t seq; /* odd while being written */
        int32_t owner; /* pid of the exporter; 0 = empty */
        uint32_t seed, size;
        char token[NPU_TOKEN_LEN];
};

/* Shared by the supervisor and every client (MAP_SHARED): counters survive SIGKILL. */
struct shared {
        volatile int stop;
        uint64_t ok[NOPS], errors[NOPS];
        uint64_t status[32];      /* reported errors by npu_status_t */
        uint64_t mismatches;      /* wrong data: the run fails */
        uint64_t unexplained;     /* no message, a task that was not submitted, odd status */
        uint64_t progress[MAX_CLIENTS];
        int cur_op[MAX_CLIENTS];
        struct token_entry board[BOARD];
};
static struct shared *sh;

static const void *model_bytes;
static size_t model_len;

static void add64(uint64_t *p, uint64_t v)
{
        __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static uint64_t get64(const uint64_t *p)
{
        return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- client ---- */

struct buf {
        npu_buffer_t h;
        uint64_t size;
        uint8_t *shadow; /* what the device holds */
        int valid;       /* 0: unknown after a failed task; rewritten before the next check */
};

struct export {
        npu_buffer_t h;
        int board;
        char token[NPU_TOKEN_LEN];
};

struct client {
        int slot;
        uint64_t rng;
        npu_context_t *ctx;
        npu_stream_t stream;
        int dev;
        struct buf bufs[MAX_BUFS];
        int nbufs;
        void *region;
        npu_region_t rh;
        npu_graph_t graph;
        int have_graph;
        npu_buffer_t counter; /* 256 counters, then 256 ones */
        float counter_val;
        int have_counter;
        struct export ex[2];
        int nex;
        uint64_t tasks[64]; /* tasks submitted since the last synchronize */
        int ntasks;
        int tasks_lost;     /* more than fit: a blamed task may be one not recorded */
};

static uint64_t rnd(struct client *c)
{
        c->rng ^= c->rng << 13;
        c->rng ^= c->rng >> 7;
        c->rng ^= c->rng << 17;
        return c->rng;
}

static unsigned rnd_below(struct client *c, unsigned n)
{
        return n ? (unsigned)(rnd(c) % n) : 0;
}

static void fill_pattern(uint8_t *p, size_t n, uint32_t seed)
{
        uint32_t x = seed * 2654435761u + 1;
        for (size_t i = 0; i < n; i++) {
                x = x * 1103515245u + 12345u;
                p[i] = (uint8_t)(x >> 16);
        }
}

static void mismatch(struct client *c, const char *fmt, ...)
{
        va_list ap;
        char msg[256];

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "soak: MISMATCH in client %d (pid %d), %s: %s\n", c->slot, (int)getpid(),
                op_names[sh->cur_op[c->slot]], msg);
        add64(&sh->mismatches, 1);
        _exit(3);
}

static void unexplained(struct client *c, const char *fmt, ...)
{
        va_list ap;
        char msg[256];

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "soak: UNEXPLAINED in client %d (pid %d), %s: %s\n", c->slot, (int)getpid(),
                op_names[sh->cur_op[c->slot]], msg);
        add64(&sh->unexplained, 1);
}

/* A failed call: count it and check that it was explained. Statuses that nothing this client
 * does can cause on a healthy daemon are unexplained (import: a token that went away is
 * INVALID, PERMISSION or BAD_HANDLE, which are expected there). Returns 1. */
static int reported(struct client *c, int op, npu_status_t st, const char *call)
{
        const char *msg = npu_error_message();

        add64(&sh->errors[op], 1);
        add64(&sh->status[(unsigned)st < 32 ? st : 31], 1);
        if (!msg || !*msg)
                unexplained(c, "%s failed with %s and no message (task %llu)", call, npu_strerror(st),
                            (unsigned long long)npu_error_task());
        switch (st) {
        case NPU_ERR_NO_MEMORY: case NPU_ERR_QUOTA: case NPU_ERR_LIMIT: case NPU_ERR_DEVICE:
        case NPU_ERR_EXEC: case NPU_ERR_BUSY: case NPU_ERR_CANCELLED:
                break;
        case NPU_ERR_INVALID: case NPU_ERR_PERMISSION: case NPU_ERR_BAD_HANDLE:
                if (op == OP_IMPORT)
                        break;
                /* fall through */
        default:
                unexplained(c, "%s: unexpected status %s (%s)", call, npu_strerror(st), msg);
        }
        return 1;
}

static uint64_t *next_task(struct client *c)
{
        if (c->ntasks < 64)
                return &c->tasks[c->ntasks++];
        c->tasks_lost = 1;
        return NULL;
}

/* After a synchronize of the stream, whatever it said: a new batch starts. */
static void batch_done(struct client *c)
{
        c->ntasks = 0;
        c->tasks_lost = 0;
}

/* A synchronize failed: the task it blames must be one submitted since the last one. */
static int sync_failed(struct client *c, int op, npu_status_t st, const char *call)
{
        uint64_t t = npu_error_task();
        int known = c->tasks_lost;

        for (int i = 0; i < c->ntasks; i++)
                known |= c->tasks[i] == t;
        if (!known)
                unexplained(c, "%s blames task %llu, not one of the %d just submitted", call,
                            (unsigned long long)t, c->ntasks);
        batch_done(c);
        return reported(c, op, st, call);
}

#define TRY(op, call) \
        do { \
                npu_status_t st_ = (call); \
                if (st_ != NPU_OK) { \
                        r = reported(c, op, st_, #call); \
                        goto out; \
                } \
        } while (0)

#define SYNC(op) \
        do { \
                npu_status_t st_ = npu_stream_synchronize(c->ctx, c->stream); \
                if (st_ != NPU_OK) { \
                        r = sync_failed(c, op, st_, "npu_stream_synchronize"); \
                        goto out; \
                } \
                batch_done(c); \
        } while (0)

static void drop_buf(struct client *c, int i)
{
        free(c->bufs[i].shadow);
        c->bufs[i] = c->bufs[--c->nbufs];
}

/* Rewrite a buffer whose contents are unknown; 0 or 1 (reported, buffer dropped). */
static int refresh(struct client *c, int op, struct buf *b)
{
        npu_status_t st;

        if (b->valid)
                return 0;
        fill_pattern(b->shadow, b->size, (uint32_t)rnd(c));
        st = npu_memcpy_to_device(c->ctx, b->h, 0, b->shadow, b->size);
        if (st != NPU_OK)
                return reported(c, op, st, "npu_memcpy_to_device (refresh)");
        b->valid = 1;
        return 0;
}

static int op_alloc(struct client *c)
{
        struct buf b = { 0 };
        npu_status_t st;

        if (c->nbufs == MAX_BUFS)
                return 0;
        b.size = ((uint64_t)1 << (10 + rnd_below(c, 9))) + rnd_below(c, 4096);
        st = npu_malloc(c->ctx, c->dev, b.size, &b.h);
        if (st != NPU_OK)
                return reported(c, OP_ALLOC, st, "npu_malloc");
        b.shadow = malloc(b.size);
        if (!b.shadow)
                _exit(4);
        fill_pattern(b.shadow, b.size, (uint32_t)rnd(c));
        st = npu_memcpy_to_device(c->ctx, b.h, 0, b.shadow, b.size);
        if (st != NPU_OK) {
                free(b.shadow);
                npu_free(c->ctx, b.h);
                return reported(c, OP_ALLOC, st, "npu_memcpy_to_device");
        }
        b.valid = 1;
        c->bufs[c->nbufs++] = b;
        return 0;
}

static int op_free(struct client *c)
{
        npu_status_t st;
        int i;

        if (!c->nbufs)
                return 0;
        i = (int)rnd_below(c, (unsigned)c->nbufs);
        if (rnd_below(c, 2)) {
                st = npu_free(c->ctx, c->bufs[i].h);
        } else {
                /* stream-ordered: a failure shows at the next synchronize, naming this task */
                st = npu_free_async(c->ctx, c->stream, c->bufs[i].h, next_task(c));
        }
        drop_buf(c, i); /* the handle is gone either way */
        return st == NPU_OK ? 0 : reported(c, OP_FREE, st, "npu_free");
}

static int op_verify(struct client *c)
{
        struct buf *b;
        uint8_t *got;
        uint64_t off, len;
        npu_status_t st;

        if (!c->nbufs)
                return op_alloc(c);
        b = &c->bufs[rnd_below(c, (unsigned)c->nbufs)];
        if (!b->valid)
                return refresh(c, OP_VERIFY, b);
        off = rnd_below(c, (unsigned)b->size);
        len = 1 + rnd_below(c, (unsigned)(b->size - off));
        got = malloc(len);
        if (!got)
                _exit(4);
        st = npu_memcpy_from_device(c->ctx, got, b->h, off, len);
        if (st != NPU_OK) {
                free(got);
                return reported(c, OP_VERIFY, st, "npu_memcpy_from_device");
        }
        for (uint64_t i = 0; i < len; i++)
                if (got[i] != b->shadow[off + i])
                        mismatch(c, "byte %llu of a %llu-byte buffer: %u, wrote %u",
                                 (unsigned long long)(off + i), (unsigned long long)b->size, got[i],
                                 b->shadow[off + i]);
        free(got);
        return 0;
}

/* d2d copy then a memset over part of the destination, on the stream; read back. */
static int op_copy(struct client *c)
{
        struct buf *a, *b;
        uint64_t len, ao, bo, mo, ml;
        int val = (int)rnd_below(c, 256), r = 0;
        uint8_t *got = NULL;

        if (c->nbufs < 2)
                return op_alloc(c);
        a = &c->bufs[rnd_below(c, (unsigned)c->nbufs)];
        do
                b = &c->bufs[rnd_below(c, (unsigned)c->nbufs)];
        while (b == a);
        if (refresh(c, OP_COPY, a) || refresh(c, OP_COPY, b))
                return 1;
        len = 1 + rnd_below(c, (unsigned)(a->size < b->size ? a->size : b->size));
        ao = rnd_below(c, (unsigned)(a->size - len + 1));
        bo = rnd_below(c, (unsigned)(b->size - len + 1));
        ml = 1 + rnd_below(c, (unsigned)len);
        mo = bo + rnd_below(c, (unsigned)(len - ml + 1));
        b->valid = 0; /* until the stream says it is done */
        TRY(OP_COPY, npu_memcpy_d2d_async(c->ctx, c->stream, b->h, bo, a->h, ao, len, next_task(c)));
        TRY(OP_COPY, npu_memset_async(c->ctx, c->stream, b->h, mo, val, ml, next_task(c)));
        SYNC(OP_COPY);
        memcpy(b->shadow + bo, a->shadow + ao, len);
        memset(b->shadow + mo, val, ml);
        b->valid = 1;
        got = malloc(b->size);
        if (!got)
                _exit(4);
        TRY(OP_COPY, npu_memcpy_from_device(c->ctx, got, b->h, 0, b->size));
        if (memcmp(got, b->shadow, b->size) != 0)
                mismatch(c, "d2d copy of %llu bytes + memset of %llu: destination differs",
                         (unsigned long long)len, (unsigned long long)ml);
out:
        free(got);
        return r;
}

/* Host region -> device -> host region through the stream. */
static int op_region(struct client *c)
{
        struct buf *b;
        uint8_t *reg = c->region;
        uint64_t len, off;
        int r = 0;

        if (!c->nbufs)
                return op_alloc(c);
        b = &c->bufs[rnd_below(c, (unsigned)c->nbufs)];
        if (refresh(c, OP_REGION, b))
                return 1;
        len = 1 + rnd_below(c, (unsigned)(b->size < REGION_SIZE / 2 ? b->size : REGION_SIZE / 2));
        off = rnd_below(c, (unsigned)(b->size - len + 1));
        fill_pattern(reg, len, (uint32_t)rnd(c));
        memset(reg + REGION_SIZE / 2, 0xa5, len);
        b->valid = 0;
        TRY(OP_REGION, npu_memcpy_h2d_async(c->ctx, c->stream, b->h, off, c->rh, 0, len, next_task(c)));
        TRY(OP_REGION, npu_memcpy_d2h_async(c->ctx, c->stream, c->rh, REGION_SIZE / 2, b->h, off, len,
                                            next_task(c)));
        SYNC(OP_REGION);
        memcpy(b->shadow + off, reg, len);
        b->valid = 1;
        if (memcmp(reg, reg + REGION_SIZE / 2, len) != 0)
                mismatch(c, "region round trip of %llu bytes differs", (unsigned long long)len);
out:
        return r;
}

static npu_tensor_t tensor(npu_buffer_t b, uint64_t off, int ndim, const int64_t *dims)
{
        npu_tensor_t t = { .buf = b, .offset = off, .dtype = NPU_FLOAT32, .ndim = ndim };
        for (int i = 0; i < ndim; i++)
                t.dims[i] = dims[i];
        return t;
}

static float rnd_float(struct client *c)
{
        return (float)((int)rnd_below(c, 2001) - 1000) / 64.0f;
}

/* Elementwise launches: Add of two inputs or Relu of one, checked exactly. */
static int op_elementwise(struct client *c, int op)
{
        int n = 1 + (int)rnd_below(c, 4096), r = 0, nin = op == OP_ADD ? 2 : 1;
        size_t bytes = (size_t)n * sizeof(float);
        float *x = malloc(bytes * 3);
        npu_buffer_t d[3];
        int nd = 0;
        int64_t dims[1] = { n };

        if (!x)
                _exit(4);
        for (int i = 0; i < 2 * n; i++)
                x[i] = rnd_float(c);
        for (; nd < 3; nd++)
                TRY(op, npu_malloc(c->ctx, c->dev, bytes, &d[nd]));
        TRY(op, npu_memcpy_to_device(c->ctx, d[0], 0, x, bytes));
        TRY(op, npu_memcpy_to_device(c->ctx, d[1], 0, x + n, bytes));
        npu_tensor_t in[2] = { tensor(d[0], 0, 1, dims), tensor(d[1], 0, 1, dims) };
        npu_tensor_t out = tensor(d[2], 0, 1, dims);
        TRY(op, npu_launch(c->ctx, c->stream, op == OP_ADD ? "Add" : "Relu", in, nin, &out, 1, NULL, 0,
                           next_task(c)));
        SYNC(op);
        TRY(op, npu_memcpy_from_device(c->ctx, x + 2 * n, d[2], 0, bytes));
        for (int i = 0; i < n; i++) {
                float want = op == OP_ADD ? x[i] + x[n + i] : (x[i] > 0 ? x[i] : 0);
                if (x[2 * n + i] != want)
                        mismatch(c, "%s element %d of %d: %g, expected %g", op_names[op], i, n,
                                 (double)x[2 * n + i], (double)want);
        }
out:
        for (int i = 0; i < nd; i++)
                npu_free(c->ctx, d[i]);
        free(x);
        return r;
}

static int op_matmul(struct client *c)
{
        int m = 1 + (int)rnd_below(c, 48), k = 1 + (int)rnd_below(c, 48), n = 1 + (int)rnd_below(c, 48);
        size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
        float *a = malloc((na + nb + nc) * sizeof(float)), *b = a + na, *got = b + nb;
        npu_buffer_t d;
        int have = 0, r = 0;
        int64_t da[2] = { m, k }, db[2] = { k, n }, dc[2] = { m, n };

        if (!a)
                _exit(4);
        for (size_t i = 0; i < na + nb; i++)
                a[i] = rnd_float(c);
        /* one buffer, three tensors at offsets */
        TRY(OP_MATMUL, npu_malloc(c->ctx, c->dev, (na + nb + nc) * sizeof(float), &d));
        have = 1;
        TRY(OP_MATMUL, npu_memcpy_to_device(c->ctx, d, 0, a, (na + nb) * sizeof(float)));
        npu_tensor_t in[2] = { tensor(d, 0, 2, da), tensor(d, na * sizeof(float), 2, db) };
        npu_tensor_t out = tensor(d, (na + nb) * sizeof(float), 2, dc);
        TRY(OP_MATMUL, npu_launch(c->ctx, c->stream, "MatMul", in, 2, &out, 1, NULL, 0, next_task(c)));
        SYNC(OP_MATMUL);
        TRY(OP_MATMUL, npu_memcpy_from_device(c->ctx, got, d, (na + nb) * sizeof(float), nc * sizeof(float)));
        for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                        double ref = 0, mag = 0;
                        for (int q = 0; q < k; q++) {
                                ref += (double)a[i * k + q] * b[q * n + j];
                                mag += fabs((double)a[i * k + q] * b[q * n + j]);
                        }
                        if (fabs(ref - got[i * n + j]) > 1e-5 * mag + 1e-5)
                                mismatch(c, "MatMul %dx%dx%d (%d,%d): %g, expected %g", m, k, n, i, j,
                                         (double)got[i * n + j], ref);
                }
out:
        if (have)
                npu_free(c->ctx, d);
        free(a);
        return r;
}

/* k in-place increments of 256 counters on the stream: after a clean synchronize each ran
 * exactly once (the counters moved by exactly k). After a failure the counters must still
 * agree with each other and lie between the old value and old + k. */
static int op_counter(struct client *c)
{
        static float ones[256], vals[256];
        int64_t dims[1] = { 256 };
        int k = 1 + (int)rnd_below(c, 8), r = 0;
        npu_status_t st;

        if (!c->have_counter) {
                for (int i = 0; i < 256; i++)
                        ones[i] = 1, vals[i] = 0;
                st = npu_malloc(c->ctx, c->dev, 512 * sizeof(float), &c->counter);
                if (st != NPU_OK)
                        return reported(c, OP_COUNTER, st, "npu_malloc");
                c->have_counter = 1;
                c->counter_val = 0;
                if ((st = npu_memcpy_to_device(c->ctx, c->counter, 0, vals, sizeof(vals))) != NPU_OK ||
                    (st = npu_memcpy_to_device(c->ctx, c->counter, sizeof(vals), ones, sizeof(ones))) != NPU_OK) {
                        npu_free(c->ctx, c->counter);
                        c->have_counter = 0;
                        return reported(c, OP_COUNTER, st, "npu_memcpy_to_device");
                }
        }
        npu_tensor_t cnt = tensor(c->counter, 0, 1, dims), one = tensor(c->counter, sizeof(vals), 1, dims);
        npu_tensor_t in[2] = { cnt, one };
        for (int i = 0; i < k; i++) {
                st = npu_launch(c->ctx, c->stream, "Add", in, 2, &cnt, 1, NULL, 0, next_task(c));
                if (st != NPU_OK) {
                        r = reported(c, OP_COUNTER, st, "npu_launch");
                        k = i; /* the ones before it were queued */
                        break;
                }
        }
        st = npu_stream_synchronize(c->ctx, c->stream);
        if (st != NPU_OK)
                r = sync_failed(c, OP_COUNTER, st, "npu_stream_synchronize");
        batch_done(c);
        st = npu_memcpy_from_device(c->ctx, vals, c->counter, 0, sizeof(vals));
        if (st != NPU_OK) {
                npu_free(c->ctx, c->counter);
                c->have_counter = 0;
                return r ? r : reported(c, OP_COUNTER, st, "npu_memcpy_from_device");
        }
        for (int i = 0; i < 256; i++) {
                if (!r && vals[i] != c->counter_val + (float)k)
                        mismatch(c, "counter %d is %g after %d increments of %g: not exactly once", i,
                                 (double)vals[i], k, (double)c->counter_val);
                if (r && (vals[i] != vals[0] || vals[i] < c->counter_val ||
                          vals[i] > c->counter_val + (float)k || vals[i] != floorf(vals[i])))
                        mismatch(c, "counter %d is %g (counter 0: %g) after a failed batch of %d from %g", i,
                                 (double)vals[i], (double)vals[0], k, (double)c->counter_val);
        }
        c->counter_val = vals[0];
        if (c->counter_val > 1 << 20) { /* stay exact in float */
                npu_free(c->ctx, c->counter);
                c->have_counter = 0;
        }
        return r;
}

/* The test_add model: sum = x + y, all float [3,4,5]. */
static int op_graph(struct client *c)
{
        int64_t dims[3] = { 3, 4, 5 };
        float x[180];
        npu_buffer_t d;
        int have = 0, r = 0;

        if (!model_bytes)
                return 0;
        if (!c->have_graph) {
                npu_status_t st = npu_graph_load(c->ctx, c->dev, model_bytes, model_len, &c->graph);
                if (st != NPU_OK)
                        return reported(c, OP_GRAPH, st, "npu_graph_load");
                c->have_graph = 1;
        }
        for (int i = 0; i < 120; i++)
                x[i] = rnd_float(c);
        TRY(OP_GRAPH, npu_malloc(c->ctx, c->dev, sizeof(x), &d));
        have = 1;
        TRY(OP_GRAPH, npu_memcpy_to_device(c->ctx, d, 0, x, 120 * sizeof(float)));
        npu_tensor_t in[2] = { tensor(d, 0, 3, dims), tensor(d, 60 * sizeof(float), 3, dims) };
        npu_tensor_t out = tensor(d, 120 * sizeof(float), 3, dims);
        TRY(OP_GRAPH, npu_graph_run(c->ctx, c->stream, c->graph, in, 2, &out, 1, next_task(c)));
        SYNC(OP_GRAPH);
        TRY(OP_GRAPH, npu_memcpy_from_device(c->ctx, x + 120, d, 120 * sizeof(float), 60 * sizeof(float)));
        for (int i = 0; i < 60; i++)
                if (x[120 + i] != x[i] + x[60 + i])
                        mismatch(c, "graph test_add element %d: %g, expected %g", i, (double)x[120 + i],
                                 (double)(x[i] + x[60 + i]));
out:
        if (have)
                npu_free(c->ctx, d);
        if (c->have_graph && rnd_below(c, 10) == 0) {
                npu_graph_unload(c->ctx, c->graph);
                c->have_graph = 0;
        }
        return r;
}

static void board_put(int i, int32_t owner, uint32_t seed, uint32_t size, const char *token)
{
        struct token_entry *e = &sh->board[i];
        uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

        /* one writer at a time per entry: whoever makes the sequence odd */
        do {
                if (s & 1)
                        return;
        } while (!__atomic_compare_exchange_n(&e->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
        e->owner = owner;
        e->seed = seed;
        e->size = size;
        if (token)
                memcpy(e->token, token, NPU_TOKEN_LEN);
        __atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

static int board_get(int i, struct token_entry *out)
{
        struct token_entry *e = &sh->board[i];
        uint32_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE), s2;

        if (s1 & 1)
                return -1;
        memcpy(out, e, sizeof(*out));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
        return s1 == s2 && out->owner ? 0 : -1;
}

/* Retire the oldest export: off the board, revoke, free. */
static int retire_export(struct client *c)
{
        struct export *x = &c->ex[0];
        struct token_entry e;
        npu_status_t st;
        int r = 0;

        if (board_get(x->board, &e) == 0 && e.owner == (int32_t)getpid() &&
            memcmp(e.token, x->token, NPU_TOKEN_LEN) == 0)
                board_put(x->board, 0, 0, 0, NULL);
        st = npu_buffer_revoke(c->ctx, x->token);
        if (st != NPU_OK)
                r = reported(c, OP_EXPORT, st, "npu_buffer_revoke");
        st = npu_free(c->ctx, x->h);
        if (st != NPU_OK)
                r = reported(c, OP_EXPORT, st, "npu_free");
        c->ex[0] = c->ex[1];
        c->nex--;
        return r;
}

/* Export a buffer that is never written again, and offer its token to the others. */
static int op_export(struct client *c)
{
        struct export x = { .board = (int)rnd_below(c, BOARD) };
        uint32_t seed = (uint32_t)rnd(c), size = 1024 + rnd_below(c, 63 << 10);
        uint8_t *p;
        npu_status_t st;

        if (c->nex == 2)
                return retire_export(c);
        st = npu_malloc(c->ctx, c->dev, size, &x.h);
        if (st != NPU_OK)
                return reported(c, OP_EXPORT, st, "npu_malloc");
        p = malloc(size);
        if (!p)
                _exit(4);
        fill_pattern(p, size, seed);
        st = npu_memcpy_to_device(c->ctx, x.h, 0, p, size);
        free(p);
        if (st == NPU_OK)
                st = npu_buffer_export(c->ctx, x.h, NULL, 0, (int)rnd_below(c, 2), x.token);
        if (st != NPU_OK) {
                npu_free(c->ctx, x.h);
                return reported(c, OP_EXPORT, st, "npu_memcpy_to_device/npu_buffer_export");
        }
        board_put(x.board, (int32_t)getpid(), seed, size, x.token);
        c->ex[c->nex++] = x;
        return 0;
}

/* Import someone else's token, read it, check it is what its exporter wrote. A token whose
 * exporter revoked it, freed it or died must fail to import (reported), never give data. */
static int op_import(struct client *c)
{
        struct token_entry e;
        npu_buffer_t h;
        uint8_t *want, *got;
        npu_status_t st;
        int r = 0;

        if (board_get((int)rnd_below(c, BOARD), &e) < 0 || e.owner == (int32_t)getpid())
                return 0;
        st = npu_buffer_import(c->ctx, e.token, 1, &h);
        if (st != NPU_OK)
                return reported(c, OP_IMPORT, st, "npu_buffer_import");
        want = malloc(e.size);
        got = malloc(e.size);
        if (!want || !got)
                _exit(4);
        fill_pattern(want, e.size, e.seed);
        st = npu_memcpy_from_device(c->ctx, got, h, 0, e.size);
        if (st != NPU_OK)
                r = reported(c, OP_IMPORT, st, "npu_memcpy_from_device");
        else if (memcmp(want, got, e.size) != 0)
                mismatch(c, "imported %u bytes from pid %d differ from what it exported", e.size, e.owner);
        free(want);
        free(got);
        st = npu_free(c->ctx, h);
        if (st != NPU_OK && !r)
                r = reported(c, OP_IMPORT, st, "npu_free");
        return r;
}

static int open_stream(struct client *c)
{
        npu_status_t st = npu_stream_create(c->ctx, c->dev, (int)rnd_below(c, 8), &c->stream);
        return st == NPU_OK ? 0 : reported(c, OP_STREAM, st, "npu_stream_create");
}

/* Destroy the stream (work on it finishes first) and make another on the same device. */
static int op_stream(struct client *c)
{
        npu_status_t st = npu_stream_destroy(c->ctx, c->stream);

        if (st != NPU_OK)
                return reported(c, OP_STREAM, st, "npu_stream_destroy");
        batch_done(c); /* what failed on it is not reported any more */
        return open_stream(c) ? -1 : 0;
}

static int run_op(struct client *c, int op)
{
        switch (op) {
        case OP_ALLOC: return op_alloc(c);
        case OP_FREE: return op_free(c);
        case OP_VERIFY: return op_verify(c);
        case OP_COPY: return op_copy(c);
        case OP_REGION: return op_region(c);
        case OP_ADD: case OP_RELU: return op_elementwise(c, op);
        case OP_MATMUL: return op_matmul(c);
        case OP_COUNTER: return op_counter(c);
        case OP_GRAPH: return op_graph(c);
        case OP_EXPORT: return op_export(c);
        case OP_IMPORT: return op_import(c);
        case OP_STREAM: return op_stream(c);
        }
        return 0;
}

static int pick_op(struct client *c)
{
        int total = 0, x;

        for (int i = 0; i < NOPS; i++)
                total += op_weight[i];
        x = (int)rnd_below(c, (unsigned)total);
        for (int i = 0; i < NOPS; i++)
                if ((x -= op_weight[i]) < 0)
                        return i;
        return OP_VERIFY;
}

/* A client process: connect, loop over random operations until told to stop or until its
 * own random lifetime ends, then leave in one of three ways (tidy, disconnect only, exit). */
static void client_main(int slot, uint64_t seed, const char *sock)
{
        struct client cl = { .slot = slot, .rng = seed | 1 }, *c = &cl;
        npu_status_t st;
        long lifetime = 200 + (long)rnd_below(c, 20000);
        int dev;

        signal(SIGPIPE, SIG_IGN);
        sh->cur_op[slot] = OP_CONNECT;
        st = npu_connect(sock, &c->ctx);
        if (st != NPU_OK) {
                reported(c, OP_CONNECT, st, "npu_connect");
                usleep(200000);
                _exit(0);
        }
        st = npu_stream_create(c->ctx, NPU_DEVICE_ANY, (int)rnd_below(c, 8), &c->stream);
        if (st != NPU_OK || (st = npu_stream_device(c->ctx, c->stream, &dev)) != NPU_OK) {
                reported(c, OP_CONNECT, st, "npu_stream_create(ANY)");
                usleep(200000);
                _exit(0);
        }
        c->dev = dev;
        st = npu_host_alloc(c->ctx, REGION_SIZE, &c->region, &c->rh);
        if (st != NPU_OK) {
                reported(c, OP_CONNECT, st, "npu_host_alloc");
                usleep(200000);
                _exit(0);
        }
        add64(&sh->ok[OP_CONNECT], 1);
        for (long n = 0; n < lifetime && !sh->stop; n++) {
                int op = pick_op(c);
                sh->cur_op[slot] = op;
                int r = run_op(c, op);
                if (r < 0)
                        break; /* no stream left */
                if (r == 0)
                        add64(&sh->ok[op], 1);
                else
                        usleep(1000); /* back off a little after an error */
                add64(&sh->progress[slot], 1);
        }
        switch (sh->stop ? 0 : rnd_below(c, 3)) {
        case 0: /* tidy */
                npu_synchronize(c->ctx);
                while (c->nex)
                        retire_export(c);
                while (c->nbufs) {
                        npu_free(c->ctx, c->bufs[0].h);
                        drop_buf(c, 0);
                }
                if (c->have_counter)
                        npu_free(c->ctx, c->counter);
                if (c->have_graph)
                        npu_graph_unload(c->ctx, c->graph);
                npu_host_free(c->ctx, c->rh);
                npu_stream_destroy(c->ctx, c->stream);
                npu_disconnect(c->ctx);
                break;
        case 1: /* disconnect with everything still held */
                npu_disconnect(c->ctx);
                break;
        default: /* just exit: the kernel closes the socket */
                break;
        }
        _exit(0);
}

/* ------------------------------------------------------------ supervisor ---- */

static int proc_fds(pid_t pid)
{
        char path[64];
        struct dirent *d;
        DIR *dir;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        if (!(dir = opendir(path)))
                return -1;
        while ((d = readdir(dir)))
                n += d->d_name[0] != '.';
        closedir(dir);
        return n;
}

/* One admin call on a fresh connection (so the supervisor holds no session in between).
 * Returns the parsed result or NULL (message printed). */
static json_t *admin(const char *sock, const char *method, const char *params)
{
        npu_context_t *ctx;
        char *text = NULL;
        json_t *v = NULL;
        npu_status_t st = npu_connect(sock, &ctx);

        if (st != NPU_OK) {
                fprintf(stderr, "soak: connect for %s: %s\n", method, npu_error_message());
                return NULL;
        }
        st = npu_admin_call(ctx, method, params, &text);
        if (st == NPU_OK)
                v = json_loads(text, 0, NULL);
        else
                fprintf(stderr, "soak: %s: %s (%s)\n", method, npu_strerror(st), npu_error_message());
        free(text);
        npu_disconnect(ctx);
        return v;
}

struct sample {
        double t;
        long rss;
        int fds;
};

struct child {
        pid_t pid;
        int killed;
        double since;
        uint64_t progress;
};

static uint64_t sum_ops(const uint64_t *a)
{
        uint64_t s = 0;
        for (int i = 0; i < NOPS; i++)
                s += get64(&a[i]);
        return s;
}

static pid_t spawn(int slot, uint64_t seed, const char *sock)
{
        pid_t pid;

        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid == 0)
                client_main(slot, seed, sock);
        return pid;
}

static void *read_file(const char *path, size_t *ret_len)
{
        FILE *f = fopen(path, "rb");
        void *p = NULL;
        long n;

        if (!f)
                return NULL;
        if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
            (p = malloc((size_t)n)) && fread(p, 1, (size_t)n, f) != (size_t)n) {
                free(p);
                p = NULL;
        }
        fclose(f);
        *ret_len = p ? (size_t)n : 0;
        return p;
}

static int failures;

static void check(int ok, const char *fmt, ...)
{
        va_list ap;

        printf("%s: ", ok ? "ok" : "FAIL");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        failures += !ok;
}

static double max_rss(const struct sample *s, int n, double from, double to)
{
        long m = -1;
        for (int i = 0; i < n; i++)
                if (s[i].t >= from && s[i].t <= to && s[i].rss > m)
                        m = s[i].rss;
        return (double)m;
}

int main(int argc, char **argv)
{
        int nclients = 64, seconds = 1800, faults = 1, nsamples = 0, cap_samples;
        unsigned long long seed = (unsigned long long)time(NULL);
        const char *model = DEFAULT_MODEL, *npuctl = NULL;
        const char *extra[24] = { NULL };
        struct npud_proc p;
        struct child kids[MAX_CLIENTS] = { { 0 } };
        struct sample *samples;
        uint64_t spawned = 0, kills = 0, exits = 0, stuck = 0, crashed = 0;
        double t0, next_sample, next_fault, interval;
        long base_rss;
        int base_fds, nextra = 0;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc)
                        nclients = atoi(argv[++i]);
                else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
                        seconds = atoi(argv[++i]);
                else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
                        seed = strtoull(argv[++i], NULL, 0);
                else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc)
                        model = argv[++i];
                else if (strcmp(argv[i], "--npuctl") == 0 && i + 1 < argc)
                        npuctl = argv[++i];
                else if (strcmp(argv[i], "--no-faults") == 0)
                        faults = 0;
                else if (strcmp(argv[i], "--") == 0)
                        while (++i < argc && nextra < 23)
                                extra[nextra++] = argv[i];
                else {
                        fprintf(stderr, "usage: soak [--clients N] [--seconds S] [--seed N] [--model FILE] "
                                        "[--npuctl PATH] [--no-faults] [-- NPUD-ARGS...]\n");
                        return 2;
                }
        }
        if (nclients < 1 || nclients > MAX_CLIENTS || seconds < 10) {
                fprintf(stderr, "soak: 1 to %d clients, at least 10 seconds\n", MAX_CLIENTS);
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        signal(SIGPIPE, SIG_IGN);
        sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (sh == MAP_FAILED) {
                perror("soak: mmap");
                return 1;
        }
        model_bytes = read_file(model, &model_len);
        if (!model_bytes)
                printf("soak: note: no model at %s; graph runs are skipped\n", model);
        interval = seconds / 40.0 < 1 ? 1 : seconds / 40.0 > 30 ? 30 : seconds / 40.0;
        cap_samples = (int)(seconds / interval) + 64;
        samples = calloc((size_t)cap_samples, sizeof(*samples));
        if (!samples || harness_start(&p, nextra ? extra : NULL) < 0) {
                fprintf(stderr, "soak: npud did not start (NPUD_BIN=%s)\n", getenv("NPUD_BIN") ? getenv("NPUD_BIN") : "");
                return 1;
        }
        printf("soak: %d clients for %d s against npud pid %d (%s), seed %llu, faults %s\n", nclients, seconds,
               (int)p.pid, p.sock, seed, faults ? "on" : "off");

        /* warm-up: one client touches every path, so lazily made daemon state is in the baseline */
        {
                pid_t w = spawn(0, seed ^ 0x5eed, p.sock);
                int status;
                double until = now_s() + 3;
                while (now_s() < until && waitpid(w, &status, WNOHANG) == 0)
                        usleep(50000);
                sh->stop = 1;
                waitpid(w, &status, 0);
                sh->stop = 0;
                for (int i = 0; i < 100; i++) { /* its session ends asynchronously */
                        json_t *s = admin(p.sock, "sessions", NULL);
                        size_t n = json_array_size(json_object_get(s, "sessions"));
                        json_decref(s);
                        if (n <= 1)
                                break;
                        usleep(100000);
                }
                usleep(200000);
        }
        base_rss = harness_proc_kib(p.pid, "VmRSS");
        base_fds = proc_fds(p.pid);
        memset(sh->ok, 0, sizeof(sh->ok));
        memset(sh->errors, 0, sizeof(sh->errors));
        memset(sh->status, 0, sizeof(sh->status));
        printf("soak: baseline after warm-up: rss %.1f MiB, %d fds\n", (double)base_rss / 1024, base_fds);
        printf("%8s %10s %6s %8s %12s %8s %7s %7s\n", "time_s", "rss_mib", "fds", "clients", "ops_ok",
               "errors", "kills", "exits");

        t0 = now_s();
        next_sample = t0;
        next_fault = t0 + 5;
        for (int i = 0; i < nclients; i++) {
                kids[i].pid = spawn(i, seed + (++spawned) * 0x9e3779b97f4a7c15ull, p.sock);
                kids[i].since = t0;
        }
        uint64_t srng = seed | 1;
        while (now_s() - t0 < seconds) {
                double t = now_s();
                int status, alive = 0;
                pid_t pid;

                /* reap and replace */
                while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                        for (int i = 0; i < nclients; i++) {
                                if (kids[i].pid != pid)
                                        continue;
                                if (WIFSIGNALED(status) && !kids[i].killed) {
                                        printf("soak: FAIL: client %d (pid %d) died of signal %d in %s\n", i,
                                               (int)pid, WTERMSIG(status), op_names[sh->cur_op[i]]);
                                        crashed++;
                                } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
                                        crashed += WEXITSTATUS(status) != 3; /* 3: mismatch, counted */
                                        if (WEXITSTATUS(status) != 3)
                                                printf("soak: FAIL: client %d exited with %d\n", i,
                                                       WEXITSTATUS(status));
                                } else if (!kids[i].killed) {
                                        exits++;
                                }
                                kids[i].pid = spawn(i, seed + (++spawned) * 0x9e3779b97f4a7c15ull, p.sock);
                                kids[i].killed = 0;
                                kids[i].since = t;
                                kids[i].progress = get64(&sh->progress[i]);
                        }
                }
                /* random SIGKILLs: each client about once every 30 s */
                for (int i = 0; i < nclients; i++) {
                        srng ^= srng << 13, srng ^= srng >> 7, srng ^= srng << 17;
                        if (kids[i].pid > 0 && !kids[i].killed && srng % 300 == 0) {
                                kill(kids[i].pid, SIGKILL);
                                kids[i].killed = 1;
                                kills++;
                        }
                        if (kids[i].pid > 0)
                                alive++;
                        /* progress: a client that completes nothing for STUCK_SECONDS is stuck */
                        uint64_t pr = get64(&sh->progress[i]);
                        if (pr != kids[i].progress) {
                                kids[i].progress = pr;
                                kids[i].since = t;
                        } else if (kids[i].pid > 0 && !kids[i].killed && t - kids[i].since > STUCK_SECONDS) {
                                printf("soak: FAIL: client %d (pid %d) made no progress for %d s in %s\n", i,
                                       (int)kids[i].pid, STUCK_SECONDS, op_names[sh->cur_op[i]]);
                                stuck++;
                                kill(kids[i].pid, SIGKILL);
                                kids[i].killed = 1;
                        }
                }
                /* faults: the next two tasks on a device fail; their clients must see a reported error */
                if (faults && t >= next_fault) {
                        char params[96];
                        srng ^= srng << 13, srng ^= srng >> 7, srng ^= srng << 17;
                        snprintf(params, sizeof(params), "{\"device\":%d,\"kind\":\"fail-next\",\"value\":2}",
                                 (int)(srng % 2));
                        json_decref(admin(p.sock, "fault_inject", params));
                        next_fault = t + 7;
                }
                if (t >= next_sample && nsamples < cap_samples) {
                        struct sample *s = &samples[nsamples++];
                        s->t = t - t0;
                        s->rss = harness_proc_kib(p.pid, "VmRSS");
                        s->fds = proc_fds(p.pid);
                        uint64_t e = sum_ops(sh->errors);
                        printf("%8.0f %10.1f %6d %8d %12llu %8llu %7llu %7llu\n", s->t, (double)s->rss / 1024,
                               s->fds, alive, (unsigned long long)sum_ops(sh->ok), (unsigned long long)e,
                               (unsigned long long)kills, (unsigned long long)exits);
                        next_sample += interval;
                        if (!harness_alive(&p)) {
                                printf("soak: FAIL: npud died\n");
                                break;
                        }
                }
                usleep(100000);
        }

        /* stop: clients finish their operation, tidy up and exit */
        double run_end = now_s() - t0;
        if (nsamples < cap_samples) /* the last point of the curve: the end of the run */
                samples[nsamples++] = (struct sample){ run_end, harness_proc_kib(p.pid, "VmRSS"), proc_fds(p.pid) };
        sh->stop = 1;
        for (double until = now_s() + STUCK_SECONDS;;) {
                int left = 0, status;
                pid_t pid;
                while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                        for (int i = 0; i < nclients; i++)
                                if (kids[i].pid == pid) {
                                        if (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
                                            WEXITSTATUS(status) != 3)
                                                crashed++;
                                        if (WIFSIGNALED(status) && !kids[i].killed)
                                                crashed++;
                                        kids[i].pid = 0;
                                }
                for (int i = 0; i < nclients; i++)
                        left += kids[i].pid > 0;
                if (!left)
                        break;
                if (now_s() > until) {
                        for (int i = 0; i < nclients; i++)
                                if (kids[i].pid > 0) {
                                        printf("soak: FAIL: client %d (pid %d) did not stop, in %s\n", i,
                                               (int)kids[i].pid, op_names[sh->cur_op[i]]);
                                        stuck++;
                                        kill(kids[i].pid, SIGKILL);
                                        waitpid(kids[i].pid, NULL, 0);
                                        kids[i].pid = 0;
                                }
                        break;
                }
                usleep(50000);
        }
        double stop_s = now_s() - t0 - run_end;

        /* ---- the figures ---- */
        printf("\nsoak: %llu clients started, %llu SIGKILLed, %llu left by themselves; stopping took %.1f s\n",
               (unsigned long long)spawned, (unsigned long long)kills, (unsigned long long)exits, stop_s);
        printf("%-8s %12s %10s\n", "op", "ok", "errors");
        for (int i = 0; i < NOPS; i++)
                printf("%-8s %12llu %10llu\n", op_names[i], (unsigned long long)get64(&sh->ok[i]),
                       (unsigned long long)get64(&sh->errors[i]));
        printf("reported errors by status:");
        for (int i = 1; i < 32; i++)
                if (get64(&sh->status[i]))
                        printf(" %s %llu;", npu_strerror((npu_status_t)i), (unsigned long long)get64(&sh->status[i]));
        printf("\n\n");

        /* ---- the checks ---- */
        check(get64(&sh->mismatches) == 0, "results: %llu mismatches (wrong data or a task not run exactly once)",
              (unsigned long long)get64(&sh->mismatches));
        check(get64(&sh->unexplained) == 0, "errors explained: %llu without a message, with an odd status, "
              "or blaming a task not submitted", (unsigned long long)get64(&sh->unexplained));
        check(stuck == 0 && crashed == 0, "clients: %llu stuck, %llu crashed", (unsigned long long)stuck,
              (unsigned long long)crashed);
        int missing = 0;
        for (int i = 0; i < NOPS; i++)
                missing += op_weight[i] && !get64(&sh->ok[i]) && !(i == OP_GRAPH && !model_bytes);
        check(missing == 0, "coverage: every kind of operation succeeded at least once (%d never did)", missing);
        int alive = harness_alive(&p);
        check(alive, "npud alive after the run");

        /* every session gone, then every byte back */
        json_t *mem = NULL;
        size_t nsess = 0;
        for (int i = 0; alive && i < 100; i++) {
                json_t *s = admin(p.sock, "sessions", NULL);
                nsess = json_array_size(json_object_get(s, "sessions"));
                json_decref(s);
                if (nsess <= 1)
                        break;
                usleep(100000);
        }
        check(nsess == 1, "sessions: %zu left besides this check's own", nsess ? nsess - 1 : 0);
        if (alive)
                mem = admin(p.sock, "mem", NULL);
        json_int_t used = 0;
        json_t *d, *e;
        size_t i, k;
        json_array_foreach(json_object_get(mem, "devices"), i, d) {
                used += json_integer_value(json_object_get(d, "memory_used"));
                printf("soak: device %d: %lld bytes in use, %zu sessions and %zu tenants holding memory\n",
                       (int)json_integer_value(json_object_get(d, "id")),
                       (long long)json_integer_value(json_object_get(d, "memory_used")),
                       json_array_size(json_object_get(d, "sessions")), json_array_size(json_object_get(d, "tenants")));
                json_array_foreach(json_object_get(d, "tenants"), k, e)
                        used += json_integer_value(json_object_get(e, "bytes"));
        }
        check(mem && used == 0, "npuctl mem: every device and tenant back to 0 bytes (%lld)", (long long)used);
        json_decref(mem);
        if (npuctl && alive) {
                char cmd[512];
                snprintf(cmd, sizeof(cmd), "%s --socket %s mem", npuctl, p.sock);
                fflush(stdout);
                if (system(cmd) != 0)
                        check(0, "%s ran", cmd);
        }

        /* fds back to the baseline (sessions close asynchronously: wait a little) */
        int fds = -1;
        for (int n = 0; alive && n < 100; n++) {
                fds = proc_fds(p.pid);
                if (fds <= base_fds)
                        break;
                usleep(100000);
        }
        int max_fds = 0;
        for (int n = 0; n < nsamples; n++)
                max_fds = samples[n].fds > max_fds ? samples[n].fds : max_fds;
        check(fds >= 0 && fds <= base_fds, "fds: %d at the end, baseline %d (at most %d during the run)", fds,
              base_fds, max_fds);

        /* RSS: after warm-up RSS plateaus at the high-water mark of what the clients hold at
         * once (the allocator keeps freed memory, the simulator keeps touched device memory).
         * A leak grows with the work done, so the last quarter's peak must not exceed the
         * second quarter's peak by more than 16 MiB + 10 %: a leak above that much per half
         * run fails. The slope over the second half is printed too. */
        double q2 = max_rss(samples, nsamples, run_end * 0.25, run_end * 0.5);
        double q4 = max_rss(samples, nsamples, run_end * 0.75, run_end);
        double allow = 16 * 1024 + 0.10 * q2;
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        int nn = 0;
        for (int n = 0; n < nsamples; n++)
                if (samples[n].t >= run_end / 2) {
                        sx += samples[n].t, sy += (double)samples[n].rss;
                        sxx += samples[n].t * samples[n].t, sxy += samples[n].t * (double)samples[n].rss;
                        nn++;
                }
        double slope = nn > 1 && nn * sxx - sx * sx > 0 ? (nn * sxy - sx * sy) / (nn * sxx - sx * sx) : 0;
        long end_rss = alive ? harness_proc_kib(p.pid, "VmRSS") : -1;
        printf("soak: rss MiB: baseline %.1f, peak 2nd quarter %.1f, peak last quarter %.1f, after the run %.1f; "
               "2nd-half slope %.1f KiB/min\n", (double)base_rss / 1024, q2 / 1024, q4 / 1024,
               (double)end_rss / 1024, slope * 60);
        check(q2 > 0 && q4 > 0 && q4 <= q2 + allow,
              "rss flat: last-quarter peak %.1f MiB <= second-quarter peak %.1f MiB + %.1f MiB", q4 / 1024,
              q2 / 1024, allow / 1024);

        int rc = alive ? harness_stop(&p) : -1;
        if (!alive)
                harness_stop(&p);
        check(rc == 0, "npud exits cleanly on SIGTERM (status %d)", rc);
        printf("soak: %s (%d failed check%s)\n", failures ? "FAILED" : "passed", failures, failures == 1 ? "" : "s");
        free(samples);
        free((void *)model_bytes);
        return failures ? 1 : 0;
}
