/* npuctl devices, device show N and health: the device table in the spirit of npu-smi info,
 * one device in detail, and device health with drain state and injected faults. */
#include <stdio.h>
#include <string.h>

#include "npuctl.h"

static const struct npuctl_col device_cols[] = {
        { "id", "NPU", COL_DEFAULT },
        { "name", "Device", COL_CSV },
        { "profile", "Name", COL_DEFAULT },
        { "health", "Health", COL_DEFAULT },
        { "draining", "Draining", COL_CSV },
        { "memory", "Memory used / total", COL_TABLE },
        { "memory_used", "Memory used", COL_RIGHT | COL_CSV },
        { "memory_total", "Memory total", COL_RIGHT | COL_CSV },
        { "largest_free", "Largest free", COL_RIGHT | COL_CSV },
        { "cube", "AICore%", COL_RIGHT | COL_DEFAULT },
        { "vector", "Vector%", COL_RIGHT | COL_DEFAULT },
        { "aicpu", "AICPU%", COL_RIGHT | COL_CSV },
        { "dma", "DMA%", COL_RIGHT | COL_CSV },
        { "sessions", "Sessions", COL_RIGHT | COL_DEFAULT },
        { "streams", "Streams", COL_RIGHT | COL_DEFAULT },
        { "tasks_completed", "Tasks done", COL_RIGHT | COL_CSV },
        { "tasks_failed", "Tasks failed", COL_RIGHT | COL_CSV },
        { "temperature", "Temp(C)", COL_RIGHT | COL_DEFAULT },
        { "power", "Power(W)", COL_RIGHT | COL_DEFAULT },
        { "power_limit", "Power limit(W)", COL_RIGHT | COL_CSV },
        { "clock_mhz", "AICore MHz", COL_RIGHT | COL_CSV },
        { "ecc_corrected", "ECC corrected", COL_RIGHT | COL_CSV },
        { "ecc_uncorrected", "ECC uncorrected", COL_RIGHT | COL_CSV },
        { "uuid", "UUID", COL_CSV },
        { "serial", "Serial", COL_CSV },
        { "bus_id", "Bus-Id", COL_CSV },
        { "firmware", "Firmware", COL_CSV },
        { "driver", "Driver", COL_CSV },
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

/* Utilization: npud answers a percentage (JSON, D-Bus); the table shows it so, CSV has the
 * fraction 0..1 like every share (npuctl(8)). */
static void set_util(struct npuctl_table *t, const char *engine, json_t *util)
{
        double pct = json_number_value(json_object_get(util, engine));
        char text[32], raw[32];

        snprintf(text, sizeof(text), "%.1f", pct);
        snprintf(raw, sizeof(raw), "%.6f", pct / 100.0);
        npuctl_table_set(t, engine, text, raw);
}

static void device_row(struct npuctl_table *t, json_t *dev)
{
        json_t *util = json_object_get(dev, "utilization");
        int draining = json_is_true(json_object_get(dev, "draining"));
        char u[32], tot[32], mem[80], health[48];

        npuctl_table_row(t);
        npuctl_table_int(t, "id", get_int(dev, "id"));
        npuctl_table_str(t, "name", get_str(dev, "name"));
        npuctl_table_str(t, "profile", get_str(dev, "profile"));
        snprintf(health, sizeof(health), "%s%s", get_str(dev, "health"), draining ? ", draining" : "");
        npuctl_table_set(t, "health", health, get_str(dev, "health"));
        npuctl_table_set(t, "draining", draining ? "yes" : "no", draining ? "1" : "0");
        npuctl_format_bytes((double)get_int(dev, "memory_used"), u, sizeof(u));
        npuctl_format_bytes((double)get_int(dev, "memory_total"), tot, sizeof(tot));
        snprintf(mem, sizeof(mem), "%s / %s", u, tot);
        /* CSV has raw numbers only: the bytes in use, as memory_used */
        snprintf(u, sizeof(u), "%lld", (long long)get_int(dev, "memory_used"));
        npuctl_table_set(t, "memory", mem, u);
        npuctl_table_bytes(t, "memory_used", (uint64_t)get_int(dev, "memory_used"));
        npuctl_table_bytes(t, "memory_total", (uint64_t)get_int(dev, "memory_total"));
        npuctl_table_bytes(t, "largest_free", (uint64_t)get_int(dev, "largest_free"));
        set_util(t, "cube", util);
        set_util(t, "vector", util);
        set_util(t, "aicpu", util);
        set_util(t, "dma", util);
        npuctl_table_int(t, "sessions", get_int(dev, "sessions"));
        npuctl_table_int(t, "streams", get_int(dev, "streams"));
        npuctl_table_int(t, "tasks_completed", get_int(dev, "tasks_completed"));
        npuctl_table_int(t, "tasks_failed", get_int(dev, "tasks_failed"));
        json_t *ecc = json_object_get(dev, "ecc");
        if (json_is_number(json_object_get(dev, "temperature"))) {
                npuctl_table_num(t, "temperature", "%.0f", json_number_value(json_object_get(dev, "temperature")));
                npuctl_table_num(t, "power", "%.1f", json_number_value(json_object_get(dev, "power")));
                npuctl_table_num(t, "power_limit", "%.0f", json_number_value(json_object_get(dev, "power_limit")));
                npuctl_table_num(t, "clock_mhz", "%.0f", json_number_value(json_object_get(dev, "clock_mhz")));
                npuctl_table_int(t, "ecc_corrected", get_int(ecc, "corrected"));
                npuctl_table_int(t, "ecc_uncorrected", get_int(ecc, "uncorrected"));
        } else {
                /* npud reads no sensors ("telemetry": false): not zeros; CSV cells stay empty */
                static const char *const keys[] = { "temperature", "power", "power_limit", "clock_mhz",
                                                    "ecc_corrected", "ecc_uncorrected" };
                for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                        npuctl_table_set(t, keys[k], "n/a", "");
        }
        npuctl_table_str(t, "uuid", get_str(dev, "uuid"));
        npuctl_table_str(t, "serial", get_str(dev, "serial"));
        npuctl_table_str(t, "bus_id", get_str(dev, "bus_id"));
        npuctl_table_str(t, "firmware", get_str(dev, "firmware"));
        npuctl_table_str(t, "driver", get_str(dev, "driver"));
}

int npuctl_cmd_devices(struct npuctl *c, int argc, char **argv)
{
        struct npuctl_table *t;
        int code = 0;
        json_t *res, *dev;
        size_t i;

        if (argc >= 2 && strcmp(argv[1], "--history") == 0)
                return npuctl_devices_history(c, argc - 1, argv + 1);
        if (npuctl_nargs("devices", argc, argv, 0, 0) < 0 ||
            npuctl_table_check_fields(c, device_cols))
                return NPUCTL_USAGE;
        res = npuctl_call(c, "devices", NULL, &code);
        if (!res)
                return code;
        if (c->json) {
                npuctl_print_json(json_object_get(res, "devices"));
                json_decref(res);
                return 0;
        }
        t = npuctl_table_new(device_cols);
        npuctl_table_boxed(t);
        json_array_foreach(json_object_get(res, "devices"), i, dev)
                device_row(t, dev);
        code = npuctl_table_print(c, t);
        npuctl_table_free(t);
        json_decref(res);
        return code;
}

/* "fail-next 2, slow x4" from the daemon's faults list; "none" when empty. */
static void faults_text(json_t *faults, char *buf, size_t len)
{
        json_t *f;
        size_t i, pos = 0;

        buf[0] = 0;
        json_array_foreach(faults, i, f) {
                const char *kind = get_str(f, "kind");
                double v = json_number_value(json_object_get(f, "value"));
                int n;
                if (strcmp(kind, "fail-next") == 0)
                        n = snprintf(buf + pos, len - pos, "%s%s %.0f", pos ? ", " : "", kind, v);
                else if (strcmp(kind, "slow") == 0)
                        n = snprintf(buf + pos, len - pos, "%s%s x%g", pos ? ", " : "", kind, v);
                else
                        n = snprintf(buf + pos, len - pos, "%s%s", pos ? ", " : "", kind);
                if (n < 0 || (size_t)n >= len - pos)
                        break;
                pos += (size_t)n;
        }
        if (!pos)
                snprintf(buf, len, "none");
}

/* The CSV value of the faults: "fail-next=2;slow=4", empty when none. */
static void faults_raw(json_t *faults, char *buf, size_t len)
{
        json_t *f;
        size_t i, pos = 0;

        buf[0] = 0;
        json_array_foreach(faults, i, f) {
                int n = snprintf(buf + pos, len - pos, "%s%s=%g", pos ? ";" : "", get_str(f, "kind"),
                                 json_number_value(json_object_get(f, "value")));
                if (n < 0 || (size_t)n >= len - pos)
                        break;
                pos += (size_t)n;
        }
}

static const struct npuctl_col health_cols[] = {
        { "id", "NPU", COL_DEFAULT },
        { "health", "HEALTH", COL_DEFAULT },
        { "draining", "DRAINING", COL_DEFAULT },
        { "faults", "FAULTS", COL_DEFAULT },
        { NULL, NULL, 0 },
};

int npuctl_cmd_health(struct npuctl *c, int argc, char **argv)
{
        struct npuctl_table *t;
        int code = 0;
        json_t *res, *dev;
        size_t i;

        if (npuctl_nargs("health", argc, argv, 0, 0) < 0 || npuctl_table_check_fields(c, health_cols))
                return NPUCTL_USAGE;
        res = npuctl_call(c, "health", NULL, &code);
        if (!res)
                return code;
        if (c->json) {
                npuctl_print_json(json_object_get(res, "devices"));
                json_decref(res);
                return 0;
        }
        t = npuctl_table_new(health_cols);
        json_array_foreach(json_object_get(res, "devices"), i, dev) {
                int draining = json_is_true(json_object_get(dev, "draining"));
                char ft[256], fr[256];
                faults_text(json_object_get(dev, "faults"), ft, sizeof(ft));
                faults_raw(json_object_get(dev, "faults"), fr, sizeof(fr));
                npuctl_table_row(t);
                npuctl_table_int(t, "id", get_int(dev, "id"));
                npuctl_table_str(t, "health", get_str(dev, "health"));
                npuctl_table_set(t, "draining", draining ? "yes" : "no", draining ? "1" : "0");
                npuctl_table_set(t, "faults", ft, fr);
        }
        code = npuctl_table_print(c, t);
        npuctl_table_free(t);
        json_decref(res);
        return code;
}

/* The entry of list whose "id" (integer) or "name" (string) matches; NULL if none. */
static json_t *find_id(json_t *list, json_int_t id)
{
        json_t *e;
        size_t i;

        json_array_foreach(list, i, e)
                if (json_is_integer(json_object_get(e, "id")) && get_int(e, "id") == id)
                        return e;
        return NULL;
}

/* "0-1", "0", or "none": which devices there are, for the unknown-device message. */
static void device_range(json_t *devs, char *buf, size_t len)
{
        size_t n = json_array_size(devs);
        if (!n)
                snprintf(buf, len, "no devices");
        else if (n == 1)
                snprintf(buf, len, "device %lld", (long long)get_int(json_array_get(devs, 0), "id"));
        else
                snprintf(buf, len, "devices %lld-%lld", (long long)get_int(json_array_get(devs, 0), "id"),
                         (long long)get_int(json_array_get(devs, n - 1), "id"));
}

static void print_holders(json_t *mem)
{
        json_t *s;
        size_t i;

        if (json_array_size(json_object_get(mem, "sessions"))) {
                printf("\n%-8s %-8s %-16s %-16s %12s\n", "SESSION", "PID", "COMMAND", "TENANT", "MEMORY");
                json_array_foreach(json_object_get(mem, "sessions"), i, s) {
                        char b[32];
                        npuctl_format_bytes((double)get_int(s, "bytes"), b, sizeof(b));
                        printf("%-8lld %-8lld %-16s %-16s %12s\n", (long long)get_int(s, "id"),
                               (long long)get_int(s, "pid"), npuctl_esc(get_str(s, "comm")),
                               npuctl_esc(get_str(s, "tenant")), b);
                }
        }
}

static void print_tenants(json_t *sched_dev, json_t *mem)
{
        json_t *t;
        size_t i;

        if (!json_array_size(json_object_get(sched_dev, "tenants")))
                return;
        printf("\n%-16s %-16s %12s %10s %10s %7s %7s %11s %11s\n", "TENANT", "CLASS", "MEMORY",
               "TASKS", "ENGINE-S", "SHARE", "TARGET", "WAIT P50", "WAIT P99");
        json_array_foreach(json_object_get(sched_dev, "tenants"), i, t) {
                json_int_t bytes = 0;
                json_t *mt;
                size_t k;
                char b[32];
                json_array_foreach(json_object_get(mem, "tenants"), k, mt)
                        if (strcmp(get_str(mt, "name"), get_str(t, "name")) == 0)
                                bytes = get_int(mt, "bytes");
                char name[160];
                npuctl_format_bytes((double)bytes, b, sizeof(b));
                /* a tenant a reload removed: its work stays counted, as in sched and metrics */
                snprintf(name, sizeof(name), "%s%s", npuctl_esc(get_str(t, "name")),
                         json_is_true(json_object_get(t, "removed")) ? " (removed)" : "");
                printf("%-16s %-16s %12s %10lld %10.3f %6.1f%% %6.1f%% %8.0f us %8.0f us\n",
                       name, npuctl_esc(get_str(t, "class")), b,
                       (long long)get_int(t, "tasks"),
                       json_number_value(json_object_get(t, "engine_seconds")),
                       100 * json_number_value(json_object_get(t, "share")),
                       100 * json_number_value(json_object_get(t, "target_share")),
                       json_number_value(json_object_get(t, "wait_p50_us")),
                       json_number_value(json_object_get(t, "wait_p99_us")));
        }
}

int npuctl_cmd_device(struct npuctl *c, int argc, char **argv)
{
        json_t *devs = NULL, *health = NULL, *mem = NULL, *sched = NULL, *params;
        json_t *dev, *hdev, *mdev, *sdev, *util, *cores;
        int code = 0, id;
        char range[64], ft[256], b1[32], b2[32], b3[32];

        if (argc < 2 || strcmp(argv[1], "show") != 0) {
                fprintf(stderr, argc < 2 ? "npuctl device: missing subcommand (device show N)\n"
                                         : "npuctl device: unknown subcommand '%s' (device show N)\n",
                        npuctl_esc(argv[1]));
                return NPUCTL_USAGE;
        }
        if (npuctl_nargs("device show", argc - 1, argv + 1, 1, 1) < 0 ||
            npuctl_parse_device("device show", argv[2], &id) < 0 ||
            npuctl_table_check_fields(c, device_cols))
                return NPUCTL_USAGE;
        if (!(devs = npuctl_call(c, "devices", NULL, &code)))
                return code;
        dev = find_id(json_object_get(devs, "devices"), id);
        if (!dev) {
                device_range(json_object_get(devs, "devices"), range, sizeof(range));
                fprintf(stderr, "npuctl device show: no device %d (npud has %s)\n", id, range);
                json_decref(devs);
                return NPUCTL_ERROR;
        }
        if (c->csv || c->fields) {
                /* the table form of one device is its row of the device table */
                struct npuctl_table *t = npuctl_table_new(device_cols);
                device_row(t, dev);
                code = npuctl_table_print(c, t);
                npuctl_table_free(t);
                json_decref(devs);
                return code;
        }
        params = json_pack("{s:i}", "device", id);
        if (!(health = npuctl_call(c, "health", NULL, &code)) ||
            !(mem = npuctl_call(c, "mem", params, &code)) ||
            !(sched = npuctl_call(c, "sched", NULL, &code)))
                goto out;
        hdev = find_id(json_object_get(health, "devices"), id);
        mdev = find_id(json_object_get(mem, "devices"), id);
        sdev = find_id(json_object_get(sched, "devices"), id);
        if (c->json) {
                json_t *all = json_deep_copy(dev);
                json_object_set(all, "faults", json_object_get(hdev, "faults"));
                json_object_set(all, "memory", mdev ? mdev : json_null());
                json_object_set(all, "tenants", json_object_get(sdev, "tenants"));
                npuctl_print_json(all);
                json_decref(all);
                goto out;
        }
        util = json_object_get(dev, "utilization");
        cores = json_object_get(dev, "cores");
        faults_text(json_object_get(hdev, "faults"), ft, sizeof(ft));
        printf("NPU %d: %s, profile %s\n", id, npuctl_esc(get_str(dev, "name")),
               npuctl_esc(get_str(dev, "profile")));
        printf("  Health:       %s%s\n", npuctl_esc(get_str(dev, "health")),
               json_is_true(json_object_get(dev, "draining")) ? " (draining: no new streams)" : "");
        printf("  Faults:       %s\n", npuctl_esc(ft));
        printf("  UUID:         %s\n", npuctl_esc(get_str(dev, "uuid")));
        printf("  Serial:       %s\n", npuctl_esc(get_str(dev, "serial")));
        printf("  Bus-Id:       %s\n", npuctl_esc(get_str(dev, "bus_id")));
        printf("  Firmware:     %s, driver %s\n", npuctl_esc(get_str(dev, "firmware")),
               npuctl_esc(get_str(dev, "driver")));
        if (json_is_number(json_object_get(dev, "temperature"))) {
                printf("  Temperature:  %.1f C\n", json_number_value(json_object_get(dev, "temperature")));
                printf("  Power:        %.1f W of %.0f W\n", json_number_value(json_object_get(dev, "power")),
                       json_number_value(json_object_get(dev, "power_limit")));
                printf("  AI core:      %.0f MHz\n", json_number_value(json_object_get(dev, "clock_mhz")));
                printf("  HBM ECC:      %lld corrected, %lld uncorrected\n",
                       (long long)get_int(json_object_get(dev, "ecc"), "corrected"),
                       (long long)get_int(json_object_get(dev, "ecc"), "uncorrected"));
        } else {
                printf("  Telemetry:    n/a (npud reads no sensors: \"telemetry\": false)\n");
        }
        npuctl_format_bytes((double)get_int(dev, "memory_used"), b1, sizeof(b1));
        npuctl_format_bytes((double)get_int(dev, "memory_total"), b2, sizeof(b2));
        npuctl_format_bytes((double)get_int(mdev, "largest_free"), b3, sizeof(b3));
        printf("  Memory:       %s used of %s; largest free block %s, %lld free segment%s, "
               "fragmentation %.1f%%\n", b1, b2, b3, (long long)get_int(mdev, "free_segments"),
               get_int(mdev, "free_segments") == 1 ? "" : "s",
               100 * json_number_value(json_object_get(mdev, "fragmentation")));
        printf("  Engines:      cube %lld cores %.1f%%, vector %lld cores %.1f%%, aicpu %lld cores %.1f%%, "
               "dma %lld %.1f%%\n",
               (long long)get_int(cores, "cube"), json_number_value(json_object_get(util, "cube")),
               (long long)get_int(cores, "vector"), json_number_value(json_object_get(util, "vector")),
               (long long)get_int(cores, "aicpu"), json_number_value(json_object_get(util, "aicpu")),
               (long long)get_int(cores, "dma"), json_number_value(json_object_get(util, "dma")));
        if (get_int(dev, "host_workers") > 0) /* compute mode */
                printf("  Host:         %lld worker%s%s%s\n", (long long)get_int(dev, "host_workers"),
                       get_int(dev, "host_workers") == 1 ? "" : "s", *get_str(dev, "host_cpus") ? " on CPUs " : "",
                       npuctl_esc(get_str(dev, "host_cpus")));
        printf("  Streams:      %lld (%lld session%s)\n", (long long)get_int(dev, "streams"),
               (long long)get_int(dev, "sessions"), get_int(dev, "sessions") == 1 ? "" : "s");
        printf("  Tasks:        %lld completed, %lld failed\n", (long long)get_int(dev, "tasks_completed"),
               (long long)get_int(dev, "tasks_failed"));
        print_holders(mdev);
        print_tenants(sdev, mdev);
        if (!json_is_true(json_object_get(mem, "all")))
                printf("\n(only your own sessions are shown; root and the admin group see all)\n");
out:
        json_decref(params);
        json_decref(devs);
        json_decref(health);
        json_decref(mem);
        json_decref(sched);
        return code;
}
