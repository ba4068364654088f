/* GEMMs on prepacked constant weights (ops/blas.h, struct ops_packed_b; the onednn-packed
 * tuning variant): a MatMul and a Gemm with transB and a bias give what the plain path gives
 * (within 1e-5 relative) and are computed on the packed weights; a call with another B (same
 * shape), a column block of a B that is not transposed and a call with alpha != 1 take the
 * plain path and are still right; a row block (another row count, as a split part runs) takes
 * the packed path, and so does a column block of a transposed B (on a packed copy of the
 * block made once). The same for the libxsmm layout (xsmm-packed, test_sgemm_xsmm). Through
 * the graph compiler: tuning measures both packed variants; a cached onednn-packed or
 * xsmm-packed choice makes the node keep packed weights, whole runs and parts on them agree
 * with the plain graph,
 * graph_info's counters say so, and graph_free releases them (the ASan build checks). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnx.pb-c.h>

#include "graph/compile.h"
#include "graph/exec.h"
#include "graph/graph.h"
#include "graph/onnx-import.h"
#include "graph/steps.h"
#include "ops/blas.h"
#include "ops/tune.h"
#include "proto/dtype.h"

#include "tests/check-run.h"
#include "tests/onnx-build.h"

static void fill(float *p, size_t n, uint32_t seed)
{
        for (size_t i = 0; i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                p[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
        }
}

/* |x - ref| within 1e-5 of the magnitude of the terms that made ref (a sum of k products
 * of values under 1 in magnitude: at most k; in practice about sqrt(k)). */
static void same(const float *x, const float *ref, size_t n, int k, const char *what)
{
        double scale = sqrt((double)k);
        for (size_t i = 0; i < n; i++) {
                double tol = 1e-5 * (fabs(ref[i]) > scale ? fabs(ref[i]) : scale);
                ck_assert_msg(fabs((double)x[i] - (double)ref[i]) <= tol, "%s: [%zu] %.9g, plain %.9g",
                              what, i, x[i], ref[i]);
        }
}

static void plain(enum CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a, const float *b,
                  float beta, float *c)
{
        ops_sgemm_force(OPS_SGEMM_OPENBLAS);
        ops_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, a, k, b, tb == CblasNoTrans ? n : k,
                  beta, c, n);
        ops_sgemm_force(OPS_SGEMM_AUTO);
}

/* The product under variant v on packed B p (ldc: c's row stride). */
static void on_packed(int v, const struct ops_packed_b *p, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                      float alpha, const float *a, const float *b, int ldb, float beta, float *c, int ldc)
{
        ops_sgemm_force(v);
        ops_sgemm_packed(p);
        ops_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, alpha, a, k, b, ldb, beta, c, ldc);
        ops_sgemm_packed(NULL);
        ops_sgemm_force(OPS_SGEMM_AUTO);
}

static void packed(const struct ops_packed_b *p, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                   float alpha, const float *a, const float *b, int ldb, float beta, float *c)
{
        on_packed(OPS_SGEMM_ONEDNN_PACKED, p, tb, m, n, k, alpha, a, b, ldb, beta, c, n);
}

