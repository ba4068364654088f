/* Tuning pass (compile.h, GRAPH_COMPILE_TUNE): every float32 MatMul, Gemm, Conv and
 * ConvTranspose node of the root graph whose input shapes the model fixes is run once per GEMM
 * variant (ops/blas.h: OpenBLAS, oneDNN) on data of its real shapes, unless the tuning cache
 * (ops/tune.h) already knows the winner for this host, operator, shapes and attributes; the
 * node then runs with the winner. What one variant costs against the other depends on the
 * shapes, the CPU and how the libraries are configured on the host (OpenBLAS with or without
 * OPENBLAS_CORETYPE, for one), which a size threshold cannot know.
 *
 * Measuring runs the kernel on the thread that compiles (not a worker), so it is bounded: a
 * node whose cost model says more than GRAPH_TUNE_FLOPS, or whose scratch would exceed
 * GRAPH_TUNE_BYTES, keeps the default. Failing to tune is never an error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/blas.h"
#include "ops/tune.h"
#include "compile.h"

static const char *const tunable_ops[] = { "MatMul", "Gemm", "Conv", "ConvTranspose" };

static int tunable(const struct graph_node *gn)
{
        if (!gn->def || !gn->def->run || !gn->def->infer || gn->nimplicit || gn->nin > OPS_MAX_INPUTS ||
            gn->nout > OPS_MAX_OUTPUTS || gn->nattr > OPS_MAX_ATTRS)
                return 0;
        /* a MatMul / Gemm / Conv with its epilogue (compile-epilogue.c) runs the operator's
         * kernel under the node's variant like the operator alone */
        if (gn->def == &graph_fused_gemm_def)
                return 1;
        for (size_t i = 0; i < sizeof(tunable_ops) / sizeof(tunable_ops[0]); i++)
                if (strcmp(gn->def->name, tunable_ops[i]) == 0 && !*gn->domain)
                        return 1;
        return 0;
}

