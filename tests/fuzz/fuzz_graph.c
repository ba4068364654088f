/* libFuzzer target for graph load + run: the bytes are imported as an ONNX model against the
 * operator registry, the cost estimate npud makes on the loop thread is computed, and the
 * graph then runs the way a backend worker runs it, with inputs generated from the model's
 * declared inputs (open extents 1 or 2, at most FUZZ_MAX_ELEMS elements per tensor) and
 * outputs bound with their declared shapes. The run is under a run context like npud's, so
 * every input is bounded in time and memory: a deadline of FUZZ_DEADLINE_MS, a Loop/Scan trip
 * cap and a byte budget for intermediates. What must hold: no crash, no undefined behaviour,
 * no leak, nothing left charged to the budget after the run. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/exec.h"
#include "graph/onnx-import.h"
#include "ops/runctx.h"
#include "proto/dtype.h"

#define FUZZ_MAX_ELEMS 4096
#define FUZZ_DEADLINE_MS 200
#define FUZZ_MAX_TRIPS 1000
#define FUZZ_BUDGET (256ull << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        ops_set_threads(1);
        return 0;
}

static uint64_t mono_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A tensor shaped like a declared value (open extents and unknown ranks filled in), data
 * malloc'd and filled from seed with small values, so that indices, axes and counts taken
 * from inputs are often in range. 0, or -1 when it cannot or should not be made. */
static int make_tensor(int dtype, int ndim, const int64_t *dims, uint32_t seed,
                       struct ops_tensor *t)
{
        size_t es = proto_dtype_size(dtype);
        int64_t n = 1;

        memset(t, 0, sizeof(*t));
        if (!es)
                return -1;
        t->dtype = dtype;
        t->ndim = ndim < 0 ? 1 : ndim;
        if (t->ndim > OPS_MAX_DIMS)
                return -1;
        for (int d = 0; d < t->ndim; d++) {
                int64_t e = ndim >= 0 && dims[d] >= 0 ? dims[d] : 1 + (int64_t)((seed >> d) & 1);
                if (e > FUZZ_MAX_ELEMS)
                        return -1;
                t->dims[d] = e;
                n *= e;
                if (n > FUZZ_MAX_ELEMS)
                        return -1;
        }
        t->data = malloc((size_t)n * es + 1);
        if (!t->data)
                return -1;
        for (size_t i = 0; i < (size_t)n * es; i++) {
                seed = seed * 1103515245u + 12345u;
                ((uint8_t *)t->data)[i] = (uint8_t)(seed >> 16);
        }
        /* small integers and floats read better than random bit patterns */
        if (dtype == PROTO_DTYPE_INT64)
                for (int64_t i = 0; i < n; i++)
                        ((int64_t *)t->data)[i] = (int64_t)(((uint8_t *)t->data)[i * 8] % 5) - 1;
        else if (dtype == PROTO_DTYPE_INT32)
                for (int64_t i = 0; i < n; i++)
                        ((int32_t *)t->data)[i] = (int32_t)(((uint8_t *)t->data)[i * 4] % 5) - 1;
        else if (dtype == PROTO_DTYPE_FLOAT32)
                for (int64_t i = 0; i < n; i++)
                        ((float *)t->data)[i] = (float)(((uint8_t *)t->data)[i * 4] % 17) / 4.0f - 2.0f;
        else if (dtype == PROTO_DTYPE_BOOL)
                for (int64_t i = 0; i < n; i++)
                        ((uint8_t *)t->data)[i] &= 1;
        return 0;
}

static void run(const struct graph *g, uint32_t seed)
{
        struct ops_tensor t[GRAPH_MAX_IO];
        struct ops_mem_budget budget = { .name = "fuzz", .limit = FUZZ_BUDGET };
        atomic_int cancel = 0;
        struct ops_runctx ctx = { .cancel = &cancel, .max_loop_trips = FUZZ_MAX_TRIPS, .mem = &budget };
        int nin = g->ninputs, nout = g->noutputs, made = 0, ok = 1;
        char err[512];

        if (nin + nout > GRAPH_MAX_IO)
                return;
        for (int i = 0; i < nin && ok; i++, made++) {
                const struct graph_value *v = &g->values[g->inputs[i]];
                ok = make_tensor(v->dtype ? v->dtype : PROTO_DTYPE_FLOAT32, v->ndim, v->dims,
                                 seed + (uint32_t)i * 7919u, &t[i]) == 0;
        }
        if (ok)
                (void)graph_estimate_ns(g, nin, t, 1e9, 1e11, NULL);
        for (int k = 0; k < nout && ok; k++, made++) {
                const struct ops_tensor *d = &g->output_decl[k];
                ok = make_tensor(d->dtype ? d->dtype : PROTO_DTYPE_FLOAT32, d->ndim, d->dims, seed,
                                 &t[nin + k]) == 0;
        }
        if (ok) {
                ctx.deadline_ns = mono_ns() + FUZZ_DEADLINE_MS * 1000000ull;
                ops_runctx_set(&ctx);
                (void)graph_exec(g, nin, t, nout, t + nin, err, sizeof(err));
                ops_runctx_set(NULL);
                if (atomic_load(&budget.used) != 0) {
                        fprintf(stderr, "fuzz_graph: %llu bytes still charged after the run\n",
                                (unsigned long long)atomic_load(&budget.used));
                        abort();
                }
        }
        for (int i = 0; i < made; i++)
                free(t[i].data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct graph *g;
        char err[4096];
        uint32_t seed = 2166136261u;

        for (size_t i = 0; i < size && i < 64; i++)
                seed = (seed ^ data[i]) * 16777619u;
        if (onnx_import(data, size, NULL, &g, err, sizeof(err)) == 0) {
                run(g, seed);
                graph_free(g);
        }
        return 0;
}
