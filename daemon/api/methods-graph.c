/* Graph methods (graph_load, graph_unload, graph_info) (the
 * preparation of GRAPH_RUN records is daemon/exec/submit.c): ONNX models imported into npud
 * and run as one task each.
 *
 * Memory: a graph's weights (initializers and tensor attributes, of its subgraphs too) are
 * placed in one device buffer of the graph's device, allocated through the same allocator,
 * quota checks and accounting as mem_alloc: the loading session's tenant is charged from
 * graph_load until graph_unload or the end of the session. Like a freed buffer, the memory
 * itself returns once the last run using the graph has completed. The copies of the weights
 * that tuned kernels reorder at load (packed weights) are charged with them: the compiler
 * makes no more of them than the tenant's quota leaves after the weights. The host memory of
 * the graph structure (nodes, attributes) is not charged; it is small next to the weights.
 *
 * The model is checked and mapped on the loop thread (bounded by ONNX_MAX_MODEL_BYTES, 1 GiB),
 * then imported and compiled on a helper thread (graph-load.h), and the reply is deferred
 * until that is done: a large model no longer stalls other clients for the seconds its
 * import takes. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/cost.h"
#include "proto/errors.h"
#include "proto/frame.h"
#include "proto/message.h"
#include "proto/submit.h"
#include "daemon/exec/alloc.h"
#include "daemon/exec/reclaim.h"
#include "dispatch.h"
#include "export.h"
#include "ops/blas.h"
#include "graph/compile.h"
#include "graph-load.h"
#include "graph/exec.h"
#include "graph/steps.h"
#include "daemon/exec/graph-obj.h"
#include "graph/onnx-import.h"
#include "util/log.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/tenant.h"

#define GRAPH_MAX_PER_SESSION 64
#define IMPORT_ERR_MAX GRAPH_LOAD_ERR_MAX

/* A reply whose message may be longer than session_reply_error's (lists of nodes). */
static void reply_error_long(struct session *s, uint64_t id, int code, const char *msg)
{
        log_debug("session %llu (pid %d): %s: %s", (unsigned long long)s->id, (int)s->pid,
                  proto_error_name(code), msg);
        session_send_json(s, PROTO_KIND_REPLY, id, proto_reply_error(code, msg));
}

/* ---- weights in device memory ---- */

struct storage_ctx {
        struct session *s;
        struct device *dev;
        struct buffer *b;
        uint64_t rounded;
};

/* onnx_import_env.alloc: the checks and allocation of mem_alloc, for the weights. */
static int storage_alloc(void *ctx, uint64_t size, void **ret, char *err, size_t errlen)
{
        struct storage_ctx *c = ctx;
        struct session *s = c->s;
        struct device *dev = c->dev;
        const struct policy_tenant *pol = &s->tenant->pol;
        uint64_t rounded = alloc_round_up(size);
        uint64_t reserve = s->npud->tenants.policy->lc_reserved;
        struct alloc_stats st;

        if (pol->quota_total && (rounded > pol->quota_total || s->tenant->mem_used > pol->quota_total - rounded)) {
                snprintf(err, errlen, "tenant '%s' would exceed its memory quota with %" PRIu64
                         " bytes of weights: %" PRIu64 " bytes used, %" PRIu64 " allowed",
                         pol->name, rounded, s->tenant->mem_used, pol->quota_total);
                return PROTO_E_QUOTA;
        }
        uint64_t qdev = tenant_quota_device(s->tenant, dev->id);
        if (qdev && (rounded > qdev || s->tenant->dev[dev->id].mem_used > qdev - rounded)) {
                snprintf(err, errlen, "tenant '%s' would exceed its quota on device %d with %" PRIu64
                         " bytes of weights: %" PRIu64 " bytes used, %" PRIu64 " allowed",
                         pol->name, dev->id, rounded, s->tenant->dev[dev->id].mem_used, qdev);
                return PROTO_E_QUOTA;
        }
        device_mem_stats(dev, &st);
        if (reserve && pol->klass != POLICY_CLASS_LATENCY_CRITICAL &&
            (st.free_bytes < reserve || st.free_bytes - reserve < rounded)) {
                snprintf(err, errlen, "device %d has %" PRIu64 " bytes free, of which %" PRIu64
                         " are reserved for latency-critical tenants; the weights need %" PRIu64,
                         dev->id, st.free_bytes, reserve, rounded);
                return PROTO_E_NO_MEMORY;
        }
        if (buffer_new(dev, size, &c->b) < 0) {
                c->b = NULL;
                snprintf(err, errlen, "device %d cannot fit %" PRIu64 " bytes of weights (%" PRIu64
                         " free, largest free block %" PRIu64 ")",
                         dev->id, size, st.free_bytes, st.largest_free);
                return PROTO_E_NO_MEMORY;
        }
        c->rounded = rounded;
        *ret = buffer_ptr(c->b);
        return 0;
}

