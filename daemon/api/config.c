/* Configuration: defaults, JSON file, command line. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph.h"
#include "proto/frame.h"
#include "proto/socket-path.h"
#include "daemon/backend/backend.h"
#include "config.h"
#include "util/log.h"
#include "metrics.h"

#ifndef NPUD_VERSION
#define NPUD_VERSION "0.1.0"
#endif

static int set_admin_group(struct npud_config *c, const char *name, char *err, size_t errlen);

/* Where the tuning cache lives when the configuration says nothing (config.h). */
static void default_tuning_cache(char *out, size_t len)
{
        const char *state = getenv("STATE_DIRECTORY"), *xdg = getenv("XDG_STATE_HOME");
        const char *home = getenv("HOME");

        out[0] = 0;
        if (state && *state) /* systemd may list several, colon-separated: the first */
                snprintf(out, len, "%.*s/tuning.cache", (int)strcspn(state, ":"), state);
        else if (geteuid() == 0)
                snprintf(out, len, "/var/lib/npud/tuning.cache");
        else if (xdg && *xdg == '/')
                snprintf(out, len, "%s/npud/tuning.cache", xdg);
        else if (home && *home == '/')
                snprintf(out, len, "%s/.local/state/npud/tuning.cache", home);
}

void config_defaults(struct npud_config *c)
{
        memset(c, 0, sizeof(*c));
        proto_default_socket_path(c->socket_path, sizeof(c->socket_path));
        c->sim_devices = 2;
        snprintf(c->sim_profile, sizeof(c->sim_profile), "910B3");
        c->sim_mode = SIM_MODE_COMPUTE;
        c->log_level = LOG_LVL_INFO;
        default_tuning_cache(c->tuning_cache, sizeof(c->tuning_cache));
        c->limits.max_connections = 256;
        c->limits.max_buffers = 65536;
        c->limits.max_streams = 1024;
        c->limits.max_events = 65536;
        c->limits.max_regions = 64;
        c->limits.max_region_bytes = 16ull << 30;
        c->limits.max_queued_tasks = 16384;
        c->limits.max_connections_per_uid = 64;
        c->limits.reserved_connections = 16;
        c->limits.hello_timeout_ms = 10000;
        c->limits.idle_timeout_ms = 0;
        c->limits.max_frame_before_hello = 8192;
        c->limits.max_waiters = 1024;
        c->limits.max_streams_per_uid = 256;
        c->limits.max_output_bytes = 16ull << 20;
        c->limits.max_output_bytes_per_uid = 64ull << 20;
        c->limits.max_output_bytes_total = 1ull << 30;
        c->limits.graph_load_threads = 2;
        c->limits.max_graph_load_bytes = 1ull << 30;
        policy_config_init(&c->policy);
        set_admin_group(c, "npuadm", NULL, 0);
}

static int set_admin_group(struct npud_config *c, const char *name, char *err, size_t errlen)
{
        struct group *g;

        if (strlen(name) >= sizeof(c->admin_group)) {
                if (err)
                        snprintf(err, errlen, "admin_group: name too long");
                return -EINVAL;
        }
        snprintf(c->admin_group, sizeof(c->admin_group), "%s", name);
        g = getgrnam(name);
        /* The built-in default may be missing (root alone administers then); a group the
         * configuration names must exist, or a typo would silently lock every admin out. */
        if (!g && err) {
                snprintf(err, errlen, "admin_group: no group '%s' on this host", name);
                return -EINVAL;
        }
        c->have_admin_gid = g != NULL;
        if (g)
                c->admin_gid = g->gr_gid;
        return 0;
}

/* Read an integer member in [lo, hi]; absent leaves *out alone. */
static int get_int(json_t *obj, const char *key, const char *path, int64_t lo, int64_t hi,
                   int64_t *out, char *err, size_t errlen)
{
        json_t *v = json_object_get(obj, key);

        if (!v)
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
                snprintf(err, errlen, "%s%s: must be an integer from %lld to %lld", path, key,
                         (long long)lo, (long long)hi);
                return -EINVAL;
        }
        *out = json_integer_value(v);
        return 0;
}

