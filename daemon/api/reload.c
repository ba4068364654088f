/* Reloading the configuration (SIGHUP, `npuctl reload`, D-Bus Reload) and tenant quota
 * changes. A reload parses the file and the original command line into a fresh
 * configuration; only if that succeeds does it replace limits, log level, admin group and
 * the scheduling policy, and move every session to the tenant it matches now. Settings that
 * need a restart (socket, simulated devices, workers, metrics listener) are reported. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/errors.h"
#include "util/log.h"
#include "manage.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/cpulat.h"
#include "daemon/exec/tenant.h"

static void warn_restart(const struct npud_config *old, const struct npud_config *c)
{
        if (strcmp(old->socket_path, c->socket_path) || old->sim_devices != c->sim_devices ||
            strcmp(old->sim_profile, c->sim_profile) || old->sim_mode != c->sim_mode ||
            old->sim_share_workers != c->sim_share_workers || old->workers != c->workers ||
            strcmp(old->metrics_listen, c->metrics_listen))
                log_warn("reload: socket, simulated devices, workers and metrics.listen "
                         "take effect only after a restart");
}

static int has_runtime_quota(const struct tenant *t)
{
        if (t->has_quota_total)
                return 1;
        for (int i = 0; i < t->ndevices; i++)
                if (t->dev[i].has_quota)
                        return 1;
        return 0;
}

/* What a tenant had set at run time before the reload. */
struct had_quotas {
        struct tenant *t; /* referenced */
        int total;
        uint64_t devices; /* bit d: device d (the first 64) */
};

/* One run-time quota after the reload: kept, or replaced by the file's. */
static void report_quota(json_t *list, const char *tenant, const char *which, int kept,
                         const char *why)
{
        if (kept)
                log_info("reload: tenant '%s' keeps its run-time %s quota", tenant, which);
        else
                log_info("reload: tenant '%s': its run-time %s quota gives way to the file's (%s)",
                         tenant, which, why);
        json_array_append_new(list, json_pack("{s:s, s:s}", "tenant", tenant, "quota", which));
}

int manage_reload(struct npud *d, char *err, size_t errlen)
{
        return manage_reload_info(d, NULL, err, errlen);
}

int manage_reload_info(struct npud *d, json_t **ret_info, char *err, size_t errlen)
{
        struct npud_config *c = malloc(sizeof(*c));
        struct had_quotas had[POLICY_MAX_TENANTS];
        int nhad = 0;
        struct session *s;
        char who[64];
        int e;

        if (!c) {
                snprintf(err, errlen, "out of memory");
                return PROTO_E_LIMIT;
        }
        config_defaults(c);
        e = config_parse_args(c, d->argc, d->argv, err, errlen);
        if (e != 0) {
                free(c);
                log_error("reload refused, old configuration stays in force: %s", err);
                return PROTO_E_INVALID;
        }
        tenant_runtime_append(d, &c->policy); /* npuctl tenant add's tenants stay */
        /* tenants with run-time quotas, to tell which of them the reload keeps */
        for (int i = 0; i < d->tenants.ntenants && nhad < POLICY_MAX_TENANTS; i++) {
                struct tenant *t = d->tenants.tenants[i];
                if (!has_runtime_quota(t))
                        continue;
                had[nhad] = (struct had_quotas){ tenant_ref(t), t->has_quota_total, 0 };
                for (int dv = 0; dv < t->ndevices && dv < 64; dv++)
                        if (t->dev[dv].has_quota)
                                had[nhad].devices |= 1ull << dv;
                nhad++;
        }
        if (tenant_registry_apply(&d->tenants, &c->policy) < 0) {
                for (int i = 0; i < nhad; i++)
                        tenant_unref(had[i].t);
                free(c);
                snprintf(err, errlen, "out of memory");
                return PROTO_E_LIMIT;
        }
        warn_restart(&d->config, c);
        d->config.limits = c->limits;
        d->config.log_level = c->log_level;
        log_set_level((enum log_level)c->log_level);
        memcpy(d->config.admin_group, c->admin_group, sizeof(c->admin_group));
        d->config.admin_gid = c->admin_gid;
        d->config.have_admin_gid = c->have_admin_gid;
        d->config.policy = c->policy;
        d->config.graph_accumulate = c->graph_accumulate; /* for loads from now on */
        d->config.cpu_wake_latency_us = c->cpu_wake_latency_us;
        cpulat_configure(c->cpu_wake_latency_us);
        d->ex.tile_ns = c->policy.tile_ns;
        for (int i = 0; i < d->ex.devices.count; i++)
                d->ex.devices.devices[i].pd.min_share = c->policy.min_share;
        TAILQ_FOREACH(s, &d->sessions, link) {
                const char *req = s->tenant_request[0] ? s->tenant_request : NULL;
                if (session_assign_tenant(s, req) < 0) {
                        log_warn("reload: session %llu may no longer use tenant '%s'",
                                 (unsigned long long)s->id, req);
                        session_assign_tenant(s, NULL);
                }
                session_maybe_resume(s);
        }
        free(c);
        json_t *kept = json_array(), *dropped = json_array();
        for (int i = 0; i < nhad; i++) {
                struct tenant *t = had[i].t;
                const char *why = t->index < 0 ? "removed from the file" : "the file changed it";
                char which[32];
                if (had[i].total)
                        report_quota(t->index >= 0 && t->has_quota_total ? kept : dropped, t->pol.name,
                                     "total", t->index >= 0 && t->has_quota_total, why);
                for (int dv = 0; dv < t->ndevices && dv < 64; dv++) {
                        if (!(had[i].devices >> dv & 1))
                                continue;
                        int k = t->index >= 0 && t->dev[dv].has_quota;
                        snprintf(which, sizeof(which), "device %d", dv);
                        report_quota(k ? kept : dropped, t->pol.name, which, k, why);
                }
                tenant_unref(t);
        }
        if (d->hooks.tenants_changed)
                d->hooks.tenants_changed(d);
        log_event(LOG_LVL_INFO, LOG_MID_RELOAD, -1, d->actor.uid, d->actor.pid, d->actor.via,
                  "configuration reloaded: %d tenant(s) (by %s)", d->tenants.ntenants,
                  manage_actor_text(d, who, sizeof(who)));
        if (ret_info)
                *ret_info = json_pack("{s:i, s:o, s:o}", "tenants", d->tenants.ntenants,
                                      "runtime_quotas_kept", kept, "runtime_quotas_dropped", dropped);
        else {
                json_decref(kept);
                json_decref(dropped);
        }
        return 0;
}