/* Bytes the session's tenant may still be charged on device id: the least of what its
 * total and device quotas leave; -1 when neither is set. */
static int64_t quota_room(struct session *s, int id)
{
        const struct policy_tenant *pol = &s->tenant->pol;
        uint64_t room = UINT64_MAX, qdev = tenant_quota_device(s->tenant, id);

        if (pol->quota_total)
                room = s->tenant->mem_used >= pol->quota_total ? 0 : pol->quota_total - s->tenant->mem_used;
        if (qdev) {
                uint64_t used = s->tenant->dev[id].mem_used, r = used >= qdev ? 0 : qdev - used;
                if (r < room)
                        room = r;
        }
        return room == UINT64_MAX ? -1 : room > INT64_MAX ? INT64_MAX : (int64_t)room;
}

static void charge_bytes(struct session *s, int id, uint64_t bytes, int sign)
{
        struct tenant *tn = s->tenant;

        if (sign > 0) {
                s->dev_bytes[id] += bytes;
                tn->mem_used += bytes;
                tn->dev[id].mem_used += bytes;
                if (tn->mem_used > tn->mem_peak)
                        tn->mem_peak = tn->mem_used;
        } else {
                s->dev_bytes[id] -= bytes;
                tn->mem_used -= bytes;
                tn->dev[id].mem_used -= bytes;
        }
}

static void charge(struct session *s, struct graph_obj *o, int sign)
{
        charge_bytes(s, o->dev->id, o->charged, sign);
}

/* ---- export tokens ---- */

/* A loaded graph shared with the other sessions of its tenant: a pre-fork server loads the
 * weights once and its workers import them. The token holds a reference to the graph; it
 * ends when the exporter unloads the graph, when its session ends, or on graph_revoke.
 * Graphs already imported stay (they hold their own references): the weights remain
 * charged to the loading tenant until the last importer lets go of them. */
struct graph_export {
        struct graph_export *next;
        char token[EXPORT_TOKEN_LEN + 1];
        struct graph_obj *o;   /* reference */
        uint64_t session_id;   /* exporter */
        uint32_t handle;       /* the exporter's handle */
        char tenant[POLICY_NAME_MAX];
};

static struct graph_export *graph_exports; /* loop thread only */

#define GRAPH_EXPORTS_PER_SESSION 64

static void graph_export_drop(struct graph_export **pp)
{
        struct graph_export *e = *pp;

        *pp = e->next;
        graph_obj_unref(e->o);
        free(e);
}

/* End the tokens of session_id, of its graph handle `handle` only when handle != 0. */
static int graph_exports_end(uint64_t session_id, uint32_t handle)
{
        int n = 0;

        for (struct graph_export **pp = &graph_exports; *pp;)
                if ((*pp)->session_id == session_id && (!handle || (*pp)->handle == handle)) {
                        graph_export_drop(pp);
                        n++;
                } else {
                        pp = &(*pp)->next;
                }
        return n;
}

void graph_exports_end_session(uint64_t session_id)
{
        graph_exports_end(session_id, 0);
}

static struct graph_export *graph_export_find(const char *token, struct graph_export ***ret_pp)
{
        if (strlen(token) != EXPORT_TOKEN_LEN)
                return NULL;
        for (struct graph_export **pp = &graph_exports; *pp; pp = &(*pp)->next)
                if (memcmp((*pp)->token, token, EXPORT_TOKEN_LEN) == 0) {
                        if (ret_pp)
                                *ret_pp = pp;
                        return *pp;
                }
        return NULL;
}

void graph_obj_release(struct session *s, struct graph_obj *o)
{
        if (s->id != o->owner_session || o->owner_released) {
                graph_obj_unref(o); /* an import: the charge is the loader's */
                return;
        }
        o->owner_released = 1;
        if (o->weights) { /* the weights buffer keeps the tenant's charge until its last user */
                s->dev_bytes[o->dev->id] -= o->charged;
                buffer_keep_charge(o->weights, s->tenant, o->charged);
        } else {
                charge(s, o, -1);
        }
        graph_obj_unref(o);
}

