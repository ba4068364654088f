/* The daemon context: the one object the loop thread owns and hands to every handler. */
#ifndef NPUD_NPUD_H
#define NPUD_NPUD_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "config.h"
#include "daemon/exec/device.h"
#include "daemon/exec/exec.h"
#include "daemon/exec/stream.h"
#include "daemon/exec/tenant.h"
#include "export.h"

struct event_base;
struct event;
struct session;
struct device;
struct npud;
struct metrics;

/* Observers of daemon state changes (D-Bus signals); any may be NULL. */
struct npud_hooks {
        void (*session_opened)(struct npud *d, struct session *s);
        void (*session_closed)(struct npud *d, struct session *s);
        void (*device_changed)(struct npud *d, struct device *dev); /* health, draining, memory */
        /* the tenant set or a tenant's policy may have changed (tenant_add/remove, reload,
         * quota_set): observers compare against what they last told */
        void (*tenants_changed)(struct npud *d);
        void *userdata;
};

/* Who asked for the admin operation in progress, for the audit log: set by each entry point
 * (the protocol's dispatch, the D-Bus handlers, the SIGHUP handler) before it calls into
 * manage.c. uid (uid_t)-1 when unknown (a signal). */
struct npud_actor {
        uid_t uid;
        pid_t pid;
        const char *via; /* "socket", "dbus", "signal" */
};

struct npud {
        struct event_base *base;
        struct npud_config config;
        struct exec ex; /* the execution layer: backend, devices, streams, scheduler */
        TAILQ_HEAD(, session) sessions;
        uint32_t nsessions;
        uint64_t next_session_id;
        int listen_fd;
        struct event *listen_event;
        struct event *util_timer;
        struct event *sig_int, *sig_term;
        uint64_t started_ns;
        struct npud_hooks hooks;
        struct metrics *metrics; /* NULL unless a metrics listener is configured */
        struct tenant_registry tenants;
        struct export_list exports;
        int argc;    /* the command line, re-read on reload */
        char **argv;
        struct npud_actor actor; /* loop thread */
        /* Tenants added at run time (npuctl tenant add: Slurm prologs, CDI): a reload
         * keeps them beside the file's, unless the file now names the tenant itself. */
        struct policy_tenant *runtime_tenants;
        int nruntime_tenants;
};

#endif