START_TEST(test_sgemm_packed)
{
        enum { M = 64, K = 200, N = 136 };
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *b2 = malloc(sizeof(float) * K * N), *c0 = malloc(sizeof(float) * M * N);
        float *c1 = malloc(sizeof(float) * M * N);
        char err[128] = "";

        fill(a, M * K, 1);
        fill(b, K * N, 2);
        fill(b2, K * N, 3);
        for (int tb = 0; tb < 2; tb++) {
                enum CBLAS_TRANSPOSE t = tb ? CblasTrans : CblasNoTrans;
                struct ops_packed_b *p = ops_packed_b_new(b, K, N, tb, M, err, sizeof(err));
                ck_assert_msg(p != NULL, "pack: %s", err);
                ck_assert_uint_ge(ops_packed_b_bytes(p), (uint64_t)K * N * sizeof(float));

                /* the whole product, then accumulating into C (Gemm's bias) */
                plain(t, M, N, K, a, b, 0.0f, c0);
                packed(p, t, M, N, K, 1.0f, a, b, tb ? K : N, 0.0f, c1);
                ck_assert_uint_eq(ops_packed_b_runs(p), 1);
                same(c1, c0, M * N, K, "packed");
                for (int i = 0; i < M * N; i++)
                        c0[i] = c1[i] = (float)(i % 5) - 2.0f;
                plain(t, M, N, K, a, b, 1.0f, c0);
                packed(p, t, M, N, K, 1.0f, a, b, tb ? K : N, 1.0f, c1);
                ck_assert_uint_eq(ops_packed_b_runs(p), 2);
                same(c1, c0, M * N, K, "packed, beta 1");

                /* rows 17..45: another row count, as a row part of a split node */
                plain(t, 29, N, K, a + 17 * K, b, 0.0f, c0);
                packed(p, t, 29, N, K, 1.0f, a + 17 * K, b, tb ? K : N, 0.0f, c1);
                ck_assert_uint_eq(ops_packed_b_runs(p), 3);
                same(c1, c0, 29 * N, K, "row part");

                /* another B of the same shape: the plain path, on that B */
                plain(t, M, N, K, a, b2, 0.0f, c0);
                packed(p, t, M, N, K, 1.0f, a, b2, tb ? K : N, 0.0f, c1);
                ck_assert_uint_eq(ops_packed_b_runs(p), 3);
                same(c1, c0, M * N, K, "other B");

                /* columns 40..79, as a column part of a split node: with transB a packed
                 * copy of that block (B's rows 40..79), without it the plain path */
                const float *bc = tb ? b + 40 * K : b + 40;
                float *cc0 = malloc(sizeof(float) * M * 40), *cc1 = malloc(sizeof(float) * M * 40);
                uint64_t bytes = ops_packed_b_bytes(p);
                ops_sgemm_force(OPS_SGEMM_OPENBLAS);
                ops_sgemm(CblasRowMajor, CblasNoTrans, t, M, 40, K, 1.0f, a, K, bc, tb ? K : N, 0.0f, cc0, 40);
                for (int rep = 0; rep < 2; rep++) {
                        memset(cc1, 0, sizeof(float) * M * 40);
                        ops_sgemm_force(OPS_SGEMM_ONEDNN_PACKED);
                        ops_sgemm_packed(p);
                        ops_sgemm(CblasRowMajor, CblasNoTrans, t, M, 40, K, 1.0f, a, K, bc, tb ? K : N,
                                  0.0f, cc1, 40);
                        ops_sgemm_packed(NULL);
                        ops_sgemm_force(OPS_SGEMM_AUTO);
                        same(cc1, cc0, M * 40, K, "column part");
                }
                ck_assert_uint_eq(ops_packed_b_runs(p), tb ? 5 : 3);
                if (tb) /* one block made, once */
                        ck_assert_uint_ge(ops_packed_b_bytes(p), bytes + (uint64_t)40 * K * sizeof(float));
                else
                        ck_assert_uint_eq(ops_packed_b_bytes(p), bytes);
                free(cc0);
                free(cc1);
                uint64_t runs = ops_packed_b_runs(p);

                /* alpha 2: the plain path */
                plain(t, M, N, K, a, b, 0.0f, c0);
                packed(p, t, M, N, K, 2.0f, a, b, tb ? K : N, 0.0f, c1);
                ck_assert_uint_eq(ops_packed_b_runs(p), runs);
                for (int i = 0; i < M * N; i++)
                        c0[i] *= 2.0f;
                same(c1, c0, M * N, K, "alpha 2");
                ops_packed_b_free(p);
        }
        free(a);
        free(b);
        free(b2);
        free(c0);
        free(c1);
}
END_TEST

/* The libxsmm layout of the same packed B (xsmm-packed): whole products, accumulating, a
 * row count that is not a multiple of the kernels' 64 rows, column ranges that start and
 * end inside its 32-column blocks (as column parts of a split node run, no copy made), and
 * the calls it does not take (another B, alpha 2) on the plain path; ops_packed_b_keep
 * leaves one layout. */
