/* Conv by oneDNN's direct convolution on packed filters (ops/blas.h, struct ops_packed_conv;
 * the onednn-direct tuning variant):
 *   - through the Conv kernel, geometries with strides, dilations, asymmetric pads, channel
 *     counts that are not multiples of oneDNN's blocks, a batch of two and a bias give what
 *     the im2col path gives (within 1e-5 relative) and are computed on the packed filters;
 *   - a convolution wider than one band (OPS_POLL_MACS) runs in bands of output rows, each
 *     with its own pads, and still agrees;
 *   - a call on other filters of the same shape, or with other strides, takes the im2col
 *     path and is still right; grouped and 1-D convolutions are refused at packing;
 *   - through the graph compiler: the variant is measured for a Conv on constant filters, a
 *     cached onednn-direct choice makes the node keep packed filters, and whole runs and
 *     row-block parts (GRAPH_SPLIT_SPATIAL) on them agree with the plain graph, with the
 *     activation applied by oneDNN (Relu, LeakyRelu), by the epilogue after it (Sigmoid),
 *     none, or after a residual Add of the input (a ResNet block's); without packed filters
 *     the parts copy their rows out and agree too; graph_free releases them (the ASan build
 *     checks). */
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
#include "ops/ops.h"
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

/* |x - ref| within 1e-5 of the magnitude of the k products that made ref (about sqrt(k)). */
static void same(const float *x, const float *ref, size_t n, int k, const char *what)
{
        double scale = sqrt((double)k);
        for (size_t i = 0; i < n; i++) {
                double tol = 1e-5 * (fabs(ref[i]) > scale ? fabs(ref[i]) : scale);
                ck_assert_msg(fabs((double)x[i] - (double)ref[i]) <= tol, "%s: [%zu] %.9g, im2col %.9g", what, i,
                              x[i], ref[i]);
        }
}

struct geo {
        int64_t n, c, h, w, m, kh, kw, sh, sw, dh, dw, pads[4];
        int bias;
};

static const struct geo geos[] = {
        { 1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, 0 }, /* the ResNet block's */
        { 2, 3, 17, 19, 8, 5, 5, 2, 2, 1, 1, { 2, 2, 2, 2 }, 1 },   /* a first layer */
        { 1, 20, 23, 21, 33, 3, 3, 1, 1, 2, 2, { 0, 1, 2, 0 }, 1 }, /* dilated, asymmetric pads */
        { 1, 48, 14, 14, 24, 1, 1, 2, 2, 1, 1, { 0, 0, 0, 0 }, 0 }, /* 1x1, stride 2 */
        { 1, 128, 20, 256, 128, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, 0 }, /* bands of 7 rows */
};

static int64_t out_extent(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe)
{
        return (in + pb + pe - ((k - 1) * d + 1)) / s + 1;
}

/* A Conv call of geometry g on x, w (and b) into y. */
static void conv_call(const struct geo *g, float *x, float *w, float *b, float *y, struct ops_call *c,
                      int64_t *strides, int64_t *dil)
{
        memset(c, 0, sizeof(*c));
        strides[0] = g->sh;
        strides[1] = g->sw;
        dil[0] = g->dh;
        dil[1] = g->dw;
        c->nin = g->bias ? 3 : 2;
        c->nout = 1;
        c->opset = 17;
        c->in[0] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = 4, .dims = { g->n, g->c, g->h, g->w }, .data = x };
        c->in[1] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = 4, .dims = { g->m, g->c, g->kh, g->kw }, .data = w };
        if (g->bias)
                c->in[2] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = 1, .dims = { g->m }, .data = b };
        c->out[0] = (struct ops_tensor){ .dtype = PROTO_DTYPE_FLOAT32, .ndim = 4,
                                         .dims = { g->n, g->m, out_extent(g->h, g->kh, g->sh, g->dh, g->pads[0], g->pads[2]),
                                                   out_extent(g->w, g->kw, g->sw, g->dw, g->pads[1], g->pads[3]) },
                                         .data = y };
        const char *names[3] = { "pads", "strides", "dilations" };
        const int64_t *vals[3] = { g->pads, strides, dil };
        for (int a = 0; a < 3; a++) {
                snprintf(c->attr[a].name, sizeof(c->attr[a].name), "%s", names[a]);
                c->attr[a].type = OPS_ATTR_INTS;
                c->attr[a].n = a ? 2 : 4;
                c->attr[a].ints = vals[a];
        }
        c->nattr = 3;
}