/* ---- methods ---- */

/* {"name","dtype","shape"}: shape null when the rank is open, -1 for open extents. */
static json_t *value_json(const char *name, int dtype, int ndim, const int64_t *dims)
{
        json_t *shape = ndim < 0 ? json_null() : json_array();

        for (int d = 0; d < ndim; d++)
                json_array_append_new(shape, json_integer(dims[d] < 0 ? -1 : (json_int_t)dims[d]));
        return json_pack("{s:s, s:i, s:o}", "name", name, "dtype", dtype, "shape", shape);
}

/* What the compiler did at load (null when it was off): nodes before and after, what each
 * pass removed or made, and the memory plan's arena against the sum of the intermediates it
 * placed. */
static json_t *compile_json(const struct graph *g)
{
        const struct graph_compile_stats *st = g->stats;
        json_t *groups;

        if (!st)
                return json_null();
        groups = json_array();
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                const struct graph_fused *fz = NULL;
                json_t *ops;
                if (gn->def != &graph_fused_def)
                        continue;
                for (int a = 0; a < gn->nattr; a++)
                        if (gn->attr[a].type == OPS_ATTR_OPAQUE)
                                fz = gn->attr[a].graph;
                if (!fz)
                        continue;
                ops = json_array();
                for (int s = 0; s < fz->nsteps; s++)
                        json_array_append_new(ops, json_string(fz->steps[s].def->name));
                json_array_append_new(groups, json_pack("{s:s, s:o}", "node", gn->name, "ops", ops));
        }
        /* MatMul / Gemm / Conv nodes that took a bias and / or activation (compile-epilogue.c) */
        json_t *epis = json_array();
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                const struct graph_epilogue *ep = NULL;
                if (gn->def != &graph_fused_gemm_def)
                        continue;
                for (int a = 0; a < gn->nattr; a++)
                        if (gn->attr[a].type == OPS_ATTR_OPAQUE)
                                ep = gn->attr[a].graph;
                if (ep)
                        json_array_append_new(epis, json_pack("{s:s, s:s, s:b, s:b, s:s*}", "node", gn->name,
                                                              "op", ep->op->name, "bias", ep->bias,
                                                              "residual", ep->resid,
                                                              "act", ep->act ? ep->act->name : NULL));
        }
        /* the kernel variant tuning chose per node (compile-tune.c) */
        json_t *tuned = json_array();
        for (int n = 0; n < g->nnodes; n++) {
                const struct graph_node *gn = &g->nodes[n];
                if (gn->variant > 0 && gn->variant <= OPS_SGEMM_VARIANTS)
                        json_array_append_new(tuned, json_pack("{s:s, s:s, s:s}", "node", gn->name,
                                                               "op", gn->def->name, "variant",
                                                               ops_sgemm_variant_names[gn->variant - 1]));
        }
        return json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:i, s:i, s:o, s:i, s:i, s:i, s:I, s:I, s:I, s:o, s:i, s:i, s:i, s:I}",
                         "nodes_before", st->nodes_before, "nodes_after", st->nodes_after,
                         "folded", st->folded, "bn_folded", st->bn_folded, "bn_exact", st->bn_exact,
                         "dead", st->dead,
                         "fused_nodes", st->fused_nodes, "fused_groups", groups,
                         "gelu_fused", st->gelu_fused, "layernorm_fused", st->layernorm_fused,
                         "epilogues", epis, "softmax_fused", st->softmax_fused,
                         "planned", st->planned, "in_place", st->inplace,
                         "arena_bytes", (json_int_t)st->arena_bytes,
                         "intermediate_bytes", (json_int_t)st->intermediate_bytes,
                         "model_intermediate_bytes", (json_int_t)st->model_intermediate_bytes,
                         "tuned", tuned, "tune_measured", st->tune_measured,
                         "tune_cached", st->tune_cached, "packed", st->packed,
                         "packed_bytes", (json_int_t)st->packed_bytes);
}

static const char *const plan_engine_names[OPS_ENGINE_COUNT] = { "cube", "vector", "aicpu", "dma" };

/* The estimate per step from the last run's input shapes, else from the declared ones when
 * they are fixed; *cost and *parts are NULL when there is none. *own: they were made here. */
