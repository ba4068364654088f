/* bench_models: four realistic models (issue 11, "Figures") timed through npud against ONNX
 * Runtime on the same inputs with the same thread count:
 *   - an MLP 32x1024 -> 1024 -> 1024 -> 10 (Gemm transB=1 + Relu as PyTorch exports
 *     nn.Linear, the last layer MatMul + Add);
 *   - a ResNet basic block on 1x64x56x56 (Conv3x3 + BatchNormalization + Relu, Conv3x3 +
 *     BatchNormalization, residual Add, Relu);
 *   - a transformer encoder layer, seq 128, d 256, 4 heads, FFN 1024 (attention by
 *     MatMul / Div by sqrt(d_k) / additive causal mask / Softmax, LayerNormalization after
 *     each residual Add, GELU in its Erf form);
 *   - the 8-operator elementwise chain of bench_compile over 4 M float32 (same operators,
 *     same constants).
 * The models are built with tests/onnx-build.h (tests/bench/bench-models.h, shared with
 * npubench) and written to a temporary directory at bench time (no binary model in the
 * repository). npud (passes on, one device, --workers T) loads each once and runs it N
 * times: median and p90 per run (npu_graph_run + synchronize). npud and ONNX Runtime take
 * turns, 3 rounds each (NPUD_BENCH_ROUNDS: more on a host whose neighbours are busy), and
 * each round of either side starts with three untimed warm-up runs.
 * ONNX Runtime runs the same .onnx file and input through tests/bench/ort-time.js under node
 * when ORT_NODE_MODULES names a node_modules folder holding onnxruntime-node (see
 * docs/benchmarks.md); otherwise that column is skipped with a message and the npud figures
 * still print. Both get T threads: T = NPUD_BENCH_THREADS, else the number of CPUs it may run on
 * (util/cpus.h), npud's default host worker count in compute mode. Also printed: ONNX Runtime on
 * 1 thread, the largest difference between the two outputs against the ONNX suite's
 * tolerance (rtol 1e-3, atol 1e-7, as npu-onnx-test), each side's largest error against a
 * float64 reference computed here (tests/bench/bench-ref.h), and the memory plan from
 * npu_graph_info: arena bytes against the sum of the model's own intermediates (target <= 0.5),
 * and against the intermediates left after fusion. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "npu-admin.h"
#include "npu.h"
#include "tests/integration/harness.h"
#include "util/cpus.h"

#define ONNX_BUILD_ASSERT(cond)                                                                \
        do {                                                                                   \
                if (!(cond)) {                                                                 \
                        fprintf(stderr, "bench_models: %s:%d: %s failed\n", __FILE__,          \
                                __LINE__, #cond);                                              \
                        abort();                                                               \
                }                                                                              \
        } while (0)
#include "tests/bench/bench-models.h" /* the models, with tests/onnx-build.h */
#include "tests/bench/bench-ref.h"    /* their float64 references */

#define CHECK(call)                                                                            \
        do {                                                                                   \
                npu_status_t st_ = (call);                                                     \
                if (st_ != NPU_OK) {                                                           \
                        fprintf(stderr, "%s: %s (%s)\n", #call, npu_strerror(st_),             \
                                npu_error_message());                                          \
                        exit(1);                                                               \
                }                                                                              \
        } while (0)

#define RTOL 1e-3 /* ONNX_TEST_RTOL, ONNX_TEST_ATOL (client/onnx-tensor.h) */
#define ATOL 1e-7
#define SECONDS_PER_SIDE 2.0 /* time npud runs a model for, about; ORT runs as many */
#define ROUNDS 3             /* npud and ORT take turns, ROUNDS times (NPUD_BENCH_ROUNDS) */

/* Rounds of turns: more of them spread a busy neighbour's bursts over both sides. */
static int rounds(void)
{
        const char *env = getenv("NPUD_BENCH_ROUNDS");
        int n = env ? atoi(env) : ROUNDS;

        return n >= 1 && n <= 100 ? n : ROUNDS;
}

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

/* Run times of one side over all rounds. */
struct samples {
        double *t; /* seconds */
        int n, cap;
};

