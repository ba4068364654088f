/* npuctl mem [DEV]: device memory per device (use, largest free block, free segments,
 * fragmentation) and who holds it: sessions (all of them for root and the admin group) and
 * tenants. As CSV or with --fields it is one row per device. */
#include <stdio.h>

#include "npuctl.h"

static const struct npuctl_col mem_cols[] = {
        { "device", "NPU", COL_DEFAULT },
        { "total", "TOTAL", COL_RIGHT | COL_DEFAULT },
        { "used", "USED", COL_RIGHT | COL_DEFAULT },
        { "free", "FREE", COL_RIGHT | COL_DEFAULT },
        { "largest_free", "LARGEST FREE", COL_RIGHT | COL_DEFAULT },
        { "free_segments", "FREE SEGMENTS", COL_RIGHT | COL_DEFAULT },
        { "fragmentation", "FRAGMENTATION", COL_RIGHT | COL_DEFAULT },
        { "sessions", "SESSIONS", COL_RIGHT | COL_DEFAULT },
        { NULL, NULL, 0 },
};

static json_int_t get_int(json_t *o, const char *key)
{
        return json_integer_value(json_object_get(o, key));
}

static const char *get_str(json_t *o, const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : "?";
}

static void print_device(json_t *d)
{
        char used[32], total[32], largest[32], b[32];
        json_t *e;
        size_t i;

        npuctl_format_bytes((double)get_int(d, "memory_used"), used, sizeof(used));
        npuctl_format_bytes((double)get_int(d, "memory_total"), total, sizeof(total));
        npuctl_format_bytes((double)get_int(d, "largest_free"), largest, sizeof(largest));
        printf("NPU %lld: %s used of %s; largest free block %s, %lld free segment%s, fragmentation %.1f%%\n",
               (long long)get_int(d, "id"), used, total, largest, (long long)get_int(d, "free_segments"),
               get_int(d, "free_segments") == 1 ? "" : "s",
               100 * json_number_value(json_object_get(d, "fragmentation")));
        if (json_array_size(json_object_get(d, "sessions"))) {
                printf("  %-8s %-8s %-6s %-16s %-16s %12s\n", "SESSION", "PID", "UID", "COMMAND", "TENANT",
                       "MEMORY");
                json_array_foreach(json_object_get(d, "sessions"), i, e) {
                        npuctl_format_bytes((double)get_int(e, "bytes"), b, sizeof(b));
                        printf("  %-8lld %-8lld %-6lld %-16s %-16s %12s\n", (long long)get_int(e, "id"),
                               (long long)get_int(e, "pid"), (long long)get_int(e, "uid"),
                               npuctl_esc(get_str(e, "comm")), npuctl_esc(get_str(e, "tenant")), b);
                }
        } else {
                printf("  no session holds memory here\n");
        }
        if (json_array_size(json_object_get(d, "tenants"))) {
                printf("  %-16s %12s\n", "TENANT", "MEMORY");
                json_array_foreach(json_object_get(d, "tenants"), i, e) {
                        npuctl_format_bytes((double)get_int(e, "bytes"), b, sizeof(b));
                        printf("  %-16s %12s\n", npuctl_esc(get_str(e, "name")), b);
                }
        }
}

int npuctl_cmd_mem(struct npuctl *c, int argc, char **argv)
{
        json_t *params = NULL, *res, *d;
        int code = 0, dev;
        size_t i;

        if (npuctl_nargs("mem", argc, argv, 0, 1) < 0 || npuctl_table_check_fields(c, mem_cols))
                return NPUCTL_USAGE;
        if (argc > 1) {
                if (npuctl_parse_device("mem", argv[1], &dev) < 0)
                        return NPUCTL_USAGE;
                params = json_pack("{s:i}", "device", dev);
        }
        res = npuctl_call(c, "mem", params, &code);
        json_decref(params);
        if (!res)
                return code;
        if (c->json) {
                npuctl_print_json(res);
        } else if (c->csv || c->fields) {
                struct npuctl_table *t = npuctl_table_new(mem_cols);
                json_array_foreach(json_object_get(res, "devices"), i, d) {
                        npuctl_table_row(t);
                        npuctl_table_int(t, "device", get_int(d, "id"));
                        npuctl_table_bytes(t, "total", (uint64_t)get_int(d, "memory_total"));
                        npuctl_table_bytes(t, "used", (uint64_t)get_int(d, "memory_used"));
                        npuctl_table_bytes(t, "free", (uint64_t)get_int(d, "free_bytes"));
                        npuctl_table_bytes(t, "largest_free", (uint64_t)get_int(d, "largest_free"));
                        npuctl_table_int(t, "free_segments", get_int(d, "free_segments"));
                        double f = json_number_value(json_object_get(d, "fragmentation"));
                        char ft[32], fr[32];
                        /* a person reads a percentage; a script gets the fraction 0..1 */
                        snprintf(ft, sizeof(ft), "%.1f%%", 100 * f);
                        snprintf(fr, sizeof(fr), "%.6f", f);
                        npuctl_table_set(t, "fragmentation", ft, fr);
                        npuctl_table_int(t, "sessions", (long long)json_array_size(json_object_get(d, "sessions")));
                }
                code = npuctl_table_print(c, t);
                npuctl_table_free(t);
        } else {
                json_array_foreach(json_object_get(res, "devices"), i, d) {
                        if (i)
                                printf("\n");
                        print_device(d);
                }
                if (!json_is_true(json_object_get(res, "all")))
                        printf("(only your own sessions are shown; root and the admin group see all)\n");
        }
        json_decref(res);
        return code;
}