static void plan_estimate(const struct graph_obj *o, uint64_t **cost, uint32_t **parts, uint64_t **host,
                          int *own)
{
        const struct graph *g = o->g;
        const struct backend_device_desc *d = &o->dev->desc;
        struct ops_tensor *in;
        int fixed = 1;

        *own = 0;
        *cost = o->est_valid ? o->est_steps : NULL;
        *parts = o->est_valid ? o->est_parts : NULL;
        *host = o->est_valid ? o->est_host : NULL;
        if (*cost && *parts && *host)
                return;
        *cost = NULL;
        *parts = NULL;
        *host = NULL;
        if (!(in = calloc((size_t)g->ninputs + 1, sizeof(*in))))
                return;
        for (int i = 0; i < g->ninputs && fixed; i++) {
                const struct graph_value *v = &g->values[g->inputs[i]];
                in[i].dtype = v->dtype;
                in[i].ndim = v->ndim;
                fixed = v->kind != GRAPH_VALUE_INPUT || (v->dtype && v->ndim >= 0);
                for (int k = 0; fixed && k < v->ndim && k < OPS_MAX_DIMS; k++) {
                        in[i].dims[k] = v->dims[k];
                        fixed = v->dims[k] >= 0;
                }
        }
        size_t n = (size_t)g->steps->nsteps;
        *cost = fixed ? malloc(n * OPS_ENGINE_COUNT * sizeof(**cost)) : NULL;
        *parts = fixed ? malloc(n * sizeof(**parts)) : NULL;
        *host = fixed ? malloc(n * sizeof(**host)) : NULL;
        if (!*cost || !*parts || !*host ||
            graph_estimate_steps_parts(g, g->ninputs, in, d->flops_per_core, d->cores,
                                       d->mem_bandwidth, *cost, *parts, NULL, *host) < 0) {
                free(*cost);
                free(*parts);
                free(*host);
                *cost = NULL;
                *parts = NULL;
                *host = NULL;
        } else {
                *own = 1;
        }
        free(in);
}

/* graph_info's "plan": per step its node(s), the engine kind of earliest estimated finish
 * and that estimate (the cost model, uncalibrated), the most parts it splits into, and,
 * for a tuned node, its time on one host thread as tuning measured it (what sizes its
 * parts in compute mode). */
static json_t *plan_json(const struct graph_obj *o)
{
        const struct graph *g = o->g;
        const struct graph_steps *gs = g->steps;
        json_t *arr = json_array();
        uint64_t *cost;
        uint32_t *parts;
        uint64_t *host;
        int own;

        if (!gs)
                return arr;
        plan_estimate(o, &cost, &parts, &host, &own);
        for (int s = 0; s < gs->nsteps; s++) {
                json_t *nodes = json_array(), *st;
                const char *op;
                if (s == 0) {
                        op = "(bind)";
                } else if (s == gs->nsteps - 1) {
                        op = "(outputs)";
                } else {
                        const struct graph_node *gn = &g->nodes[graph_step_node(g, s)];
                        const struct graph_fused *fz = NULL;
                        op = gn->def->name;
                        for (int a = 0; gn->def == &graph_fused_def && a < gn->nattr; a++)
                                if (gn->attr[a].type == OPS_ATTR_OPAQUE)
                                        fz = gn->attr[a].graph;
                        if (fz)
                                for (int k = 0; k < fz->nsteps; k++)
                                        json_array_append_new(nodes, json_string(fz->steps[k].name ? fz->steps[k].name : ""));
                        else
                                json_array_append_new(nodes, json_string(gn->name ? gn->name : ""));
                }
                int best = -1;
                for (int e = 0; cost && e < OPS_ENGINE_COUNT; e++) {
                        uint64_t c = cost[(size_t)s * OPS_ENGINE_COUNT + (size_t)e];
                        if (c && (best < 0 || c < cost[(size_t)s * OPS_ENGINE_COUNT + (size_t)best]))
                                best = e;
                }
                st = json_pack("{s:i, s:s, s:o, s:s, s:f, s:i}", "step", s, "op", op, "nodes", nodes,
                               "engine", best >= 0 ? plan_engine_names[best] : "",
                               "est_us", best >= 0 ? (double)cost[(size_t)s * OPS_ENGINE_COUNT + (size_t)best] / 1e3 : 0.0,
                               "parts_max", parts ? (int)parts[s] : 1);
                if (host && host[s])
                        json_object_set_new(st, "host_us", json_real((double)host[s] / 1e3));
                json_array_append_new(arr, st);
        }
        if (own) {
                free(cost);
                free(parts);
                free(host);
        }
        return arr;
}