static int run_conv(struct ops_call *c, int variant, const struct ops_packed_conv *p)
{
        char err[256] = "";
        ops_sgemm_force(variant);
        ops_conv_packed(p);
        int rc = ops_run(ops_lookup("Conv"), c, err, sizeof(err));
        ops_conv_packed(NULL);
        ops_sgemm_force(OPS_SGEMM_AUTO);
        ck_assert_msg(rc == 0, "Conv: %s", err);
        return rc;
}

START_TEST(test_conv_direct_geometries)
{
        const struct geo *g = &geos[_i];
        int64_t oh = out_extent(g->h, g->kh, g->sh, g->dh, g->pads[0], g->pads[2]);
        int64_t ow = out_extent(g->w, g->kw, g->sw, g->dw, g->pads[1], g->pads[3]);
        size_t nx = (size_t)(g->n * g->c * g->h * g->w), nw = (size_t)(g->m * g->c * g->kh * g->kw);
        size_t ny = (size_t)(g->n * g->m * oh * ow);
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *w2 = malloc(nw * 4), *b = malloc((size_t)g->m * 4);
        float *y0 = calloc(ny, 4), *y1 = calloc(ny, 4), *y2 = calloc(ny, 4);
        int64_t strides[2], dil[2];
        struct ops_call *c = malloc(sizeof(*c));
        char err[256] = "";

        fill(x, nx, 1);
        fill(w, nw, 2);
        fill(b, (size_t)g->m, 3);
        conv_call(g, x, w, b, y0, c, strides, dil);
        run_conv(c, OPS_SGEMM_ONEDNN, NULL); /* im2col + sgemm */

        struct ops_packed_conv *p = ops_conv_pack(c, err, sizeof(err));
        ck_assert_msg(p != NULL, "pack: %s", err);
        ck_assert_uint_ge(ops_packed_conv_bytes(p), nw * 4);
        c->out[0].data = y1;
        run_conv(c, OPS_SGEMM_ONEDNN_DIRECT, p);
        uint64_t bands = _i == 4 ? 3 : (uint64_t)g->n; /* 7 + 7 + 6 rows */
        ck_assert_uint_eq(ops_packed_conv_runs(p), bands);
        same(y1, y0, ny, (int)(g->c * g->kh * g->kw), "direct");

        /* other filters of the same shape: the im2col path, on those filters */
        memcpy(w2, w, nw * 4);
        w2[0] += 0.5f;
        c->in[1].data = w2;
        c->out[0].data = y2;
        run_conv(c, OPS_SGEMM_ONEDNN_DIRECT, p);
        ck_assert_uint_eq(ops_packed_conv_runs(p), bands);
        float *ref = calloc(ny, 4);
        c->out[0].data = ref;
        run_conv(c, OPS_SGEMM_ONEDNN, NULL);
        same(y2, ref, ny, (int)(g->c * g->kh * g->kw), "other filters");
        free(ref);
        ops_packed_conv_free(p);
        free(c);
        free(x);
        free(w);
        free(w2);
        free(b);
        free(y0);
        free(y1);
        free(y2);
}
END_TEST