static void push(struct samples *s, double v)
{
        if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 64;
                s->t = realloc(s->t, sizeof(double) * (size_t)s->cap);
                if (!s->t) {
                        fprintf(stderr, "bench_models: out of memory\n");
                        exit(1);
                }
        }
        s->t[s->n++] = v;
}

/* The q quantile (0.5: median), 0 without samples; sorts the samples. */
static double quant(struct samples *s, double q)
{
        int i = (int)(q * s->n);

        if (!s->n)
                return 0;
        qsort(s->t, (size_t)s->n, sizeof(double), cmp_double);
        return s->t[i < s->n ? i : s->n - 1];
}

/* The median of the samples s took from index from on (one round's), 0 without any; leaves
 * s as it is. */
static double round_median(const struct samples *s, int from)
{
        struct samples r = { 0 };
        double m;

        for (int i = from; i < s->n; i++)
                push(&r, s->t[i]);
        m = quant(&r, 0.5);
        free(r.t);
        return m;
}

/* The ratios of npud's round medians to ONNX Runtime's in the same rounds: the sides take
 * turns, so each ratio pairs runs a few seconds apart, which the host's slower minutes
 * (a neighbour's load) touch alike. Printed beside the ratio of the medians of all runs. */
static void print_paired(const char *what, struct samples *ratios)
{
        if (ratios->n < 2)
                return;
        double lo = quant(ratios, 0.0), hi = quant(ratios, 1.0);
        printf("  %s, paired by round (npud's round median / ORT's, %d rounds): median %.2f, range %.2f-%.2f\n",
               what, ratios->n, quant(ratios, 0.5), lo, hi);
}

/* The model loaded once on npud, with its bound input and output. */
struct npud_side {
        npu_context_t *ctx;
        npu_graph_t g;
        npu_buffer_t bx, by;
        npu_stream_t st;
        npu_tensor_t tx, ty;
        int runs; /* per round */
        uint64_t units; /* units of work the device ran for the timed runs */
        long long nodes_before, nodes_after, arena, inter, model_inter;
        struct samples t;
        float *y;
};

