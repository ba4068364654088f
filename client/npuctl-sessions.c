/* npuctl sessions and npuctl version. */
#include <stdio.h>

#include "npuctl.h"

int npuctl_cmd_sessions(struct npuctl *c, int argc, char **argv)
{
        int code = 0;
        json_t *res, *s;
        size_t i;

        if (argc > 1) {
                fprintf(stderr, "npuctl sessions: unexpected argument '%s'\n", argv[1]);
                return NPUCTL_USAGE;
        }
        res = npuctl_call(c, "sessions", &code);
        if (!res)
                return code;
        if (c->json) {
                npuctl_print_json(json_object_get(res, "sessions"));
                json_decref(res);
                return 0;
        }
        printf("%-8s %-8s %-6s %-16s %8s %12s %8s %8s %10s\n", "SESSION", "PID", "UID", "COMMAND",
               "BUFFERS", "DEVICE MEM", "STREAMS", "EVENTS", "QUEUED");
        json_array_foreach(json_object_get(res, "sessions"), i, s) {
                json_int_t id = 0, pid = 0, uid = 0, bufs = 0, bytes = 0, streams = 0, events = 0, queued = 0;
                const char *comm = "";
                char b[32];
                json_unpack(s, "{s?I, s?I, s?I, s?s, s?I, s?I, s?I, s?I, s?I}", "id", &id, "pid", &pid,
                            "uid", &uid, "comm", &comm, "buffers", &bufs, "buffer_bytes", &bytes,
                            "streams", &streams, "events", &events, "queued_tasks", &queued);
                npuctl_format_bytes((double)bytes, b, sizeof(b));
                printf("%-8lld %-8lld %-6lld %-16s %8lld %12s %8lld %8lld %10lld\n", (long long)id,
                       (long long)pid, (long long)uid, comm, (long long)bufs, b, (long long)streams,
                       (long long)events, (long long)queued);
        }
        if (!json_is_true(json_object_get(res, "all")))
                printf("(only your own sessions are shown; root and the admin group see all)\n");
        json_decref(res);
        return 0;
}

int npuctl_cmd_version(struct npuctl *c, int argc, char **argv)
{
        int code = 0;
        json_t *res = npuctl_call(c, "version", &code);

        if (!res) {
                if (!c->json)
                        printf("npuctl %s (libnpu %s); npud not reachable\n", npu_version(), npu_version());
                return code;
        }
        if (c->json) {
                json_object_set_new(res, "npuctl", json_string(npu_version()));
                npuctl_print_json(res);
        } else {
                const char *v = json_string_value(json_object_get(res, "version"));
                printf("npuctl %s\nlibnpu %s\nnpud %s (protocol %lld)\n", npu_version(), npu_version(),
                       v ? v : "?", (long long)json_integer_value(json_object_get(res, "protocol")));
        }
        json_decref(res);
        return 0;
}
