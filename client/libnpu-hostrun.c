/* libnpu one-call path: npu_graph_run_host runs a loaded graph on tensors in ordinary host
 * memory and returns the outputs in host memory.
 *
 * Each graph used this way gets, on first use, a pool of slots. A slot is what one run in
 * flight needs: its own stream (so a failure of one caller's run is reported to that caller
 * only, see npu_stream_synchronize), one device buffer holding the inputs then the outputs
 * back to back, and a host region of the same size mapped by both sides. A call takes a free
 * slot (or makes one when every slot is busy: as many slots as calls ever ran at once), copies
 * the inputs into the region, queues one H2D copy, the run and one D2H copy on the slot's
 * stream, synchronizes that stream and copies the outputs out. Nothing is allocated per call
 * once the slots are big enough, and no lock is held across the run: several threads on one
 * context and one graph run at once. npu_graph_unload and npu_disconnect release the slots. */
#include "client/libnpu-internal.h"

#define HR_ALIGN 64u          /* each tensor's offset in a slot */
#define HR_MIN_BYTES (4u << 10)

struct hr_slot {
        npu_stream_t stream;
        npu_buffer_t buf;
        npu_region_t region;
        void *host;           /* the region's mapping */
        uint64_t cap;         /* bytes of buf and of the region; 0 before the first run */
        struct hr_slot *next; /* free list */
};

struct hr_graph {
        uint32_t id;
        int device;
        int nin, nout;
        npu_graph_io_t *io;   /* inputs, then outputs */
        int users;            /* calls holding the graph (hostrun_mu) */
        int dead;             /* unloaded: the last user frees it */
        struct hr_slot *free_slots;
        struct hr_slot **all; /* every slot, to release them */
        int nall, all_cap;
        struct hr_graph *next;
};

struct npu_hostrun {
        pthread_mutex_t mu;
        struct hr_graph *graphs;
        uint64_t drops;       /* graphs dropped so far: a state made across a drop is stale */
};

static pthread_mutex_t hr_init_mu = PTHREAD_MUTEX_INITIALIZER;

/* The context's hostrun state, made at the first call (contexts that never use this path
 * carry nothing). */
static struct npu_hostrun *hr_state(npu_context_t *ctx)
{
        struct npu_hostrun *h = __atomic_load_n(&ctx->hostrun, __ATOMIC_ACQUIRE);

        if (h)
                return h;
        pthread_mutex_lock(&hr_init_mu);
        h = ctx->hostrun;
        if (!h && (h = calloc(1, sizeof(*h)))) {
                pthread_mutex_init(&h->mu, NULL);
                __atomic_store_n(&ctx->hostrun, h, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&hr_init_mu);
        return h;
}

/* Gives the slot's daemon objects back. Errors are ignored: the graph is going away, and a
 * lost connection has released them anyway. */
static void slot_release(npu_context_t *ctx, struct hr_slot *s, int talk)
{
        if (talk) {
                if (s->cap) {
                        npu_free(ctx, s->buf);
                        npu_host_free(ctx, s->region);
                }
                npu_stream_destroy(ctx, s->stream);
        }
        free(s);
}

static void hr_graph_free(npu_context_t *ctx, struct hr_graph *g, int talk)
{
        for (int i = 0; i < g->nall; i++)
                slot_release(ctx, g->all[i], talk);
        free(g->all);
        free(g->io);
        free(g);
}

/* The graph's description and device, fetched outside the lock (round trips). */
static npu_status_t hr_graph_new(npu_context_t *ctx, npu_graph_t graph, struct hr_graph **ret)
{
        json_t *res = NULL, *dev;
        struct hr_graph *g;
        npu_status_t st;
        int nin, nout;

        st = npu_graph_io_count(ctx, graph, &nin, &nout);
        if (st != NPU_OK)
                return st;
        st = npu_call(ctx, "graph_info", json_pack("{s:I}", "graph", (json_int_t)graph.id), &res);
        if (st != NPU_OK)
                return st;
        dev = json_object_get(res, "device");
        if (!json_is_integer(dev) || json_integer_value(dev) < 0 || json_integer_value(dev) > INT32_MAX) {
                json_decref(res);
                return fail(NPU_ERR_PROTOCOL, "npu_graph_run_host: graph_info reply lacks 'device'");
        }
        g = calloc(1, sizeof(*g));
        if (g)
                g->io = calloc((size_t)(nin + nout) + 1, sizeof(*g->io));
        if (!g || !g->io) {
                json_decref(res);
                free(g);
                return fail(NPU_ERR_SYSTEM, "npu_graph_run_host: out of memory");
        }
        g->id = graph.id;
        g->device = (int)json_integer_value(dev);
        g->nin = nin;
        g->nout = nout;
        json_decref(res);
        for (int i = 0; i < nin + nout && st == NPU_OK; i++) {
                g->io[i].size = sizeof(g->io[i]);
                st = i < nin ? npu_graph_input(ctx, graph, i, &g->io[i])
                             : npu_graph_output(ctx, graph, i - nin, &g->io[i]);
        }
        if (st != NPU_OK) {
                hr_graph_free(ctx, g, 0);
                return st;
        }
        *ret = g;
        return NPU_OK;
}

/* The graph's state with one more user. */
static npu_status_t hr_graph_get(npu_context_t *ctx, struct npu_hostrun *h, npu_graph_t graph,
                                 struct hr_graph **ret)
{
        struct hr_graph *g, *made = NULL;
        uint64_t drops = 0;
        npu_status_t st;