START_TEST(test_conv_direct_refused)
{
        struct geo g = geos[1];
        float x[2 * 3 * 17 * 19], w[8 * 3 * 25], b[8], y[2 * 8 * 9 * 10];
        int64_t strides[2], dil[2];
        struct ops_call c;
        char err[256] = "";

        fill(x, sizeof(x) / 4, 1);
        fill(w, sizeof(w) / 4, 2);
        conv_call(&g, x, w, b, y, &c, strides, dil);
        struct ops_packed_conv *p = ops_conv_pack(&c, err, sizeof(err));
        ck_assert_ptr_nonnull(p);

        /* strides other than the packed filters': the im2col path */
        float y0[2 * 8 * 17 * 19], y1[2 * 8 * 17 * 19];
        g.sh = g.sw = 1;
        conv_call(&g, x, w, b, y0, &c, strides, dil);
        ck_assert_int_eq(c.out[0].dims[2], 17);
        run_conv(&c, OPS_SGEMM_ONEDNN, NULL);
        c.out[0].data = y1;
        run_conv(&c, OPS_SGEMM_ONEDNN_DIRECT, p);
        ck_assert_uint_eq(ops_packed_conv_runs(p), 0);
        ck_assert_int_eq(memcmp(y0, y1, sizeof(y0)), 0);
        ops_packed_conv_free(p);

        /* two groups */
        int64_t two = 2;
        float wg[8 * 1 * 25];
        struct ops_tensor xg = { .dtype = PROTO_DTYPE_FLOAT32, .ndim = 4, .dims = { 1, 2, 17, 19 }, .data = x };
        g = geos[1];
        conv_call(&g, x, wg, b, y, &c, strides, dil);
        c.in[0] = xg;
        c.in[1].dims[1] = 1;
        snprintf(c.attr[3].name, sizeof(c.attr[3].name), "group");
        c.attr[3].type = OPS_ATTR_INT;
        c.attr[3].i = two;
        c.nattr = 4;
        ck_assert_ptr_null(ops_conv_pack(&c, err, sizeof(err)));
        ck_assert_msg(strstr(err, "one group"), "%s", err);

        /* 1-D */
        conv_call(&geos[1], x, w, b, y, &c, strides, dil);
        c.in[0].ndim = c.in[1].ndim = 3;
        c.attr[0].n = 2;
        c.attr[1].n = c.attr[2].n = 1;
        ck_assert_ptr_null(ops_conv_pack(&c, err, sizeof(err)));
}
END_TEST

/* ---- through the graph compiler ---- */

enum { GC = 24, GH = 60, GW = 30, GM = 24 };

/* The activation after the Conv: the direct path applies Relu and LeakyRelu itself, and
 * leaves Sigmoid to the FusedGemm's epilogue; none leaves a plain Conv node. */
static const char *const acts[] = { "Relu", "LeakyRelu", "Sigmoid", NULL, "Residual" };
static int act_i;

/* y = act(Conv(x, W, bias, pads 1)): a FusedGemm on a Conv once compiled. */
static struct graph *model(unsigned flags)
{
        Onnx__GraphProto *g = graph_proto();
        struct graph *gr = NULL;
        char err[256] = "";
        size_t len;
        int64_t xd[4] = { 1, GC, GH, GW }, yd[4] = { 1, GM, GH, GW }, wd[4] = { GM, GC, 3, 3 }, bd[1] = { GM };
        float *w = K(sizeof(float) * GM * GC * 9), *bias = K(sizeof(float) * GM);