static json_t *graph_json(const struct graph_obj *o, uint32_t handle)
{
        const struct graph *g = o->g;
        json_t *in = json_array(), *out = json_array(), *calib = json_object();

        for (int e = 0; e < OPS_ENGINE_COUNT; e++)
                json_object_set_new(calib, plan_engine_names[e], json_real(o->calib[e]));

        for (int i = 0; i < g->ninputs; i++) {
                const struct graph_value *v = &g->values[g->inputs[i]];
                json_array_append_new(in, value_json(v->name, v->dtype, v->ndim, v->dims));
        }
        for (int k = 0; k < g->noutputs; k++) {
                const struct ops_tensor *d = &g->output_decl[k];
                json_array_append_new(out, value_json(g->values[g->outputs[k]].name, d->dtype, d->ndim, d->dims));
        }
        return json_pack("{s:I, s:i, s:o, s:o, s:i, s:I, s:i, s:s, s:o, s:i, s:o, s:I, s:i, s:o}", "graph",
                         (json_int_t)handle, "device", o->dev->id, "inputs", in, "outputs", out, "nodes",
                         g->stats ? g->stats->nodes_before : g->nnodes, "weight_bytes", (json_int_t)g->storage_bytes,
                         "opset", g->opset, "accumulate", graph_accumulate_name(g->accumulate),
                         "compile", compile_json(g), "steps", g->steps ? g->steps->nsteps : 1,
                         "plan", plan_json(o), "parts_sent", (json_int_t)o->parts_sent,
                         "parts_parallel", (int)o->parts_parallel, "calibration", calib);
}

/* Map a sealed model memfd read-only. Consumes fd. 0 or a PROTO_E_* code with a message. */
static int model_map(int fd, void **ret, size_t *ret_size, char *err, size_t errlen)
{
        struct stat st;
        int seals = fcntl(fd, F_GET_SEALS), rc = PROTO_E_INVALID;
        void *map;

        if (seals < 0) {
                snprintf(err, errlen, "the model fd is not a memfd");
                goto out;
        }
        /* Sealed against writes, the bytes cannot change while the decoder reads them. */
        if ((seals & (F_SEAL_SHRINK | F_SEAL_WRITE)) != (F_SEAL_SHRINK | F_SEAL_WRITE)) {
                snprintf(err, errlen, "the model memfd must be sealed with F_SEAL_SHRINK and F_SEAL_WRITE");
                goto out;
        }
        if (fstat(fd, &st) < 0 || st.st_size <= 0) {
                snprintf(err, errlen, "the model memfd is empty");
                goto out;
        }
        if ((uint64_t)st.st_size > ONNX_MAX_MODEL_BYTES) {
                snprintf(err, errlen, "the model has %lld bytes, more than the limit of %llu",
                         (long long)st.st_size, (unsigned long long)ONNX_MAX_MODEL_BYTES);
                rc = PROTO_E_LIMIT;
                goto out;
        }
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
                snprintf(err, errlen, "cannot map the model: %s", strerror(errno));
                goto out;
        }
        *ret = map;
        *ret_size = (size_t)st.st_size;
        rc = 0;
out:
        close(fd);
        return rc;
}