        for (;;) {
                pthread_mutex_lock(&h->mu);
                for (g = h->graphs; g && g->id != graph.id; g = g->next)
                        ;
                /* A graph unloaded while its description was fetched must not get a state
                 * (its slots would hold device memory until disconnect): fetch again, which
                 * then fails with NPU_ERR_BAD_HANDLE. */
                if (!g && made && h->drops == drops) {
                        g = made;
                        made = NULL;
                        g->next = h->graphs;
                        h->graphs = g;
                }
                if (g)
                        g->users++;
                drops = h->drops;
                pthread_mutex_unlock(&h->mu);
                if (made) { /* another thread stored the graph meanwhile, or a drop came */
                        hr_graph_free(ctx, made, 0);
                        made = NULL;
                }
                if (g) {
                        *ret = g;
                        return NPU_OK;
                }
                st = hr_graph_new(ctx, graph, &made);
                if (st != NPU_OK)
                        return st;
        }
}

static void hr_graph_put(npu_context_t *ctx, struct npu_hostrun *h, struct hr_graph *g)
{
        int last;

        pthread_mutex_lock(&h->mu);
        last = --g->users == 0 && g->dead;
        pthread_mutex_unlock(&h->mu);
        if (last)
                hr_graph_free(ctx, g, 1);
}

static npu_status_t slot_take(npu_context_t *ctx, struct npu_hostrun *h, struct hr_graph *g,
                              struct hr_slot **ret)
{
        struct hr_slot *s;
        npu_status_t st;