static void xsmm(const struct ops_packed_b *p, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 float alpha, const float *a, const float *b, int ldb, float beta, float *c, int ldc)
{
        on_packed(OPS_SGEMM_XSMM_PACKED, p, tb, m, n, k, alpha, a, b, ldb, beta, c, ldc);
}

START_TEST(test_sgemm_xsmm)
{
        enum { M = 100, K = 200, N = 136 };
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *b2 = malloc(sizeof(float) * K * N), *c0 = malloc(sizeof(float) * M * N);
        float *c1 = malloc(sizeof(float) * M * N);
        char err[128] = "";

        if (!ops_xsmm_usable()) { /* the variant then takes the plain path, as other calls */
                fprintf(stderr, "test_sgemm_xsmm: skipped, libxsmm is off (NPUD_SGEMM_XSMM=0) or makes no kernels on this CPU\n");
                free(a);
                free(b);
                free(b2);
                free(c0);
                free(c1);
                return;
        }
        fill(a, M * K, 4);
        fill(b, K * N, 5);
        fill(b2, K * N, 6);
        for (int tb = 0; tb < 2; tb++) {
                enum CBLAS_TRANSPOSE t = tb ? CblasTrans : CblasNoTrans;
                int ldb = tb ? K : N;
                struct ops_packed_b *p = ops_packed_b_new(b, K, N, tb, M, err, sizeof(err));
                ck_assert_msg(p != NULL, "pack: %s", err);
                uint64_t dnnl_bytes = ops_packed_b_bytes(p);

                plain(t, M, N, K, a, b, 0.0f, c0);
                xsmm(p, t, M, N, K, 1.0f, a, b, ldb, 0.0f, c1, N);
                ck_assert_uint_eq(ops_packed_b_runs(p), 1);
                same(c1, c0, M * N, K, "xsmm");
                /* its layout, made on that first call: 5 blocks of 32 columns */
                ck_assert_uint_eq(ops_packed_b_bytes(p), dnnl_bytes + (uint64_t)5 * 32 * K * sizeof(float));
                for (int i = 0; i < M * N; i++)
                        c0[i] = c1[i] = (float)(i % 7) - 3.0f;
                plain(t, M, N, K, a, b, 1.0f, c0);
                xsmm(p, t, M, N, K, 1.0f, a, b, ldb, 1.0f, c1, N);
                same(c1, c0, M * N, K, "xsmm, beta 1");
                plain(t, 29, N, K, a + 17 * K, b, 0.0f, c0);
                xsmm(p, t, 29, N, K, 1.0f, a + 17 * K, b, ldb, 0.0f, c1, N);
                same(c1, c0, 29 * N, K, "xsmm, row part");
                ck_assert_uint_eq(ops_packed_b_runs(p), 3);

                /* column ranges: one block, two partial ones, partial + whole + partial */
                static const int ranges[][2] = { { 32, 64 }, { 40, 80 }, { 5, 130 }, { 100, 136 } };
                for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
                        int lo = ranges[r][0], w = ranges[r][1] - lo;
                        const float *bc = tb ? b + (size_t)lo * K : b + lo;
                        ops_sgemm_force(OPS_SGEMM_OPENBLAS);
                        ops_sgemm(CblasRowMajor, CblasNoTrans, t, M, w, K, 1.0f, a, K, bc, ldb, 0.0f, c0, w);
                        ops_sgemm_force(OPS_SGEMM_AUTO);
                        memset(c1, 0, sizeof(float) * M * N);
                        xsmm(p, t, M, w, K, 1.0f, a, bc, ldb, 0.0f, c1, w);
                        same(c1, c0, (size_t)M * w, K, "xsmm, column range");
                        ck_assert_uint_eq(ops_packed_b_runs(p), 4 + r);
                }
                uint64_t runs = ops_packed_b_runs(p);

                /* another B, alpha 2: the plain path */
                plain(t, M, N, K, a, b2, 0.0f, c0);
                xsmm(p, t, M, N, K, 1.0f, a, b2, ldb, 0.0f, c1, N);
                same(c1, c0, M * N, K, "xsmm, other B");
                plain(t, M, N, K, a, b, 0.0f, c0);
                xsmm(p, t, M, N, K, 2.0f, a, b, ldb, 0.0f, c1, N);
                for (int i = 0; i < M * N; i++)
                        c0[i] *= 2.0f;
                same(c1, c0, M * N, K, "xsmm, alpha 2");
                ck_assert_uint_eq(ops_packed_b_runs(p), runs);

                /* kept for xsmm: the oneDNN copy goes, and its variant takes the plain path */
                ops_packed_b_keep(p, OPS_SGEMM_XSMM_PACKED);
                ck_assert_uint_eq(ops_packed_b_bytes(p), (uint64_t)5 * 32 * K * sizeof(float));
                plain(t, M, N, K, a, b, 0.0f, c0);
                packed(p, t, M, N, K, 1.0f, a, b, ldb, 0.0f, c1);
                ck_assert_uint_eq(ops_packed_b_runs(p), runs);
                same(c1, c0, M * N, K, "oneDNN copy gone");
                xsmm(p, t, M, N, K, 1.0f, a, b, ldb, 0.0f, c1, N);
                ck_assert_uint_eq(ops_packed_b_runs(p), runs + 1);
                same(c1, c0, M * N, K, "xsmm kept");
                ops_packed_b_free(p);

                /* kept for oneDNN: the libxsmm layout goes and is not made again */
                p = ops_packed_b_new(b, K, N, tb, M, err, sizeof(err));
                ck_assert_ptr_nonnull(p);
                xsmm(p, t, M, N, K, 1.0f, a, b, ldb, 0.0f, c1, N);
                ops_packed_b_keep(p, OPS_SGEMM_ONEDNN_PACKED);
                ck_assert_uint_eq(ops_packed_b_bytes(p), dnnl_bytes);
                xsmm(p, t, M, N, K, 1.0f, a, b, ldb, 0.0f, c1, N);
                ck_assert_uint_eq(ops_packed_b_runs(p), 1);
                ck_assert_uint_eq(ops_packed_b_bytes(p), dnnl_bytes);
                same(c1, c0, M * N, K, "libxsmm layout gone");
                ops_packed_b_free(p);
        }
        free(a);
        free(b);
        free(b2);
        free(c0);
        free(c1);
}
END_TEST