static int check_keys(json_t *obj, const char *path, const char *const *allowed, char *err,
                      size_t errlen)
{
        const char *key;
        json_t *v;

        if (!json_is_object(obj)) {
                snprintf(err, errlen, "%s: must be an object", *path ? path : "config");
                return -EINVAL;
        }
        json_object_foreach(obj, key, v) {
                int ok = 0;
                for (const char *const *a = allowed; *a; a++)
                        ok |= strcmp(*a, key) == 0;
                if (!ok) {
                        snprintf(err, errlen, "%s%s: unknown key", path, key);
                        return -EINVAL;
                }
        }
        return 0;
}

static int apply_limits(struct npud_config *c, json_t *l, char *err, size_t errlen)
{
        static const char *const keys[] = {
                "max_connections", "max_buffers", "max_streams", "max_events", "max_regions",
                "max_region_bytes", "max_queued_tasks", "max_connections_per_uid",
                "reserved_connections", "hello_timeout_ms", "idle_timeout_ms",
                "max_frame_before_hello", "max_waiters", "max_streams_per_uid", "max_output_bytes",
                "max_output_bytes_per_uid", "max_output_bytes_total", "graph_load_threads",
                "max_graph_load_bytes", NULL
        };
        struct npud_limits *lim = &c->limits;
        struct { const char *key; uint32_t *p32; uint64_t *p64; int64_t min, max; } map[] = {
                { "max_connections", &lim->max_connections, NULL, 1, 1 << 20 },
                { "max_buffers", &lim->max_buffers, NULL, 1, 1 << 20 },
                { "max_streams", &lim->max_streams, NULL, 1, 1 << 16 },
                { "max_events", &lim->max_events, NULL, 1, 1 << 20 },
                { "max_regions", &lim->max_regions, NULL, 1, 1 << 16 },
                { "max_region_bytes", NULL, &lim->max_region_bytes, 1, INT64_MAX },
                { "max_queued_tasks", &lim->max_queued_tasks, NULL, 1, 1 << 24 },
                { "max_connections_per_uid", &lim->max_connections_per_uid, NULL, 1, 1 << 20 },
                { "reserved_connections", &lim->reserved_connections, NULL, 0, 1 << 20 },
                { "hello_timeout_ms", &lim->hello_timeout_ms, NULL, 0, 3600000 },
                { "idle_timeout_ms", &lim->idle_timeout_ms, NULL, 0, 30ll * 86400000 },
                { "max_frame_before_hello", &lim->max_frame_before_hello, NULL, 256,
                  PROTO_MAX_JSON_BODY },
                { "max_waiters", &lim->max_waiters, NULL, 1, 1 << 24 },
                { "max_streams_per_uid", &lim->max_streams_per_uid, NULL, 1, 1 << 20 },
                { "max_output_bytes", NULL, &lim->max_output_bytes, 1 << 20, INT64_MAX },
                { "max_output_bytes_per_uid", NULL, &lim->max_output_bytes_per_uid, 1 << 20,
                  INT64_MAX },
                { "max_output_bytes_total", NULL, &lim->max_output_bytes_total, 1 << 20,
                  INT64_MAX },
                { "graph_load_threads", &lim->graph_load_threads, NULL, 1, 64 },
                { "max_graph_load_bytes", NULL, &lim->max_graph_load_bytes, 1 << 20, INT64_MAX },
        };
        int e = check_keys(l, "limits.", keys, err, errlen);
        for (size_t i = 0; e == 0 && i < sizeof(map) / sizeof(map[0]); i++) {
                int64_t v = map[i].p32 ? (int64_t)*map[i].p32 : (int64_t)*map[i].p64;
                e = get_int(l, map[i].key, "limits.", map[i].min, map[i].max, &v, err, errlen);
                if (map[i].p32)
                        *map[i].p32 = (uint32_t)v;
                else
                        *map[i].p64 = (uint64_t)v;
        }
        if (e == 0 && json_object_get(l, "reserved_connections")) {
                lim->reserved_connections_set = 1;
                if (lim->reserved_connections >= lim->max_connections) {
                        snprintf(err, errlen, "limits.reserved_connections: must be less than "
                                 "limits.max_connections (%u)", lim->max_connections);
                        e = -EINVAL;
                }
        }
        return e;
}