        pthread_mutex_lock(&h->mu);
        if ((s = g->free_slots))
                g->free_slots = s->next;
        pthread_mutex_unlock(&h->mu);
        if (s) {
                *ret = s;
                return NPU_OK;
        }
        s = calloc(1, sizeof(*s));
        if (!s)
                return fail(NPU_ERR_SYSTEM, "npu_graph_run_host: out of memory");
        st = npu_stream_create(ctx, g->device, 0, &s->stream);
        if (st != NPU_OK) {
                free(s);
                return st;
        }
        pthread_mutex_lock(&h->mu);
        if (g->nall == g->all_cap) {
                int cap = g->all_cap ? 2 * g->all_cap : 4;
                struct hr_slot **na = realloc(g->all, (size_t)cap * sizeof(*na));
                if (na) {
                        g->all = na;
                        g->all_cap = cap;
                }
        }
        if (g->nall < g->all_cap)
                g->all[g->nall++] = s;
        else
                s = NULL;
        pthread_mutex_unlock(&h->mu);
        if (!s)
                return fail(NPU_ERR_SYSTEM, "npu_graph_run_host: out of memory");
        *ret = s;
        return NPU_OK;
}

static void slot_put(struct npu_hostrun *h, struct hr_graph *g, struct hr_slot *s)
{
        pthread_mutex_lock(&h->mu);
        s->next = g->free_slots;
        g->free_slots = s;
        pthread_mutex_unlock(&h->mu);
}

/* Room for bytes in the slot: a larger buffer and region replace the old ones. */
static npu_status_t slot_reserve(npu_context_t *ctx, const struct hr_graph *g, struct hr_slot *s,
                                 uint64_t bytes)
{
        npu_status_t st;
        uint64_t cap;

        if (bytes <= s->cap)
                return NPU_OK;
        cap = bytes < HR_MIN_BYTES ? HR_MIN_BYTES : (bytes + 4095) & ~(uint64_t)4095;
        if (s->cap) {
                npu_free(ctx, s->buf);
                npu_host_free(ctx, s->region);
                s->cap = 0;
        }
        st = npu_malloc(ctx, g->device, cap, &s->buf);
        if (st != NPU_OK)
                return st;
        st = npu_host_alloc(ctx, cap, &s->host, &s->region);
        if (st != NPU_OK) {
                npu_free(ctx, s->buf);
                return st;
        }
        s->cap = cap;
        return NPU_OK;
}

static void shape_str(int ndim, const int64_t *dims, char *buf, size_t len)
{
        size_t off = (size_t)snprintf(buf, len, "[");

        for (int i = 0; i < ndim && off < len; i++)
                off += dims[i] < 0 ? (size_t)snprintf(buf + off, len - off, "%s?", i ? "," : "")
                                   : (size_t)snprintf(buf + off, len - off, "%s%lld", i ? "," : "",
                                                      (long long)dims[i]);
        if (off < len)
                snprintf(buf + off, len - off, "]");
}

static const char *dtype_str(int dtype, char *buf, size_t len)
{
        const char *n = proto_dtype_name(dtype);

        if (n)
                return n;
        snprintf(buf, len, "dtype %d", dtype);
        return buf;
}

static int reserved_zero(const npu_host_tensor_t *t)
{
        for (size_t i = 0; i < sizeof(t->reserved) / sizeof(t->reserved[0]); i++)
                if (t->reserved[i])
                        return 0;
        return 1;
}

/* Bytes of a tensor of dtype and shape; 0 and a message when it has none or overflows. */
static uint64_t tensor_bytes(int dtype, int ndim, const int64_t *dims)
{
        uint64_t n = proto_dtype_size(dtype);

        for (int k = 0; k < ndim && n; k++) {
                if (dims[k] < 0 || (dims[k] && n > UINT64_MAX / (uint64_t)dims[k] / 2))
                        return UINT64_MAX;
                n *= (uint64_t)dims[k];
        }
        return n;
}

#define FN "npu_graph_run_host"

/* Checks each input against the graph's description and fills the outputs' dtype and
 * shape; offsets[] receives each tensor's place in the slot, *ret_total the slot's size. */
static npu_status_t hr_plan(const struct hr_graph *g, const npu_host_tensor_t *inputs,
                            npu_host_tensor_t *outputs, uint64_t *offsets, uint64_t *ret_total)
{
        char s1[192], s2[192], d1[24], d2[24];
        uint64_t off = 0;

        for (int i = 0; i < g->nin + g->nout; i++) {
                const npu_graph_io_t *io = &g->io[i];
                int is_out = i >= g->nin, idx = is_out ? i - g->nin : i;
                const char *what = is_out ? "output" : "input";
                const npu_host_tensor_t *t = is_out ? &outputs[idx] : &inputs[idx];
                int dtype, ndim;
                int64_t dims[NPU_MAX_DIMS];
                uint64_t need;

                if (!reserved_zero(t))
                        return fail(NPU_ERR_INVALID, FN ": %s %d '%.200s': reserved members must be zero", what,
                                    idx, io->name);
                if (!t->data && t->bytes)
                        return fail(NPU_ERR_INVALID, FN ": %s %d '%.200s': data is NULL", what, idx, io->name);
                if (!is_out) {
                        int ok;
                        if (t->ndim < 0 || t->ndim > NPU_MAX_DIMS)
                                return fail(NPU_ERR_INVALID, FN ": input %d '%.200s' has %d dimensions (0 to %d)",
                                            idx, io->name, t->ndim, NPU_MAX_DIMS);
                        if (io->dtype && (int)t->dtype != (int)io->dtype)
                                return fail(NPU_ERR_SHAPE, FN ": input %d '%.200s' is %s but given as %s", idx,
                                            io->name, dtype_str(io->dtype, d1, sizeof(d1)),
                                            dtype_str((int)t->dtype, d2, sizeof(d2)));
                        ok = io->ndim < 0 || t->ndim == io->ndim;
                        for (int k = 0; ok && k < io->ndim; k++)
                                ok = io->dims[k] < 0 || io->dims[k] == t->dims[k];
                        for (int k = 0; ok && k < t->ndim; k++)
                                ok = t->dims[k] >= 0;
                        if (!ok) {
                                shape_str(io->ndim, io->dims, s1, sizeof(s1));
                                shape_str(t->ndim, t->dims, s2, sizeof(s2));
                                return fail(NPU_ERR_SHAPE, FN ": input %d '%.200s' has shape %s but is given as %s",
                                            idx, io->name, s1, s2);
                        }
                        dtype = (int)t->dtype;
                        ndim = t->ndim;
                        memcpy(dims, t->dims, sizeof(dims));
                } else {
                        /* From the description; what it leaves open, from the caller. */
                        dtype = io->dtype ? (int)io->dtype : (int)t->dtype;
                        ndim = io->ndim >= 0 ? io->ndim : t->ndim;
                        int ok = ndim >= 0 && ndim <= NPU_MAX_DIMS && (io->ndim < 0 || t->ndim == ndim ||
                                                                        t->ndim == 0);
                        for (int k = 0; ok && k < ndim; k++) {
                                dims[k] = io->ndim >= 0 && io->dims[k] >= 0 ? io->dims[k] : t->dims[k];
                                ok = dims[k] >= 0;
                        }
                        if (!ok || !proto_dtype_size(dtype)) {
                                shape_str(io->ndim, io->dims, s1, sizeof(s1));
                                return fail(NPU_ERR_SHAPE, FN ": output %d '%.200s' is %s %s in the graph: set outputs[%d]"
                                            ".dtype, .ndim and .dims to what the run computes", idx, io->name,
                                            io->dtype ? dtype_str(io->dtype, d1, sizeof(d1)) : "of open type",
                                            s1, idx);
                        }
                }
                if (dtype == NPU_STRING)
                        return fail(NPU_ERR_UNSUPPORTED, FN ": %s %d '%.200s' is a string tensor: use "
                                    "npu_graph_run with the encoding of docs/protocol.md", what, idx, io->name);
                need = tensor_bytes(dtype, ndim, dims);
                if (need == UINT64_MAX || (!proto_dtype_size(dtype)))
                        return fail(NPU_ERR_INVALID, FN ": %s %d '%.200s': bad dtype or size", what, idx, io->name);
                if (is_out ? t->bytes < need : t->bytes != need) {
                        shape_str(ndim, dims, s1, sizeof(s1));
                        return fail(NPU_ERR_INVALID, FN ": %s %d '%.200s' (%s %s) needs %llu bytes, %s has %llu",
                                    what, idx, io->name, dtype_str(dtype, d1, sizeof(d1)), s1,
                                    (unsigned long long)need, is_out ? "the buffer" : "the host tensor",
                                    (unsigned long long)t->bytes);
                }
                if (is_out) {
                        npu_host_tensor_t *o = &outputs[idx];
                        o->dtype = (npu_dtype_t)dtype;
                        o->ndim = ndim;
                        for (int k = 0; k < NPU_MAX_DIMS; k++)
                                o->dims[k] = k < ndim ? dims[k] : 0;
                }
                offsets[i] = off;
                if (need > INT64_MAX - off - HR_ALIGN)
                        return fail(NPU_ERR_INVALID, FN ": the tensors' sizes overflow");
                off += (need + HR_ALIGN - 1) & ~(uint64_t)(HR_ALIGN - 1);
        }
        *ret_total = off;
        return NPU_OK;
}

/* The copies and the run on the slot's stream, then its synchronize. */
static npu_status_t hr_run(npu_context_t *ctx, const struct hr_graph *g, struct hr_slot *s,
                           const npu_host_tensor_t *inputs, npu_host_tensor_t *outputs,
                           const uint64_t *offsets, uint64_t total)
{
        npu_tensor_t t[PROTO_REC_MAX_GRAPH_TENSORS];
        uint64_t in_end = g->nout ? offsets[g->nin] : total;
        npu_graph_t graph = { g->id };
        npu_status_t st = NPU_OK;
        int queued = 0;

        for (int i = 0; i < g->nin + g->nout; i++) {
                const npu_host_tensor_t *h = i < g->nin ? &inputs[i] : &outputs[i - g->nin];
                t[i].buf = s->buf;
                t[i].offset = offsets[i];
                t[i].dtype = h->dtype;
                t[i].ndim = h->ndim;
                memcpy(t[i].dims, h->dims, sizeof(t[i].dims));
                if (i < g->nin && h->bytes)
                        memcpy((uint8_t *)s->host + offsets[i], h->data, h->bytes);
        }
        if (in_end) {
                st = npu_memcpy_h2d_async(ctx, s->stream, s->buf, 0, s->region, 0, in_end, NULL);
                queued = st == NPU_OK;
        }
        if (st == NPU_OK) {
                st = npu_graph_run(ctx, s->stream, graph, t, g->nin, t + g->nin, g->nout, NULL);
                queued |= st == NPU_OK;
        }
        if (st == NPU_OK && total > in_end)
                st = npu_memcpy_d2h_async(ctx, s->stream, s->region, in_end, s->buf, in_end, total - in_end,
                                          NULL);
        if (st == NPU_OK)
                return npu_stream_synchronize(ctx, s->stream);
        if (queued) { /* drain what was queued, so the slot is idle again; keep the first error */
                char msg[sizeof(npu_tls_message)];
                memcpy(msg, npu_tls_message, sizeof(msg));
                npu_stream_synchronize(ctx, s->stream);
                memcpy(npu_tls_message, msg, sizeof(msg));
                npu_tls_task = 0;
        }
        return st;
}

NPU_EXPORT npu_status_t npu_graph_run_host(npu_context_t *ctx, npu_graph_t graph,
                                           const npu_host_tensor_t *inputs, int ninputs,
                                           npu_host_tensor_t *outputs, int noutputs)
{
        uint64_t offsets[PROTO_REC_MAX_GRAPH_TENSORS], total = 0;
        struct npu_hostrun *h;
        struct hr_slot *s = NULL;
        struct hr_graph *g;
        npu_status_t st;

        if (!ctx)
                return fail(NPU_ERR_INVALID, FN ": NULL context");
        if (ninputs < 0 || noutputs < 0 || (ninputs && !inputs) || (noutputs && !outputs))
                return fail(NPU_ERR_INVALID, FN ": %s", ninputs < 0 || noutputs < 0 ? "negative count"
                            : ninputs && !inputs ? "inputs is NULL" : "outputs is NULL");
        h = hr_state(ctx);
        if (!h)
                return fail(NPU_ERR_SYSTEM, FN ": out of memory");
        st = hr_graph_get(ctx, h, graph, &g);
        if (st != NPU_OK)
                return st;
        if (ninputs != g->nin || noutputs != g->nout ||
            g->nin + g->nout > PROTO_REC_MAX_GRAPH_TENSORS) {
                st = fail(NPU_ERR_INVALID, FN ": graph %u has %d input%s and %d output%s, %d and %d given",
                          graph.id, g->nin, g->nin == 1 ? "" : "s", g->nout, g->nout == 1 ? "" : "s",
                          ninputs, noutputs);
                hr_graph_put(ctx, h, g);
                return st;
        }
        st = hr_plan(g, inputs, outputs, offsets, &total);
        if (st == NPU_OK)
                st = slot_take(ctx, h, g, &s);
        if (st == NPU_OK) {
                st = slot_reserve(ctx, g, s, total);
                if (st == NPU_OK)
                        st = hr_run(ctx, g, s, inputs, outputs, offsets, total);
                if (st == NPU_OK)
                        for (int i = 0; i < g->nout; i++)
                                if (outputs[i].data)
                                        memcpy(outputs[i].data, (uint8_t *)s->host + offsets[g->nin + i],
                                               tensor_bytes(outputs[i].dtype, outputs[i].ndim, outputs[i].dims));
                slot_put(h, g, s);
        }
        hr_graph_put(ctx, h, g);
        return st;
}

/* npu_graph_unload: the graph's slots go (now, or when its last running call ends). */
void npu_hostrun_graph_drop(npu_context_t *ctx, uint32_t graph)
{
        struct npu_hostrun *h = __atomic_load_n(&ctx->hostrun, __ATOMIC_ACQUIRE);
        struct hr_graph *g = NULL;
        int now = 0;

        if (!h)
                return;
        pthread_mutex_lock(&h->mu);
        h->drops++;
        for (struct hr_graph **pp = &h->graphs; *pp; pp = &(*pp)->next)
                if ((*pp)->id == graph) {
                        g = *pp;
                        *pp = g->next;
                        g->dead = 1;
                        now = g->users == 0;
                        break;
                }
        pthread_mutex_unlock(&h->mu);
        if (g && now)
                hr_graph_free(ctx, g, 1);
}

/* npu_disconnect: npud releases the daemon's side with the session; the regions' mappings
 * are unmapped with the context's. */
void npu_hostrun_free(npu_context_t *ctx)
{
        struct npu_hostrun *h = ctx->hostrun;

        if (!h)
                return;
        while (h->graphs) {
                struct hr_graph *g = h->graphs;
                h->graphs = g->next;
                hr_graph_free(ctx, g, 0);
        }
        pthread_mutex_destroy(&h->mu);
        free(h);
        ctx->hostrun = NULL;
}
