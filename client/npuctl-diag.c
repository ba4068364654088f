/* npuctl diag [-r 1|2|3]: device diagnostics in the manner of dcgmi diag, run through libnpu
 * as an ordinary client. On every device it runs a known-answer kernel on each engine kind
 * (MatMul on the cube cores, Add on the vector cores, Cast on the AI CPUs, a device-to-device
 * copy on the DMA engines), a memory pattern test (fills of 0x00, 0xff, 0x55 and 0xaa, then
 * every 64-bit word holding its own offset, each read back in full) and a copy-bandwidth
 * test (host to device, device to device, device to host, timed with events), and reports
 * pass or fail with the figures. Larger levels use larger sizes and repeat more.
 *
 * It must not disturb latency-critical work: it joins the first best-effort tenant npud lets
 * this user into (npud checks the credentials), falling back to the user's own tenant, and
 * queues everything on streams of the lowest priority, so that npud's scheduler runs
 * latency-critical (and, in a best-effort tenant, normal) work first on every device. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npuctl.h"

struct diag {
        npu_context_t *ctx;
        int level;
        int failures;
        struct npuctl_table *table;
        json_t *results;
};

static const struct npuctl_col diag_cols[] = {
        { "id", "NPU", COL_RIGHT | COL_DEFAULT },
        { "test", "TEST", COL_DEFAULT },
        { "result", "RESULT", COL_DEFAULT },
        { "value", "VALUE", COL_RIGHT | COL_CSV },
        { "detail", "DETAIL", COL_DEFAULT },
        { NULL, NULL, 0 },
};

/* One result: pass or fail, a figure (NAN: none) and a line saying what was measured. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static void report(struct diag *g, int dev, const char *test, int pass, double value,
                   const char *fmt, ...)
{
        char detail[512], raw[64] = "";
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        if (!pass)
                g->failures++;
        if (!isnan(value))
                snprintf(raw, sizeof(raw), "%.6g", value);
        npuctl_table_row(g->table);
        npuctl_table_int(g->table, "id", dev);
        npuctl_table_str(g->table, "test", test);
        npuctl_table_str(g->table, "result", pass ? "pass" : "FAIL");
        npuctl_table_set(g->table, "result", pass ? "pass" : "FAIL", pass ? "pass" : "fail");
        npuctl_table_set(g->table, "value", raw, raw);
        npuctl_table_str(g->table, "detail", detail);
        json_t *o = json_pack("{s:i, s:s, s:s, s:s}", "device", dev, "test", test, "result",
                              pass ? "pass" : "fail", "detail", detail);
        if (!isnan(value))
                json_object_set_new(o, "value", json_real(value));
        json_array_append_new(g->results, o);
}

/* "npu_x: why" of the last failed call. */
static const char *why(void)
{
        return npu_error_message()[0] ? npu_error_message() : "failed";
}

static npu_tensor_t tensor2(npu_buffer_t b, npu_dtype_t dt, int64_t d0, int64_t d1)
{
        npu_tensor_t t = { .buf = b, .dtype = dt, .ndim = d1 ? 2 : 1, .dims = { d0, d1 } };
        return t;
}

/* MatMul of n x n float32 matrices of small multiples of powers of two, whose products and
 * sums are exact in float32, against the product computed here. */
