/* libnpu example: a 256x128 by 128x64 float32 MatMul on device 0, checked against a result
 * computed on the host. Run with npud up: build/bin/example-matmul [SOCKET] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <npu.h>

#define M 256
#define K 128
#define N 64

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
        static float a[M * K], b[K * N], c[M * N];
        npu_context_t *ctx;
        npu_buffer_t da, db, dc;
        npu_stream_t stream;

        for (int i = 0; i < M * K; i++)
                a[i] = (float)((i % 7) - 3) * 0.25f;
        for (int i = 0; i < K * N; i++)
                b[i] = (float)((i % 5) - 2) * 0.5f;

        CHECK(npu_connect(argc > 1 ? argv[1] : NULL, &ctx));
        CHECK(npu_malloc(ctx, 0, sizeof(a), &da));
        CHECK(npu_malloc(ctx, 0, sizeof(b), &db));
        CHECK(npu_malloc(ctx, 0, sizeof(c), &dc));
        CHECK(npu_memcpy_to_device(ctx, da, 0, a, sizeof(a)));
        CHECK(npu_memcpy_to_device(ctx, db, 0, b, sizeof(b)));
        CHECK(npu_stream_create(ctx, 0, 0, &stream));

        npu_tensor_t in[2] = {
                { .buf = da, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { M, K } },
                { .buf = db, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { K, N } },
        };
        npu_tensor_t out = { .buf = dc, .dtype = NPU_FLOAT32, .ndim = 2, .dims = { M, N } };
        CHECK(npu_launch(ctx, stream, "MatMul", in, 2, &out, 1, NULL, 0, NULL));
        CHECK(npu_stream_synchronize(ctx, stream));
        CHECK(npu_memcpy_from_device(ctx, c, dc, 0, sizeof(c)));

        for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                        double ref = 0;
                        for (int k = 0; k < K; k++)
                                ref += (double)a[i * K + k] * b[k * N + j];
                        if (fabs(ref - c[i * N + j]) > 1e-3) {
                                fprintf(stderr, "mismatch at (%d,%d): %f vs %f\n", i, j, c[i * N + j], ref);
                                return 1;
                        }
                }
        printf("matmul %dx%d @ %dx%d: result verified\n", M, K, K, N);
        npu_disconnect(ctx);
        return 0;
}