static void method_graph_load(struct request *req)
{
        static const char *const keys[] = { "device", "fd", "accumulate", NULL };
        struct session *s = req->session;
        json_t *acc = json_object_get(req->params, "accumulate");
        int accumulate = s->npud->config.graph_accumulate;
        struct graph_load *j;
        struct device *dev;
        uint64_t devid, idx;
        char err[IMPORT_ERR_MAX];
        void *model;
        size_t size;
        int rc, fd;

        if (params_only(req, keys) < 0 || param_u64(req, "device", INT32_MAX, &devid) < 0 ||
            param_u64(req, "fd", PROTO_MAX_FDS - 1, &idx) < 0)
                return;
        if (acc && (accumulate = graph_accumulate_parse(json_string_value(acc))) < 0) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "graph_load: parameter 'accumulate' must be \"float32\", \"float64\" or \"mixed\"");
                return;
        }
        dev = device_get(&s->npud->ex.devices, (int)devid);
        if (!dev) {
                session_reply_error(s, req->id, PROTO_E_INVALID, "graph_load: no device %" PRIu64, devid);
                return;
        }
        if (devid >= 64 || !(s->tenant->pol.devices >> devid & 1)) {
                session_reply_error(s, req->id, PROTO_E_PERMISSION, "graph_load: tenant '%s' may not use device %d",
                                    s->tenant->pol.name, dev->id);
                return;
        }
        if (session_device_hidden(s, req->id, "graph_load", dev->id))
                return;
        if ((int)idx >= req->nfds || req->fds[idx] < 0) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "graph_load: fd index %" PRIu64 " was not passed", idx);
                return;
        }
        /* Loads in progress count: each may end as a handle. */
        if (s->handles.count[HANDLE_GRAPH] + s->graph_loads >= GRAPH_MAX_PER_SESSION) {
                session_reply_error(s, req->id, PROTO_E_LIMIT,
                                    "graph_load: session holds the maximum of %d graphs",
                                    GRAPH_MAX_PER_SESSION);
                return;
        }
        fd = req->fds[idx];
        req->fds[idx] = -1;
        rc = model_map(fd, &model, &size, err, sizeof(err));
        if (rc) {
                session_reply_error(s, req->id, rc, "graph_load: %s", err);
                return;
        }
        j = calloc(1, sizeof(*j));
        if (!j) {
                munmap(model, size);
                session_reply_error(s, req->id, PROTO_E_NO_MEMORY, "graph_load: out of memory");
                return;
        }
        j->s = s;
        j->req_id = req->id;
        j->dev = dev;
        j->model = model;
        j->size = size;
        j->pack_limit = quota_room(s, dev->id); /* again once the weights are charged */
        j->accumulate = accumulate;
        j->background = s->tenant && s->tenant->pol.klass == POLICY_CLASS_BEST_EFFORT;
        /* The import and compilation run on a helper thread (graph-load.c); the reply
         * comes from graph_load_finish. */
        rc = graph_load_start(s->npud, j, err, sizeof(err));
        if (rc)
                session_reply_error(s, req->id, rc, "graph_load: %s", err);
}

/* A load's weights: allocated and charged now, on the loop thread, so that loads running
 * at the same time each see the others in the quota checks. */
int graph_load_alloc(struct graph_load *j, uint64_t size, void **ret, char *err, size_t errlen)
{
        struct storage_ctx sc = { .s = j->s, .dev = j->dev };
        int rc = storage_alloc(&sc, size, ret, err, errlen);

        if (rc)
                return rc;
        j->weights = sc.b;
        j->rounded = sc.rounded;
        charge_bytes(j->s, j->dev->id, j->rounded, 1);
        j->pack_limit = quota_room(j->s, j->dev->id);
        return 0;
}

static void load_fail(struct graph_load *j, int rc, const char *err)
{
        char msg[IMPORT_ERR_MAX + 32];

        graph_free(j->g);
        j->g = NULL;
        if (j->weights) {
                charge_bytes(j->s, j->dev->id, j->rounded, -1);
                buffer_unref(j->weights);
                j->weights = NULL;
        }
        snprintf(msg, sizeof(msg), "graph_load: %s", err);
        reply_error_long(j->s, j->req_id, rc, msg);
}