static void test_cube(struct diag *g, int dev, npu_stream_t s)
{
        int n = 64 << (g->level - 1);
        size_t bytes = (size_t)n * n * sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
        npu_buffer_t da = { 0 }, db = { 0 }, dc = { 0 };
        int bad = -1;

        if (!a || !b || !c) {
                report(g, dev, "cube:MatMul", 0, NAN, "out of host memory");
                goto out;
        }
        for (int i = 0; i < n; i++)
                for (int k = 0; k < n; k++) {
                        a[i * n + k] = (float)((i * 3 + k) % 5 - 2) * 0.5f;
                        b[i * n + k] = (float)((i + 2 * k) % 7 - 3) * 0.25f;
                }
        if (npu_malloc(g->ctx, dev, bytes, &da) || npu_malloc(g->ctx, dev, bytes, &db) ||
            npu_malloc(g->ctx, dev, bytes, &dc) || npu_memcpy_to_device(g->ctx, da, 0, a, bytes) ||
            npu_memcpy_to_device(g->ctx, db, 0, b, bytes)) {
                report(g, dev, "cube:MatMul", 0, NAN, "%s", why());
                goto out;
        }
        npu_tensor_t in[2] = { tensor2(da, NPU_FLOAT32, n, n), tensor2(db, NPU_FLOAT32, n, n) };
        npu_tensor_t out = tensor2(dc, NPU_FLOAT32, n, n);
        if (npu_launch(g->ctx, s, "MatMul", in, 2, &out, 1, NULL, 0, NULL) ||
            npu_stream_synchronize(g->ctx, s) || npu_memcpy_from_device(g->ctx, c, dc, 0, bytes)) {
                report(g, dev, "cube:MatMul", 0, NAN, "%s", why());
                goto out;
        }
        for (int i = 0; i < n * n && bad < 0; i++) {
                double want = 0;
                for (int k = 0; k < n; k++)
                        want += (double)a[(i / n) * n + k] * b[k * n + i % n];
                if (fabs(c[i] - want) > 1e-3 * (1 + fabs(want)))
                        bad = i;
        }
        if (bad >= 0)
                report(g, dev, "cube:MatMul", 0, NAN, "%dx%d: element %d is %g, not the known answer",
                       n, n, bad, c[bad]);
        else
                report(g, dev, "cube:MatMul", 1, NAN, "%dx%d float32 matches the known answer", n, n);
out:
        npu_free(g->ctx, da);
        npu_free(g->ctx, db);
        npu_free(g->ctx, dc);
        free(a);
        free(b);
        free(c);
}

/* Add on the vector cores, then Cast on the AI CPUs, of values exact in float32 and int32. */
static void test_vector_aicpu(struct diag *g, int dev, npu_stream_t s)
{
        int64_t n = (int64_t)1 << (14 + 2 * g->level);
        size_t bytes = (size_t)n * 4;
        float *a = malloc(bytes), *b = malloc(bytes), *sum = malloc(bytes);
        int32_t *ints = malloc(bytes);
        npu_buffer_t da = { 0 }, db = { 0 }, dc = { 0 }, di = { 0 };
        int64_t bad = -1;

        if (!a || !b || !sum || !ints) {
                report(g, dev, "vector:Add", 0, NAN, "out of host memory");
                goto out;
        }
        for (int64_t i = 0; i < n; i++) {
                a[i] = (float)(i % 1000) * 0.5f;
                b[i] = -(float)(i % 777) * 0.25f;
        }
        if (npu_malloc(g->ctx, dev, bytes, &da) || npu_malloc(g->ctx, dev, bytes, &db) ||
            npu_malloc(g->ctx, dev, bytes, &dc) || npu_malloc(g->ctx, dev, bytes, &di) ||
            npu_memcpy_to_device(g->ctx, da, 0, a, bytes) ||
            npu_memcpy_to_device(g->ctx, db, 0, b, bytes)) {
                report(g, dev, "vector:Add", 0, NAN, "%s", why());
                goto out;
        }
        npu_tensor_t in[2] = { tensor2(da, NPU_FLOAT32, n, 0), tensor2(db, NPU_FLOAT32, n, 0) };
        npu_tensor_t out = tensor2(dc, NPU_FLOAT32, n, 0);
        if (npu_launch(g->ctx, s, "Add", in, 2, &out, 1, NULL, 0, NULL) ||
            npu_stream_synchronize(g->ctx, s) || npu_memcpy_from_device(g->ctx, sum, dc, 0, bytes)) {
                report(g, dev, "vector:Add", 0, NAN, "%s", why());
                goto out;
        }
        for (int64_t i = 0; i < n && bad < 0; i++)
                if (sum[i] != a[i] + b[i])
                        bad = i;
        if (bad >= 0)
                report(g, dev, "vector:Add", 0, NAN, "element %" PRId64 " is %g, not %g", bad,
                       sum[bad], a[bad] + b[bad]);
        else
                report(g, dev, "vector:Add", 1, NAN, "%" PRId64 " float32 sums match", n);
        /* Cast the sums (multiples of 0.25) to int32: truncation towards zero */
        npu_tensor_t cin = tensor2(dc, NPU_FLOAT32, n, 0), cout = tensor2(di, NPU_INT32, n, 0);
        npu_attr_t to = { .name = "to", .i = NPU_INT32 };
        if (npu_launch(g->ctx, s, "Cast", &cin, 1, &cout, 1, &to, 1, NULL) ||
            npu_stream_synchronize(g->ctx, s) || npu_memcpy_from_device(g->ctx, ints, di, 0, bytes)) {
                report(g, dev, "aicpu:Cast", 0, NAN, "%s", why());
                goto out;
        }
        bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++)
                if (ints[i] != (int32_t)(a[i] + b[i]))
                        bad = i;
        if (bad >= 0)
                report(g, dev, "aicpu:Cast", 0, NAN, "element %" PRId64 " is %d, not %d", bad,
                       ints[bad], (int32_t)(a[bad] + b[bad]));
        else
                report(g, dev, "aicpu:Cast", 1, NAN, "%" PRId64 " float32 to int32 match", n);