static int apply_sim(struct npud_config *c, json_t *sim, char *err, size_t errlen)
{
        static const char *const keys[] = { "devices", "profile", "mode", "share_workers", NULL };
        int64_t n = c->sim_devices;
        json_t *v;
        int e = check_keys(sim, "sim.", keys, err, errlen);

        if (e == 0)
                e = get_int(sim, "devices", "sim.", 0, 64, &n, err, errlen);
        if (e)
                return e;
        c->sim_devices = (int)n;
        if ((v = json_object_get(sim, "profile"))) {
                if (!json_is_string(v) || !sim_profile_valid(json_string_value(v))) {
                        snprintf(err, errlen, "sim.profile: must be one of 910B1, 910B3, 910B4, 310P3");
                        return -EINVAL;
                }
                snprintf(c->sim_profile, sizeof(c->sim_profile), "%s", json_string_value(v));
        }
        if ((v = json_object_get(sim, "mode"))) {
                const char *m = json_is_string(v) ? json_string_value(v) : "";
                if (strcmp(m, "compute") && strcmp(m, "model")) {
                        snprintf(err, errlen, "sim.mode: must be \"compute\" or \"model\"");
                        return -EINVAL;
                }
                c->sim_mode = strcmp(m, "model") == 0 ? SIM_MODE_MODEL : SIM_MODE_COMPUTE;
        }
        if ((v = json_object_get(sim, "share_workers"))) {
                if (!json_is_boolean(v)) {
                        snprintf(err, errlen, "sim.share_workers: must be true or false");
                        return -EINVAL;
                }
                c->sim_share_workers = json_is_true(v);
        }
        return 0;
}

/* Validate a metrics listen address (what names it in the message) and store it. */
static int set_metrics_listen(struct npud_config *c, const char *addr, const char *what,
                              char *err, size_t errlen)
{
        struct sockaddr_storage ss;
        socklen_t len;
        char why[200];

        if (strlen(addr) >= sizeof(c->metrics_listen)) {
                snprintf(err, errlen, "%s: longer than %zu bytes", what,
                         sizeof(c->metrics_listen) - 1);
                return -EINVAL;
        }
        if (metrics_parse_listen(addr, &ss, &len, why, sizeof(why)) < 0) {
                snprintf(err, errlen, "%s: %s", what, why);
                return -EINVAL;
        }
        snprintf(c->metrics_listen, sizeof(c->metrics_listen), "%s", addr);
        return 0;
}

static int apply_metrics(struct npud_config *c, json_t *m, char *err, size_t errlen)
{
        static const char *const keys[] = { "listen", NULL };
        json_t *v;
        int e = check_keys(m, "metrics.", keys, err, errlen);

        if (e == 0 && (v = json_object_get(m, "listen"))) {
                if (!json_is_string(v)) {
                        snprintf(err, errlen, "metrics.listen: must be a string");
                        return -EINVAL;
                }
                e = set_metrics_listen(c, json_string_value(v), "metrics.listen", err, errlen);
        }
        return e;
}

/* "dbus": true|false — connect to the system bus (bus.h). */
static int apply_dbus(struct npud_config *c, json_t *v, char *err, size_t errlen)
{
        if (!json_is_boolean(v)) {
                snprintf(err, errlen, "dbus: must be true or false");
                return -EINVAL;
        }
        c->dbus = json_is_true(v);
        return 0;
}

/* "realtime_loop": true|false (default true) — raise the loop thread (config.h). */
static int apply_realtime_loop(struct npud_config *c, json_t *v, char *err, size_t errlen)
{
        if (!json_is_boolean(v)) {
                snprintf(err, errlen, "realtime_loop: must be true or false");
                return -EINVAL;
        }
        c->no_realtime_loop = !json_is_true(v);
        return 0;
}

/* "telemetry": true|false (default true) — sensor figures and the history (config.h). */
static int apply_telemetry(struct npud_config *c, json_t *v, char *err, size_t errlen)
{
        if (!json_is_boolean(v)) {
                snprintf(err, errlen, "telemetry: must be true or false");
                return -EINVAL;
        }
        c->no_telemetry = !json_is_true(v);
        return 0;
}

