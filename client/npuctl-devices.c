/* npuctl devices: the device table, in the spirit of npu-smi info. */
#include <stdio.h>

#include "npuctl.h"

int npuctl_cmd_devices(struct npuctl *c, int argc, char **argv)
{
        int code = 0;
        json_t *res, *dev;
        size_t i;

        if (argc > 1) {
                fprintf(stderr, "npuctl devices: unexpected argument '%s'\n", argv[1]);
                return NPUCTL_USAGE;
        }
        res = npuctl_call(c, "devices", &code);
        if (!res)
                return code;
        if (c->json) {
                npuctl_print_json(json_object_get(res, "devices"));
                json_decref(res);
                return 0;
        }
        static const char rule[] =
                "+------+--------+---------+-------------------------+---------+---------+----------+---------+";
        printf("%s\n| %-4s | %-6s | %-7s | %-23s | %-7s | %-7s | %-8s | %-7s |\n%s\n", rule, "NPU",
               "Name", "Health", "Memory used / total", "AICore%", "Vector%", "Sessions", "Streams", rule);
        json_array_foreach(json_object_get(res, "devices"), i, dev) {
                json_int_t id = 0, used = 0, total = 0, sessions = 0, streams = 0;
                const char *profile = "?", *health = "?";
                double cube = 0, vector = 0;
                char u[32], t[32], mem[80];

                json_unpack(dev, "{s?I, s?s, s?s, s?I, s?I, s?I, s?I, s?{s?F, s?F}}", "id", &id,
                            "profile", &profile, "health", &health, "memory_used", &used,
                            "memory_total", &total, "sessions", &sessions, "streams", &streams,
                            "utilization", "cube", &cube, "vector", &vector);
                npuctl_format_bytes((double)used, u, sizeof(u));
                npuctl_format_bytes((double)total, t, sizeof(t));
                snprintf(mem, sizeof(mem), "%s / %s", u, t);
                printf("| %-4lld | %-6s | %-7s | %-23s | %7.1f | %7.1f | %8lld | %7lld |\n",
                       (long long)id, profile, health, mem, cube, vector, (long long)sessions,
                       (long long)streams);
        }
        printf("%s\n", rule);
        json_decref(res);
        return 0;
}