out:
        npu_free(g->ctx, da);
        npu_free(g->ctx, db);
        npu_free(g->ctx, dc);
        npu_free(g->ctx, di);
        free(a);
        free(b);
        free(sum);
        free(ints);
}

/* Seconds between two events recorded around queued work, after it finished. */
static double timed(struct diag *g, npu_stream_t s, npu_event_t e0, npu_event_t e1)
{
        float ms = 0;

        if (npu_event_record(g->ctx, e1, s) || npu_stream_synchronize(g->ctx, s) ||
            npu_event_elapsed_ms(g->ctx, e0, e1, &ms))
                return -1;
        return ms / 1e3;
}

/* Memory patterns and copies through one buffer: the copies are the DMA engines' known
 * answer and the bandwidth figures. */
static void test_memory(struct diag *g, int dev, npu_stream_t s)
{
        static const int fills[] = { 0x00, 0xff, 0x55, 0xaa };
        uint64_t size = (uint64_t)16 << (20 + 2 * (g->level - 1)); /* 16, 64, 256 MiB */
        npu_buffer_t buf = { 0 }, buf2 = { 0 };
        npu_region_t reg = { 0 };
        npu_event_t e0 = { 0 }, e1 = { 0 };
        uint8_t *host = NULL;
        uint64_t *w;
        int reps = g->level;
        double t;

        if (npu_malloc(g->ctx, dev, size, &buf) || npu_malloc(g->ctx, dev, size, &buf2) ||
            npu_host_alloc(g->ctx, size, (void **)&host, &reg) || npu_event_create(g->ctx, &e0) ||
            npu_event_create(g->ctx, &e1)) {
                report(g, dev, "memory:pattern", 0, NAN, "%s", why());
                goto out;
        }
        w = (uint64_t *)host;
        for (size_t f = 0; f < sizeof(fills) / sizeof(fills[0]); f++) {
                uint64_t want = 0x0101010101010101ull * (uint8_t)fills[f];
                if (npu_memset_async(g->ctx, s, buf, 0, fills[f], size, NULL) ||
                    npu_memcpy_d2h_async(g->ctx, s, reg, 0, buf, 0, size, NULL) ||
                    npu_stream_synchronize(g->ctx, s)) {
                        report(g, dev, "memory:pattern", 0, NAN, "%s", why());
                        goto out;
                }
                for (uint64_t i = 0; i < size / 8; i++)
                        if (w[i] != want) {
                                report(g, dev, "memory:pattern", 0, NAN,
                                       "fill 0x%02x: word at offset %" PRIu64 " reads %016" PRIx64,
                                       fills[f], i * 8, w[i]);
                                goto out;
                        }
        }
        /* every word its own offset (catches address lines), host to device and back */
        for (uint64_t i = 0; i < size / 8; i++)
                w[i] = i * 8 ^ 0x5a5a5a5a00000000ull;
        if (npu_event_record(g->ctx, e0, s) ||
            npu_memcpy_h2d_async(g->ctx, s, buf, 0, reg, 0, size, NULL) || (t = timed(g, s, e0, e1)) < 0) {
                report(g, dev, "memory:pattern", 0, NAN, "%s", why());
                goto out;
        }
        double h2d = (double)size / (t > 0 ? t : 1e-9) / 1e9;
        if (npu_event_record(g->ctx, e0, s)) {
                report(g, dev, "copy:d2d", 0, NAN, "%s", why());
                goto out;
        }
        for (int r = 0; r < reps; r++)
                if (npu_memcpy_d2d_async(g->ctx, s, buf2, 0, buf, 0, size, NULL)) {
                        report(g, dev, "copy:d2d", 0, NAN, "%s", why());
                        goto out;
                }
        if ((t = timed(g, s, e0, e1)) < 0) {
                report(g, dev, "copy:d2d", 0, NAN, "%s", why());
                goto out;
        }
        double d2d = (double)size * reps / (t > 0 ? t : 1e-9) / 1e9;
        memset(host, 0, size);
        if (npu_event_record(g->ctx, e0, s) ||
            npu_memcpy_d2h_async(g->ctx, s, reg, 0, buf2, 0, size, NULL) || (t = timed(g, s, e0, e1)) < 0) {
                report(g, dev, "copy:d2h", 0, NAN, "%s", why());
                goto out;
        }
        double d2h = (double)size / (t > 0 ? t : 1e-9) / 1e9;
        for (uint64_t i = 0; i < size / 8; i++)
                if (w[i] != (i * 8 ^ 0x5a5a5a5a00000000ull)) {
                        report(g, dev, "memory:pattern", 0, NAN,
                               "address pattern: word at offset %" PRIu64 " reads %016" PRIx64, i * 8, w[i]);
                        goto out;
                }
        report(g, dev, "memory:pattern", 1, (double)size,
               "%" PRIu64 " MiB: fills 00 ff 55 aa and an address pattern read back intact", size >> 20);
        report(g, dev, "dma:copy", 1, NAN, "device-to-device copies of %" PRIu64 " MiB arrive intact",
               size >> 20);
        report(g, dev, "bandwidth:h2d", h2d > 0, h2d, "%.2f GB/s host to device", h2d);
        report(g, dev, "bandwidth:d2d", d2d > 0, d2d, "%.2f GB/s device to device (%d x %" PRIu64 " MiB)",
               d2d, reps, size >> 20);
        report(g, dev, "bandwidth:d2h", d2h > 0, d2h, "%.2f GB/s device to host", d2h);
out:
        npu_free(g->ctx, buf);
        npu_free(g->ctx, buf2);
        if (host)
                npu_host_free(g->ctx, reg);
        if (e0.id)
                npu_event_destroy(g->ctx, e0);
        if (e1.id)
                npu_event_destroy(g->ctx, e1);
}

