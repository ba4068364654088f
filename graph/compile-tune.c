/* Tuning pass (compile.h, GRAPH_COMPILE_TUNE): every float32 MatMul, Gemm, Conv and
 * ConvTranspose node of the root graph whose input shapes the model fixes (its graph inputs'
 * or the shapes the nodes before it infer from them) is run once per GEMM
 * variant (ops/blas.h: OpenBLAS, oneDNN) on data of its real shapes, unless the tuning cache
 * (ops/tune.h) already knows the winner for this host, operator, shapes and attributes; the
 * node then runs with the winner. What one variant costs against the other depends on the
 * shapes, the CPU and how the libraries are configured on the host (OpenBLAS with or without
 * OPENBLAS_CORETYPE, for one), which a size threshold cannot know.
 *
 * A MatMul or Gemm (or the FusedGemm made of one) whose B is a float32 2-D initializer has
 * two more variants on a copy of B made once, here: oneDNN's matmul primitive on B reordered
 * into the layout oneDNN prefers (onednn-packed), and libxsmm's JIT kernels on B in column
 * blocks (xsmm-packed, ops/blas.h). The node keeps the winner's copy (graph_node.packed,
 * ops_packed_b_keep) when one of them wins; its signature says "packed-bx", so that the
 * cache never answers it with a choice measured without both (entries of older caches
 * included). The copies of one graph stay under GRAPH_PACK_TOTAL bytes and its pack_limit
 * (what the tenant's quota leaves).
 *
 * Measuring runs the kernel on the thread that compiles (not a worker), so it is bounded: a
 * node whose cost model says more than GRAPH_TUNE_FLOPS, or whose scratch would exceed
 * GRAPH_TUNE_BYTES, keeps the default. Failing to tune is never an error. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/blas.h"
#include "ops/control.h"
#include "ops/tune.h"
#include "compile.h"
#include "split.h"

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
 * 64x64x3x3 | group=1 pads=1,1,1,1 strides=1,1", extra (" packed-bx" or " direct" when the
 * node has those variants, else "") after the bar. Longer than the cache allows: a readable
 * head and a hash of the whole. */
static void node_sig(const struct ops_call *call, const char *extra, char *out, size_t outlen)
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
        sig_add(sig, sizeof(sig), &len, " |%s", extra);
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
        const struct ops_packed_b *packed;
        const struct ops_packed_conv *pconv;
        int forced; /* the graph's accumulation variant (float64, mixed): that one only; -1 */
};

static int run_variant(void *arg, int variant)
{
        struct tune_run *r = arg;
        char msg[128];

        /* a variant the node does not have is not measured: float64 accumulation is the
         * graph's choice, never a float32 graph's tuning result, and the only one of a
         * graph that made it */
        int on_packed = ops_sgemm_on_packed_b(variant), direct = variant == OPS_SGEMM_ONEDNN_DIRECT;

        if (r->forced >= 0 ? variant != r->forced : variant >= OPS_SGEMM_F64)
                return -1;
        if ((on_packed && !r->packed) || (direct && !r->pconv) ||
            (variant == OPS_SGEMM_XSMM_PACKED && !ops_xsmm_usable()))
                return -1;
        int rc = ops_run_variant(r->def, r->call, variant,
                                 on_packed || variant == r->forced ? r->packed : NULL, direct ? r->pconv : NULL,
                                 msg, sizeof(msg));
        /* a stop (over the tuning budget) fails this variant's run only */
        struct ops_runctx *c = ops_runctx_current();
        if (c && c->code) {
                c->code = 0;
                return -1;
        }
        return rc < 0 ? -1 : 0;
}

/* The operator whose product the node computes: its own, or a FusedGemm's; NULL for a node
 * of another domain. */
static const struct ops_def *product_op(const struct graph_node *gn, const struct ops_call *call)
{
        if (gn->def == &graph_fused_gemm_def) {
                const struct graph_epilogue *ep = graph_fused_gemm_epilogue(call);
                return ep ? ep->op : NULL;
        }
        return *gn->domain ? NULL : gn->def;
}

/* B of the node's product as a packed B would take it: 0 and *k, *n, *transb when the node
 * is a MatMul, or a Gemm without transA and with alpha 1 (or a FusedGemm of either), whose B
 * is a float32 2-D initializer (call: the node's inputs and attributes, shapes known). */

