/* npuctl-hold: a client for tests/integration/test-npuctl.sh that holds device memory.
 * Usage: npuctl-hold SOCKET DEVICE BYTES [SECONDS]. Connects, allocates BYTES on DEVICE,
 * prints "ready" and its own session's view, then sleeps (default 30 s) or until killed, so
 * that npuctl mem, sessions and tenants have something to show. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <npu.h>

int main(int argc, char **argv)
{
        npu_context_t *ctx;
        npu_buffer_t buf;
        npu_status_t st;
        unsigned seconds;

        if (argc < 4 || argc > 5) {
                fprintf(stderr, "usage: npuctl-hold SOCKET DEVICE BYTES [SECONDS]\n");
                return 2;
        }
        seconds = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 30;
        st = npu_connect(argv[1], &ctx);
        if (st != NPU_OK) {
                fprintf(stderr, "npuctl-hold: %s\n", npu_error_message());
                return 1;
        }
        st = npu_malloc(ctx, atoi(argv[2]), strtoull(argv[3], NULL, 10), &buf);
        if (st != NPU_OK) {
                fprintf(stderr, "npuctl-hold: npu_malloc: %s (%s)\n", npu_strerror(st),
                        npu_error_message());
                npu_disconnect(ctx);
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        sleep(seconds);
        npu_free(ctx, buf);
        npu_disconnect(ctx);
        return 0;
}