void graph_load_finish(struct graph_load *j)
{
        struct session *s = j->s;
        struct device *dev = j->dev;
        struct graph *g = j->g;
        struct graph_obj *o;
        char err[IMPORT_ERR_MAX];
        uint32_t h;

        if (j->rc) {
                load_fail(j, j->rc, j->err);
                return;
        }
        /* A run needs its whole arena at once: a plan larger than what the tenant may hold in
         * intermediates could never run, so it is refused now rather than at every run. */
        if (g->stats && g->stats->arena_bytes) {
                uint64_t lim = atomic_load(&s->tenant->ws.limit);
                uint64_t dlim = atomic_load(&s->tenant->dev[dev->id].ws.limit);
                if (dlim && (!lim || dlim < lim))
                        lim = dlim;
                if (lim && g->stats->arena_bytes > lim) {
                        snprintf(err, sizeof(err), "the model's intermediates need an arena of %" PRIu64
                                 " bytes per run, more than tenant '%s' may hold (%" PRIu64 " bytes)",
                                 g->stats->arena_bytes, s->tenant->pol.name, lim);
                        load_fail(j, PROTO_E_QUOTA, err);
                        return;
                }
        }
        /* The weights the tuned kernels reordered at load (graph_info's packed_bytes) are
         * memory of the graph like its weights: charged to the tenant with them. The
         * compiler packed no more than the quota left when the weights were charged; other
         * allocations of the tenant since may have taken that room. */
        uint64_t packed = alloc_round_up(g->stats ? g->stats->packed_bytes : 0);
        int64_t room = quota_room(s, dev->id);
        if (packed && room >= 0 && packed > (uint64_t)room) {
                snprintf(err, sizeof(err), "tenant '%s' would exceed its memory quota with %" PRIu64
                         " bytes of packed weights (reordered at load for the tuned kernels): %" PRIu64
                         " bytes left", s->tenant->pol.name, packed, (uint64_t)room);
                load_fail(j, PROTO_E_QUOTA, err);
                return;
        }
        if (s->handles.count[HANDLE_GRAPH] >= GRAPH_MAX_PER_SESSION) { /* graph_import meanwhile */
                snprintf(err, sizeof(err), "session holds the maximum of %d graphs", GRAPH_MAX_PER_SESSION);
                load_fail(j, PROTO_E_LIMIT, err);
                return;
        }
        o = calloc(1, sizeof(*o));
        if (!o) {
                load_fail(j, PROTO_E_NO_MEMORY, "out of memory");
                return;
        }
        o->refs = 1;
        o->g = g;
        for (int e = 0; e < OPS_ENGINE_COUNT; e++)
                o->calib[e] = 1.0;
        o->owner_session = s->id;
        o->weights = j->weights;
        o->dev = dev;
        o->charged = j->weights ? j->rounded : 0; /* charged since graph_load_alloc */
        if (packed) { /* and the packed copies, until the weights' last user lets go */
                charge_bytes(s, dev->id, packed, 1);
                o->charged += packed;
        }
        j->g = NULL;
        j->weights = NULL;
        if (handle_insert(&s->handles, HANDLE_GRAPH, o, &h) < 0) {
                charge(s, o, -1);
                graph_obj_unref(o);
                session_reply_error(s, j->req_id, PROTO_E_LIMIT, "graph_load: handle table full");
                return;
        }
        log_session_msg(LOG_LVL_INFO, s->id, s->pid, s->tenant->pol.name, dev->id,
                        "graph %u loaded on device %d: %d nodes (%d compiled), %d inputs, %d outputs, "
                        "%llu bytes of weights, opset %d, arena %llu bytes",
                        h, dev->id, g->stats ? g->stats->nodes_before : g->nnodes, g->nnodes,
                        g->ninputs, g->noutputs, (unsigned long long)g->storage_bytes, g->opset,
                        (unsigned long long)(g->stats ? g->stats->arena_bytes : 0));
        session_reply_result(s, j->req_id, graph_json(o, h));
}

static void method_graph_unload(struct request *req)
{
        static const char *const keys[] = { "graph", NULL };
        struct session *s = req->session;
        struct graph_obj *o;
        uint64_t h;

        if (params_only(req, keys) < 0 || param_u64(req, "graph", UINT32_MAX, &h) < 0)
                return;
        o = handle_remove(&s->handles, HANDLE_GRAPH, (uint32_t)h);
        if (!o) {
                session_reply_error(s, req->id, PROTO_E_BAD_HANDLE,
                                    "graph_unload: graph handle %" PRIu64 " is unknown or already unloaded", h);
                return;
        }
        graph_exports_end(s->id, (uint32_t)h);
        graph_obj_release(s, o);
        session_reply_result(s, req->id, NULL);
}

static void method_graph_export(struct request *req)
{
        static const char *const keys[] = { "graph", NULL };
        struct session *s = req->session;
        struct graph_export *e;
        struct graph_obj *o;
        unsigned char raw[16];
        uint64_t h;
        int n = 0;

        if (params_only(req, keys) < 0 || param_u64(req, "graph", UINT32_MAX, &h) < 0)
                return;
        o = handle_lookup(&s->handles, HANDLE_GRAPH, (uint32_t)h);
        if (!o) {
                session_reply_error(s, req->id, PROTO_E_BAD_HANDLE,
                                    "graph_export: graph handle %" PRIu64 " is unknown", h);
                return;
        }
        if (o->owner_session != s->id) {
                session_reply_error(s, req->id, PROTO_E_PERMISSION,
                                    "graph_export: graph %" PRIu64 " is an import; only the session that "
                                    "loaded it may export it", h);
                return;
        }
        for (e = graph_exports; e; e = e->next)
                n += e->session_id == s->id;
        if (n >= GRAPH_EXPORTS_PER_SESSION) {
                session_reply_error(s, req->id, PROTO_E_LIMIT,
                                    "graph_export: session has the maximum of %d graph exports",
                                    GRAPH_EXPORTS_PER_SESSION);
                return;
        }
        e = calloc(1, sizeof(*e));
        if (!e || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
                free(e);
                session_reply_error(s, req->id, PROTO_E_LIMIT, "graph_export: no token could be made");
                return;
        }
        for (int i = 0; i < 16; i++)
                snprintf(e->token + 2 * i, 3, "%02x", raw[i]);
        e->o = graph_obj_ref(o);
        e->session_id = s->id;
        e->handle = (uint32_t)h;
        snprintf(e->tenant, sizeof(e->tenant), "%s", session_tenant_name(s));
        e->next = graph_exports;
        graph_exports = e;
        session_reply_result(s, req->id, json_pack("{s:s}", "token", e->token));
}