static int packable_b(const struct graph *g, const struct graph_node *gn, const struct ops_call *call,
                      long *k, long *n, int *transb)
{
        const struct ops_def *op = product_op(gn, call);
        const struct ops_tensor *b = &call->in[1];

        if (!op || gn->nin < 2 || gn->in[1] < 0 ||
            g->values[gn->in[1]].kind != GRAPH_VALUE_INIT || b->dtype != PROTO_DTYPE_FLOAT32 ||
            b->ndim != 2 || !b->data || b->dims[0] < 1 || b->dims[1] < 1)
                return -1;
        *transb = 0;
        if (strcmp(op->name, "Gemm") == 0) {
                if (ops_attr_int(call, "transA", 0) || ops_attr_float(call, "alpha", 1.0) != 1.0)
                        return -1;
                *transb = ops_attr_int(call, "transB", 0) != 0;
        } else if (strcmp(op->name, "MatMul") != 0) {
                return -1;
        }
        *k = (long)b->dims[*transb ? 1 : 0];
        *n = (long)b->dims[*transb ? 0 : 1];
        return 0;
}

/* Whether the node is a Conv (or a FusedGemm of one) whose filters are a float32 4-D
 * initializer: the direct variant may pack them. */
static int direct_conv(const struct graph *g, const struct graph_node *gn, const struct ops_call *call)
{
        const struct ops_def *op = product_op(gn, call);

        return op && strcmp(op->name, "Conv") == 0 && gn->nin >= 2 && gn->in[1] >= 0 &&
               g->values[gn->in[1]].kind == GRAPH_VALUE_INIT && call->in[1].dtype == PROTO_DTYPE_FLOAT32 &&
               call->in[1].ndim == 4 && call->in[1].data;
}

/* Rows of the node's product (a MatMul's leading dims flattened), the layout's hint. */
static long product_rows(const struct ops_call *call)
{
        const struct ops_tensor *y = &call->out[0];
        int64_t rows = 1;

        for (int d = 0; d + 1 < y->ndim; d++)
                rows *= y->dims[d];
        return rows > 0 && rows < (1 << 30) ? (long)rows : 1;
}

/* Data for the inputs of call the model does not hold, and for its outputs: scratch memory
 * (in scratch[], *nscratch of them), float32 filled with small values. 0, or -1 when it would
 * pass GRAPH_TUNE_BYTES or memory is short. */
static int fill_data(const struct graph_node *gn, struct ops_call *call, void **scratch, int *nscratch)
{
        uint64_t bytes = 0;

        for (int i = 0; i < gn->nin + gn->nout; i++) {
                struct ops_tensor *t = i < gn->nin ? &call->in[i] : &call->out[i - gn->nin];
                if (!t->dtype || t->data)
                        continue;
                int64_t numel = ops_tensor_numel(t);
                size_t es = proto_dtype_size(t->dtype);
                if (numel < 0 || !es)
                        return -1;
                bytes += (uint64_t)numel * es;
                if (bytes > GRAPH_TUNE_BYTES)
                        return -1;
                float *p = malloc((size_t)numel * es + 1);
                if (!p)
                        return -1;
                scratch[(*nscratch)++] = p;
                if (t->dtype == PROTO_DTYPE_FLOAT32)
                        for (int64_t k = 0; k < numel; k++)
                                p[k] = (float)((k * 7919) % 17 - 8) * 0.0625f;
                else
                        memset(p, 0, (size_t)numel * es);
                t->data = p;
        }
        return 0;
}

/* The call of node gn on the shapes known[] holds (its inputs' data: the initializers'),
 * outputs inferred; NULL when an input is unknown or inference fails. */
static struct ops_call *node_call(const struct graph *g, const struct graph_node *gn, const struct ops_tensor *known)
{
        struct ops_call *call = malloc(sizeof(*call));

        if (call && !graph_infer_static(g, gn, known, call)) {
                free(call);
                return NULL;
        }
        return call;
}

/* Kernels measured at load run under a run context of their own: the load's cancellation
 * and deadline, and a memory budget of GRAPH_TUNE_BYTES for their workspace. A kernel that
 * wants more fails and is not measured (the float64 ones take their paths that need less),
 * so a model cannot make npud allocate at load what no tenant's quota covers; a stop inside
 * it stays inside it. */
