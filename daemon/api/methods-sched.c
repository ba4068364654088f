/* Scheduling and tenant methods: tenants with their policy and usage, per-device scheduler
 * statistics (tasks, engine time, share vs. configured share, queue wait p50/p99), reload,
 * and tenant quota changes. */
#include <inttypes.h>
#include <stdio.h>

#include "proto/errors.h"
#include "dispatch.h"
#include "manage.h"
#include "notify.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/tenant.h"

static json_t *device_list(uint64_t mask, int ndevices)
{
        json_t *a = json_array();
        for (int i = 0; i < ndevices && i < 64; i++)
                if (mask >> i & 1)
                        json_array_append_new(a, json_integer(i));
        return a;
}

static void method_tenants(struct request *req)
{
        static const char *const keys[] = { NULL };
        struct tenant_registry *reg = &req->session->npud->tenants;
        json_t *list;

        if (params_only(req, keys) < 0)
                return;
        list = json_array();
        for (int i = 0; i < reg->ntenants; i++) {
                struct tenant *t = reg->tenants[i];
                json_t *tj, *o = json_pack("{s:I, s:I, s:I, s:I}",
                                      "workspace_bytes", (json_int_t)atomic_load(&t->ws.used),
                                      "workspace_peak_bytes", (json_int_t)atomic_load(&t->ws.peak),
                                      "max_run_ms", (json_int_t)t->pol.max_run_ms,
                                      "max_loop_trips", (json_int_t)t->pol.max_loop_trips);
                tj = json_pack("{s:s, s:s, s:f, s:i, s:i, s:i, s:I, s:I, s:I, s:i, s:i, s:o}",
                                  "name", t->pol.name, "class", policy_class_name(t->pol.klass),
                                  "weight", t->pol.weight, "sessions", (int)t->sessions,
                                  "streams", (int)t->streams, "queued_tasks", (int)t->queued,
                                  "memory_used", (json_int_t)t->mem_used,
                                  "memory_quota_total", (json_int_t)t->pol.quota_total,
                                  "memory_quota_per_device", (json_int_t)t->pol.quota_per_device,
                                  "max_streams", (int)t->pol.max_streams,
                                  "max_queued_tasks", (int)t->pol.max_queued_tasks, "devices",
                                  device_list(t->pol.devices, reg->ndevices));
                /* the quota in force on each device, and which quotas were set at run time
                 * (they survive reloads that leave the file's value unchanged) */
                json_t *qd = json_array(), *rt = json_object(), *rtd = json_array();
                for (int dv = 0; dv < reg->ndevices; dv++) {
                        json_array_append_new(qd, json_integer((json_int_t)tenant_quota_device(t, dv)));
                        if (t->dev[dv].has_quota)
                                json_array_append_new(rtd, json_pack("{s:i, s:I}", "device", dv, "bytes",
                                                                     (json_int_t)t->dev[dv].quota));
                }
                if (t->has_quota_total)
                        json_object_set_new(rt, "total", json_integer((json_int_t)t->quota_total));
                json_object_set_new(rt, "devices", rtd);
                json_object_set_new(o, "memory_quota_by_device", qd);
                json_object_set_new(o, "runtime_quotas", rt);
                /* graph intermediates and kernel workspaces of running work; run limits */
                json_object_update(tj, o);
                json_decref(o);
                json_array_append_new(list, tj);
        }
        session_reply_result(req->session, req->id,
                             json_pack("{s:o, s:s, s:f, s:I}", "tenants", list, "placement",
                                       policy_placement_name(reg->policy->placement),
                                       "min_best_effort_share", reg->policy->min_share, "tile_us",
                                       (json_int_t)(reg->policy->tile_ns / 1000)));
}

/* Configured share of a tenant on a device: strict classes, so among the tenants that used
 * the device, the highest class present takes everything by weight. */
static double target_share(const struct tenant_registry *reg, int dev, const struct tenant *t)
{
        int best = POLICY_CLASS_COUNT;
        double wsum = 0;

        for (int i = 0; i < reg->ntenants; i++)
                if (reg->tenants[i]->dev[dev].tasks && (int)reg->tenants[i]->pol.klass < best)
                        best = (int)reg->tenants[i]->pol.klass;
        for (int i = 0; i < reg->ntenants; i++)
                if (reg->tenants[i]->dev[dev].tasks && (int)reg->tenants[i]->pol.klass == best)
                        wsum += reg->tenants[i]->pol.weight;
        if ((int)t->pol.klass != best || wsum <= 0)
                return 0;
        return t->pol.weight / wsum;
}

