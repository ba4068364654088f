/* Tenants added and removed at run time (root or the admin group): tenant_add takes one
 * tenant in the configuration file's form ({"name", "uids", "gids", "devices", "quota_total",
 * ...}, checked by the same parser and so with the same messages), tenant_remove removes one
 * that tenant_add added. A Slurm prolog makes a tenant per job this way and its epilog
 * removes it; the tenants of the file are the file's to change (edit it and reload).
 *
 * Both rebuild the policy with the tenant added or left out and apply it as a reload does:
 * tenants that stay keep their state, and every session is moved to the tenant it matches
 * now (a job's processes that connected before the prolog finished join its tenant). The
 * run-time tenants are kept in npud->runtime_tenants, which a reload appends to the file's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/errors.h"
#include "util/log.h"
#include "dispatch.h"
#include "manage.h"
#include "npud.h"
#include "session.h"

/* Make policy the one in force and move every session to the tenant it matches now. */
static int apply_policy(struct npud *d, const struct policy_config *policy)
{
        struct session *s;

        if (tenant_registry_apply(&d->tenants, policy) < 0)
                return -1;
        d->config.policy = *policy;
        TAILQ_FOREACH(s, &d->sessions, link) {
                const char *req = s->tenant_request[0] ? s->tenant_request : NULL;
                if (session_assign_tenant(s, req) < 0) {
                        log_warn("tenant change: session %llu may no longer use tenant '%s'",
                                 (unsigned long long)s->id, req);
                        session_assign_tenant(s, NULL);
                }
                session_maybe_resume(s);
        }
        if (d->hooks.tenants_changed)
                d->hooks.tenants_changed(d);
        return 0;
}

void tenant_runtime_append(struct npud *d, struct policy_config *policy)
{
        for (int i = 0; i < d->nruntime_tenants; i++) {
                const struct policy_tenant *t = &d->runtime_tenants[i];
                if (policy_tenant_find(policy, t->name) >= 0) {
                        log_warn("reload: tenant '%s' added at run time is now in the file; the "
                                 "file's definition wins", t->name);
                        memmove(&d->runtime_tenants[i], &d->runtime_tenants[i + 1],
                                (size_t)(d->nruntime_tenants - i - 1) * sizeof(*t));
                        d->nruntime_tenants--;
                        i--;
                        continue;
                }
                if (policy->ntenants < POLICY_MAX_TENANTS)
                        policy->tenants[policy->ntenants++] = *t;
        }
}

static void method_tenant_add(struct request *req)
{
        struct session *s = req->session;
        struct npud *d = s->npud;
        json_t *t = json_object_get(req->params, "tenant");
        struct policy_config *one = NULL, *next = NULL;
        struct policy_tenant *list;
        char err[256];

        if (!json_is_object(t) || json_object_size(req->params) != 1) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "tenant_add: parameters must be {\"tenant\": {...}}, the tenant "
                                    "as in the configuration file's \"tenants\" array");
                return;
        }
        one = malloc(sizeof(*one));
        next = malloc(sizeof(*next));
        if (!one || !next)
                goto oom;
        policy_config_init(one);
        json_t *arr = json_pack("[O]", t);
        int e = arr ? policy_config_parse(one, arr, NULL, err, sizeof(err)) : -1;
        json_decref(arr);
        if (!arr)
                goto oom;
        if (e) {
                /* the parser names "tenants[0].key": the key is what matters here */
                const char *msg = strncmp(err, "tenants[0].", 11) == 0 ? err + 11 : err;
                session_reply_error(s, req->id, PROTO_E_INVALID, "tenant_add: %s", msg);
                goto out;
        }
        if (one->ntenants != 2) { /* [0] is "default", which the file alone configures */
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "tenant_add: the default tenant is configured in the file");
                goto out;
        }
        struct policy_tenant *nt = &one->tenants[1];
        if (policy_tenant_find(d->tenants.policy, nt->name) >= 0) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "tenant_add: a tenant named '%s' exists already", nt->name);
                goto out;
        }
        if (d->ex.devices.count < 64 && (nt->devices >> d->ex.devices.count)) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "tenant_add: devices: npud has devices 0 to %d only",
                                    d->ex.devices.count - 1);
                goto out;
        }
        if (d->tenants.policy->ntenants >= POLICY_MAX_TENANTS) {
                session_reply_error(s, req->id, PROTO_E_LIMIT, "tenant_add: there are %d tenants already",
                                    POLICY_MAX_TENANTS);
                goto out;
        }
        list = realloc(d->runtime_tenants, (size_t)(d->nruntime_tenants + 1) * sizeof(*list));
        if (!list)
                goto oom;
        d->runtime_tenants = list;
        *next = *d->tenants.policy;
        next->tenants[next->ntenants++] = *nt;
        if (apply_policy(d, next) < 0)
                goto oom;
        list[d->nruntime_tenants++] = *nt;
        manage_audit(d, LOG_LVL_INFO, LOG_MID_TENANT_ADD, -1,
                     "tenant '%s' added at run time (%d uid(s), %d gid(s), devices 0x%llx, quota %llu bytes)",
                     nt->name, nt->nuids, nt->ngids, (unsigned long long)nt->devices,
                     (unsigned long long)nt->quota_total);
        session_reply_result(s, req->id, json_pack("{s:s, s:i}", "tenant", nt->name, "tenants",
                                                   d->tenants.ntenants));
        goto out;