/* ---- through the graph compiler ---- */

static Onnx__TensorProto *finit(const char *name, int ndim, const int64_t *dims, uint32_t seed)
{
        int64_t n = 1;

        for (int i = 0; i < ndim; i++)
                n *= dims[i];
        float *v = K(sizeof(float) * (size_t)n);
        fill(v, (size_t)n, seed);
        return finit_data(name, ndim, dims, v);
}

enum { GK = 96, GN = 80 };
static int GM; /* rows: 600 split by rows, 32 (Gemm with transB) by columns */

/* y = Relu(MatMul(x, W) + bias) (fused: a FusedGemm on a MatMul) when !gemm, else
 * y = Gemm(x, Wt, bias, transB=1). */
static struct graph *model(int gemm, unsigned flags)
{
        Onnx__GraphProto *g = graph_proto();
        struct graph *gr = NULL;
        char err[256] = "";
        size_t len;
        int64_t xd[2] = { GM, GK }, yd[2] = { GM, GN }, wd[2] = { GK, GN }, wtd[2] = { GN, GK },
                bd[1] = { GN };

        if (gemm) {
                Onnx__NodeProto *n = node("Gemm", 3, (const char *[]){ "x", "w", "bias" }, 1,
                                          (const char *[]){ "y" });
                attr_i(n, "transB", 1);
                g->n_node = 1;
                g->node = (Onnx__NodeProto **)list(1, n);
        } else {
                g->n_node = 3;
                g->node = (Onnx__NodeProto **)list(
                        3, node("MatMul", 2, (const char *[]){ "x", "w" }, 1, (const char *[]){ "p" }),
                        node("Add", 2, (const char *[]){ "p", "bias" }, 1, (const char *[]){ "q" }),
                        node("Relu", 1, (const char *[]){ "q" }, 1, (const char *[]){ "y" }));
        }
        g->n_initializer = 2;
        g->initializer = K(sizeof(*g->initializer) * 2);
        g->initializer[0] = finit("w", 2, gemm ? wtd : wd, 11);
        g->initializer[1] = finit("bias", 1, bd, 12);
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, yd));
        uint8_t *buf = model_pack(g, 17, &len);
        keep_free();
        ck_assert_msg(onnx_import(buf, len, NULL, &gr, err, sizeof(err)) == 0, "import: %s", err);
        free(buf);
        ck_assert_msg(graph_compile(gr, flags, err, sizeof(err)) == 0, "compile: %s", err);
        ck_assert_int_eq(graph_steps_build(gr, err, sizeof(err)), 0);
        return gr;
}