int manage_tenant_quota(struct npud *d, const char *tenant, int device, uint64_t bytes,
                        char *err, size_t errlen)
{
        return manage_tenant_quota_info(d, tenant, device, bytes, NULL, err, errlen);
}

int manage_tenant_quota_info(struct npud *d, const char *tenant, int device, uint64_t bytes,
                             json_t **ret_info, char *err, size_t errlen)
{
        int i = policy_tenant_find(d->tenants.policy, tenant);

        if (i < 0) {
                snprintf(err, errlen, "no tenant named '%s'", tenant);
                return PROTO_E_INVALID;
        }
        if (device < -1 || device >= d->ex.devices.count) {
                snprintf(err, errlen, "no device %d", device);
                return PROTO_E_INVALID;
        }
        /* Quotas limit new allocations; memory already held stays until freed. The file's
         * policy stays as it was: a reload compares against it (tenant.h). */
        struct tenant *t = d->tenants.tenants[i];
        uint64_t used = device < 0 ? t->mem_used : t->dev[device].mem_used;
        char where[32], warning[256] = "";
        if (device < 0)
                snprintf(where, sizeof(where), "total");
        else
                snprintf(where, sizeof(where), "device %d", device);
        tenant_quota_set(t, device, bytes);
        if (d->hooks.tenants_changed)
                d->hooks.tenants_changed(d);
        if (bytes && used > bytes)
                snprintf(warning, sizeof(warning),
                         "tenant '%s' already uses %llu bytes (%s), more than the new quota of "
                         "%llu: its allocations fail until it frees %llu bytes", tenant,
                         (unsigned long long)used, where, (unsigned long long)bytes,
                         (unsigned long long)(used - bytes));
        manage_audit(d, LOG_LVL_INFO, LOG_MID_QUOTA_SET, device,
              "tenant '%s': %s memory quota set to %llu bytes%s%s", tenant, where,
              (unsigned long long)bytes, warning[0] ? "; " : "", warning);
        if (ret_info) {
                *ret_info = json_pack("{s:s, s:i, s:I, s:I, s:b}", "tenant", tenant, "device", device,
                                      "bytes", (json_int_t)bytes, "memory_used", (json_int_t)used,
                                      "below_usage", warning[0] != 0);
                if (*ret_info && warning[0])
                        json_object_set_new(*ret_info, "warning", json_string(warning));
        }
        return 0;
}
