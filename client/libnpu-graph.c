/* libnpu graphs: load, typed introspection of inputs and outputs, and runs checked against
 * the description before they are submitted. */
#include "client/libnpu-internal.h"

/* ---- graph descriptions: typed introspection and the checks of npu_graph_run ---- */

struct graph_io_desc {
        char *name;
        int dtype; /* 0: open */
        int ndim;  /* -1: open rank */
        int64_t dims[NPU_MAX_DIMS];
};

/* What graph_load and graph_info answer about one graph, kept until npu_graph_unload. */
struct graph_desc {
        uint32_t id;
        int nin, nout;
        struct graph_io_desc *io; /* inputs, then outputs */
        struct graph_desc *next;
};

static void graph_desc_free(struct graph_desc *d)
{
        if (!d)
                return;
        for (int i = 0; i < d->nin + d->nout; i++)
                free(d->io[i].name);
        free(d->io);
        free(d);
}

void npu_graph_descs_free(npu_context_t *ctx)
{
        while (ctx->graphs) {
                struct graph_desc *d = ctx->graphs;
                ctx->graphs = d->next;
                graph_desc_free(d);
        }
}

/* One {"name","dtype","shape"} entry of a graph_load or graph_info result. */
static int graph_io_parse(json_t *e, struct graph_io_desc *io)
{
        json_t *name = json_object_get(e, "name"), *dtype = json_object_get(e, "dtype");
        json_t *shape = json_object_get(e, "shape");

        if (!json_is_string(name) || !json_is_integer(dtype) || json_integer_value(dtype) < 0 ||
            json_integer_value(dtype) > 255 || !(json_is_null(shape) || json_is_array(shape)) ||
            json_array_size(shape) > NPU_MAX_DIMS)
                return -1;
        io->dtype = (int)json_integer_value(dtype);
        io->ndim = json_is_null(shape) ? -1 : (int)json_array_size(shape);
        for (int d = 0; d < io->ndim; d++) {
                json_t *x = json_array_get(shape, (size_t)d);
                if (!json_is_integer(x))
                        return -1;
                io->dims[d] = json_integer_value(x) < 0 ? -1 : (int64_t)json_integer_value(x);
        }
        io->name = strdup(json_string_value(name));
        return io->name ? 0 : -1;
}

/* 0, -1 for a malformed result, -2 out of memory; no message (npu_graph_load succeeds
 * without a description). */
static int graph_desc_parse(uint32_t id, json_t *res, struct graph_desc **ret)
{
        json_t *lists[2] = { json_object_get(res, "inputs"), json_object_get(res, "outputs") };
        struct graph_desc *d;
        size_t n;

        if (!json_is_array(lists[0]) || !json_is_array(lists[1]) ||
            (n = json_array_size(lists[0]) + json_array_size(lists[1])) > PROTO_REC_MAX_GRAPH_TENSORS)
                return -1;
        d = calloc(1, sizeof(*d));
        if (d)
                d->io = calloc(n ? n : 1, sizeof(*d->io));
        if (!d || !d->io) {
                free(d);
                return -2;
        }
        d->id = id;
        for (int l = 0; l < 2; l++)
                for (size_t i = 0; i < json_array_size(lists[l]); i++) {
                        if (graph_io_parse(json_array_get(lists[l], i), &d->io[d->nin + d->nout]) < 0) {
                                free(d->io[d->nin + d->nout].name);
                                graph_desc_free(d);
                                return -1;
                        }
                        if (l)
                                d->nout++;
                        else
                                d->nin++;
                }
        *ret = d;
        return 0;
}

static struct graph_desc *graph_desc_find_locked(npu_context_t *ctx, uint32_t id)
{
        for (struct graph_desc *d = ctx->graphs; d; d = d->next)
                if (d->id == id)
                        return d;
        return NULL;
}

/* Keep the description of graph id from a graph_load or graph_info result, replacing an
 * older one (a handle of an unloaded graph). Nothing is kept when the result is unusable. */
