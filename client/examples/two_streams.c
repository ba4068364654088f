/* libnpu example: two streams with an event dependency. Stream 1 uploads x through a host
 * region and squares it; stream 2 waits for that event, adds x*x to itself and downloads the
 * result, so the result is 2*x*x. Run with npud up: build/bin/example-two_streams [SOCKET] */
#include <stdio.h>

#include <npu.h>

#define COUNT 4096

#define CHECK(call) \
        do { \
                npu_status_t st_ = (call); \
                if (st_ != NPU_OK) { \
                        fprintf(stderr, "%s: %s (%s)\n", #call, npu_strerror(st_), npu_error_message()); \
                        return 1; \
                } \
        } while (0)

int main(int argc, char **argv)
{
        npu_context_t *ctx;
        npu_region_t region;
        npu_buffer_t x, sq, out;
        npu_stream_t s1, s2;
        npu_event_t squared;
        float *host;
        const uint64_t bytes = COUNT * sizeof(float);

        CHECK(npu_connect(argc > 1 ? argv[1] : NULL, &ctx));
        CHECK(npu_host_alloc(ctx, 2 * bytes, (void **)&host, &region));
        for (int i = 0; i < COUNT; i++)
                host[i] = (float)(i % 100) / 10.0f;
        CHECK(npu_malloc(ctx, 0, bytes, &x));
        CHECK(npu_malloc(ctx, 0, bytes, &sq));
        CHECK(npu_malloc(ctx, 0, bytes, &out));
        CHECK(npu_stream_create(ctx, 0, 1, &s1));
        CHECK(npu_stream_create(ctx, 0, 1, &s2));
        CHECK(npu_event_create(ctx, &squared));

        npu_tensor_t tx = { .buf = x, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { COUNT } };
        npu_tensor_t tsq = { .buf = sq, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { COUNT } };
        npu_tensor_t tout = { .buf = out, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { COUNT } };

        CHECK(npu_memcpy_h2d_async(ctx, s1, x, 0, region, 0, bytes, NULL));
        CHECK(npu_launch(ctx, s1, "Mul", (npu_tensor_t[]){ tx, tx }, 2, &tsq, 1, NULL, 0, NULL));
        CHECK(npu_event_record(ctx, squared, s1));

        CHECK(npu_stream_wait_event(ctx, s2, squared));
        CHECK(npu_launch(ctx, s2, "Add", (npu_tensor_t[]){ tsq, tsq }, 2, &tout, 1, NULL, 0, NULL));
        CHECK(npu_memcpy_d2h_async(ctx, s2, region, bytes, out, 0, bytes, NULL));
        CHECK(npu_stream_synchronize(ctx, s2));

        for (int i = 0; i < COUNT; i++) {
                float e = 2 * host[i] * host[i];
                if (host[COUNT + i] != e) {
                        fprintf(stderr, "mismatch at %d: %f vs %f\n", i, host[COUNT + i], e);
                        return 1;
                }
        }
        printf("two streams with an event dependency: %d results verified\n", COUNT);
        npu_disconnect(ctx);
        return 0;
}
