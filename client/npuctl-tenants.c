/* npuctl tenants, quota show/set, sched and reload: tenants with their policy and usage,
 * device-memory quotas, what each tenant got from the scheduler on each device (tasks,
 * engine time, share against the configured share, queue wait), and configuration reload. */
#include <stdio.h>
#include <string.h>

#include "npuctl.h"

static json_int_t get_int(json_t *o, const char *key)
{
        return json_integer_value(json_object_get(o, key));
}

static const char *get_str(json_t *o, const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : "?";
}

/* A limit where 0 means none: "unlimited" for people, 0 for scripts. */
static void set_limit_bytes(struct npuctl_table *t, const char *key, json_int_t v)
{
        if (v)
                npuctl_table_bytes(t, key, (uint64_t)v);
        else
                npuctl_table_set(t, key, "unlimited", "0");
}

static void set_limit(struct npuctl_table *t, const char *key, json_int_t v)
{
        if (v)
                npuctl_table_int(t, key, v);
        else
                npuctl_table_set(t, key, "unlimited", "0");
}

static const struct npuctl_col tenant_cols[] = {
        { "name", "TENANT", COL_DEFAULT },
        { "class", "CLASS", COL_DEFAULT },
        { "weight", "WEIGHT", COL_RIGHT | COL_DEFAULT },
        { "sessions", "SESSIONS", COL_RIGHT | COL_DEFAULT },
        { "streams", "STREAMS", COL_RIGHT | COL_DEFAULT },
        { "queued_tasks", "QUEUED", COL_RIGHT | COL_DEFAULT },
        { "memory_used", "MEMORY", COL_RIGHT | COL_DEFAULT },
        { "memory_quota_total", "QUOTA", COL_RIGHT | COL_DEFAULT },
        { "memory_quota_per_device", "QUOTA/DEVICE", COL_RIGHT | COL_DEFAULT },
        { "max_streams", "MAX STREAMS", COL_RIGHT | COL_CSV },
        { "max_queued_tasks", "MAX QUEUED", COL_RIGHT | COL_CSV },
        { "devices", "DEVICES", COL_DEFAULT },
        { NULL, NULL, 0 },
};

int npuctl_cmd_tenants(struct npuctl *c, int argc, char **argv)
{
        static const char *const ints[] = { "sessions", "streams", "queued_tasks" };
        struct npuctl_table *t;
        int code = 0;
        json_t *res, *e, *d;
        size_t i, k;

        if (npuctl_nargs("tenants", argc, argv, 0, 0) < 0 || npuctl_table_check_fields(c, tenant_cols))
                return NPUCTL_USAGE;
        if (!(res = npuctl_call(c, "tenants", NULL, &code)))
                return code;
        if (c->json) {
                npuctl_print_json(res);
                json_decref(res);
                return 0;
        }
        t = npuctl_table_new(tenant_cols);
        json_array_foreach(json_object_get(res, "tenants"), i, e) {
                char devs[256] = "";
                size_t pos = 0;
                npuctl_table_row(t);
                npuctl_table_str(t, "name", get_str(e, "name"));
                npuctl_table_str(t, "class", get_str(e, "class"));
                npuctl_table_num(t, "weight", "%g", json_number_value(json_object_get(e, "weight")));
                for (k = 0; k < sizeof(ints) / sizeof(ints[0]); k++)
                        npuctl_table_int(t, ints[k], get_int(e, ints[k]));
                npuctl_table_bytes(t, "memory_used", (uint64_t)get_int(e, "memory_used"));
                set_limit_bytes(t, "memory_quota_total", get_int(e, "memory_quota_total"));
                set_limit_bytes(t, "memory_quota_per_device", get_int(e, "memory_quota_per_device"));
                set_limit(t, "max_streams", get_int(e, "max_streams"));
                set_limit(t, "max_queued_tasks", get_int(e, "max_queued_tasks"));
                json_array_foreach(json_object_get(e, "devices"), k, d) {
                        int n = snprintf(devs + pos, sizeof(devs) - pos, "%s%lld", pos ? "," : "",
                                         (long long)json_integer_value(d));
                        if (n < 0 || (size_t)n >= sizeof(devs) - pos)
                                break;
                        pos += (size_t)n;
                }
                npuctl_table_str(t, "devices", pos ? devs : "none");
        }
        code = npuctl_table_print(c, t);
        if (!code && !c->csv && !c->fields && json_object_get(res, "placement"))
                printf("\nscheduler: placement %s, best-effort share at least %g, tiles of %lld us\n",
                       npuctl_esc(get_str(res, "placement")),
                       json_number_value(json_object_get(res, "min_best_effort_share")),
                       (long long)get_int(res, "tile_us"));
        npuctl_table_free(t);
        json_decref(res);
        return code;
}