static const char *graph_token_param(struct request *req)
{
        json_t *tok = json_object_get(req->params, "token");

        if (!json_is_string(tok)) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "%s: 'token' must be a string", req->method);
                return NULL;
        }
        return json_string_value(tok);
}

static void method_graph_import(struct request *req)
{
        static const char *const keys[] = { "token", NULL };
        struct session *s = req->session;
        struct graph_export *e;
        const char *tok;
        uint32_t h;

        if (params_only(req, keys) < 0 || !(tok = graph_token_param(req)))
                return;
        e = graph_export_find(tok, NULL);
        if (!e) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "graph_import: token is unknown or ended (revoked, or the graph was "
                                    "unloaded by its exporter)");
                return;
        }
        if (strcmp(e->tenant, session_tenant_name(s)) != 0) {
                session_reply_error(s, req->id, PROTO_E_PERMISSION,
                                    "graph_import: tenant '%s' may not import a graph of tenant '%s' "
                                    "(graphs are shared within a tenant only)",
                                    session_tenant_name(s), e->tenant);
                return;
        }
        if (e->session_id == s->id) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "graph_import: this session exported the token: it holds graph %u already",
                                    e->handle);
                return;
        }
        if (s->handles.count[HANDLE_GRAPH] >= GRAPH_MAX_PER_SESSION) {
                session_reply_error(s, req->id, PROTO_E_LIMIT,
                                    "graph_import: session holds the maximum of %d graphs",
                                    GRAPH_MAX_PER_SESSION);
                return;
        }
        if (handle_insert(&s->handles, HANDLE_GRAPH, e->o, &h) < 0) {
                session_reply_error(s, req->id, PROTO_E_LIMIT, "graph_import: handle table full");
                return;
        }
        graph_obj_ref(e->o);
        session_reply_result(s, req->id, graph_json(e->o, h));
}

static void method_graph_revoke(struct request *req)
{
        static const char *const keys[] = { "token", NULL };
        struct session *s = req->session;
        struct graph_export *e, **pp;
        const char *tok;

        if (params_only(req, keys) < 0 || !(tok = graph_token_param(req)))
                return;
        e = graph_export_find(tok, &pp);
        if (!e || e->session_id != s->id) {
                session_reply_error(s, req->id, e ? PROTO_E_PERMISSION : PROTO_E_INVALID,
                                    e ? "graph_revoke: only the exporting session may revoke a token"
                                      : "graph_revoke: token is unknown or ended");
                return;
        }
        graph_export_drop(pp);
        session_reply_result(s, req->id, NULL);
}

static void method_graph_info(struct request *req)
{
        static const char *const keys[] = { "graph", NULL };
        struct session *s = req->session;
        struct graph_obj *o;
        uint64_t h;

        if (params_only(req, keys) < 0 || param_u64(req, "graph", UINT32_MAX, &h) < 0)
                return;
        o = handle_lookup(&s->handles, HANDLE_GRAPH, (uint32_t)h);
        if (!o) {
                session_reply_error(s, req->id, PROTO_E_BAD_HANDLE,
                                    "graph_info: graph handle %" PRIu64 " is unknown", h);
                return;
        }
        session_reply_result(s, req->id, graph_json(o, (uint32_t)h));
}

const struct method methods_graph[] = {
        { "graph_load", method_graph_load, 0 },
        { "graph_unload", method_graph_unload, 0 },
        { "graph_info", method_graph_info, 0 },
        { "graph_export", method_graph_export, 0 },
        { "graph_import", method_graph_import, 0 },
        { "graph_revoke", method_graph_revoke, 0 },
        { NULL, NULL, 0 },
};
