/* Graph methods (graph_load, graph_unload, graph_info) (the
 * preparation of GRAPH_RUN records is daemon/exec/submit.c): ONNX models imported into npud
 * and run as one task each.
 *
 * Memory: a graph's weights (initializers and tensor attributes, of its subgraphs too) are
 * placed in one device buffer of the graph's device, allocated through the same allocator,
 * quota checks and accounting as mem_alloc: the loading session's tenant is charged from
 * graph_load until graph_unload or the end of the session. Like a freed buffer, the memory
 * itself returns once the last run using the graph has completed. The host memory of the
 * graph structure (nodes, attributes) is not charged; it is small next to the weights.
 *
 * The model is parsed on the loop thread, bounded by ONNX_MAX_MODEL_BYTES (1 GiB); a large
 * model stalls other clients for the time its import takes, which is dominated by copying
 * the weights twice (protobuf decoding, then into device memory). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/cost.h"
#include "proto/errors.h"
#include "proto/frame.h"
#include "proto/message.h"
#include "proto/submit.h"
#include "daemon/exec/alloc.h"
#include "dispatch.h"
#include "graph/exec.h"
#include "daemon/exec/graph-obj.h"
#include "graph/onnx-import.h"
#include "util/log.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/tenant.h"

#define GRAPH_MAX_PER_SESSION 64
#define IMPORT_ERR_MAX 4096 /* every unsupported node of a model fits in one message */

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
        uint64_t rounded = size > UINT64_MAX - ALLOC_GRANULE
                                   ? UINT64_MAX
                                   : (size + ALLOC_GRANULE - 1) / ALLOC_GRANULE * ALLOC_GRANULE;
        uint64_t reserve = s->npud->tenants.policy->lc_reserved;
        struct alloc_stats st;

        if (pol->quota_total && (rounded > pol->quota_total || s->tenant->mem_used > pol->quota_total - rounded)) {
                snprintf(err, errlen, "tenant '%s' would exceed its memory quota with %" PRIu64
                         " bytes of weights: %" PRIu64 " bytes used, %" PRIu64 " allowed",
                         pol->name, rounded, s->tenant->mem_used, pol->quota_total);
                return PROTO_E_QUOTA;
        }
        if (pol->quota_per_device && (rounded > pol->quota_per_device ||
                                      s->tenant->dev[dev->id].mem_used > pol->quota_per_device - rounded)) {
                snprintf(err, errlen, "tenant '%s' would exceed its quota on device %d with %" PRIu64
                         " bytes of weights: %" PRIu64 " bytes used, %" PRIu64 " allowed",
                         pol->name, dev->id, rounded, s->tenant->dev[dev->id].mem_used,
                         pol->quota_per_device);
                return PROTO_E_QUOTA;
        }
        alloc_get_stats(dev->alloc, &st);
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

static void charge(struct session *s, struct graph_obj *o, int sign)
{
        struct tenant *tn = s->tenant;
        int id = o->dev->id;

        if (sign > 0) {
                s->dev_bytes[id] += o->charged;
                tn->mem_used += o->charged;
                tn->dev[id].mem_used += o->charged;
                if (tn->mem_used > tn->mem_peak)
                        tn->mem_peak = tn->mem_used;
        } else {
                s->dev_bytes[id] -= o->charged;
                tn->mem_used -= o->charged;
                tn->dev[id].mem_used -= o->charged;
        }
}

void graph_obj_release(struct session *s, struct graph_obj *o)
{
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

static json_t *graph_json(const struct graph_obj *o, uint32_t handle)
{
        const struct graph *g = o->g;
        json_t *in = json_array(), *out = json_array();

        for (int i = 0; i < g->ninputs; i++) {
                const struct graph_value *v = &g->values[g->inputs[i]];
                json_array_append_new(in, value_json(v->name, v->dtype, v->ndim, v->dims));
        }
        for (int k = 0; k < g->noutputs; k++) {
                const struct ops_tensor *d = &g->output_decl[k];
                json_array_append_new(out, value_json(g->values[g->outputs[k]].name, d->dtype, d->ndim, d->dims));
        }
        return json_pack("{s:I, s:i, s:o, s:o, s:i, s:I, s:i}", "graph", (json_int_t)handle,
                         "device", o->dev->id, "inputs", in, "outputs", out, "nodes", g->nnodes,
                         "weight_bytes", (json_int_t)g->storage_bytes, "opset", g->opset);
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
        static const char *const keys[] = { "device", "fd", NULL };
        struct session *s = req->session;
        struct storage_ctx sc = { .s = s };
        struct onnx_import_env env = { .alloc = storage_alloc, .ctx = &sc };
        struct graph_obj *o;
        struct graph *g = NULL;
        struct device *dev;
        uint64_t devid, idx;
        char err[IMPORT_ERR_MAX], msg[IMPORT_ERR_MAX + 32];
        void *model;
        size_t size;
        uint32_t h;
        int rc, fd;

        if (params_only(req, keys) < 0 || param_u64(req, "device", INT32_MAX, &devid) < 0 ||
            param_u64(req, "fd", PROTO_MAX_FDS - 1, &idx) < 0)
                return;
        dev = device_get(&s->npud->ex.devices, (int)devid);
        if (!dev) {
                session_reply_error(s, req->id, PROTO_E_INVALID, "graph_load: no device %" PRIu64, devid);
                return;
        }
        if ((int)idx >= req->nfds || req->fds[idx] < 0) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "graph_load: fd index %" PRIu64 " was not passed", idx);
                return;
        }
        if (s->handles.count[HANDLE_GRAPH] >= GRAPH_MAX_PER_SESSION) {
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
        sc.dev = dev;
        rc = onnx_import(model, size, &env, &g, err, sizeof(err));
        munmap(model, size);
        if (rc) {
                buffer_unref(sc.b);
                snprintf(msg, sizeof(msg), "graph_load: %s", err);
                reply_error_long(s, req->id, rc, msg);
                return;
        }
        o = calloc(1, sizeof(*o));
        if (!o) {
                graph_free(g);
                buffer_unref(sc.b);
                session_reply_error(s, req->id, PROTO_E_LIMIT, "graph_load: out of memory");
                return;
        }
        o->refs = 1;
        o->g = g;
        o->weights = sc.b;
        o->dev = dev;
        o->charged = sc.b ? sc.rounded : 0;
        if (handle_insert(&s->handles, HANDLE_GRAPH, o, &h) < 0) {
                graph_obj_unref(o);
                session_reply_error(s, req->id, PROTO_E_LIMIT, "graph_load: handle table full");
                return;
        }
        charge(s, o, 1);
        log_session_msg(LOG_LVL_INFO, s->id, s->pid, s->tenant->pol.name, dev->id,
                        "graph %u loaded on device %d: %d nodes, %d inputs, %d outputs, "
                        "%llu bytes of weights, opset %d",
                        h, dev->id, g->nnodes, g->ninputs, g->noutputs,
                        (unsigned long long)g->storage_bytes, g->opset);
        session_reply_result(s, req->id, graph_json(o, h));
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
        graph_obj_release(s, o);
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
        { NULL, NULL, 0 },
};
