/* npuctl-hold: a client for tests/integration/test-npuctl*.sh that holds device memory.
 * Usage: npuctl-hold [--name COMM] SOCKET DEVICE BYTES [SECONDS]. Connects, allocates BYTES on
 * DEVICE, prints "ready" and its own session's view, then sleeps (default 30 s) or until
 * killed, so that npuctl mem, sessions and tenants have something to show; exits 3 with the
 * error when its session was killed meanwhile. --name sets the
 * process name (comm, at most 15 bytes, any bytes but NUL) before connecting: the name npud
 * reports, as a hostile tenant could set it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <npu.h>

int main(int argc, char **argv)
{
        npu_context_t *ctx;
        npu_buffer_t buf;
        npu_status_t st;
        unsigned seconds;

        if (argc > 2 && strcmp(argv[1], "--name") == 0) {
                if (prctl(PR_SET_NAME, (unsigned long)argv[2], 0, 0, 0) < 0) {
                        perror("npuctl-hold: prctl");
                        return 1;
                }
                argv += 2;
                argc -= 2;
        }
        if (argc < 4 || argc > 5) {
                fprintf(stderr, "usage: npuctl-hold [--name COMM] SOCKET DEVICE BYTES [SECONDS]\n");
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
        /* a session killed meanwhile: the error names why (test-npuctl.sh) */
        st = npu_free(ctx, buf);
        if (st != NPU_OK) {
                fprintf(stderr, "npuctl-hold: npu_free: %s (%s)\n", npu_strerror(st),
                        npu_error_message());
                npu_disconnect(ctx);
                return 3;
        }
        npu_disconnect(ctx);
        return 0;
}
