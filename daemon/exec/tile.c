/* Splitting tasks into tiles (see tile.h). */
#include <string.h>

#include "stream.h"
#include "tile.h"

#define COPY_TILE_ALIGN 4096u

static int64_t numel(const struct ops_tensor *t)
{
        return ops_tensor_numel(t);
}

/* Elementwise calls split when every input has the output's element count or a single
 * element (the broadcast scalar case). */
static uint64_t elementwise_max(const struct exec_call *c)
{
        int64_t n = numel(&exec_call_out(c)[0]);

        if (c->nout != 1 || n <= 0)
                return 1;
        for (int i = 0; i < c->nin; i++) {
                int64_t m = numel(&exec_call_in(c)[i]);
                if (m != n && m != 1)
                        return 1;
        }
        /* tiles of at least 16 Ki elements: smaller ones cost more in dispatch than they save */
        return n / 16384 ? (uint64_t)n / 16384 : 1;
}

/* Each row block re-packs the whole right-hand matrix in the GEMM, so blocks stay at least
 * MIN_TILE_ROWS rows to keep that overhead small. */
#define MIN_TILE_ROWS 256

static uint64_t rows_max(const struct exec_call *c)
{
        const struct ops_tensor *a = &exec_call_in(c)[0];

        if (c->nin != 2 || c->nout != 1 || a->ndim != 2 || exec_call_out(c)[0].ndim != 2)
                return 1;
        uint64_t blocks = a->dims[0] > 0 ? (uint64_t)a->dims[0] / MIN_TILE_ROWS : 1;
        return blocks ? blocks : 1;
}

uint64_t tile_max(const struct exec_item *it)
{
        switch (it->kind) {
        case EXEC_COPY:
        case EXEC_MEMSET:
                return it->len / COPY_TILE_ALIGN ? it->len / COPY_TILE_ALIGN : 1;
        case EXEC_GRAPH: /* a graph run without steps is one task */
        case EXEC_GRAPH_STEP: /* its steps are dispatched one by one (sched.c), not tiled */
                return 1;
        case EXEC_OP:
                if (ops_by_id(it->op_id)->flags & OPS_FLAG_ELEMENTWISE)
                        return elementwise_max(it->call);
                if (ops_by_id(it->op_id)->flags & OPS_FLAG_ROW_SPLIT)
                        return rows_max(it->call);
                return 1;
        }
        return 1;
}

/* [lo, hi) of k-th of n near-equal parts of total, aligned to align. */
static void split(uint64_t total, uint64_t n, uint64_t k, uint64_t align, uint64_t *lo, uint64_t *hi)
{
        uint64_t units = (total + align - 1) / align;
        *lo = units * k / n * align;
        *hi = units * (k + 1) / n * align;
        if (*hi > total)
                *hi = total;
        if (*lo > total)
                *lo = total;
}

static void flatten(struct ops_tensor *t, int64_t lo, int64_t hi, size_t esize)
{
        if (numel(t) == 1) { /* broadcast scalar stays whole */
                t->ndim = 1;
                t->dims[0] = 1;
                return;
        }
        exec_tensor_set_addr(t, exec_tensor_addr(t) + (uint64_t)lo * esize);
        t->ndim = 1;
        t->dims[0] = hi - lo;
}

void tile_make(const struct exec_item *it, uint64_t n, uint64_t k, struct exec_item *ret,
               struct exec_call *call)
{
        uint64_t lo, hi;

        /* the tile starts with no status or message of its own */
        *ret = (struct exec_item){ .kind = it->kind, .dst = it->dst, .src = it->src,
                                   .host_end = it->host_end, .len = it->len,
                                   .value = it->value, .op_id = it->op_id, .graph = it->graph,
                                   .model_ns = it->model_ns / n };
        switch (it->kind) {
        case EXEC_COPY:
        case EXEC_MEMSET:
                split(it->len, n, k, COPY_TILE_ALIGN, &lo, &hi);
                ret->dst = it->dst + lo; /* device or host address alike */
                if (it->kind == EXEC_COPY)
                        ret->src = it->src + lo;
                ret->len = hi - lo;
                return;
        case EXEC_OP: {
                struct exec_call *c = call;
                if (exec_call_copy(c, it->call) < 0) /* the unit's tile call has room for any */
                        return;
                ret->call = c;
                struct ops_tensor *in = exec_call_in(c), *out = exec_call_out(c);
                if (ops_by_id(it->op_id)->flags & OPS_FLAG_ELEMENTWISE) {
                        split((uint64_t)numel(&out[0]), n, k, 1, &lo, &hi);
                        for (int i = 0; i < c->nin; i++)
                                flatten(&in[i], (int64_t)lo, (int64_t)hi, proto_dtype_size(in[i].dtype));
                        flatten(&out[0], (int64_t)lo, (int64_t)hi, proto_dtype_size(out[0].dtype));
                } else { /* row split of a 2-D MatMul */
                        split((uint64_t)in[0].dims[0], n, k, 1, &lo, &hi);
                        size_t ea = proto_dtype_size(in[0].dtype), eo = proto_dtype_size(out[0].dtype);
                        exec_tensor_set_addr(&in[0], exec_tensor_addr(&in[0]) +
                                                     lo * (uint64_t)in[0].dims[1] * ea);
                        in[0].dims[0] = (int64_t)(hi - lo);
                        exec_tensor_set_addr(&out[0], exec_tensor_addr(&out[0]) +
                                                      lo * (uint64_t)out[0].dims[1] * eo);
                        out[0].dims[0] = (int64_t)(hi - lo);
                }
                return;
        }
        case EXEC_GRAPH:
        case EXEC_GRAPH_STEP:
                return;
        }
}