static int graph_desc_store(npu_context_t *ctx, uint32_t id, json_t *res)
{
        struct graph_desc *d, **pp;
        int rc = graph_desc_parse(id, res, &d);

        if (rc < 0)
                return rc;
        pthread_mutex_lock(&ctx->mu);
        for (pp = &ctx->graphs; *pp && (*pp)->id != id; pp = &(*pp)->next)
                ;
        if (*pp) {
                struct graph_desc *old = *pp;
                d->next = old->next;
                *pp = d;
                graph_desc_free(old);
        } else {
                d->next = ctx->graphs;
                ctx->graphs = d;
        }
        npu_ctx_unlock(ctx);
        return 0;
}

static void graph_desc_drop(npu_context_t *ctx, uint32_t id)
{
        struct graph_desc *d = NULL;

        pthread_mutex_lock(&ctx->mu);
        for (struct graph_desc **pp = &ctx->graphs; *pp; pp = &(*pp)->next)
                if ((*pp)->id == id) {
                        d = *pp;
                        *pp = d->next;
                        break;
                }
        npu_ctx_unlock(ctx);
        graph_desc_free(d);
}

/* On success ctx->mu is held and *ret is the graph's description (fetched with graph_info
 * the first time); the caller copies what it needs and unlocks. */
static npu_status_t graph_desc_lock(npu_context_t *ctx, npu_graph_t graph, const char *fn,
                                    struct graph_desc **ret)
{
        json_t *res = NULL;
        npu_status_t st;
        int rc;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "%s: NULL context", fn);
        pthread_mutex_lock(&ctx->mu);
        if ((*ret = graph_desc_find_locked(ctx, graph.id)))
                return NPU_OK;
        npu_ctx_unlock(ctx);
        st = npu_call(ctx, "graph_info", json_pack("{s:I}", "graph", (json_int_t)graph.id), &res);
        if (st != NPU_OK)
                return st;
        rc = graph_desc_store(ctx, graph.id, res);
        json_decref(res);
        if (rc < 0)
                return rc == -2 ? fail(NPU_ERR_SYSTEM, "%s: out of memory", fn)
                                : fail(NPU_ERR_PROTOCOL, "%s: graph_info reply lacks valid 'inputs' and 'outputs'", fn);
        pthread_mutex_lock(&ctx->mu);
        if ((*ret = graph_desc_find_locked(ctx, graph.id)))
                return NPU_OK;
        npu_ctx_unlock(ctx); /* unloaded meanwhile by another thread */
        return fail(NPU_ERR_BAD_HANDLE, "%s: graph %u was unloaded", fn, graph.id);
}

NPU_EXPORT npu_status_t npu_graph_io_count(npu_context_t *ctx, npu_graph_t graph, int *ret_ninputs,
                                           int *ret_noutputs)
{
        struct graph_desc *d;
        npu_status_t st = graph_desc_lock(ctx, graph, "npu_graph_io_count", &d);

        if (st != NPU_OK)
                return st;
        if (ret_ninputs)
                *ret_ninputs = d->nin;
        if (ret_noutputs)
                *ret_noutputs = d->nout;
        npu_ctx_unlock(ctx);
        return NPU_OK;
}

#define GRAPH_IO_SIZE_MAX 65536 /* a size beyond any version: an uninitialized field */