struct tune_ctx {
        struct ops_runctx *outer;
        struct ops_mem_budget mem;
        struct ops_runctx ctx;
};

/* Install t's context; tune_ctx_leave puts the load's back and says whether a kernel
 * stopped under it (over the budget, cancelled). */
static void tune_ctx_enter(struct tune_ctx *t)
{
        memset(t, 0, sizeof(*t));
        t->outer = ops_runctx_current();
        atomic_store(&t->mem.limit, GRAPH_TUNE_BYTES);
        t->mem.name = "load-time tuning";
        t->ctx.cancel = t->outer ? t->outer->cancel : NULL;
        t->ctx.deadline_ns = t->outer ? t->outer->deadline_ns : 0;
        t->ctx.mem = &t->mem;
        ops_runctx_set(&t->ctx);
}

static int tune_ctx_leave(struct tune_ctx *t)
{
        ops_runctx_set(t->outer);
        return t->ctx.code;
}

/* What time_node may spend on one graph's load, in all: a model of many big elementwise
 * nodes does not make its load run for long (the nodes past it keep the cost model). */
#define GRAPH_TIME_BUDGET_NS 500000000ull

/* A node no variant is tuned for whose step splits into parts (an elementwise chain, a
 * softmax, a LayerNormalization): its time on one thread, measured now (the better of two
 * runs on data of its shapes), sizes its parts as a tuned node's does. The AI CPU model the
 * scheduler falls back on says half of what the elementwise chain takes here, and its parts
 * then hold both workers for 2 ms at a time. Not cached: a fused group has no signature of
 * its own, and one run of a bounded node costs what loading it does. */
static void time_node(struct graph *g, struct graph_node *gn, const struct ops_tensor *known, uint64_t *spent)
{
        void *scratch[OPS_MAX_INPUTS + OPS_MAX_OUTPUTS] = { 0 };
        int nscratch = 0;
        uint64_t flops = 0, b = 0, best = 0;
        char msg[256];
        struct ops_call *call;

        if (*spent >= GRAPH_TIME_BUDGET_NS || !gn->def || !gn->def->run || !gn->def->infer || !gn->def->cost ||
            gn->nimplicit ||
            gn->nin > OPS_MAX_INPUTS || gn->nout > OPS_MAX_OUTPUTS || gn->nattr > OPS_MAX_ATTRS)
                return;
        for (int a = 0; a < gn->nattr; a++)
                if (gn->attr[a].type == OPS_ATTR_GRAPH)
                        return;
        if (!(call = node_call(g, gn, known)))
                return;
        ops_cost(gn->def, call, &flops, &b);
        if (flops && flops <= GRAPH_TUNE_FLOPS && graph_split_max_parts(gn->def, call) > 1 &&
            fill_data(gn, call, scratch, &nscratch) == 0) {
                for (int rep = 0; rep < 2; rep++) {
                        struct timespec t0, t1;
                        struct tune_ctx tctx;
                        tune_ctx_enter(&tctx);
                        clock_gettime(CLOCK_MONOTONIC, &t0);
                        int rc = ops_run(gn->def, call, msg, sizeof(msg));
                        clock_gettime(CLOCK_MONOTONIC, &t1);
                        if (tune_ctx_leave(&tctx))
                                rc = -1;
                        ops_control_forget();
                        if (rc < 0) {
                                best = 0;
                                break;
                        }
                        uint64_t ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t1.tv_nsec -
                                      (uint64_t)t0.tv_nsec;
                        *spent += ns;
                        if (!best || ns < best)
                                best = ns ? ns : 1;
                }
                gn->tuned_ns = best;
                gn->tuned_flops = best ? flops : 0;
        }
        for (int i = 0; i < nscratch; i++)
                free(scratch[i]);
        free(call);
}

/* The packed copy of constant weights for a graph's accumulation variant (float64 or mixed). */
static struct ops_packed_b *acc_packed_new(int variant, const float *b, long k, long n, int transb, char *err,
                                           size_t errlen)
{
        return variant == OPS_SGEMM_F64 ? ops_packed_b_new_f64(b, k, n, transb, err, errlen)
                                        : ops_packed_b_new_mixed(b, k, n, transb, err, errlen);
}

