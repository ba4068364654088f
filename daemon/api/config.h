/* npud configuration: defaults, the JSON config file and the command line, in that order of
 * precedence (command line wins). Every wrong key or value is reported by name. */
#ifndef NPUD_CONFIG_H
#define NPUD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"

enum sim_mode { SIM_MODE_COMPUTE = 0, SIM_MODE_MODEL = 1 };

struct npud_limits {
        uint32_t max_connections;
        uint32_t max_buffers;       /* per session */
        uint32_t max_streams;       /* per session */
        uint32_t max_events;        /* per session */
        uint32_t max_regions;       /* per session */
        uint64_t max_region_bytes;  /* per session, sum of registered host regions */
        uint32_t max_queued_tasks;  /* per session; reading pauses above it */
        /* Admission and per-uid budgets (docs/protocol.md, "Limits"). Admins (root and the
         * admin group) are exempt from the per-uid limits and may use the reserved slots. */
        uint32_t max_connections_per_uid;
        uint32_t reserved_connections; /* of max_connections, for admins only */
        int reserved_connections_set;  /* given in the file (else min(16, max/4)) */
        uint32_t hello_timeout_ms;     /* 0 = none */
        uint32_t idle_timeout_ms;      /* sessions with nothing in flight; 0 = none */
        uint32_t max_frame_before_hello; /* body bytes of any frame before hello */
        uint32_t max_waiters;          /* per session: deferred synchronize replies */
        uint32_t max_streams_per_uid;
        uint64_t max_output_bytes;          /* per session: unread replies and notifications */
        uint64_t max_output_bytes_per_uid;
        uint64_t max_output_bytes_total;
        /* graph_load imports and compiles models on helper threads (graph-load.c): this many
         * threads at most, and models of this many bytes in all being imported at once. */
        uint32_t graph_load_threads;
        uint64_t max_graph_load_bytes;
};

/* Connection slots other users than admins may take. */
static inline uint32_t limits_unreserved_connections(const struct npud_limits *l)
{
        uint32_t r = l->reserved_connections_set ? l->reserved_connections
                     : l->reserved_connections < l->max_connections / 4 ? l->reserved_connections
                                                                         : l->max_connections / 4;
        return l->max_connections > r ? l->max_connections - r : 0;
}

struct npud_config {
        char socket_path[108];
        char config_path[4096];
        int sim_devices;
        char sim_profile[16];
        enum sim_mode sim_mode;
        /* "sim.share_workers": true lets every device's units run on every host worker;
         * false (default) gives each device its own workers, pinned to its own CPUs, where
         * the host has a worker per device (sim_backend_new) */
        int sim_share_workers;
        int log_level;
        int workers; /* host worker threads; 0 = number of CPUs */
        char admin_group[64];
        gid_t admin_gid;
        int have_admin_gid;
        struct npud_limits limits;
        char metrics_listen[256]; /* "IPV4:PORT", "[IPV6]:PORT" or a Unix path; "" = off */
        int dbus;                 /* serve org.npud.Manager1 on the system bus (bus.h) */
        /* "telemetry": false: npud reports no sensor figures (temperature, power, clock, ECC)
         * and keeps no history: for a driver whose management interface is slow or absent.
         * Status (health, memory, utilization, task counts) is reported either way. */
        int no_telemetry;
        /* "realtime_loop": false keeps the loop thread at the priority of the other
         * threads; by default it runs at SCHED_FIFO 1 where permitted, else nice -10
         * (util/prio.h). */
        int no_realtime_loop;
        /* The kernel tuning cache (ops/tune.h): "tuning_cache" or --tuning-cache; "" keeps it
         * in memory only. Default: $STATE_DIRECTORY/tuning.cache under systemd
         * (StateDirectory=npud), /var/lib/npud/tuning.cache for root, else
         * $XDG_STATE_HOME/npud/tuning.cache (~/.local/state/npud/tuning.cache). */
        char tuning_cache[4096];
        /* "graph_accumulate": the accumulation of a graph_load that names none (enum
         * graph_accumulate). */
        int graph_accumulate;
        /* "cpu_wake_latency_us": the CPUs' wake-up latency npud asks the kernel for while
         * latency-critical work arrives (PM QoS, daemon/exec/cpulat.h); -1: never ask.
         * Default 0: idle CPUs poll instead of sleeping while such work is about. */
        int cpu_wake_latency_us;
        struct policy_config policy; /* tenants and scheduler settings */
};

/* Fill defaults (socket path depends on the uid). */
void config_defaults(struct npud_config *c);
/* Load a JSON config file over c. 0 or -EINVAL/-errno with a message naming the key. */
int config_load_file(struct npud_config *c, const char *path, char *err, size_t errlen);
/* Parse the command line: returns 0 to run, 1 when --help/--version printed and the program
 * should exit 0, -EINVAL with a message on bad usage. Loads --config itself. */
int config_parse_args(struct npud_config *c, int argc, char **argv, char *err, size_t errlen);

#endif