static char dir[64], path[128];

/* Both packed variants measured (the direct one, for convolutions, not). */
static int measured_packed(void *arg, const struct tune_entry *e)
{
        *(int *)arg = e->nvariants == OPS_SGEMM_VARIANTS && strstr(e->sig, "packed-bx") &&
                      strcmp(e->names[OPS_SGEMM_ONEDNN_PACKED], "onednn-packed") == 0 &&
                      strcmp(e->names[OPS_SGEMM_XSMM_PACKED], "xsmm-packed") == 0 &&
                      e->ns[OPS_SGEMM_ONEDNN_PACKED] > 0 &&
                      (e->ns[OPS_SGEMM_XSMM_PACKED] > 0 || !ops_xsmm_usable()) &&
                      e->ns[OPS_SGEMM_ONEDNN_DIRECT] == 0;
        return 0;
}

static int winner; /* the variant rewrite() makes the winner */

/* Every entry of the cache rewritten with winner as the winner where it was measured. */
static int rewrite(void *arg, const struct tune_entry *e)
{
        FILE *fp = arg;
        int w = e->nvariants > winner ? winner : e->variant;

        fprintf(fp, "%s\t%s\t%s\t%llu\t%d", e->profile, e->op, e->sig, (unsigned long long)e->when, w);
        for (int i = 0; i < e->nvariants; i++)
                fprintf(fp, "\t%s=%llu", e->names[i], (unsigned long long)(e->ns[i] ? e->ns[i] : 1));
        fprintf(fp, "\n");
        return 0;
}

