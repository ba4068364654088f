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
#include "daemon/exec/tenant.h"

static void warn_restart(const struct npud_config *old, const struct npud_config *c)
{
        if (strcmp(old->socket_path, c->socket_path) || old->sim_devices != c->sim_devices ||
            strcmp(old->sim_profile, c->sim_profile) || old->sim_mode != c->sim_mode ||
            old->workers != c->workers || strcmp(old->metrics_listen, c->metrics_listen))
                log_warn("reload: socket, simulated devices, workers and metrics.listen "
                         "take effect only after a restart");
}

int manage_reload(struct npud *d, char *err, size_t errlen)
{
        struct npud_config *c = malloc(sizeof(*c));
        struct session *s;
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
        if (tenant_registry_apply(&d->tenants, &c->policy) < 0) {
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
        log_info("configuration reloaded: %d tenant(s)", d->tenants.ntenants);
        return 0;
}

int manage_tenant_quota(struct npud *d, const char *tenant, int device, uint64_t bytes,
                        char *err, size_t errlen)
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
        /* Quotas limit new allocations; memory already held stays until freed. */
        struct policy_tenant *pol = &d->tenants.policy->tenants[i];
        if (device < 0)
                pol->quota_total = bytes;
        else
                pol->quota_per_device = bytes;
        d->tenants.tenants[i]->pol = *pol;
        log_info("tenant '%s': %s memory quota set to %llu bytes", tenant,
                 device < 0 ? "total" : "per-device", (unsigned long long)bytes);
        return 0;
}