        fill(w, GM * GC * 9, 11);
        fill(bias, GM, 12);
        Onnx__NodeProto *conv = node("Conv", 3, (const char *[]){ "x", "w", "bias" }, 1, (const char *[]){ "p" });
        attr_ints(conv, "pads", 4, (const int64_t[]){ 1, 1, 1, 1 });
        if (acts[act_i] && !strcmp(acts[act_i], "Residual")) { /* a ResNet block's: Relu(conv + x) */
                g->n_node = 3;
                g->node = (Onnx__NodeProto **)list(3, conv, node("Add", 2, (const char *[]){ "p", "x" }, 1, (const char *[]){ "s" }),
                                                   node("Relu", 1, (const char *[]){ "s" }, 1, (const char *[]){ "y" }));
        } else if (acts[act_i]) {
                Onnx__NodeProto *a = node(acts[act_i], 1, (const char *[]){ "p" }, 1, (const char *[]){ "y" });
                if (strcmp(acts[act_i], "LeakyRelu") == 0)
                        attr_f(a, "alpha", 0.2f);
                g->n_node = 2;
                g->node = (Onnx__NodeProto **)list(2, conv, a);
        } else {
                conv->output[0] = "y";
                g->n_node = 1;
                g->node = (Onnx__NodeProto **)list(1, conv);
        }
        g->n_initializer = 2;
        g->initializer = K(sizeof(*g->initializer) * 2);
        g->initializer[0] = finit_data("w", 4, wd, w);
        g->initializer[1] = finit_data("bias", 1, bd, bias);
        g->n_input = 1;
        g->input = (Onnx__ValueInfoProto **)list(1, tvalue("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, xd));
        g->n_output = 1;
        g->output = (Onnx__ValueInfoProto **)list(1, tvalue("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd));
        uint8_t *buf = model_pack(g, 17, &len);
        keep_free();
        ck_assert_msg(onnx_import(buf, len, NULL, &gr, err, sizeof(err)) == 0, "import: %s", err);
        free(buf);
        ck_assert_msg(graph_compile(gr, flags, err, sizeof(err)) == 0, "compile: %s", err);
        ck_assert_int_eq(graph_steps_build(gr, err, sizeof(err)), 0);
        return gr;
}

static char dir[64], path[128];

static int measured_direct(void *arg, const struct tune_entry *e)
{
        *(int *)arg = e->nvariants == OPS_SGEMM_ONEDNN_DIRECT + 1 && strstr(e->sig, " direct") &&
                      strcmp(e->names[OPS_SGEMM_ONEDNN_DIRECT], "onednn-direct") == 0 &&
                      e->ns[OPS_SGEMM_ONEDNN_DIRECT] > 0 && e->ns[OPS_SGEMM_ONEDNN_PACKED] == 0;
        return 0;
}

/* Every entry of the cache rewritten with onednn-direct as the winner. */
static int rewrite(void *arg, const struct tune_entry *e)
{
        FILE *fp = arg;

        fprintf(fp, "%s\t%s\t%s\t%llu\t%d", e->profile, e->op, e->sig, (unsigned long long)e->when,
                OPS_SGEMM_ONEDNN_DIRECT);
        for (int i = 0; i < e->nvariants; i++)
                fprintf(fp, "\t%s=%llu", e->names[i], (unsigned long long)(e->ns[i] ? e->ns[i] : 1));
        fprintf(fp, "\n");
        return 0;
}

START_TEST(test_graph_direct)
{
        char err[256] = "";

        act_i = _i;
        size_t nx = GC * GH * GW, ny = GM * GH * GW;
        float *x = malloc(sizeof(float) * nx), *y0 = calloc(ny, 4), *y1 = calloc(ny, 4), *y2 = calloc(ny, 4);
        struct ops_tensor t[2] = {
                { .dtype = PROTO_DTYPE_FLOAT32, .ndim = 4, .dims = { 1, GC, GH, GW }, .data = x },
                { .dtype = PROTO_DTYPE_FLOAT32, .ndim = 4, .dims = { 1, GM, GH, GW } },
        };

        snprintf(dir, sizeof(dir), "/tmp/npud-direct-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/tuning.cache", dir);
        ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), 0);
        fill(x, nx, 5);

        struct graph *g = model(GRAPH_COMPILE_ALL & ~GRAPH_COMPILE_TUNE);
        t[1].data = y0;
        ck_assert_msg(graph_exec(g, 1, t, 1, &t[1], err, sizeof(err)) == 0, "plain: %s", err);
        /* and in row-block parts without packed filters: each part copies its rows of the
         * input (and of the residual) out */
        struct graph_bind pb = { .g = g, .nin = 1, .nout = 1 };
        t[1].data = y2;
        ck_assert_msg(graph_run_step(&pb, 0, t, err, sizeof(err)) == 0, "bind: %s", err);
        for (int k = 1; k >= 0; k--)
                ck_assert_msg(graph_run_step_part(&pb, 1, k, 2, t, err, sizeof(err)) == 0, "part %d: %s", k, err);
        graph_run_step_done(&pb, 1);
        ck_assert_msg(graph_run_step(&pb, 2, t, err, sizeof(err)) == 0, "outputs: %s", err);
        graph_run_free(pb.run);
        same(y2, y0, ny, GC * 9, "plain graph in parts");
        memset(y2, 0, ny * 4);
        graph_free(g);

        /* tuned: the direct variant is measured (and the packed-B one is not) */
        g = model(GRAPH_COMPILE_ALL);
        ck_assert_int_eq(g->nnodes, 1);
        ck_assert_int_eq(g->stats->tune_measured, 1);
        graph_free(g);
        int measured = 0;
        tune_foreach(measured_direct, &measured);
        ck_assert_msg(measured, "the direct variant was not measured");

        /* the cache says onednn-direct: the node keeps packed filters */
        char tmp[160];
        snprintf(tmp, sizeof(tmp), "%s.new", path);
        FILE *fp = fopen(tmp, "w");
        ck_assert_ptr_nonnull(fp);
        fprintf(fp, "npud-tune 1\n");
        tune_foreach(rewrite, fp);
        fclose(fp);
        ck_assert_int_eq(rename(tmp, path), 0);
        ck_assert_int_eq(tune_open(path, NULL, err, sizeof(err)), 0);
        g = model(GRAPH_COMPILE_ALL);
        struct graph_node *gn = &g->nodes[0];
        ck_assert_int_eq(g->stats->tune_cached, 1);
        ck_assert_int_eq(gn->variant, OPS_SGEMM_ONEDNN_DIRECT + 1);
        ck_assert_ptr_nonnull(gn->pconv);
        ck_assert_ptr_null(gn->packed);
        ck_assert_int_eq(g->stats->packed, 1);
        ck_assert_uint_ge(g->stats->packed_bytes, (uint64_t)GM * GC * 9 * sizeof(float));
        /* the time tuning measured (cached here) sizes the step's parts: the estimate of
         * the step on one host thread is that time for the same shapes, and nothing for
         * the binding and handing over */
        ck_assert_uint_gt(gn->tuned_ns, 0);
        ck_assert_uint_ge(gn->tuned_flops, 2ull * GM * GC * 9 * GH * GW); /* and the epilogue's */
        double rate[OPS_ENGINE_COUNT];
        int cores[OPS_ENGINE_COUNT];
        for (int e = 0; e < OPS_ENGINE_COUNT; e++) {
                rate[e] = 1e12;
                cores[e] = 1;
        }
        uint64_t cost[3 * OPS_ENGINE_COUNT], host[3];
        uint32_t parts[3];
        ck_assert_int_eq(g->steps->nsteps, 3);
        ck_assert_int_eq(graph_estimate_steps_parts(g, 1, t, rate, cores, 1e10, cost, parts, NULL, host), 0);
        ck_assert_uint_eq(host[1], gn->tuned_ns);
        ck_assert_uint_eq(host[0], 0);
        ck_assert_uint_eq(host[2], 0);

        t[1].data = y1;
        ck_assert_msg(graph_exec(g, 1, t, 1, &t[1], err, sizeof(err)) == 0, "direct: %s", err);
        ck_assert_uint_eq(ops_packed_conv_runs(gn->pconv), 1);
        same(y1, y0, ny, GC * 9, "direct graph");

        /* the node step in row-block parts, last first: each part its own band geometry */
        t[1].data = y2;
        struct graph_bind b = { .g = g, .nin = 1, .nout = 1 };
        ck_assert_msg(graph_run_step(&b, 0, t, err, sizeof(err)) == 0, "bind: %s", err);
        for (int k = 1; k >= 0; k--)
                ck_assert_msg(graph_run_step_part(&b, 1, k, 2, t, err, sizeof(err)) == 0, "part %d: %s", k, err);
        graph_run_step_done(&b, 1);
        ck_assert_msg(graph_run_step(&b, 2, t, err, sizeof(err)) == 0, "outputs: %s", err);
        graph_run_free(b.run);
        ck_assert_uint_eq(ops_packed_conv_runs(gn->pconv), 3);
        same(y2, y0, ny, GC * 9, "direct graph in parts");
        graph_free(g);

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
        Suite *s = suite_create("conv_direct");
        TCase *tc = tcase_create("conv_direct");

        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, test_conv_direct_geometries, 0, (int)(sizeof(geos) / sizeof(geos[0])));
        tcase_add_test(tc, test_conv_direct_refused);
        tcase_add_loop_test(tc, test_graph_direct, 0, (int)(sizeof(acts) / sizeof(acts[0])));
        suite_add_tcase(s, tc);
        return check_run(s);
}