static long long info_int(json_t *o, const char *key)
{
        json_t *v = o ? json_object_get(o, key) : NULL;

        return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Before each round, as ort-time.js does in the node process of each of its rounds: a
 * moment for the host to settle after the other side (node's exit frees a few hundred MB),
 * then three untimed warm-up runs. */
#define ROUND_SETTLE_US 100000
#define ROUND_WARMUP 3

/* One run, synchronized: what each timed sample is. */
static void run_once(struct npud_side *r)
{
        CHECK(npu_graph_run(r->ctx, r->st, r->g, &r->tx, 1, &r->ty, 1, NULL));
        CHECK(npu_stream_synchronize(r->ctx, r->st));
}

/* acc: how its products accumulate (enum npu_accumulate; float32: npud's default) */
static void npud_open(const char *sock, const struct bmodel *m, const float *x, int acc,
                      struct npud_side *r)
{
        npu_load_options_t lo = { .size = sizeof(lo), .accumulate = acc };
        char *info;
        json_t *j, *c;
        double t0 = 0;

        memset(r, 0, sizeof(*r));
        CHECK(npu_connect(sock, &r->ctx));
        CHECK(npu_graph_load_with(r->ctx, 0, m->bytes, m->len, acc != NPU_ACCUMULATE_FLOAT32 ? &lo : NULL, &r->g));
        CHECK(npu_graph_info(r->ctx, r->g, &info));
        if (getenv("NPUD_BENCH_INFO")) /* the plan: steps, engines, tuned variants */
                printf("  graph_info: %s\n", info);
        j = json_loads(info, 0, NULL);
        free(info);
        c = j ? json_object_get(j, "compile") : NULL;
        r->nodes_before = info_int(c, "nodes_before");
        r->nodes_after = info_int(c, "nodes_after");
        r->arena = info_int(c, "arena_bytes");
        r->inter = info_int(c, "intermediate_bytes");
        r->model_inter = info_int(c, "model_intermediate_bytes");
        json_decref(j);
        CHECK(npu_malloc(r->ctx, 0, m->n * sizeof(float), &r->bx));
        CHECK(npu_malloc(r->ctx, 0, m->yn * sizeof(float), &r->by));
        CHECK(npu_memcpy_to_device(r->ctx, r->bx, 0, x, m->n * sizeof(float)));
        CHECK(npu_stream_create(r->ctx, 0, 0, &r->st));
        r->tx = (npu_tensor_t){ .buf = r->bx, .dtype = NPU_FLOAT32, .ndim = m->ndim };
        memcpy(r->tx.dims, m->dims, sizeof(int64_t) * (size_t)m->ndim);
        r->ty = (npu_tensor_t){ .buf = r->by, .dtype = NPU_FLOAT32, .ndim = m->ydim };
        memcpy(r->ty.dims, m->ydims, sizeof(int64_t) * (size_t)m->ydim);
        /* ROUND_WARMUP warm-up runs; the last sizes the run count */
        for (int i = 0; i < ROUND_WARMUP; i++) {
                t0 = now_s();
                run_once(r);
        }
        r->runs = (int)(SECONDS_PER_SIDE / rounds() / (now_s() - t0));
        r->runs = r->runs < 4 ? 4 : r->runs > 100 ? 100 : r->runs;
}

/* Units of work device 0 has run so far. */
static uint64_t device_units(npu_context_t *ctx)
{
        npu_admin_device_t *d = NULL;
        size_t n = 0;
        uint64_t u = 0;

        CHECK(npu_admin_devices(ctx, sizeof(*d), &d, &n));
        if (n)
                u = d[0].units;
        free(d);
        return u;
}

/* One round: settle, warm up, then runs runs one after another, each timed from submission
 * to completion. */
static void npud_round(struct npud_side *r)
{
        usleep(ROUND_SETTLE_US);
        for (int i = 0; i < ROUND_WARMUP; i++)
                run_once(r);
        uint64_t u0 = device_units(r->ctx);

        for (int i = 0; i < r->runs; i++) {
                double t0 = now_s();

                run_once(r);
                push(&r->t, now_s() - t0);
        }
        r->units += device_units(r->ctx) - u0;
}

static void npud_close(const struct bmodel *m, struct npud_side *r)
{
        r->y = xmalloc(m->yn * sizeof(float));
        CHECK(npu_memcpy_from_device(r->ctx, r->y, r->by, 0, m->yn * sizeof(float)));
        CHECK(npu_graph_unload(r->ctx, r->g));
        CHECK(npu_free(r->ctx, r->bx));
        CHECK(npu_free(r->ctx, r->by));
        npu_disconnect(r->ctx);
}

/* ---- ONNX Runtime through node ---- */

struct ort {
        char script[4096];
        char dir[64]; /* temporary directory for the model, input and output files */
        const char *skip; /* why the column is skipped; NULL when it runs */
        char why[10000];
};

static int safe_path(const char *p)
{
        return p && !strchr(p, '\'');
}

static void ort_probe(struct ort *o)
{
        const char *mods = getenv("ORT_NODE_MODULES"), *script = getenv("NPUD_BENCH_ORT_SCRIPT");
        char path[4096];
        struct stat sb;

        o->skip = NULL;
        /* the script beside this source file, the bench running from the repository root */
        if (script)
                snprintf(o->script, sizeof(o->script), "%s", script);
        else {
                const char *slash = strrchr(__FILE__, '/');
                snprintf(o->script, sizeof(o->script), "%.*sort-time.js",
                         slash ? (int)(slash - __FILE__ + 1) : 0, __FILE__);
        }
        if (!mods || !*mods) {
                o->skip = "ORT_NODE_MODULES is not set; to get it: mkdir -p DIR && cd DIR && "
                          "npm install --ignore-scripts onnxruntime-node, then "
                          "ORT_NODE_MODULES=DIR/node_modules (docs/benchmarks.md)";
                return;
        }
        snprintf(path, sizeof(path), "%s/onnxruntime-node/package.json", mods);
        if (stat(path, &sb) < 0) {
                snprintf(o->why, sizeof(o->why), "no onnxruntime-node in ORT_NODE_MODULES=%s "
                         "(%s: %s)", mods, path, strerror(errno));
                o->skip = o->why;
                return;
        }
        if (stat(o->script, &sb) < 0 || !safe_path(o->script)) {
                snprintf(o->why, sizeof(o->why), "cannot use %s (run from the repository root or "
                         "set NPUD_BENCH_ORT_SCRIPT)", o->script);
                o->skip = o->why;
                return;
        }
        if (system("node --version >/dev/null 2>&1") != 0) {
                o->skip = "node is not on PATH";
                return;
        }
        snprintf(o->dir, sizeof(o->dir), "/tmp/bench_models.XXXXXX");
        if (!mkdtemp(o->dir)) {
                snprintf(o->why, sizeof(o->why), "mkdtemp: %s", strerror(errno));
                o->skip = o->why;
        }
}

static int write_file(const char *path, const void *p, size_t n)
{
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(p, 1, n, f) == n;

        if (f && fclose(f) != 0)
                ok = 0;
        return ok ? 0 : -1;
}

static int read_file(const char *path, void *p, size_t n)
{
        FILE *f = fopen(path, "rb");
        int ok = f && fread(p, 1, n, f) == n;

        if (f)
                fclose(f);
        return ok ? 0 : -1;
}

/* One round through ONNX Runtime on threads threads: appends the run times to t and, when
 * y, reads the output. 0, or -1 when node failed (its stderr passes through). */
static int ort_round(struct ort *o, const struct bmodel *m, int threads, int runs,
                     struct samples *t, float *y, char *version, size_t vlen)
{
        char cmd[16384], dims[128] = "", ver[64], *line = NULL, *p, *end;
        size_t off = 0, cap = 0;
        double med, p90;
        FILE *f;
        int ok = 0, th, nr, got = 0;

        for (int i = 0; i < m->ndim; i++)
                off += (size_t)snprintf(dims + off, sizeof(dims) - off, "%s%lld", i ? "," : "",
                                        (long long)m->dims[i]);
        snprintf(cmd, sizeof(cmd), "node '%s' %s/model.onnx %d %d X %s/x.bin %s Y %s/y.bin",
                 o->script, o->dir, threads, runs, o->dir, dims, o->dir);
        f = popen(cmd, "r");
        if (!f)
                return -1;
        while (getline(&line, &cap, f) > 0) {
                if (sscanf(line, "ort %63s threads %d runs %d median_ms %lf p90_ms %lf", ver, &th,
                           &nr, &med, &p90) == 5)
                        ok = 1;
                if (strncmp(line, "times ", 6) == 0)
                        for (p = line + 6;; p = end) {
                                double v = strtod(p, &end);
                                if (end == p)
                                        break;
                                push(t, v * 1e-3);
                                got++;
                        }
        }
        free(line);
        if (pclose(f) != 0 || !ok || got != runs)
                return -1;
        snprintf(version, vlen, "%s", ver);
        if (y) {
                char path[128];

                snprintf(path, sizeof(path), "%s/y.bin", o->dir);
                if (read_file(path, y, m->yn * sizeof(float)) < 0)
                        return -1;
        }
        return 0;
}

/* ---- comparison ---- */

struct diff {
        double max_abs;        /* largest |npud - ORT| */
        size_t bad;            /* elements outside atol + rtol |ORT| */
        double bad_got, bad_want; /* the one furthest outside */
        double gross;          /* largest |npud - ORT| / (1 + |ORT|) */
};

static void compare(const float *a, const float *e, size_t n, struct diff *d)
{
        double worst = -1;

        memset(d, 0, sizeof(*d));
        for (size_t i = 0; i < n; i++) {
                double x = fabs((double)a[i] - (double)e[i]), lim = ATOL + RTOL * fabs((double)e[i]);

                if (x > d->max_abs || isnan(x))
                        d->max_abs = x;
                if (x / (1 + fabs((double)e[i])) > d->gross || isnan(x))
                        d->gross = isnan(x) ? INFINITY : x / (1 + fabs((double)e[i]));
                if (!(x <= lim)) {
                        d->bad++;
                        if (!(x - lim <= worst)) {
                                worst = x - lim;
                                d->bad_got = a[i];
                                d->bad_want = e[i];
                        }
                }
        }
}

/* Against the float64 reference: the largest |y - ref| and the elements outside the ONNX
 * suite's tolerance (atol + rtol |ref|). */
static void against_ref(const float *y, const double *ref, size_t n, double *max_abs, size_t *bad)
{
        *max_abs = 0;
        *bad = 0;
        for (size_t i = 0; i < n; i++) {
                double x = fabs((double)y[i] - ref[i]);
                if (x > *max_abs || isnan(x))
                        *max_abs = x;
                if (!(x <= ATOL + RTOL * fabs(ref[i])))
                        (*bad)++;
        }
}

int main(void)
{
        struct bmodel models[5];
        struct npud_proc npud = { 0 };
        struct ort o;
        char workers[16], path[128];
        const char *env = getenv("NPUD_BENCH_THREADS");
        int threads = env ? atoi(env) : cpus_usable(), rc = 0;

        if (threads < 1 || threads > 256) {
                fprintf(stderr, "bench_models: NPUD_BENCH_THREADS must be 1..256\n");
                return 2;
        }
        mlp(&models[REF_MLP]);
        resnet_block(&models[REF_RESNET]);
        encoder_layer(&models[REF_ENCODER]);
        chain(&models[REF_CHAIN]);
        round_trip(&models[REF_RELU]);
        snprintf(workers, sizeof(workers), "%d", threads);
        const char *extra[] = { "--sim-devices", "1", "--workers", workers, NULL };
        if (harness_start(&npud, extra) < 0) {
                fprintf(stderr, "bench_models: cannot start npud\n");
                return 1;
        }
        ort_probe(&o);
        printf("threads: %d (npud --workers %d, ONNX Runtime intraOpNumThreads %d; "
               "NPUD_BENCH_THREADS overrides)\n", threads, threads, threads);
        if (o.skip)
                printf("ONNX Runtime column skipped: %s\n", o.skip);
        /* NPUD_BENCH_MODELS=mlp,resnet,transformer,chain,fixed: only those (for profiling one) */
        const char *only = getenv("NPUD_BENCH_MODELS");
        static const char *const keys[5] = { "mlp", "resnet", "transformer", "chain", "fixed" };
        for (int k = 0; k < 5; k++) {
                struct bmodel *m = &models[k];
                struct npud_side r, ra[2];
                /* the same model loaded to accumulate in float64 and mixed, for every model
                 * with products (not the one-Relu round trip); NPUD_BENCH_ACC64=0 skips both
                 * (to profile the float32 side alone), NPUD_BENCH_ACC=mixed (or float64)
                 * keeps one */
                static const int acc_kind[2] = { NPU_ACCUMULATE_FLOAT64, NPU_ACCUMULATE_MIXED };
                static const char *const acc_name[2] = { "float64", "mixed" };
                const char *a64 = getenv("NPUD_BENCH_ACC64"), *acc_only = getenv("NPUD_BENCH_ACC");
                int acc64 = k != REF_RELU && !(a64 && strcmp(a64, "0") == 0);
                int acc_on[2] = { acc64 && (!acc_only || strstr(acc_only, "float64")),
                                  acc64 && (!acc_only || strstr(acc_only, "mixed")) };
                if (only && *only && !strstr(only, keys[k]))
                        continue;
                struct samples ot = { 0 }, o1t = { 0 };
                float *x = xmalloc(m->n * sizeof(float)), *ey = NULL;
                double om, op90, o1m;
                char version[64] = "";
                int have_ort = !o.skip, have_ort1 = !o.skip && threads > 1;

                fill(x, m->n, 1 + (unsigned)k, 1.0f);
                npud_open(npud.sock, m, x, NPU_ACCUMULATE_FLOAT32, &r);
                for (int a = 0; a < 2; a++)
                        if (acc_on[a])
                                npud_open(npud.sock, m, x, acc_kind[a], &ra[a]);
                if (have_ort) {
                        snprintf(path, sizeof(path), "%s/model.onnx", o.dir);
                        int wr = write_file(path, m->bytes, m->len);
                        snprintf(path, sizeof(path), "%s/x.bin", o.dir);
                        if (wr < 0 || write_file(path, x, m->n * sizeof(float)) < 0) {
                                fprintf(stderr, "bench_models: cannot write %s\n", path);
                                have_ort = have_ort1 = 0;
                        }
                        ey = xmalloc(m->yn * sizeof(float));
                }
                /* the sides take turns, so that a busy host slows all alike */
                struct samples pr = { 0 }, pra[2] = { { 0 }, { 0 } }; /* paired ratios by round */
                for (int round = 0; round < rounds(); round++) {
                        int n0 = r.t.n, na[2] = { acc_on[0] ? ra[0].t.n : 0, acc_on[1] ? ra[1].t.n : 0 }, no = ot.n;
                        npud_round(&r);
                        for (int a = 0; a < 2; a++)
                        if (acc_on[a])
                                npud_round(&ra[a]);
                        if (have_ort)
                                have_ort = ort_round(&o, m, threads, r.runs, &ot, ey, version,
                                                     sizeof(version)) == 0;
                        double orm = have_ort ? round_median(&ot, no) : 0;
                        if (orm > 0) {
                                push(&pr, round_median(&r.t, n0) / orm);
                                for (int a = 0; a < 2; a++)
                                        if (acc_on[a])
                                                push(&pra[a], round_median(&ra[a].t, na[a]) / orm);
                        }
                        if (have_ort1)
                                have_ort1 = ort_round(&o, m, 1, r.runs, &o1t, NULL, version,
                                                      sizeof(version)) == 0;
                }
                npud_close(m, &r);
                for (int a = 0; a < 2; a++)
                        if (acc_on[a])
                                npud_close(m, &ra[a]);
                om = quant(&ot, 0.5) * 1e3;
                op90 = quant(&ot, 0.9) * 1e3;
                o1m = quant(&o1t, 0.5) * 1e3;
                double nm = quant(&r.t, 0.5) * 1e3, np90 = quant(&r.t, 0.9) * 1e3;
                printf("%s:\n  npud       median %8.3f ms  p90 %8.3f ms  (%d runs, %lld -> %lld nodes, "
                       "%.1f units of work per run)\n",
                       m->name, nm, np90, r.t.n, r.nodes_before, r.nodes_after,
                       r.t.n ? (double)r.units / r.t.n : 0.0);
                if (have_ort) {
                        struct diff d;

                        compare(r.y, ey, m->yn, &d);
                        printf("  ORT %-6s median %8.3f ms  p90 %8.3f ms  (%d threads)",
                               version, om, op90, threads);
                        if (have_ort1)
                                printf("; 1 thread median %.3f ms", o1m);
                        if (m->target > 0) {
                                printf("\n  ratio npud/ORT %.2f (target <= %.1f)%s; max abs diff "
                                       "%.2e\n", nm / om, m->target,
                                       nm / om <= m->target ? "" : " MISSED", d.max_abs);
                                print_paired("float32", &pr);
                        } else {
                                printf("\n  difference npud - ORT %+.3f ms (reference); max abs "
                                       "diff %.2e\n", nm - om, d.max_abs);
                        }
                        if (!d.bad)
                                printf("  outputs agree within the ONNX suite tolerance (rtol %g, atol %g)\n",
                                       RTOL, ATOL);
                        else
                                printf("  %zu of %zu elements outside the ONNX suite tolerance (rtol %g, "
                                       "atol %g); furthest: npud %.9g, ORT %.9g\n",
                                       d.bad, m->yn, RTOL, ATOL, d.bad_got, d.bad_want);
                        /* Summation order differs between any two GEMM or convolution
                         * implementations; a few near-zero outputs can miss atol 1e-7 by float32
                         * rounding. A difference of 1e-4 relative to 1 + |ORT| is a wrong result. */
                        if (d.gross > 1e-4) {
                                printf("  WRONG RESULT: largest |npud - ORT| / (1 + |ORT|) is %.2e\n",
                                       d.gross);
                                rc = 1;
                        }
                } else if (!o.skip) {
                        printf("  ORT: the node run failed (see its message above)\n");
                        rc = 1;
                }
                /* how far each side is from the exact answer */
                double *ref = ref_model((enum ref_kind)k, m, x);
                if (ref) {
                        double ea, eo = 0;
                        size_t ba, bo = 0;
                        against_ref(r.y, ref, m->yn, &ea, &ba);
                        printf("  against a float64 reference: npud max abs error %.2e, %zu elements outside "
                               "the ONNX suite tolerance", ea, ba);
                        if (have_ort) {
                                against_ref(ey, ref, m->yn, &eo, &bo);
                                printf("; ORT %.2e, %zu outside", eo, bo);
                        }
                        printf("\n");
                        /* which accumulations meet both targets: the latency and no element
                         * outside the tolerance against the float64 reference */
                        char met[64] = "";
                        size_t metlen = 0;
                        if (have_ort && m->target > 0 && nm / om <= m->target && ba == 0)
                                metlen += (size_t)snprintf(met, sizeof(met), "float32");
                        for (int a = 0; a < 2; a++) {
                                if (!acc_on[a])
                                        continue;
                                double m64 = quant(&ra[a].t, 0.5) * 1e3, e64;
                                size_t b64;
                                against_ref(ra[a].y, ref, m->yn, &e64, &b64);
                                if (have_ort && m->target > 0 && m64 / om <= m->target && b64 == 0 &&
                                    metlen < sizeof(met))
                                        metlen += (size_t)snprintf(met + metlen, sizeof(met) - metlen, "%s%s",
                                                                   metlen ? ", " : "", acc_name[a]);
                                printf("  npud, %s accumulation: median %.3f ms  p90 %.3f ms", acc_name[a], m64,
                                       quant(&ra[a].t, 0.9) * 1e3);
                                if (have_ort && m->target > 0)
                                        printf(", ratio npud/ORT %.2f (target <= %.1f)%s", m64 / om, m->target,
                                               m64 / om <= m->target ? "" : " MISSED");
                                printf("; against the float64 reference max abs error %.2e, %zu elements "
                                       "outside the ONNX suite tolerance\n", e64, b64);
                                if (have_ort && m->target > 0)
                                        print_paired(acc_name[a], &pra[a]);
                        }
                        if (have_ort && m->target > 0)
                                printf("  both targets (ratio <= %.1f, 0 elements outside) met by: %s\n", m->target,
                                       met[0] ? met : "none (MISSED)");
                        /* the floor for a float32 engine: ONNX's float32 tensors, computed
                         * exactly within each node */
                        ref_round32 = 1;
                        double *ref32 = ref_model((enum ref_kind)k, m, x);
                        ref_round32 = 0;
                        if (ref32) {
                                float *y32 = malloc(sizeof(float) * m->yn);
                                if (y32) {
                                        double e32;
                                        size_t b32;
                                        for (size_t i = 0; i < m->yn; i++)
                                                y32[i] = (float)ref32[i];
                                        against_ref(y32, ref, m->yn, &e32, &b32);
                                        printf("  the model's float32 tensors computed exactly within each node: "
                                               "max abs error %.2e, %zu elements outside\n", e32, b32);
                                        free(y32);
                                }
                                free(ref32);
                        }
                        free(ref);
                }
                if (r.inter > 0 && r.model_inter > 0)
                        printf("  memory plan: arena %lld bytes; the model's intermediates %lld "
                               "bytes, ratio %.2f (target <= 0.5); after fusion %lld bytes, "
                               "ratio %.2f\n", r.arena, r.model_inter,
                               (double)r.arena / (double)r.model_inter, r.inter,
                               (double)r.arena / (double)r.inter);
                else
                        printf("  memory plan: none reported (no intermediate left to plan, or "
                               "passes off)\n");
                free(x);
                free(ey);
                free(r.y);
                free(r.t.t);
                for (int a = 0; a < 2; a++)
                        if (acc_on[a]) {
                                free(ra[a].y);
                                free(ra[a].t.t);
                        }
                free(ot.t);
                free(o1t.t);
                free(pr.t);
                free(pra[0].t);
                free(pra[1].t);
                free(m->bytes);
        }
        if (!o.skip) {
                const char *files[] = { "model.onnx", "x.bin", "y.bin" };
                for (int i = 0; i < 3; i++) {
                        snprintf(path, sizeof(path), "%s/%s", o.dir, files[i]);
                        unlink(path);
                }
                rmdir(o.dir);
        }
        if (harness_stop(&npud) != 0) {
                fprintf(stderr, "bench_models: npud did not exit cleanly\n");
                rc = 1;
        }
        return rc;
}