/* Append printf output to sig (cut at its size: the caller hashes a long signature). */
static void sig_add(char *sig, size_t cap, size_t *len, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void sig_add(char *sig, size_t cap, size_t *len, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (*len >= cap)
                return;
        va_start(ap, fmt);
        n = vsnprintf(sig + *len, cap - *len, fmt, ap);
        va_end(ap);
        *len = n < 0 ? cap : *len + (size_t)n;
}

/* The shapes and scalar attributes that decide the kernel's work, as text: "1x64x56x56
 * 64x64x3x3 | group=1 pads=1,1,1,1 strides=1,1". Longer than the cache allows: a readable
 * head and a hash of the whole. */
static void node_sig(const struct ops_call *call, char *out, size_t outlen)
{
        char sig[1024];
        size_t len = 0;

        sig[0] = 0;
        for (int i = 0; i < call->nin; i++) {
                const struct ops_tensor *t = &call->in[i];
                if (!t->dtype) {
                        sig_add(sig, sizeof(sig), &len, "%s-", i ? " " : "");
                        continue;
                }
                sig_add(sig, sizeof(sig), &len, "%s", i ? " " : "");
                for (int d = 0; d < t->ndim; d++)
                        sig_add(sig, sizeof(sig), &len, "%s%lld", d ? "x" : "", (long long)t->dims[d]);
                if (!t->ndim)
                        sig_add(sig, sizeof(sig), &len, "s");
        }
        sig_add(sig, sizeof(sig), &len, " |");
        for (int a = 0; a < call->nattr; a++) {
                const struct ops_attr *at = &call->attr[a];
                if (at->type == OPS_ATTR_INT)
                        sig_add(sig, sizeof(sig), &len, " %s=%lld", at->name, (long long)at->i);
                else if (at->type == OPS_ATTR_FLOAT)
                        sig_add(sig, sizeof(sig), &len, " %s=%g", at->name, at->f);
                else if (at->type == OPS_ATTR_INTS) {
                        sig_add(sig, sizeof(sig), &len, " %s=", at->name);
                        for (int k = 0; k < at->n; k++)
                                sig_add(sig, sizeof(sig), &len, "%s%lld", k ? "," : "", (long long)at->ints[k]);
                } else if (at->type == OPS_ATTR_STRING && at->s)
                        sig_add(sig, sizeof(sig), &len, " %s=%.32s", at->name, at->s);
        }
        if (len < outlen && len < sizeof(sig)) {
                memcpy(out, sig, len + 1);
                return;
        }
        uint64_t h = 1469598103934665603ull;
        char tail[24];
        for (const unsigned char *p = (const unsigned char *)sig; *p; p++)
                h = (h ^ *p) * 1099511628211ull;
        int n = snprintf(tail, sizeof(tail), "~%016llx", (unsigned long long)h);
        size_t head = outlen - 1 - (size_t)n;
        memcpy(out, sig, head);
        memcpy(out + head, tail, (size_t)n + 1);
        /* the cache file is tab- and line-separated; names come from the model */
        for (char *p = out; *p; p++)
                if (*p == '\t' || *p == '\n')
                        *p = ' ';
}

struct tune_run {
        const struct ops_def *def;
        struct ops_call *call;
};

static int run_variant(void *arg, int variant)
{
        struct tune_run *r = arg;
        char msg[128];

        ops_sgemm_force(variant);
        int rc = ops_run(r->def, r->call, msg, sizeof(msg));
        ops_sgemm_force(OPS_SGEMM_AUTO);
        return rc < 0 ? -1 : 0;
}

/* Tune node n: its winner in gn->variant, and the counts in st. */
static void tune_node(struct graph *g, struct graph_node *gn, struct graph_compile_stats *st)
{
        struct ops_call *call = calloc(1, sizeof(*call));
        void *scratch[OPS_MAX_INPUTS + OPS_MAX_OUTPUTS] = { 0 };
        int nscratch = 0;
        uint64_t bytes = 0;
        char msg[256], sig[TUNE_SIG_MAX];

        if (!call)
                return;
        call->nin = gn->nin;
        call->nout = gn->nout;
        call->nattr = gn->nattr;
        if (gn->nattr)
                memcpy(call->attr, gn->attr, sizeof(call->attr[0]) * (size_t)gn->nattr);
        call->opset = g->opset;
        for (int i = 0; i < gn->nin; i++) {
                const struct graph_value *v;
                if (gn->in[i] < 0)
                        continue;
                v = &g->values[gn->in[i]];
                if (v->kind == GRAPH_VALUE_INIT) {
                        call->in[i] = *v->tensor;
                        continue;
                }
                /* a value whose shape the model fixes: float32 scratch of that shape */
                if (v->dtype != PROTO_DTYPE_FLOAT32 || v->ndim < 0)
                        goto out;
                call->in[i].dtype = v->dtype;
                call->in[i].ndim = v->ndim;
                for (int d = 0; d < v->ndim; d++) {
                        if (v->dims[d] < 0)
                                goto out;
                        call->in[i].dims[d] = v->dims[d];
                }
        }
        for (int i = 0; i < gn->nin; i++)
                if (gn->in[i] >= 0 && call->in[i].dtype != PROTO_DTYPE_FLOAT32)
                        goto out; /* float32 only: the variants are of ops_sgemm */
        msg[0] = 0;
        if (ops_infer(gn->def, call, msg, sizeof(msg)) < 0)
                goto out;
        if (gn->def->cost) {
                uint64_t flops = 0, b = 0;
                ops_cost(gn->def, call, &flops, &b);
                if (flops > GRAPH_TUNE_FLOPS)
                        goto out;
        }
        node_sig(call, sig, sizeof(sig));
        int known = tune_lookup(gn->def->name, sig);
        if (known >= 0 && known < OPS_SGEMM_VARIANTS) {
                gn->variant = known + 1;
                st->tuned++;
                st->tune_cached++;
                goto out;
        }
        /* data for the inputs the model does not hold, and the outputs */
        for (int i = 0; i < gn->nin + gn->nout; i++) {
                struct ops_tensor *t = i < gn->nin ? &call->in[i] : &call->out[i - gn->nin];
                if (!t->dtype || t->data)
                        continue;
                int64_t numel = ops_tensor_numel(t);
                size_t es = proto_dtype_size(t->dtype);
                if (numel < 0 || !es)
                        goto out;
                bytes += (uint64_t)numel * es;
                if (bytes > GRAPH_TUNE_BYTES)
                        goto out;
                float *p = malloc((size_t)numel * es + 1);
                if (!p)
                        goto out;
                scratch[nscratch++] = p;
                if (t->dtype == PROTO_DTYPE_FLOAT32)
                        for (int64_t k = 0; k < numel; k++)
                                p[k] = (float)((k * 7919) % 17 - 8) * 0.0625f;
                else
                        memset(p, 0, (size_t)numel * es);
                t->data = p;
        }
        struct tune_run r = { .def = gn->def, .call = call };
        int v = tune_choose(gn->def->name, sig, OPS_SGEMM_VARIANTS, ops_sgemm_variant_names,
                            run_variant, &r);
        if (v >= 0) {
                gn->variant = v + 1;
                st->tuned++;
                st->tune_measured++;
        }
out:
        for (int i = 0; i < nscratch; i++)
                free(scratch[i]);
        free(call);
}

int graph_compile_tune(struct graph *g, struct graph_compile_stats *st)
{
        for (int k = 0; k < g->nnodes; k++) {
                struct graph_node *gn = &g->nodes[g->order[k]];
                if (tunable(gn))
                        tune_node(g, gn, st);
        }
        return 0;
}
