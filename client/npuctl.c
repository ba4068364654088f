/* npuctl: the administration CLI of npud (the npu-smi of this host). Talks to npud only
 * through libnpu. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npuctl.h"

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: npuctl [--socket PATH] [--json] COMMAND\n"
                "Administer npud, the NPU runtime service.\n\n"
                "Commands:\n"
                "  devices       table of devices: health, memory, AI core use, sessions\n"
                "  sessions      client sessions (all of them for root and the admin group)\n"
                "  version       npuctl, libnpu and npud versions\n\n"
                "Options:\n"
                "  --socket PATH  npud socket (default: $NPU_SOCKET or the per-user socket)\n"
                "  --json         machine-readable output\n"
                "  --help         this help\n\n"
                "Exit codes: 0 ok, 1 request failed, 2 usage, 3 npud unreachable, 4 permission denied.\n");
}

json_t *npuctl_call(struct npuctl *c, const char *method, int *ret_code)
{
        char *text = NULL;
        npu_status_t st;
        json_t *v;

        if (!c->ctx) {
                st = npu_connect(c->socket, &c->ctx);
                if (st != NPU_OK) {
                        fprintf(stderr, "npuctl: %s\n", npu_error_message());
                        *ret_code = NPUCTL_CONNECT;
                        return NULL;
                }
        }
        st = npu_admin_call(c->ctx, method, NULL, &text);
        if (st != NPU_OK) {
                fprintf(stderr, "npuctl: %s: %s\n", method, npu_error_message());
                *ret_code = st == NPU_ERR_PERMISSION ? NPUCTL_PERMISSION
                          : st == NPU_ERR_CONNECTION ? NPUCTL_CONNECT
                                                      : NPUCTL_ERROR;
                return NULL;
        }
        v = json_loads(text, 0, NULL);
        free(text);
        if (!v) {
                fprintf(stderr, "npuctl: %s: unreadable answer\n", method);
                *ret_code = NPUCTL_ERROR;
        }
        return v;
}

void npuctl_print_json(json_t *v)
{
        char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s)
                printf("%s\n", s);
        free(s);
}

void npuctl_format_bytes(double bytes, char *buf, size_t len)
{
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        int u = 0;

        while (bytes >= 1024 && u < 4) {
                bytes /= 1024;
                u++;
        }
        snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        static const struct {
                const char *name;
                int (*fn)(struct npuctl *c, int argc, char **argv);
        } cmds[] = {
                { "devices", npuctl_cmd_devices },
                { "sessions", npuctl_cmd_sessions },
                { "version", npuctl_cmd_version },
        };
        struct npuctl c = { 0 };
        int opt, r = NPUCTL_USAGE;

        while ((opt = getopt_long(argc, argv, "+s:jh", opts, NULL)) != -1) {
                switch (opt) {
                case 's': c.socket = optarg; break;
                case 'j': c.json = 1; break;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return NPUCTL_USAGE;
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return NPUCTL_USAGE;
        }
        for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
                if (strcmp(argv[optind], cmds[i].name) == 0) {
                        r = cmds[i].fn(&c, argc - optind, argv + optind);
                        npu_disconnect(c.ctx);
                        return r;
                }
        fprintf(stderr, "npuctl: unknown command '%s' (see npuctl --help)\n", argv[optind]);
        return NPUCTL_USAGE;
}