/* Tune node n: its winner in gn->variant, and the counts in st. */
static void tune_node(struct graph *g, struct graph_node *gn, const struct ops_tensor *known,
                      struct graph_compile_stats *st)
{
        struct ops_call *call = node_call(g, gn, known);
        void *scratch[OPS_MAX_INPUTS + OPS_MAX_OUTPUTS] = { 0 };
        int nscratch = 0;
        char msg[256], sig[TUNE_SIG_MAX];
        struct ops_packed_b *packed = NULL;
        struct ops_packed_conv *pconv = NULL;
        int forced = graph_accumulate_variant(g->accumulate), acc = forced >= 0;
        int acc64 = forced == OPS_SGEMM_F64;
        /* the signature's mark of the graph's accumulation, packed or not ("mixed-q": the
         * kernels that sum quads of runs; a time measured with the earlier ones is not taken) */
        const char *acc_sig = acc64 ? " f64" : " mixed-q", *acc_sig_packed = acc64 ? " f64-packed" : " mixed-q-packed";

        /* the executor runs every node of such a graph under its accumulation's variant;
         * this node's packed copy and time are made below when its shapes allow */
        if (acc)
                gn->variant = forced + 1;
        if (!call)
                return;
        for (int i = 0; i < gn->nin; i++)
                if (gn->in[i] >= 0 && call->in[i].dtype != PROTO_DTYPE_FLOAT32)
                        goto out; /* float32 only: the variants are of ops_sgemm */
        msg[0] = 0;
        uint64_t flops = 0;
        if (gn->def->cost) {
                uint64_t b = 0;
                ops_cost(gn->def, call, &flops, &b);
                if (flops > GRAPH_TUNE_FLOPS)
                        goto out;
        }
        long pk = 0, pn = 0;
        int ptrans = 0, packable = packable_b(g, gn, call, &pk, &pn, &ptrans) == 0;
        uint64_t limit = g->pack_limit >= 0 && (uint64_t)g->pack_limit < GRAPH_PACK_TOTAL
                                 ? (uint64_t)g->pack_limit : GRAPH_PACK_TOTAL;
        /* a float64 copy takes twice the bytes */
        if (packable && st->packed_bytes + GRAPH_PACK_BYTES(pk, pn) * (acc64 ? 2 : 1) > limit)
                packable = 0;
        int convable = !acc && !packable && direct_conv(g, gn, call);
        int64_t nf = convable ? call->in[1].dims[0] : 0; /* filters [M, C, KH, KW] */
        if (convable && (nf <= 0 || st->packed_bytes + GRAPH_PACK_BYTES(ops_tensor_numel(&call->in[1]) / nf,
                                                                        nf) > limit))
                convable = 0;
        /* " packed-bx": measured with both packed variants (a cache entry of " packed-b" was
         * measured before the libxsmm one existed, and is not taken) */
        node_sig(call, acc ? (packable ? acc_sig_packed : acc_sig) : packable ? " packed-bx" : convable ? " direct" : "",
                 sig, sizeof(sig));
        int cached = tune_lookup(gn->def->name, sig);
        if (acc && cached == forced) {
                if (packable)
                        packed = acc_packed_new(forced, call->in[1].data, pk, pn, ptrans, msg, sizeof(msg));
                st->tuned++;
                st->tune_cached++;
                goto keep;
        }
        if (!acc && cached >= 0 && cached < OPS_SGEMM_F64) {
                /* libxsmm off, or without kernels for this CPU: the oneDNN copy instead */
                if (cached == OPS_SGEMM_XSMM_PACKED && !ops_xsmm_usable())
                        cached = OPS_SGEMM_ONEDNN_PACKED;
                if (ops_sgemm_on_packed_b(cached)) {
                        /* without its weights (not packable, oneDNN refused them) the node
                         * runs oneDNN's plain path, which the packed variant falls back to */
                        if (packable)
                                packed = ops_packed_b_new(call->in[1].data, pk, pn, ptrans,
                                                          product_rows(call), msg, sizeof(msg));
                        if (!packed)
                                cached = OPS_SGEMM_ONEDNN;
                }
                if (cached == OPS_SGEMM_ONEDNN_DIRECT) {
                        if (convable)
                                pconv = ops_conv_pack(call, msg, sizeof(msg));
                        if (!pconv)
                                cached = OPS_SGEMM_ONEDNN;
                }
                gn->variant = cached + 1;
                st->tuned++;
                st->tune_cached++;
                goto keep;
        }
        /* data for the inputs the model does not hold, and the outputs */
        if (fill_data(gn, call, scratch, &nscratch) < 0)
                goto out;
        /* a packable node whose weights oneDNN refuses is measured as one that is not */
        if (packable && !(packed = acc ? acc_packed_new(forced, call->in[1].data, pk, pn, ptrans, msg, sizeof(msg))
                                       : ops_packed_b_new(call->in[1].data, pk, pn, ptrans, product_rows(call),
                                                          msg, sizeof(msg)))) {
                node_sig(call, acc ? acc_sig : "", sig, sizeof(sig));
                packable = 0;
        }
        if (convable && !(pconv = ops_conv_pack(call, msg, sizeof(msg)))) {
                node_sig(call, "", sig, sizeof(sig));
                convable = 0;
        }
        struct tune_run r = { .def = gn->def, .call = call, .packed = packed, .pconv = pconv, .forced = forced };
        /* the packed copy costs memory, and saves repacking in row parts (GRAPH_PACK_GAIN);
         * a node that runs in row parts at all gains that much more from it */
        double weight[OPS_SGEMM_VARIANTS] = { 1.0, 1.0, GRAPH_PACK_GAIN, GRAPH_PACK_GAIN, GRAPH_PACK_GAIN, 1.0, 1.0 };
        if (packable && graph_split_max_parts_packed(gn->def, call, 1) > 1)
                weight[OPS_SGEMM_ONEDNN_PACKED] = weight[OPS_SGEMM_XSMM_PACKED] = GRAPH_PACK_GAIN_PARTS;
        /* a packable node measures both packed variants (not the direct one, which it does
         * not have); a convolution the direct one */
        struct tune_ctx tctx;
        tune_ctx_enter(&tctx);
        int v = tune_choose_weighted(gn->def->name, sig,
                                     packable || acc ? OPS_SGEMM_VARIANTS
                                     : convable ? OPS_SGEMM_ONEDNN_DIRECT + 1 : OPS_SGEMM_ONEDNN_PACKED,
                                     ops_sgemm_variant_names, weight, run_variant, &r);
        tune_ctx_leave(&tctx);
        if (v >= 0) {
                gn->variant = v + 1;
                st->tuned++;
                st->tune_measured++;
        }
keep:
        /* what the chosen variant took on one thread, for the scheduler's part count */
        gn->tuned_ns = flops ? tune_lookup_ns(gn->def->name, sig, gn->variant - 1) : 0;
        gn->tuned_flops = gn->tuned_ns ? flops : 0;
        if (packed && (ops_sgemm_on_packed_b(gn->variant - 1) || (acc && gn->variant == forced + 1))) {
                ops_packed_b_keep(packed, gn->variant - 1); /* the other layout goes */
                gn->packed = packed;
                st->packed++;
                st->packed_bytes += ops_packed_b_bytes(packed);
                packed = NULL;
        }
        if (pconv && gn->variant == OPS_SGEMM_ONEDNN_DIRECT + 1) {
                gn->pconv = pconv;
                st->packed++;
                st->packed_bytes += ops_packed_conv_bytes(pconv);
                pconv = NULL;
        }
out:
        ops_packed_conv_free(pconv);
        ops_packed_b_free(packed);
        for (int i = 0; i < nscratch; i++)
                free(scratch[i]);
        free(call);
}

int graph_compile_tune(struct graph *g, struct graph_compile_stats *st)
{
        struct ops_tensor *known = calloc((size_t)g->nvalues + 1, sizeof(*known));
        struct ops_call *call = malloc(sizeof(*call));

        if (!known || !call) {
                free(known);
                free(call);
                return 0;
        }
        /* a node inside the graph is tuned on the shapes the model's fixed inputs give it,
         * as the memory plan infers them, not only one that reads a graph input */
        uint64_t spent = 0;
        graph_known_propagate(g, NULL, known, call);
        for (int k = 0; k < g->nnodes; k++) {
                struct graph_node *gn = &g->nodes[g->order[k]];
                if (tunable(gn))
                        tune_node(g, gn, known, st);
                else
                        time_node(g, gn, known, &spent);
        }
        free(known);
        free(call);
        return 0;
}