static const struct npuctl_col quota_cols[] = {
        { "name", "TENANT", COL_DEFAULT },
        { "memory_used", "MEMORY USED", COL_RIGHT | COL_DEFAULT },
        { "memory_quota_total", "QUOTA TOTAL", COL_RIGHT | COL_DEFAULT },
        { "memory_quota_per_device", "QUOTA PER DEVICE", COL_RIGHT | COL_DEFAULT },
        { "memory_quota_by_device", "BY DEVICE", COL_DEFAULT },
        { "runtime", "SET AT RUN TIME", COL_DEFAULT },
        { NULL, NULL, 0 },
};

/* The quota in force on each device: "0:1.0 GiB 1:512 MiB" for people, "0:1073741824
 * 1:536870912" for scripts (0: unlimited). */
static void set_by_device(struct npuctl_table *t, json_t *e)
{
        char text[512] = "", raw[512] = "", b[32];
        size_t pt = 0, pr = 0, i;
        json_t *q;

        json_array_foreach(json_object_get(e, "memory_quota_by_device"), i, q) {
                json_int_t v = json_integer_value(q);
                if (v)
                        npuctl_format_bytes((double)v, b, sizeof(b));
                int n = snprintf(text + pt, sizeof(text) - pt, "%s%zu:%s", pt ? " " : "", i,
                                 v ? b : "unlimited");
                int m = snprintf(raw + pr, sizeof(raw) - pr, "%s%zu:%lld", pr ? " " : "", i, (long long)v);
                if (n < 0 || m < 0 || (size_t)n >= sizeof(text) - pt || (size_t)m >= sizeof(raw) - pr)
                        break;
                pt += (size_t)n;
                pr += (size_t)m;
        }
        npuctl_table_set(t, "memory_quota_by_device", pt ? text : "-", pr ? raw : "");
}

/* Which quotas were set with `quota set` (they survive reloads that leave the file's value
 * of that quota alone): "total;device 1" or "-" ("" in CSV). */
static void set_runtime(struct npuctl_table *t, json_t *e)
{
        json_t *rt = json_object_get(e, "runtime_quotas"), *d;
        char text[256] = "";
        size_t pos = 0, i;

        if (json_object_get(rt, "total"))
                pos += (size_t)snprintf(text, sizeof(text), "total");
        json_array_foreach(json_object_get(rt, "devices"), i, d) {
                int n = snprintf(text + pos, sizeof(text) - pos, "%sdevice %lld", pos ? ";" : "",
                                 (long long)get_int(d, "device"));
                if (n < 0 || (size_t)n >= sizeof(text) - pos)
                        break;
                pos += (size_t)n;
        }
        npuctl_table_set(t, "runtime", pos ? text : "-", pos ? text : "");
}

static int quota_show(struct npuctl *c, int argc, char **argv)
{
        const char *name = argc > 2 ? argv[2] : NULL;
        struct npuctl_table *t;
        json_t *res, *e, *found = NULL;
        int code = 0;
        size_t i;

        if (npuctl_nargs("quota show", argc - 1, argv + 1, 0, 1) < 0 ||
            npuctl_table_check_fields(c, quota_cols))
                return NPUCTL_USAGE;
        if (!(res = npuctl_call(c, "tenants", NULL, &code)))
                return code;
        if (name) {
                json_array_foreach(json_object_get(res, "tenants"), i, e)
                        if (strcmp(get_str(e, "name"), name) == 0)
                                found = e;
                if (!found) {
                        fprintf(stderr, "npuctl quota show: no tenant '%s' (tenants:", npuctl_esc(name));
                        json_array_foreach(json_object_get(res, "tenants"), i, e)
                                fprintf(stderr, "%s%s", i ? ", " : " ", npuctl_esc(get_str(e, "name")));
                        fprintf(stderr, ")\n");
                        json_decref(res);
                        return NPUCTL_ERROR;
                }
        }
        if (c->json) {
                json_t *out = json_array();
                json_array_foreach(json_object_get(res, "tenants"), i, e)
                        if (!found || e == found)
                                json_array_append_new(out, json_pack("{s:O, s:O, s:O, s:O, s:O*, s:O*}",
                                        "name", json_object_get(e, "name"),
                                        "memory_used", json_object_get(e, "memory_used"),
                                        "memory_quota_total", json_object_get(e, "memory_quota_total"),
                                        "memory_quota_per_device", json_object_get(e, "memory_quota_per_device"),
                                        "memory_quota_by_device", json_object_get(e, "memory_quota_by_device"),
                                        "runtime_quotas", json_object_get(e, "runtime_quotas")));
                npuctl_print_json(out);
                json_decref(out);
                json_decref(res);
                return 0;
        }
        t = npuctl_table_new(quota_cols);
        json_array_foreach(json_object_get(res, "tenants"), i, e) {
                if (found && e != found)
                        continue;
                npuctl_table_row(t);
                npuctl_table_str(t, "name", get_str(e, "name"));
                npuctl_table_bytes(t, "memory_used", (uint64_t)get_int(e, "memory_used"));
                set_limit_bytes(t, "memory_quota_total", get_int(e, "memory_quota_total"));
                set_limit_bytes(t, "memory_quota_per_device", get_int(e, "memory_quota_per_device"));
                set_by_device(t, e);
                set_runtime(t, e);
        }
        code = npuctl_table_print(c, t);
        npuctl_table_free(t);
        json_decref(res);
        return code;
}