static json_t *sched_tenant_json(const struct tenant_registry *reg, int dv, const struct tenant *t,
                                  uint64_t total)
{
        const struct tenant_device *td = &t->dev[dv];
        json_t *o = json_pack("{s:s, s:s, s:f, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:b}",
                              "name", t->pol.name, "class", policy_class_name(t->pol.klass),
                              "weight", t->pol.weight, "tasks", (json_int_t)td->tasks, "failed",
                              (json_int_t)td->failed, "cancelled", (json_int_t)td->cancelled,
                              "engine_seconds", (double)td->engine_ns / 1e9, "share",
                              total ? (double)td->engine_ns / (double)total : 0.0,
                              "target_share", t->index >= 0 ? target_share(reg, dv, t) : 0.0,
                              "wait_p50_us", (double)tenant_wait_quantile(t, dv, 0.5) / 1e3,
                              "wait_p99_us", (double)tenant_wait_quantile(t, dv, 0.99) / 1e3,
                              "removed", t->index < 0);
        return o;
}

static void method_sched(struct request *req)
{
        static const char *const keys[] = { NULL };
        struct npud *d = req->session->npud;
        struct tenant_registry *reg = &d->tenants;
        json_t *devs;

        if (params_only(req, keys) < 0)
                return;
        devs = json_array();
        for (int dv = 0; dv < d->ex.devices.count; dv++) {
                uint64_t total = 0;
                json_t *tl = json_array();
                for (int i = 0; i < reg->ntenants; i++)
                        total += reg->tenants[i]->dev[dv].engine_ns;
                for (int i = 0; i < reg->nretired; i++)
                        total += reg->retired[i]->dev[dv].engine_ns;
                for (int i = 0; i < reg->ntenants; i++)
                        json_array_append_new(tl, sched_tenant_json(reg, dv, reg->tenants[i], total));
                /* tenants a reload removed: their work stays counted, as in metrics; only
                 * those that ran something on the device */
                for (int i = 0; i < reg->nretired; i++)
                        if (reg->retired[i]->dev[dv].tasks)
                                json_array_append_new(tl, sched_tenant_json(reg, dv, reg->retired[i],
                                                                            total));
                json_array_append_new(devs, json_pack("{s:i, s:o}", "id", dv, "tenants", tl));
        }
        session_reply_result(req->session, req->id, json_pack("{s:o}", "devices", devs));
}

static void method_reload(struct request *req)
{
        static const char *const keys[] = { NULL };
        char err[512];

        if (params_only(req, keys) < 0)
                return;
        notify_reloading(); /* ExecReload= runs `npuctl reload`: the manager waits for READY */
        json_t *info = NULL;
        int code = manage_reload_info(req->session->npud, &info, err, sizeof(err));
        notify_ready(req->session->npud);
        if (code)
                session_reply_error(req->session, req->id, code, "reload: %s", err);
        else
                session_reply_result(req->session, req->id, info);
}

static void method_quota_set(struct request *req)
{
        static const char *const keys[] = { "tenant", "device", "bytes", NULL };
        json_t *tenant = json_object_get(req->params, "tenant"), *dev = json_object_get(req->params, "device");
        uint64_t bytes;
        char err[256];

        if (params_only(req, keys) < 0 || param_u64(req, "bytes", INT64_MAX, &bytes) < 0)
                return;
        if (!json_is_string(tenant) || (dev && (!json_is_integer(dev) || json_integer_value(dev) < -1 ||
                                                json_integer_value(dev) > 1 << 20))) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "quota_set: 'tenant' must be a name and 'device' -1 (total) or a device id");
                return;
        }
        json_t *info = NULL;
        int code = manage_tenant_quota_info(req->session->npud, json_string_value(tenant),
                                            dev ? (int)json_integer_value(dev) : -1, bytes, &info,
                                            err, sizeof(err));
        if (code)
                session_reply_error(req->session, req->id, code, "quota_set: %s", err);
        else
                session_reply_result(req->session, req->id, info);
}

const struct method methods_sched[] = {
        { "tenants", method_tenants, 0 },
        { "sched", method_sched, 0 },
        { "reload", method_reload, METHOD_ADMIN },
        { "quota_set", method_quota_set, METHOD_ADMIN },
        { NULL, NULL, 0 },
};
