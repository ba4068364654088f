/* npuctl-crowd: many sessions at once, for tests/integration/test-metrics.sh (scrape cost).
 * Usage: npuctl-crowd SOCKET SESSIONS TENANTS BYTES. Opens SESSIONS connections, the i-th
 * joining tenant "t<i mod TENANTS>" and holding BYTES of device memory on device 0 (none when
 * BYTES is 0), prints "ready N", then holds them until stdin closes or it is killed. Raises
 * its open-file limit to the hard limit first: each session is a socket. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <npu.h>

int main(int argc, char **argv)
{
        struct rlimit rl;
        npu_context_t **ctx;
        long n, ntenants;
        unsigned long long bytes;
        char c;

        if (argc != 5 || (n = strtol(argv[2], NULL, 10)) < 1 || n > 100000 ||
            (ntenants = strtol(argv[3], NULL, 10)) < 1) {
                fprintf(stderr, "usage: npuctl-crowd SOCKET SESSIONS TENANTS BYTES\n");
                return 2;
        }
        bytes = strtoull(argv[4], NULL, 10);
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        ctx = calloc((size_t)n, sizeof(*ctx));
        if (!ctx)
                return 1;
        for (long i = 0; i < n; i++) {
                char tenant[32];
                npu_buffer_t buf;
                snprintf(tenant, sizeof(tenant), "t%ld", i % ntenants);
                npu_connect_options_t o = { .size = sizeof(o), .socket = argv[1], .tenant = tenant };
                if (npu_connect_with(&o, &ctx[i]) != NPU_OK) {
                        fprintf(stderr, "npuctl-crowd: session %ld: %s\n", i, npu_error_message());
                        return 1;
                }
                if (bytes && npu_malloc(ctx[i], 0, bytes, &buf) != NPU_OK) {
                        fprintf(stderr, "npuctl-crowd: session %ld: npu_malloc: %s\n", i, npu_error_message());
                        return 1;
                }
        }
        printf("ready %ld\n", n);
        fflush(stdout);
        while (read(STDIN_FILENO, &c, 1) > 0)
                ;
        for (long i = 0; i < n; i++)
                npu_disconnect(ctx[i]);
        free(ctx);
        return 0;
}