static int quota_set(struct npuctl *c, int argc, char **argv)
{
        const char *ops[3];
        int nops = 0, dev = -1, code = 0;
        uint64_t bytes;
        json_t *params, *res;
        char b[32];

        /* quota set TENANT [--device N] BYTES, with --device anywhere after "set" */
        for (int i = 2; i < argc; i++) {
                if (strcmp(argv[i], "--device") == 0 || strncmp(argv[i], "--device=", 9) == 0) {
                        const char *v = argv[i][8] == '=' ? argv[i] + 9 : i + 1 < argc ? argv[++i] : NULL;
                        if (!v) {
                                fprintf(stderr, "npuctl quota set: --device needs a device number\n");
                                return NPUCTL_USAGE;
                        }
                        if (npuctl_parse_device("quota set", v, &dev) < 0)
                                return NPUCTL_USAGE;
                } else if (argv[i][0] == '-' && argv[i][1]) {
                        fprintf(stderr, "npuctl quota set: unknown option '%s'\n", npuctl_esc(argv[i]));
                        return NPUCTL_USAGE;
                } else if (nops < 3) {
                        ops[nops++] = argv[i];
                } else {
                        nops++;
                }
        }
        if (nops != 2) {
                fprintf(stderr, "npuctl quota set: %s (quota set TENANT [--device N] BYTES)\n",
                        nops < 2 ? "missing argument" : "too many arguments");
                return NPUCTL_USAGE;
        }
        if (npuctl_parse_bytes("quota set", ops[1], &bytes) < 0)
                return NPUCTL_USAGE;
        params = json_pack("{s:s, s:i, s:I}", "tenant", ops[0], "device", dev, "bytes", (json_int_t)bytes);
        res = npuctl_call(c, "quota_set", params, &code);
        json_decref(params);
        if (!res)
                return code;
        if (c->json) {
                npuctl_print_json(res);
        } else {
                npuctl_format_bytes((double)bytes, b, sizeof(b));
                if (dev < 0)
                        printf("tenant '%s': total device-memory quota %s\n", npuctl_esc(ops[0]),
                               bytes ? b : "unlimited");
                else
                        printf("tenant '%s': device-memory quota on device %d %s\n",
                               npuctl_esc(ops[0]), dev, bytes ? b : "unlimited");
        }
        /* on stderr, so scripts reading stdout (or the JSON's "warning") are not confused */
        if (json_is_string(json_object_get(res, "warning")))
                fprintf(stderr, "npuctl quota set: warning: %s\n",
                        npuctl_esc(json_string_value(json_object_get(res, "warning"))));
        json_decref(res);
        return 0;
}

int npuctl_cmd_quota(struct npuctl *c, int argc, char **argv)
{
        const char *sub = argc > 1 ? argv[1] : "";

        if (strcmp(sub, "show") == 0)
                return quota_show(c, argc, argv);
        if (strcmp(sub, "set") == 0)
                return quota_set(c, argc, argv);
        fprintf(stderr, "npuctl quota: %s%s%s (quota show [TENANT] | quota set TENANT [--device N] BYTES)\n",
                *sub ? "unknown subcommand '" : "missing subcommand", npuctl_esc(sub), *sub ? "'" : "");
        return NPUCTL_USAGE;
}

static const struct npuctl_col sched_cols[] = {
        { "device", "NPU", COL_DEFAULT },
        { "tenant", "TENANT", COL_DEFAULT },
        { "class", "CLASS", COL_DEFAULT },
        { "weight", "WEIGHT", COL_RIGHT | COL_DEFAULT },
        { "tasks", "TASKS", COL_RIGHT | COL_DEFAULT },
        { "failed", "FAILED", COL_RIGHT | COL_DEFAULT },
        { "cancelled", "CANCELLED", COL_RIGHT | COL_DEFAULT },
        { "engine_seconds", "ENGINE-S", COL_RIGHT | COL_DEFAULT },
        { "share", "SHARE", COL_RIGHT | COL_DEFAULT },
        { "target_share", "TARGET", COL_RIGHT | COL_DEFAULT },
        { "wait_p50_us", "WAIT P50", COL_RIGHT | COL_DEFAULT },
        { "wait_p99_us", "WAIT P99", COL_RIGHT | COL_DEFAULT },
        { NULL, NULL, 0 },
};