static npu_status_t graph_io_get(npu_context_t *ctx, npu_graph_t graph, int is_output, int index,
                                 npu_graph_io_t *ret)
{
        const char *fn = is_output ? "npu_graph_output" : "npu_graph_input";
        const struct graph_io_desc *io;
        struct graph_desc *d;
        npu_status_t st;
        size_t size, len, n;

        if (!ret)
                return fail(NPU_ERR_INVALID, "%s: NULL argument", fn);
        size = ret->size;
        if (size < sizeof(*ret) || size > GRAPH_IO_SIZE_MAX)
                return fail(NPU_ERR_INVALID, "%s: size is %zu, expected sizeof(npu_graph_io_t) = %zu",
                            fn, size, sizeof(*ret));
        st = graph_desc_lock(ctx, graph, fn, &d);
        if (st != NPU_OK)
                return st;
        if (index < 0 || index >= (is_output ? d->nout : d->nin)) {
                int count = is_output ? d->nout : d->nin;
                npu_ctx_unlock(ctx);
                return fail(NPU_ERR_OUT_OF_RANGE, "%s: graph %u has %d %s%s, no index %d", fn, graph.id,
                            count, is_output ? "output" : "input", count == 1 ? "" : "s", index);
        }
        io = &d->io[is_output ? d->nin + index : index];
        memset(ret, 0, size);
        ret->size = size;
        len = strlen(io->name);
        n = len < sizeof(ret->name) ? len : sizeof(ret->name) - 1;
        while (n < len && n > 0 && ((unsigned char)io->name[n] & 0xC0) == 0x80)
                n--; /* cut on a UTF-8 character boundary */
        memcpy(ret->name, io->name, n);
        ret->name_len = len;
        ret->dtype = (npu_dtype_t)io->dtype;
        ret->ndim = io->ndim;
        for (int k = 0; k < io->ndim; k++)
                ret->dims[k] = io->dims[k];
        npu_ctx_unlock(ctx);
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_graph_input(npu_context_t *ctx, npu_graph_t graph, int index,
                                        npu_graph_io_t *ret_io)
{
        return graph_io_get(ctx, graph, 0, index, ret_io);
}

NPU_EXPORT npu_status_t npu_graph_output(npu_context_t *ctx, npu_graph_t graph, int index,
                                         npu_graph_io_t *ret_io)
{
        return graph_io_get(ctx, graph, 1, index, ret_io);
}

static npu_status_t graph_find(npu_context_t *ctx, npu_graph_t graph, int is_output, const char *name,
                               int *ret_index)
{
        const char *fn = is_output ? "npu_graph_find_output" : "npu_graph_find_input";
        struct graph_desc *d;
        npu_status_t st;

        if (!name || !ret_index)
                return fail(NPU_ERR_INVALID, "%s: NULL argument", fn);
        st = graph_desc_lock(ctx, graph, fn, &d);
        if (st != NPU_OK)
                return st;
        for (int i = 0; i < (is_output ? d->nout : d->nin); i++)
                if (strcmp(d->io[is_output ? d->nin + i : i].name, name) == 0) {
                        *ret_index = i;
                        npu_ctx_unlock(ctx);
                        return NPU_OK;
                }
        npu_ctx_unlock(ctx);
        return fail(NPU_ERR_INVALID, "%s: graph %u has no %s named '%.200s'", fn, graph.id,
                    is_output ? "output" : "input", name);
}

NPU_EXPORT npu_status_t npu_graph_find_input(npu_context_t *ctx, npu_graph_t graph, const char *name,
                                             int *ret_index)
{
        return graph_find(ctx, graph, 0, name, ret_index);
}

NPU_EXPORT npu_status_t npu_graph_find_output(npu_context_t *ctx, npu_graph_t graph, const char *name,
                                              int *ret_index)
{
        return graph_find(ctx, graph, 1, name, ret_index);
}

static void shape_text(int ndim, const int64_t *dims, char *buf, size_t len)
{
        size_t off = (size_t)snprintf(buf, len, "[");

        for (int i = 0; i < ndim && off < len; i++)
                off += dims[i] < 0 ? (size_t)snprintf(buf + off, len - off, "%s?", i ? "," : "")
                                   : (size_t)snprintf(buf + off, len - off, "%s%lld", i ? "," : "",
                                                      (long long)dims[i]);
        if (off < len)
                snprintf(buf + off, len - off, "]");
}

static const char *dtype_text(int dtype, char *buf, size_t len)
{
        const char *n = proto_dtype_name(dtype);

        if (n)
                snprintf(buf, len, "%s", n);
        else
                snprintf(buf, len, "dtype %d", dtype);
        return buf;
}

/* The checks npud makes of a run's inputs when it receives it (graph_check_inputs), made
 * first against the graph's description so that npu_graph_run itself fails and names the
 * input. Without a description (none could be kept) npud's checks alone apply. */
static npu_status_t graph_run_check(npu_context_t *ctx, npu_graph_t graph, const npu_tensor_t *inputs,
                                    int ninputs, int noutputs)
{
        char s1[192], s2[192], d1[24], d2[24];
        npu_status_t st = NPU_OK;
        struct graph_desc *d;

        pthread_mutex_lock(&ctx->mu);
        d = graph_desc_find_locked(ctx, graph.id);
        if (d && (ninputs != d->nin || noutputs != d->nout))
                st = fail(NPU_ERR_INVALID, "npu_graph_run: the graph has %d inputs and %d outputs, %d and %d bound",
                          d->nin, d->nout, ninputs, noutputs);
        for (int i = 0; d && st == NPU_OK && i < ninputs; i++) {
                const struct graph_io_desc *io = &d->io[i];
                const npu_tensor_t *t = &inputs[i];
                int ok = io->ndim < 0 || t->ndim == io->ndim;

                for (int k = 0; ok && k < io->ndim; k++)
                        ok = io->dims[k] < 0 || io->dims[k] == t->dims[k];
                if (io->dtype && (int)t->dtype != io->dtype)
                        st = fail(NPU_ERR_SHAPE, "npu_graph_run: input '%.200s' is %s but bound as %s", io->name,
                                  dtype_text(io->dtype, d1, sizeof(d1)), dtype_text((int)t->dtype, d2, sizeof(d2)));
                else if (!ok) {
                        shape_text(io->ndim, io->dims, s1, sizeof(s1));
                        shape_text(t->ndim, t->dims, s2, sizeof(s2));
                        st = fail(NPU_ERR_SHAPE, "npu_graph_run: input '%.200s' has shape %s but is bound as %s",
                                  io->name, s1, s2);
                }
        }
        npu_ctx_unlock(ctx);
        return st;
}

/* ---- graphs ---- */

/* The model goes to npud in a memfd sealed against every change, so npud can decode it in
 * place while this process cannot alter it. */
NPU_EXPORT npu_status_t npu_graph_load(npu_context_t *ctx, int device, const void *model, size_t size,
                                       npu_graph_t *ret_graph)
{
        return npu_graph_load_with(ctx, device, model, size, NULL, ret_graph);
}

NPU_EXPORT npu_status_t npu_graph_load_with(npu_context_t *ctx, int device, const void *model, size_t size,
                                            const npu_load_options_t *opts, npu_graph_t *ret_graph)
{
        const char *fn = opts ? "npu_graph_load_with" : "npu_graph_load";
        json_t *res = NULL, *params;
        npu_status_t st;
        size_t done = 0;
        int fd;

        if (!ctx || !model || !ret_graph || device < 0 || size == 0 || size > INT64_MAX)
                return fail(NPU_ERR_INVALID, "%s: invalid argument", fn);
        /* a size past any version is an uninitialized field, like npu_run_options_t's */
        if (opts && (opts->size < offsetof(npu_load_options_t, accumulate) + sizeof(opts->accumulate) ||
                     opts->size > 65536))
                return fail(NPU_ERR_INVALID, "%s: options size %zu is not that of an npu_load_options_t", fn,
                            opts->size);
        static const char *const acc_names[] = { "float32", "float64", "mixed" };
        static const int acc_version[] = { 0, PROTO_VERSION_ACCUMULATE, PROTO_VERSION_MIXED };
        if (opts && (opts->accumulate < NPU_ACCUMULATE_FLOAT32 || opts->accumulate > NPU_ACCUMULATE_MIXED))
                return fail(NPU_ERR_INVALID, "%s: accumulate %d is not NPU_ACCUMULATE_FLOAT32, _FLOAT64 or _MIXED",
                            fn, opts->accumulate);
        int acc = opts ? opts->accumulate : NPU_ACCUMULATE_FLOAT32;
        if (ctx->version < acc_version[acc])
                return fail(NPU_ERR_VERSION, "%s: %s accumulation needs npud protocol %d (this npud speaks %d)", fn,
                            acc_names[acc], acc_version[acc], ctx->version);
        fd = memfd_create("npu-graph", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return fail(NPU_ERR_SYSTEM, "memfd_create: %s", strerror(errno));
        while (done < size) {
                ssize_t n = write(fd, (const uint8_t *)model + done, size - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        st = fail(NPU_ERR_SYSTEM, "%s: writing %zu bytes: %s", fn, size,
                                  n < 0 ? strerror(errno) : "short write");
                        close(fd);
                        return st;
                }
                done += (size_t)n;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
                st = fail(NPU_ERR_SYSTEM, "%s: sealing the model: %s", fn, strerror(errno));
                close(fd);
                return st;
        }
        params = json_pack("{s:i, s:i}", "device", device, "fd", 0);
        /* named whenever the caller chose (npud's graph_accumulate may default to float64),
         * and only to an npud that takes it: an older one refuses the parameter, and sums
         * in float32 anyway */
        if (params && opts && ctx->version >= PROTO_VERSION_ACCUMULATE)
                json_object_set_new(params, "accumulate", json_string(acc_names[acc]));
        st = npu_call_fds(ctx, "graph_load", params, &fd, 1, &res);
        close(fd);
        if (st == NPU_OK)
                st = npu_get_u32(res, "graph", &ret_graph->id);
        if (st == NPU_OK && graph_desc_store(ctx, ret_graph->id, res) < 0)
                graph_desc_drop(ctx, ret_graph->id); /* fetched with graph_info when needed */
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_graph_unload(npu_context_t *ctx, npu_graph_t graph)
{
        npu_status_t st;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_graph_unload: NULL context");
        npu_hostrun_graph_drop(ctx, graph.id); /* npu_graph_run_host's buffers, before the graph */
        st = npu_call(ctx, "graph_unload", json_pack("{s:I}", "graph", (json_int_t)graph.id), NULL);
        graph_desc_drop(ctx, graph.id); /* unloaded, or no graph of this session */
        return st;
}

NPU_EXPORT npu_status_t npu_graph_info(npu_context_t *ctx, npu_graph_t graph, char **ret_json)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !ret_json)
                return fail(NPU_ERR_INVALID, "npu_graph_info: NULL argument");
        st = npu_call(ctx, "graph_info", json_pack("{s:I}", "graph", (json_int_t)graph.id), &res);
        if (st != NPU_OK)
                return st;
        *ret_json = json_dumps(res, JSON_COMPACT);
        json_decref(res);
        return *ret_json ? NPU_OK : fail(NPU_ERR_SYSTEM, "out of memory");
}

#define RUN_OPTIONS_SIZE_MAX 65536 /* a size beyond any version: an uninitialized field */

NPU_EXPORT npu_status_t npu_graph_run(npu_context_t *ctx, npu_stream_t stream, npu_graph_t graph,
                                      const npu_tensor_t *inputs, int ninputs,
                                      const npu_tensor_t *outputs, int noutputs, uint64_t *ret_task)
{
        return npu_graph_run_with(ctx, stream, graph, inputs, ninputs, outputs, noutputs, NULL, ret_task);
}

/* The options checked here as npud checks them, so that a bad option fails the call. */
static npu_status_t run_options_check(npu_context_t *ctx, const char *fn, const npu_run_options_t *opts,
                                      size_t *ret_taglen)
{
        size_t taglen = 0;

        if (opts->size < NPU_SIZE_V1(npu_run_options_t, flags) || opts->size > RUN_OPTIONS_SIZE_MAX)
                return fail(NPU_ERR_INVALID, "%s: options size is %zu, expected sizeof(npu_run_options_t) = %zu",
                            fn, opts->size, sizeof(*opts));
        if (opts->flags & ~(unsigned)NPU_RUN_FLEX_OUTPUTS)
                return fail(NPU_ERR_INVALID, "%s: unknown flags 0x%x", fn,
                            opts->flags & ~(unsigned)NPU_RUN_FLEX_OUTPUTS);
        if (opts->deadline_us > 3600ull * 1000000)
                return fail(NPU_ERR_INVALID, "%s: deadline of %llu us is over one hour", fn,
                            (unsigned long long)opts->deadline_us);
        if (opts->tag) {
                taglen = strnlen(opts->tag, NPU_RUN_TAG_MAX + 1);
                if (taglen > NPU_RUN_TAG_MAX)
                        return fail(NPU_ERR_INVALID, "%s: the tag is longer than %d bytes", fn, NPU_RUN_TAG_MAX);
                for (size_t i = 0; i < taglen; i++)
                        if (opts->tag[i] < 0x20 || opts->tag[i] > 0x7e)
                                return fail(NPU_ERR_INVALID, "%s: the tag holds a byte that is not printable ASCII (at %zu)",
                                            fn, i);
        }
        if (ctx->version < PROTO_VERSION_RUN_OPT)
                return fail(NPU_ERR_VERSION, "%s: npud speaks protocol version %d; run options need version %d",
                            fn, ctx->version, PROTO_VERSION_RUN_OPT);
        *ret_taglen = taglen;
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_graph_run_with(npu_context_t *ctx, npu_stream_t stream, npu_graph_t graph,
                                           const npu_tensor_t *inputs, int ninputs,
                                           const npu_tensor_t *outputs, int noutputs,
                                           const npu_run_options_t *opts, uint64_t *ret_task)
{
        const char *fn = opts ? "npu_graph_run_with" : "npu_graph_run";
        struct proto_rec *rec;
        npu_status_t st;
        size_t taglen = 0;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "%s: NULL context", fn);
        if (opts && (st = run_options_check(ctx, fn, opts, &taglen)) != NPU_OK)
                return st;
        if (ninputs < 0 || noutputs < 0 || ninputs + noutputs > PROTO_REC_MAX_GRAPH_TENSORS ||
            (ninputs && !inputs) || (noutputs && !outputs))
                return fail(NPU_ERR_INVALID, "%s: bad number of inputs and outputs (at most %d together)",
                            fn, PROTO_REC_MAX_GRAPH_TENSORS);
        /* The record holds 64 tensors: keep it off the caller's stack. */
        rec = calloc(1, sizeof(*rec));
        if (!rec)
                return fail(NPU_ERR_SYSTEM, "%s: out of memory", fn);
        rec->type = opts ? PROTO_REC_GRAPH_RUN_OPT : PROTO_REC_GRAPH_RUN;
        rec->stream = stream.id;
        rec->graph.graph = graph.id;
        rec->graph.nin = (uint16_t)ninputs;
        rec->graph.nout = (uint16_t)noutputs;
        if (opts) {
                rec->graph.flags = opts->flags;
                rec->graph.deadline_us = opts->deadline_us;
                if (taglen)
                        memcpy(rec->graph.tag, opts->tag, taglen);
        }
        for (int i = 0; i < ninputs + noutputs; i++) {
                const npu_tensor_t *t = i < ninputs ? &inputs[i] : &outputs[i - ninputs];
                if (t->ndim < 0 || t->ndim > NPU_MAX_DIMS) {
                        free(rec);
                        return fail(NPU_ERR_INVALID, "%s: %s %d has %d dimensions", fn,
                                    i < ninputs ? "input" : "output", i < ninputs ? i : i - ninputs, t->ndim);
                }
                rec->graph.t[i].buf = t->buf.id;
                rec->graph.t[i].dtype = (uint8_t)t->dtype;
                rec->graph.t[i].ndim = (uint8_t)t->ndim;
                rec->graph.t[i].offset = t->offset;
                for (int d = 0; d < t->ndim; d++)
                        rec->graph.t[i].dims[d] = t->dims[d];
        }
        st = graph_run_check(ctx, graph, inputs, ninputs, noutputs);
        if (st == NPU_OK)
                st = npu_submit(ctx, rec, ret_task);
        free(rec);
        return st;
}

NPU_EXPORT npu_status_t npu_graph_run_output_shape(npu_context_t *ctx, npu_stream_t stream, uint64_t task,
                                                   int index, npu_tensor_t *io)
{
        json_t *res = NULL, *outs, *o, *dtype, *shape;
        npu_status_t st;
        size_t n;

        if (!ctx || !io)
                return fail(NPU_ERR_INVALID, "npu_graph_run_output_shape: NULL argument");
        if (index < 0)
                return fail(NPU_ERR_OUT_OF_RANGE, "npu_graph_run_output_shape: no output %d", index);
        st = npu_call(ctx, "graph_run_shapes",
                      json_pack("{s:I, s:I}", "stream", (json_int_t)stream.id, "task", (json_int_t)task), &res);
        if (st != NPU_OK)
                return st;
        outs = json_object_get(res, "outputs");
        n = json_array_size(outs);
        if (!json_is_array(outs))
                st = fail(NPU_ERR_PROTOCOL, "npu_graph_run_output_shape: reply lacks 'outputs'");
        else if ((size_t)index >= n)
                st = fail(NPU_ERR_OUT_OF_RANGE, "npu_graph_run_output_shape: the run has %zu output%s, no index %d",
                          n, n == 1 ? "" : "s", index);
        if (st != NPU_OK) {
                json_decref(res);
                return st;
        }
        o = json_array_get(outs, (size_t)index);
        dtype = json_object_get(o, "dtype");
        shape = json_object_get(o, "shape");
        if (!json_is_integer(dtype) || !json_is_array(shape) || json_array_size(shape) > NPU_MAX_DIMS) {
                json_decref(res);
                return fail(NPU_ERR_PROTOCOL, "npu_graph_run_output_shape: malformed reply");
        }
        io->dtype = (npu_dtype_t)json_integer_value(dtype);
        io->ndim = (int)json_array_size(shape);
        for (int d = 0; d < io->ndim; d++)
                io->dims[d] = json_integer_value(json_array_get(shape, (size_t)d));
        json_decref(res);
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_task_cancel(npu_context_t *ctx, npu_stream_t stream, uint64_t task)
{
        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_task_cancel: NULL context");
        /* a call sends the batch first: a task still in it reaches npud before the cancel */
        return npu_call(ctx, "task_cancel",
                        json_pack("{s:I, s:I}", "stream", (json_int_t)stream.id, "task", (json_int_t)task), NULL);
}

NPU_EXPORT npu_status_t npu_graph_export(npu_context_t *ctx, npu_graph_t graph, char ret_token[NPU_TOKEN_LEN])
{
        json_t *res = NULL, *tok;
        npu_status_t st;

        if (!ctx || !ret_token)
                return fail(NPU_ERR_INVALID, "npu_graph_export: NULL argument");
        st = npu_call(ctx, "graph_export", json_pack("{s:I}", "graph", (json_int_t)graph.id), &res);
        if (st == NPU_OK) {
                tok = json_object_get(res, "token");
                if (!json_is_string(tok) || strlen(json_string_value(tok)) != NPU_TOKEN_LEN - 1)
                        st = fail(NPU_ERR_PROTOCOL, "graph_export: reply lacks a token");
                else
                        memcpy(ret_token, json_string_value(tok), NPU_TOKEN_LEN);
        }
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_graph_import(npu_context_t *ctx, const char *token, npu_graph_t *ret_graph)
{
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !token || !ret_graph)
                return fail(NPU_ERR_INVALID, "npu_graph_import: NULL argument");
        st = npu_call(ctx, "graph_import", json_pack("{s:s}", "token", token), &res);
        if (st == NPU_OK)
                st = npu_get_u32(res, "graph", &ret_graph->id);
        if (st == NPU_OK && graph_desc_store(ctx, ret_graph->id, res) < 0)
                graph_desc_drop(ctx, ret_graph->id);
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_graph_revoke(npu_context_t *ctx, const char *token)
{
        if (!ctx || !token)
                return fail(NPU_ERR_INVALID, "npu_graph_revoke: NULL argument");
        return npu_call(ctx, "graph_revoke", json_pack("{s:s}", "token", token), NULL);
}