/* A tenant limited to a device the host does not have would never get work placed: refuse it,
 * naming the tenant's key. Run once the device count is final (file, then options). */
static int check_tenant_devices(const struct npud_config *c, char *err, size_t errlen)
{
        for (int i = 0; i < c->policy.ntenants; i++) {
                uint64_t mask = c->policy.tenants[i].devices;
                if (mask == ~0ull)
                        continue; /* not restricted */
                for (int dev = c->sim_devices; dev < 64; dev++)
                        if (mask & (1ull << dev)) {
                                snprintf(err, errlen,
                                         "tenants[name=%s].devices: no device %d (npud has %d)",
                                         c->policy.tenants[i].name, dev, c->sim_devices);
                                return -EINVAL;
                        }
        }
        return 0;
}

int config_load_file(struct npud_config *c, const char *path, char *err, size_t errlen)
{
        static const char *const keys[] = { "socket", "log_level", "workers", "admin_group",
                                            "sim", "limits", "metrics", "tenants", "scheduler", "memory",
                                            "dbus", "telemetry", "tuning_cache", "realtime_loop",
                                            "graph_accumulate", "cpu_wake_latency_us", NULL };
        json_error_t jerr;
        json_t *root, *v;
        int64_t workers = c->workers;
        int e;

        root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                snprintf(err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
                return -EINVAL;
        }
        e = check_keys(root, "", keys, err, errlen);
        if (e)
                goto out;
        if ((v = json_object_get(root, "socket"))) {
                if (!json_is_string(v) || json_string_length(v) == 0 ||
                    json_string_length(v) >= sizeof(c->socket_path)) {
                        snprintf(err, errlen, "socket: must be a path of 1 to %zu bytes",
                                 sizeof(c->socket_path) - 1);
                        e = -EINVAL;
                        goto out;
                }
                snprintf(c->socket_path, sizeof(c->socket_path), "%s", json_string_value(v));
        }
        if ((v = json_object_get(root, "log_level"))) {
                int lvl = json_is_string(v) ? log_level_parse(json_string_value(v)) : -1;
                if (lvl < 0) {
                        snprintf(err, errlen, "log_level: must be error, warn, info or debug");
                        e = -EINVAL;
                        goto out;
                }
                c->log_level = lvl;
        }
        e = get_int(root, "workers", "", 0, 256, &workers, err, errlen);
        if (e)
                goto out;
        c->workers = (int)workers;
        if ((v = json_object_get(root, "admin_group"))) {
                if (!json_is_string(v)) {
                        snprintf(err, errlen, "admin_group: must be a group name");
                        e = -EINVAL;
                        goto out;
                }
                if ((e = set_admin_group(c, json_string_value(v), err, errlen)))
                        goto out;
        }
        if ((v = json_object_get(root, "sim")) && (e = apply_sim(c, v, err, errlen)))
                goto out;
        if ((v = json_object_get(root, "limits")) && (e = apply_limits(c, v, err, errlen)))
                goto out;
        if ((v = json_object_get(root, "metrics")) && (e = apply_metrics(c, v, err, errlen)))
                goto out;
        if ((v = json_object_get(root, "dbus")) && (e = apply_dbus(c, v, err, errlen)))
                goto out;
        if ((v = json_object_get(root, "telemetry")) && (e = apply_telemetry(c, v, err, errlen)))
                goto out;
        if ((v = json_object_get(root, "realtime_loop")) &&
            (e = apply_realtime_loop(c, v, err, errlen)))
                goto out;
        int64_t wake = c->cpu_wake_latency_us;
        if ((e = get_int(root, "cpu_wake_latency_us", "", -1, 2000000000, &wake, err, errlen)))
                goto out;
        c->cpu_wake_latency_us = (int)wake;
        if ((v = json_object_get(root, "graph_accumulate"))) {
                int a = graph_accumulate_parse(json_string_value(v));
                if (a < 0) {
                        snprintf(err, errlen, "graph_accumulate: must be \"float32\", \"float64\" or \"mixed\"");
                        e = -EINVAL;
                        goto out;
                }
                c->graph_accumulate = a;
        }
        if ((v = json_object_get(root, "tuning_cache"))) {
                if (!json_is_string(v) || json_string_length(v) >= sizeof(c->tuning_cache) ||
                    (json_string_length(v) && json_string_value(v)[0] != '/')) {
                        snprintf(err, errlen, "tuning_cache: must be an absolute path, or \"\" "
                                 "to keep the cache in memory only");
                        e = -EINVAL;
                        goto out;
                }
                snprintf(c->tuning_cache, sizeof(c->tuning_cache), "%s", json_string_value(v));
        }
        if ((e = policy_config_parse(&c->policy, json_object_get(root, "tenants"),
                                     json_object_get(root, "scheduler"), err, errlen)) ||
            (e = policy_memory_parse(&c->policy, json_object_get(root, "memory"), err, errlen)))
                goto out;
out:
        json_decref(root);
        if (e && strncmp(err, path, strlen(path)) != 0) {
                char tmp[512];
                snprintf(tmp, sizeof(tmp), "%s: %s", path, err);
                snprintf(err, errlen, "%s", tmp);
        }
        return e;
}

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: npud [OPTIONS]\n"
                "NPU runtime service: owns the host's NPUs and serves libnpu clients.\n\n"
                "  --socket PATH          listen on PATH (default: /run/npud/npud.sock as root,\n"
                "                         $XDG_RUNTIME_DIR/npud.sock otherwise; $NPU_SOCKET)\n"
                "  --config PATH          JSON configuration file (default /etc/npud/npud.conf\n"
                "                         when it exists)\n"
                "  --sim-devices N        number of simulated devices (default 2)\n"
                "  --sim-profile NAME     910B3 (default), 910B1, 910B4 or 310P3\n"
                "  --sim-mode MODE        compute (run kernels, default) or model (cost model)\n"
                "  --workers N            host worker threads per pool (default: number of CPUs)\n"
                "  --log-level LEVEL      error, warn, info (default) or debug\n"
                "  --metrics-listen ADDR  serve Prometheus /metrics on IPV4:PORT, [IPV6]:PORT\n"
                "                         or a Unix socket path (default: off)\n"
                "  --tuning-cache PATH    kernel tuning cache file (\"\": in memory only)\n"
                "  --dbus                 serve org.npud.Manager1 on the system bus\n"
                "                         ($DBUS_SYSTEM_BUS_ADDRESS; default: off)\n"
                "  --check-config[=PATH]  check PATH (default: --config, else\n"
                "                         /etc/npud/npud.conf), print what is wrong and exit\n"
                "  --version              print the version and exit\n"
                "  --help                 print this help and exit\n");
}