oom:
        session_reply_error(s, req->id, PROTO_E_LIMIT, "tenant_add: out of memory");
out:
        free(one);
        free(next);
}

static void method_tenant_remove(struct request *req)
{
        static const char *const keys[] = { "name", NULL };
        struct session *s = req->session;
        struct npud *d = s->npud;
        json_t *jn = json_object_get(req->params, "name");
        struct policy_config *next;
        int r = -1;

        if (params_only(req, keys) < 0)
                return;
        if (!json_is_string(jn)) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "tenant_remove: parameter 'name' must be a tenant name");
                return;
        }
        const char *name = json_string_value(jn);
        for (int i = 0; i < d->nruntime_tenants; i++)
                if (strcmp(d->runtime_tenants[i].name, name) == 0)
                        r = i;
        if (r < 0) {
                if (policy_tenant_find(d->tenants.policy, name) >= 0)
                        session_reply_error(s, req->id, PROTO_E_INVALID,
                                            "tenant_remove: tenant '%.64s' is in the configuration "
                                            "file: edit it and reload", name);
                else
                        session_reply_error(s, req->id, PROTO_E_INVALID,
                                            "tenant_remove: no tenant named '%.64s'", name);
                return;
        }
        next = malloc(sizeof(*next));
        if (!next) {
                session_reply_error(s, req->id, PROTO_E_LIMIT, "tenant_remove: out of memory");
                return;
        }
        *next = *d->tenants.policy;
        int i = policy_tenant_find(next, name);
        if (i > 0) {
                memmove(&next->tenants[i], &next->tenants[i + 1],
                        (size_t)(next->ntenants - i - 1) * sizeof(next->tenants[0]));
                next->ntenants--;
        }
        if (apply_policy(d, next) < 0) {
                free(next);
                session_reply_error(s, req->id, PROTO_E_LIMIT, "tenant_remove: out of memory");
                return;
        }
        free(next);
        char saved[POLICY_NAME_MAX];
        snprintf(saved, sizeof(saved), "%s", name);
        memmove(&d->runtime_tenants[r], &d->runtime_tenants[r + 1],
                (size_t)(d->nruntime_tenants - r - 1) * sizeof(d->runtime_tenants[0]));
        d->nruntime_tenants--;
        manage_audit(d, LOG_LVL_INFO, LOG_MID_TENANT_REMOVE, -1, "tenant '%s' removed", saved);
        session_reply_result(s, req->id, json_pack("{s:s, s:i}", "tenant", saved, "tenants",
                                                   d->tenants.ntenants));
}

const struct method methods_tenant[] = {
        { "tenant_add", method_tenant_add, METHOD_ADMIN },
        { "tenant_remove", method_tenant_remove, METHOD_ADMIN },
        { NULL, NULL, 0 },
};
