/* npuctl sessions, session kill ID and version. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "npuctl.h"

static const struct npuctl_col session_cols[] = {
        { "id", "SESSION", COL_DEFAULT },
        { "pid", "PID", COL_DEFAULT },
        { "uid", "UID", COL_DEFAULT },
        { "gid", "GID", COL_CSV },
        { "comm", "COMMAND", COL_DEFAULT },
        { "tenant", "TENANT", COL_DEFAULT },
        { "started", "STARTED", COL_DEFAULT }, /* table: local time; CSV: Unix seconds */
        { "buffers", "BUFFERS", COL_RIGHT | COL_DEFAULT },
        { "buffer_bytes", "DEVICE MEM", COL_RIGHT | COL_DEFAULT },
        { "regions", "REGIONS", COL_RIGHT | COL_CSV },
        { "region_bytes", "HOST MEM", COL_RIGHT | COL_CSV },
        { "streams", "STREAMS", COL_RIGHT | COL_DEFAULT },
        { "events", "EVENTS", COL_RIGHT | COL_DEFAULT },
        { "queued_tasks", "QUEUED", COL_RIGHT | COL_DEFAULT },
        { "tasks_submitted", "SUBMITTED", COL_RIGHT | COL_CSV },
        { "tasks_completed", "COMPLETED", COL_RIGHT | COL_CSV },
        { NULL, NULL, 0 },
};

int npuctl_cmd_sessions(struct npuctl *c, int argc, char **argv)
{
        static const char *const ints[] = { "id", "pid", "uid", "gid", "buffers", "regions", "streams",
                                            "events", "queued_tasks", "tasks_submitted",
                                            "tasks_completed" };
        struct npuctl_table *t;
        int code = 0;
        json_t *res, *s;
        size_t i;

        if (npuctl_nargs("sessions", argc, argv, 0, 0) < 0 ||
            npuctl_table_check_fields(c, session_cols))
                return NPUCTL_USAGE;
        res = npuctl_call(c, "sessions", NULL, &code);
        if (!res)
                return code;
        /* the session npuctl lists through is not one the admin is looking for */
        json_t *list = json_object_get(res, "sessions");
        for (i = json_array_size(list); i-- > 0;)
                if (json_is_true(json_object_get(json_array_get(list, i), "self")))
                        json_array_remove(list, i);
        if (c->json) {
                npuctl_print_json(json_object_get(res, "sessions"));
                json_decref(res);
                return 0;
        }
        t = npuctl_table_new(session_cols);
        json_array_foreach(json_object_get(res, "sessions"), i, s) {
                const char *comm = json_string_value(json_object_get(s, "comm"));
                npuctl_table_row(t);
                for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++)
                        npuctl_table_int(t, ints[k], json_integer_value(json_object_get(s, ints[k])));
                npuctl_table_str(t, "comm", comm ? comm : "");
                const char *tenant = json_string_value(json_object_get(s, "tenant"));
                npuctl_table_str(t, "tenant", tenant ? tenant : "");
                json_int_t started = json_integer_value(json_object_get(s, "started"));
                time_t when = (time_t)started;
                struct tm tm;
                char text[32], raw[24];
                if (started > 0 && localtime_r(&when, &tm))
                        strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
                else
                        snprintf(text, sizeof(text), "-");
                snprintf(raw, sizeof(raw), "%lld", (long long)started);
                npuctl_table_set(t, "started", text, raw);
                npuctl_table_bytes(t, "buffer_bytes",
                                   (uint64_t)json_integer_value(json_object_get(s, "buffer_bytes")));
                npuctl_table_bytes(t, "region_bytes",
                                   (uint64_t)json_integer_value(json_object_get(s, "region_bytes")));
        }
        code = npuctl_table_print(c, t);
        if (!code && !c->csv && !json_is_true(json_object_get(res, "all")))
                printf("(only your own sessions are shown; root and the admin group see all)\n");
        npuctl_table_free(t);
        json_decref(res);
        return code;
}

int npuctl_cmd_session(struct npuctl *c, int argc, char **argv)
{
        uint64_t id;
        int code;
        npu_status_t st;

        if (argc < 2 || strcmp(argv[1], "kill") != 0) {
                fprintf(stderr, argc < 2 ? "npuctl session: missing subcommand (session kill ID)\n"
                                         : "npuctl session: unknown subcommand '%s' (session kill ID)\n",
                        npuctl_esc(argv[1]));
                return NPUCTL_USAGE;
        }
        if (npuctl_nargs("session kill", argc - 1, argv + 1, 1, 1) < 0 ||
            npuctl_parse_u64("session kill", "session", argv[2], &id) < 0)
                return NPUCTL_USAGE;
        if ((code = npuctl_connect(c)) != 0)
                return code;
        st = npu_admin_session_kill(c->ctx, id);
        if (st != NPU_OK)
                return npuctl_failed("session_kill", st);
        if (c->json)
                printf("{}\n");
        else
                printf("session %llu killed\n", (unsigned long long)id);
        return 0;
}

int npuctl_cmd_version(struct npuctl *c, int argc, char **argv)
{
        int code = 0;
        json_t *res;

        if (npuctl_nargs("version", argc, argv, 0, 0) < 0)
                return NPUCTL_USAGE;
        res = npuctl_call(c, "version", NULL, &code);
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
                       v ? npuctl_esc(v) : "?", (long long)json_integer_value(json_object_get(res, "protocol")));
        }
        json_decref(res);
        return 0;
}