int config_parse_args(struct npud_config *c, int argc, char **argv, char *err, size_t errlen)
{
        enum { O_SOCKET = 256, O_CONFIG, O_DEVICES, O_PROFILE, O_MODE, O_WORKERS, O_LOG,
               O_VERSION, O_HELP, O_METRICS, O_CHECK, O_DBUS, O_TUNING };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, O_SOCKET },
                { "config", required_argument, NULL, O_CONFIG },
                { "sim-devices", required_argument, NULL, O_DEVICES },
                { "sim-profile", required_argument, NULL, O_PROFILE },
                { "sim-mode", required_argument, NULL, O_MODE },
                { "workers", required_argument, NULL, O_WORKERS },
                { "log-level", required_argument, NULL, O_LOG },
                { "version", no_argument, NULL, O_VERSION },
                { "help", no_argument, NULL, O_HELP },
                { "check-config", optional_argument, NULL, O_CHECK },
                { "metrics-listen", required_argument, NULL, O_METRICS },
                { "dbus", no_argument, NULL, O_DBUS },
                { "tuning-cache", required_argument, NULL, O_TUNING },
                { NULL, 0, NULL, 0 },
        };
        const char *config_path = NULL, *check_path = NULL;
        int opt, check = 0;

        /* First pass: find --config so the command line can override the file. */
        opterr = 0;
        optind = 1;
        while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (opt == O_CONFIG)
                        config_path = optarg;
                else if (opt == O_CHECK) {
                        check = 1;
                        check_path = optarg;
                } else if (opt == O_HELP) {
                        usage(stdout);
                        return 1;
                } else if (opt == O_VERSION) {
                        printf("npud %s (protocol 1)\n", NPUD_VERSION);
                        return 1;
                } else if (opt == '?') {
                        snprintf(err, errlen, "unknown or incomplete option '%s'", argv[optind - 1]);
                        return -EINVAL;
                }
        }
        /* "--check-config PATH" as well as "--check-config=PATH" */
        if (check && !check_path && optind == argc - 1)
                check_path = argv[optind++];
        if (optind < argc) {
                snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
                return -EINVAL;
        }
        if (check) {
                const char *path = check_path ? check_path :
                                   config_path ? config_path : "/etc/npud/npud.conf";
                int e = config_load_file(c, path, err, errlen);
                if (!e)
                        e = check_tenant_devices(c, err, errlen);
                if (e)
                        return e;
                printf("%s: configuration OK\n", path);
                return 1;
        }
        if (!config_path && access("/etc/npud/npud.conf", R_OK) == 0)
                config_path = "/etc/npud/npud.conf";
        if (config_path) {
                snprintf(c->config_path, sizeof(c->config_path), "%s", config_path);
                int e = config_load_file(c, config_path, err, errlen);
                if (e)
                        return e;
        }
        optind = 1;
        while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                char *end;
                long v;
                switch (opt) {
                case O_SOCKET:
                        if (!*optarg || strlen(optarg) >= sizeof(c->socket_path)) {
                                snprintf(err, errlen, "--socket: path must be 1 to %zu bytes",
                                         sizeof(c->socket_path) - 1);
                                return -EINVAL;
                        }
                        snprintf(c->socket_path, sizeof(c->socket_path), "%s", optarg);
                        break;
                case O_TUNING:
                        if (strlen(optarg) >= sizeof(c->tuning_cache) || (*optarg && *optarg != '/')) {
                                snprintf(err, errlen, "--tuning-cache: must be an absolute path, or "
                                         "\"\" to keep the cache in memory only");
                                return -EINVAL;
                        }
                        snprintf(c->tuning_cache, sizeof(c->tuning_cache), "%s", optarg);
                        break;
                case O_DEVICES:
                case O_WORKERS:
                        errno = 0;
                        v = strtol(optarg, &end, 10);
                        if (errno || *end || end == optarg || v < 0 || v > (opt == O_DEVICES ? 64 : 256)) {
                                snprintf(err, errlen, "%s: '%s' is not a number from 0 to %d",
                                         opt == O_DEVICES ? "--sim-devices" : "--workers", optarg,
                                         opt == O_DEVICES ? 64 : 256);
                                return -EINVAL;
                        }
                        if (opt == O_DEVICES)
                                c->sim_devices = (int)v;
                        else
                                c->workers = (int)v;
                        break;
                case O_PROFILE:
                        if (!sim_profile_valid(optarg)) {
                                snprintf(err, errlen, "--sim-profile: '%s' is not one of 910B1, 910B3, 910B4, 310P3", optarg);
                                return -EINVAL;
                        }
                        snprintf(c->sim_profile, sizeof(c->sim_profile), "%s", optarg);
                        break;
                case O_MODE:
                        if (strcmp(optarg, "compute") && strcmp(optarg, "model")) {
                                snprintf(err, errlen, "--sim-mode: '%s' is not compute or model", optarg);
                                return -EINVAL;
                        }
                        c->sim_mode = strcmp(optarg, "model") == 0 ? SIM_MODE_MODEL : SIM_MODE_COMPUTE;
                        break;
                case O_LOG:
                        if (log_level_parse(optarg) < 0) {
                                snprintf(err, errlen, "--log-level: '%s' is not error, warn, info or debug", optarg);
                                return -EINVAL;
                        }
                        c->log_level = log_level_parse(optarg);
                        break;
                case O_METRICS:
                        if (set_metrics_listen(c, optarg, "--metrics-listen", err, errlen) < 0)
                                return -EINVAL;
                        break;
                case O_DBUS:
                        c->dbus = 1;
                        break;
                default:
                        break;
                }
        }
        return check_tenant_devices(c, err, errlen);
}