/* Join the first best-effort tenant npud grants this user; else the user's own tenant. */
static npu_status_t diag_connect(struct npuctl *c, npu_context_t **ret)
{
        json_t *res, *t;
        int code = 0;
        size_t i;

        if ((res = npuctl_call(c, "tenants", NULL, &code)) != NULL) {
                json_array_foreach(json_object_get(res, "tenants"), i, t) {
                        const char *klass = json_string_value(json_object_get(t, "class"));
                        npu_connect_options_t o = { .size = sizeof(o), .socket = c->socket,
                                                    .tenant = json_string_value(json_object_get(t, "name")) };
                        if (klass && o.tenant && strcmp(klass, "best-effort") == 0 &&
                            npu_connect_with(&o, ret) == NPU_OK) {
                                json_decref(res);
                                return NPU_OK;
                        }
                }
                json_decref(res);
        }
        npu_status_t st = npu_connect(c->socket, ret);
        if (st == NPU_OK)
                fprintf(stderr, "npuctl diag: no best-effort tenant admits this user; running in "
                                "tenant '%s' at the lowest stream priority\n",
                        npuctl_esc(npu_tenant(*ret)));
        return st;
}

int npuctl_cmd_diag(struct npuctl *c, int argc, char **argv)
{
        struct diag g = { .level = 1 };
        json_t *devs;
        int code = 0;
        size_t i;

        if (argc == 3 && strcmp(argv[1], "-r") == 0 && argv[2][0] >= '1' && argv[2][0] <= '3' &&
            !argv[2][1]) {
                g.level = argv[2][0] - '0';
        } else if (argc != 1) {
                fprintf(stderr, "npuctl diag: usage: diag [-r 1|2|3] (1 quick, 2 medium, 3 long)\n");
                return NPUCTL_USAGE;
        }
        if (npuctl_table_check_fields(c, diag_cols))
                return NPUCTL_USAGE;
        if (!(devs = npuctl_call(c, "devices", NULL, &code)))
                return code;
        npu_status_t st = diag_connect(c, &g.ctx);
        if (st != NPU_OK) {
                json_decref(devs);
                return npuctl_failed("diag", st);
        }
        g.table = npuctl_table_new(diag_cols);
        g.results = json_array();
        if (!c->json && !c->csv)
                printf("npuctl diag: level %d as tenant '%s' on %zu device%s, lowest stream priority\n\n",
                       g.level, npuctl_esc(npu_tenant(g.ctx)), json_array_size(json_object_get(devs, "devices")),
                       json_array_size(json_object_get(devs, "devices")) == 1 ? "" : "s");
        json_t *d;
        json_array_foreach(json_object_get(devs, "devices"), i, d) {
                int dev = (int)json_integer_value(json_object_get(d, "id"));
                npu_stream_t s;
                if (strcmp(json_string_value(json_object_get(d, "health")) ?: "", "ok") != 0) {
                        report(&g, dev, "health", 0, NAN, "device health is '%s'",
                               json_string_value(json_object_get(d, "health")) ?: "?");
                        continue;
                }
                if (npu_stream_create(g.ctx, dev, 7, &s) != NPU_OK) {
                        report(&g, dev, "stream", 0, NAN, "%s", why());
                        continue;
                }
                test_cube(&g, dev, s);
                test_vector_aicpu(&g, dev, s);
                test_memory(&g, dev, s);
                npu_stream_destroy(g.ctx, s);
        }
        if (c->json) {
                json_t *o = json_pack("{s:i, s:s, s:b, s:o}", "level", g.level, "tenant", npu_tenant(g.ctx),
                                      "passed", g.failures == 0, "results", g.results);
                npuctl_print_json(o);
                json_decref(o);
                code = 0;
        } else {
                json_decref(g.results);
                code = npuctl_table_print(c, g.table);
                if (!c->csv)
                        printf("\n%s: %d failure%s\n", g.failures ? "FAIL" : "PASS", g.failures,
                               g.failures == 1 ? "" : "s");
        }
        npuctl_table_free(g.table);
        npu_disconnect(g.ctx);
        json_decref(devs);
        return code ? code : g.failures ? NPUCTL_ERROR : 0;
}
