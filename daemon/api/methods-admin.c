/* Admin methods: devices, sessions and version, as shown by npuctl. Any client may list
 * devices; sessions of other users are visible only to root and the admin group. */
#include <stdio.h>

#include "proto/errors.h"
#include "proto/frame.h"
#include "daemon/exec/alloc.h"
#include "daemon/exec/reclaim.h"
#include "dispatch.h"
#include "npud.h"
#include "session.h"

#ifndef NPUD_VERSION
#define NPUD_VERSION "0.1.0"
#endif

static const char *const engine_names[OPS_ENGINE_COUNT] = { "cube", "vector", "aicpu", "dma" };

static json_t *device_json(struct npud *d, struct device *dev)
{
        struct alloc_stats st;
        struct session *s;
        json_t *cores = json_object(), *util = json_object();
        int nsessions = 0;

        device_mem_stats(dev, &st);
        for (int k = 0; k < OPS_ENGINE_COUNT; k++) {
                json_object_set_new(cores, engine_names[k], json_integer(dev->desc.cores[k]));
                json_object_set_new(util, engine_names[k], json_real(dev->util[k] * 100.0));
        }
        TAILQ_FOREACH(s, &d->sessions, link) {
                struct stream *stm;
                int uses = 0;
                TAILQ_FOREACH(stm, &s->streams, session_link)
                        if (stm->dev == dev)
                                uses = 1;
                nsessions += uses;
        }
        json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:i, s:i, s:I, s:I}",
                                      "id", dev->id, "name", dev->name, "profile", dev->desc.profile,
                                      "health", device_health_name(dev->health),
                                      "memory_total", (json_int_t)dev->desc.mem_size,
                                      "memory_used", (json_int_t)dev->mem_used,
                                      "largest_free", (json_int_t)st.largest_free,
                                      "cores", cores, "utilization", util,
                                      "sessions", nsessions, "streams", (int)dev->streams,
                                      "tasks_completed", (json_int_t)dev->tasks_completed,
                                      "tasks_failed", (json_int_t)dev->tasks_failed);
        json_object_set_new(o, "draining", json_boolean(dev->draining));
        json_object_set_new(o, "units", json_integer((json_int_t)dev->units));
        json_object_set_new(o, "units_inline", json_integer((json_int_t)dev->units_inline));
        json_object_set_new(o, "host_workers", json_integer(dev->desc.host_workers));
        json_object_set_new(o, "host_cpus", json_string(dev->desc.host_cpus));
        /* identity and telemetry (backend.h): figures of the last utilization period; with
         * "telemetry": false the sensor figures are left out, not reported as zeros */
        const struct backend_health *h = &dev->telemetry;
        json_object_update_new(o, json_pack("{s:s, s:s, s:s, s:s, s:s}",
                                            "uuid", dev->desc.uuid, "serial", dev->desc.serial,
                                            "bus_id", dev->desc.bus_id, "firmware", dev->desc.firmware,
                                            "driver", dev->desc.driver));
        if (!d->config.no_telemetry)
                json_object_update_new(o, json_pack("{s:f, s:f, s:f, s:f, s:{s:I, s:I}}",
                                                    "temperature", h->temperature_c, "power", h->power_w,
                                                    "power_limit", dev->desc.power_limit_w,
                                                    "clock_mhz", h->clock_mhz, "ecc",
                                                    "corrected", (json_int_t)h->ecc_corrected,
                                                    "uncorrected", (json_int_t)h->ecc_uncorrected));
        return o;
}

static void method_devices(struct request *req)
{
        static const char *const keys[] = { NULL };
        struct npud *d = req->session->npud;
        json_t *list = json_array();

        if (params_only(req, keys) < 0) {
                json_decref(list);
                return;
        }
        for (int i = 0; i < d->ex.devices.count; i++)
                json_array_append_new(list, device_json(d, &d->ex.devices.devices[i]));
        session_reply_result(req->session, req->id, json_pack("{s:o}", "devices", list));
}

static void method_sessions(struct request *req)
{
        static const char *const keys[] = { NULL };
        struct session *me = req->session, *s;
        json_t *list;

        if (params_only(req, keys) < 0)
                return;
        list = json_array();
        TAILQ_FOREACH(s, &me->npud->sessions, link) {
                if (!me->admin && s->uid != me->uid)
                        continue;
                json_t *o = json_pack("{s:I, s:i, s:i, s:i, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                                      "id", (json_int_t)s->id, "pid", (int)s->pid, "uid", (int)s->uid,
                                      "gid", (int)s->gid, "comm", json_client_text(s->comm),
                                      "buffers", (json_int_t)s->handles.count[HANDLE_BUFFER],
                                      "buffer_bytes", (json_int_t)s->buffer_bytes,
                                      "regions", (json_int_t)s->handles.count[HANDLE_REGION],
                                      "region_bytes", (json_int_t)s->region_bytes,
                                      "streams", (json_int_t)s->handles.count[HANDLE_STREAM],
                                      "events", (json_int_t)s->handles.count[HANDLE_EVENT],
                                      "queued_tasks", (json_int_t)s->queued_tasks,
                                      "tasks_submitted", (json_int_t)s->tasks_submitted,
                                      "tasks_completed", (json_int_t)s->tasks_completed);
                /* its tenant, when it began, and whether it is the caller's own (npuctl
                 * leaves out the session it lists through) */
                if (o && (json_object_set_new(o, "tenant", json_string(session_tenant_name(s))) < 0 ||
                          json_object_set_new(o, "started", json_integer(s->started)) < 0 ||
                          json_object_set_new(o, "self", json_boolean(s == me)) < 0 ||
                          json_object_set_new(o, "client_cpu", json_integer(s->client_cpu)) < 0 ||
                          json_object_set_new(o, "writes_on_client_cpu",
                                              json_integer((json_int_t)s->writes_on_client_cpu)) < 0)) {
                        json_decref(o);
                        o = NULL;
                }
                /* a listing that silently leaves a session out would mislead: fail instead */
                if (json_array_append_new(list, o) < 0) {
                        json_decref(list);
                        session_reply_error(me, req->id, PROTO_E_LIMIT,
                                            "sessions: session %llu cannot be listed (out of memory)",
                                            (unsigned long long)s->id);
                        return;
                }
        }
        session_reply_result(me, req->id, json_pack("{s:o, s:b}", "sessions", list, "all", me->admin));
}

static void method_version(struct request *req)
{
        session_reply_result(req->session, req->id,
                             json_pack("{s:s, s:i, s:i, s:s}", "version", NPUD_VERSION,
                                       "protocol", PROTO_SESSION_VERSION, "protocol_min",
                                       PROTO_SESSION_VERSION_MIN,
                                       "backend", req->session->npud->ex.backend->ops->name));
}

const struct method methods_admin[] = {
        { "devices", method_devices, 0 },
        { "sessions", method_sessions, 0 },
        { "version", method_version, METHOD_BEFORE_HELLO },
        { NULL, NULL, 0 },
};