START_TEST(test_graph_packed)
{
        int gemm = _i > 0;
        char err[256] = "";

        GM = _i == 2 ? 32 : 600;
        float *x = malloc(sizeof(float) * GM * GK), *y0 = calloc(GM * GN, sizeof(float));
        float *y1 = calloc(GM * GN, sizeof(float)), *y2 = calloc(GM * GN, sizeof(float));
        struct ops_tensor t[2] = {
                { .dtype = PROTO_DTYPE_FLOAT32, .ndim = 2, .dims = { GM, GK }, .data = x },
                { .dtype = PROTO_DTYPE_FLOAT32, .ndim = 2, .dims = { GM, GN } },
        };

        snprintf(dir, sizeof(dir), "/tmp/npud-packed-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/tuning.cache", dir);
        ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), 0);
        fill(x, GM * GK, 5);

        /* the plain graph */
        struct graph *g = model(gemm, GRAPH_COMPILE_ALL & ~GRAPH_COMPILE_TUNE);
        t[1].data = y0;
        ck_assert_msg(graph_exec(g, 1, t, 1, &t[1], err, sizeof(err)) == 0, "plain: %s", err);
        graph_free(g);

        /* tuned: the packed variant is measured (the node is packable) */
        g = model(gemm, GRAPH_COMPILE_ALL);
        ck_assert_int_eq(g->nnodes, 1);
        ck_assert_int_eq(g->stats->tune_measured, 1);
        graph_free(g);
        ck_assert_int_eq(tune_count(), 1);
        int three = 0;
        tune_foreach(measured_packed, &three);
        ck_assert_msg(three, "the packed variant was not measured");

        /* the cache says onednn-packed, then xsmm-packed: the node keeps packed weights in
         * that variant's layout, and computes the same in one piece and in parts */
        static const int winners[2] = { OPS_SGEMM_ONEDNN_PACKED, OPS_SGEMM_XSMM_PACKED };
        char tmp[160];
        for (int wi = 0; wi < 2; wi++) {
                winner = winners[wi];
                snprintf(tmp, sizeof(tmp), "%s.new", path);
                FILE *fp = fopen(tmp, "w");
                ck_assert_ptr_nonnull(fp);
                fprintf(fp, "npud-tune 1\n"); /* the file's first line (ops/tune.c) */
                tune_foreach(rewrite, fp);
                fclose(fp);
                ck_assert_int_eq(rename(tmp, path), 0);
                ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), 0);
                g = model(gemm, GRAPH_COMPILE_ALL);
                struct graph_node *gn = &g->nodes[0];
                ck_assert_int_eq(g->stats->tune_cached, 1);
                /* without libxsmm kernels (NPUD_SGEMM_XSMM=0) an xsmm-packed choice runs
                 * onednn-packed */
                int want = winner == OPS_SGEMM_XSMM_PACKED && !ops_xsmm_usable() ? OPS_SGEMM_ONEDNN_PACKED
                                                                                 : winner;
                ck_assert_int_eq(gn->variant, want + 1);
                ck_assert_ptr_nonnull(gn->packed);
                ck_assert_int_eq(g->stats->packed, 1);
                ck_assert_uint_ge(g->stats->packed_bytes, (uint64_t)GK * GN * sizeof(float));

                memset(y1, 0, sizeof(float) * GM * GN);
                t[1].data = y1;
                ck_assert_msg(graph_exec(g, 1, t, 1, &t[1], err, sizeof(err)) == 0, "%s: %s",
                              ops_sgemm_variant_names[winner], err);
                ck_assert_uint_ge(ops_packed_b_runs(gn->packed), 1);
                same(y1, y0, GM * GN, GK, ops_sgemm_variant_names[winner]);
                /* one layout kept: the libxsmm copy pads B to 32 columns */
                ck_assert_uint_le(ops_packed_b_bytes(gn->packed),
                                  (uint64_t)GK * (GN + 64) * sizeof(float) * 2);

                /* the node step in parts (row parts: other row counts; column parts of the
                 * Gemm with 32 rows: packed blocks of B, or column ranges of the libxsmm
                 * layout), last first */
                uint64_t before = ops_packed_b_runs(gn->packed);
                memset(y2, 0, sizeof(float) * GM * GN);
                t[1].data = y2;
                struct graph_bind b = { .g = g, .nin = 1, .nout = 1 };
                ck_assert_msg(graph_run_step(&b, 0, t, err, sizeof(err)) == 0, "bind: %s", err);
                for (int k = 2; k >= 0; k--)
                        ck_assert_msg(graph_run_step_part(&b, 1, k, 3, t, err, sizeof(err)) == 0, "part %d: %s", k, err);
                graph_run_step_done(&b, 1);
                ck_assert_msg(graph_run_step(&b, 2, t, err, sizeof(err)) == 0, "outputs: %s", err);
                graph_run_free(b.run);
                ck_assert_uint_gt(ops_packed_b_runs(gn->packed), before);
                same(y2, y0, GM * GN, GK, "packed graph in parts");
                graph_free(g);
        }

        tune_open(NULL, NULL, NULL, 0);
        snprintf(tmp, sizeof(tmp), "rm -rf %s", dir);
        ck_assert_int_eq(system(tmp), 0);
        free(x);
        free(y0);
        free(y1);
        free(y2);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("packed");
        TCase *tc = tcase_create("packed");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_sgemm_packed);
        tcase_add_test(tc, test_sgemm_xsmm);
        tcase_add_loop_test(tc, test_graph_packed, 0, 3);
        suite_add_tcase(s, tc);
        return check_run(s);
}