/* Shares: a percentage for people, the fraction 0..1 for scripts. */
static void set_share(struct npuctl_table *t, const char *key, double v)
{
        char text[32], raw[32];
        snprintf(text, sizeof(text), "%.1f%%", 100 * v);
        snprintf(raw, sizeof(raw), "%.6f", v);
        npuctl_table_set(t, key, text, raw);
}

static void set_wait(struct npuctl_table *t, const char *key, double us)
{
        char text[32], raw[32];
        if (us >= 10000)
                snprintf(text, sizeof(text), "%.1f ms", us / 1000);
        else
                snprintf(text, sizeof(text), "%.0f us", us);
        snprintf(raw, sizeof(raw), "%.3f", us);
        npuctl_table_set(t, key, text, raw);
}

int npuctl_cmd_sched(struct npuctl *c, int argc, char **argv)
{
        struct npuctl_table *t;
        json_t *res, *dev, *e;
        int code = 0;
        size_t i, k;

        if (npuctl_nargs("sched", argc, argv, 0, 0) < 0 || npuctl_table_check_fields(c, sched_cols))
                return NPUCTL_USAGE;
        if (!(res = npuctl_call(c, "sched", NULL, &code)))
                return code;
        if (c->json) {
                npuctl_print_json(json_object_get(res, "devices"));
                json_decref(res);
                return 0;
        }
        t = npuctl_table_new(sched_cols);
        json_array_foreach(json_object_get(res, "devices"), i, dev) {
                json_array_foreach(json_object_get(dev, "tenants"), k, e) {
                        npuctl_table_row(t);
                        npuctl_table_int(t, "device", get_int(dev, "id"));
                        if (json_is_true(json_object_get(e, "removed"))) {
                                /* removed by a reload: its work stays counted */
                                char name[160];
                                snprintf(name, sizeof(name), "%s (removed)", get_str(e, "name"));
                                npuctl_table_str(t, "tenant", name);
                        } else {
                                npuctl_table_str(t, "tenant", get_str(e, "name"));
                        }
                        npuctl_table_str(t, "class", get_str(e, "class"));
                        npuctl_table_num(t, "weight", "%g", json_number_value(json_object_get(e, "weight")));
                        npuctl_table_int(t, "tasks", get_int(e, "tasks"));
                        npuctl_table_int(t, "failed", get_int(e, "failed"));
                        npuctl_table_int(t, "cancelled", get_int(e, "cancelled"));
                        npuctl_table_num(t, "engine_seconds", "%.3f",
                                         json_number_value(json_object_get(e, "engine_seconds")));
                        set_share(t, "share", json_number_value(json_object_get(e, "share")));
                        set_share(t, "target_share", json_number_value(json_object_get(e, "target_share")));
                        set_wait(t, "wait_p50_us", json_number_value(json_object_get(e, "wait_p50_us")));
                        set_wait(t, "wait_p99_us", json_number_value(json_object_get(e, "wait_p99_us")));
                }
        }
        code = npuctl_table_print(c, t);
        npuctl_table_free(t);
        json_decref(res);
        return code;
}

int npuctl_cmd_reload(struct npuctl *c, int argc, char **argv)
{
        json_t *res;
        int code = 0;

        if (npuctl_nargs("reload", argc, argv, 0, 0) < 0)
                return NPUCTL_USAGE;
        if (!(res = npuctl_call(c, "reload", NULL, &code)))
                return code;
        if (c->json) {
                npuctl_print_json(res);
        } else {
                json_t *kept = json_object_get(res, "runtime_quotas_kept"), *e;
                size_t i;
                printf("configuration reloaded\n");
                /* run-time quotas outlive a reload unless the file changed that quota */
                json_array_foreach(kept, i, e)
                        printf("tenant '%s' keeps its %s quota set with 'npuctl quota set'\n",
                               npuctl_esc(get_str(e, "tenant")), npuctl_esc(get_str(e, "quota")));
                json_array_foreach(json_object_get(res, "runtime_quotas_dropped"), i, e)
                        printf("tenant '%s': %s quota set with 'npuctl quota set' replaced by the "
                               "configuration file's\n", npuctl_esc(get_str(e, "tenant")),
                               npuctl_esc(get_str(e, "quota")));
        }
        json_decref(res);
        return 0;
}
