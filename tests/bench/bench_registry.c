/* Benchmark of the operator registry's lookups (ops/ops.c): ops_lookup_onnx by (domain,
 * name, opset) and ops_index of a definition, each beside the linear algorithms the index
 * replaced, re-implemented here over the same family lists and timed in the same run:
 *   old lookup — every definition of every family, string compares of domain and name,
 *                the best since_version kept;
 *   old index  — ops_get(i) walking the families from the start for every i until the
 *                definition is found (quadratic in its position).
 * Conv and LayerNormalization are late in the registry (the nn family), the costly case for
 * the old algorithms.
 *
 * Output: one `name: value` line per figure (ns per call, and old/new ratios); timings are
 * printed, never checked, but every result is compared with the old algorithm's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/ops-internal.h"
#include "ops/ops.h"

/* The registry's order: the core list of ops.c, then the families. */
static const struct ops_def *const old_core[] = {
        &ops_add_def,  &ops_sub_def,     &ops_mul_def,  &ops_div_def,     &ops_relu_def,
        &ops_sigmoid_def, &ops_tanh_def, &ops_matmul_def, &ops_softmax_def, &ops_cast_def,
        NULL,
};

static const struct ops_def *const *const old_families[] = {
        old_core, ops_family_elementwise, ops_family_reduce, ops_family_shape, ops_family_nn,
        ops_family_control,
};

#define OLD_NFAMILIES (sizeof(old_families) / sizeof(old_families[0]))

static const struct ops_def *old_get(size_t i)
{
        for (size_t f = 0; f < OLD_NFAMILIES; f++)
                for (const struct ops_def *const *d = old_families[f]; *d; d++)
                        if (i-- == 0)
                                return *d;
        return NULL;
}

static size_t old_index(const struct ops_def *def)
{
        size_t i = 0;

        for (const struct ops_def *d; (d = old_get(i)); i++)
                if (d == def)
                        return i;
        return i;
}

static int old_default_domain(const char *d)
{
        return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

static const struct ops_def *old_lookup_onnx(const char *domain, const char *name, int opset)
{
        const struct ops_def *best = NULL;

        for (size_t f = 0; f < OLD_NFAMILIES; f++)
                for (const struct ops_def *const *d = old_families[f]; *d; d++) {
                        const struct ops_def *o = *d;
                        int same = old_default_domain(domain) ? old_default_domain(o->domain)
                                                              : o->domain &&
                                                                        strcmp(o->domain, domain) == 0;

                        if (!same || strcmp(o->name, name) != 0 || !o->infer ||
                            o->since_version > opset)
                                continue;
                        if (!best || o->since_version > best->since_version)
                                best = o;
                }
        return best;
}

static double now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Keeps the compiler from dropping the timed calls. */
static volatile size_t sink;

static double time_lookup(int old, const char *name, int iters)
{
        double t0 = now_ns();

        for (int i = 0; i < iters; i++) {
                const struct ops_def *d = old ? old_lookup_onnx(NULL, name, 17)
                                              : ops_lookup_onnx(NULL, name, 17);
                sink += (size_t)d->since_version;
        }
        return (now_ns() - t0) / iters;
}

static double time_index(int old, const struct ops_def *def, int iters)
{
        double t0 = now_ns();

        for (int i = 0; i < iters; i++)
                sink += old ? old_index(def) : ops_index(def);
        return (now_ns() - t0) / iters;
}

static void bench_op(const char *name)
{
        const struct ops_def *def = ops_lookup_onnx(NULL, name, 17);
        double lo_new, lo_old, ix_new, ix_old;

        if (!def || def != old_lookup_onnx(NULL, name, 17) || ops_index(def) != old_index(def)) {
                fprintf(stderr, "bench_registry: %s: the index and the old search disagree\n",
                        name);
                exit(1);
        }
        /* A warm-up pass, then the timed ones (few old index calls: each is microseconds). */
        (void)time_lookup(0, name, 1000);
        (void)time_lookup(1, name, 100);
        lo_new = time_lookup(0, name, 1000000);
        lo_old = time_lookup(1, name, 20000);
        ix_new = time_index(0, def, 1000000);
        ix_old = time_index(1, def, 2000);
        printf("%s_registry_id: %zu\n", name, ops_id(def));
        printf("%s_lookup_onnx_ns: %.1f\n", name, lo_new);
        printf("%s_lookup_onnx_old_ns: %.1f\n", name, lo_old);
        printf("%s_lookup_onnx_speedup: %.1f\n", name, lo_old / lo_new);
        printf("%s_index_ns: %.1f\n", name, ix_new);
        printf("%s_index_old_ns: %.1f\n", name, ix_old);
        printf("%s_index_speedup: %.1f\n", name, ix_old / ix_new);
}

int main(void)
{
        ops_registry_init();
        printf("registry_definitions: %zu\n", ops_count());
        bench_op("Conv");
        bench_op("LayerNormalization");
        return 0;
}
