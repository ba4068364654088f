/* Management methods over the protocol (npuctl): drain, undrain, reset, session_kill,
 * fault_inject and fault_clear (root or the admin group; the work is done by manage.c, shared
 * with D-Bus), and the read-only views any client may ask for: health (health, draining and
 * injected faults per device) and mem (device memory: use, largest free block, free
 * segments, fragmentation, and who holds it). Like "sessions", mem shows other users'
 * sessions only to root and the admin group. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "proto/errors.h"
#include "daemon/exec/alloc.h"
#include "daemon/exec/reclaim.h"
#include "dispatch.h"
#include "manage.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/tenant.h"

/* The "device" parameter, checked against the devices npud has, so the message names both
 * the device asked for and the ones there are. NULL after an error reply. */
static struct device *param_device(struct request *req)
{
        struct npud *d = req->session->npud;
        uint64_t id;
        struct device *dev;

        if (param_u64(req, "device", INT32_MAX, &id) < 0)
                return NULL;
        dev = device_get(&d->ex.devices, (int)id);
        if (!dev) {
                if (d->ex.devices.count)
                        session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                            "%s: no device %" PRIu64 " (npud has devices 0 to %d)",
                                            req->method, id, d->ex.devices.count - 1);
                else
                        session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                            "%s: no device %" PRIu64 " (npud has no devices)",
                                            req->method, id);
        }
        return dev;
}

/* Reply to a manage_* call: {} on 0, else the error it gave. */
static void reply_manage(struct request *req, int code, const char *err)
{
        if (code)
                session_reply_error(req->session, req->id, code, "%s: %s", req->method, err);
        else
                session_reply_result(req->session, req->id, NULL);
}

static void drain_common(struct request *req, int drain)
{
        static const char *const keys[] = { "device", NULL };
        struct device *dev;
        char err[256] = "";

        if (params_only(req, keys) < 0 || !(dev = param_device(req)))
                return;
        reply_manage(req, manage_device_drain(req->session->npud, dev->id, drain, err, sizeof(err)), err);
}

static void method_drain(struct request *req)
{
        drain_common(req, 1);
}

static void method_undrain(struct request *req)
{
        drain_common(req, 0);
}

static void method_reset(struct request *req)
{
        static const char *const keys[] = { "device", NULL };
        struct device *dev;
        char err[256] = "";

        if (params_only(req, keys) < 0 || !(dev = param_device(req)))
                return;
        reply_manage(req, manage_device_reset(req->session->npud, dev->id, err, sizeof(err)), err);
}

static void method_session_kill(struct request *req)
{
        static const char *const keys[] = { "session", NULL };
        uint64_t id;
        char err[256] = "";

        if (params_only(req, keys) < 0 || param_u64(req, "session", INT64_MAX, &id) < 0)
                return;
        /* Closing the requesting session would leave nobody to reply to. */
        if (id == req->session->id) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "session_kill: session %" PRIu64 " is this connection", id);
                return;
        }
        reply_manage(req, manage_session_kill(req->session->npud, id, err, sizeof(err)), err);
}

static void method_fault_inject(struct request *req)
{
        static const char *const keys[] = { "device", "kind", "value", NULL };
        json_t *kind = json_object_get(req->params, "kind");
        json_t *value = json_object_get(req->params, "value");
        struct device *dev;
        char err[256] = "";
        int k;

        if (params_only(req, keys) < 0 || !(dev = param_device(req)))
                return;
        k = json_is_string(kind) ? manage_fault_parse(json_string_value(kind)) : -1;
        if (k < 0) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "fault_inject: parameter 'kind' must be \"fail-next\", "
                                    "\"fail-device\", \"slow\", \"ecc-corrected\" or "
                                    "\"ecc-uncorrected\"");
                return;
        }
        if (value && !json_is_number(value)) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "fault_inject: parameter 'value' must be a number");
                return;
        }
        reply_manage(req, manage_fault_inject(req->session->npud, dev->id, k,
                                              value ? json_number_value(value) : 1.0, err,
                                              sizeof(err)), err);
}

static void method_fault_clear(struct request *req)
{
        static const char *const keys[] = { "device", NULL };
        struct device *dev;
        char err[256] = "";

        if (params_only(req, keys) < 0 || !(dev = param_device(req)))
                return;
        reply_manage(req, manage_fault_clear(req->session->npud, dev->id, err, sizeof(err)), err);
}

/* The faults in force on a device: [{"kind", "value"}], empty when none (or when the
 * backend cannot tell). */
static json_t *faults_json(struct npud *d, struct device *dev)
{
        json_t *list = json_array();
        struct backend_health h = { .slow = 1.0 };

        if (d->ex.backend->ops->health(d->ex.backend, dev->id, &h) < 0)
                return list;
        int fail_next = h.fail_next, failed = h.failed;
        double slow = h.slow;
        if (failed)
                json_array_append_new(list, json_pack("{s:s, s:f}", "kind",
                                                      manage_fault_name(FAULT_FAIL_DEVICE), "value", 1.0));
        if (fail_next > 0)
                json_array_append_new(list, json_pack("{s:s, s:f}", "kind",
                                                      manage_fault_name(FAULT_FAIL_NEXT), "value",
                                                      (double)fail_next));
        if (slow != 1.0)
                json_array_append_new(list, json_pack("{s:s, s:f}", "kind",
                                                      manage_fault_name(FAULT_SLOW), "value", slow));
        return list;
}

static void method_health(struct request *req)
{
        static const char *const keys[] = { NULL };
        struct npud *d = req->session->npud;
        json_t *list;

        if (params_only(req, keys) < 0)
                return;
        list = json_array();
        for (int i = 0; i < d->ex.devices.count; i++) {
                struct device *dev = &d->ex.devices.devices[i];
                json_array_append_new(list, json_pack("{s:i, s:s, s:b, s:b, s:o}", "id", dev->id,
                                                      "health", device_health_name(dev->health),
                                                      "draining", dev->draining != 0,
                                                      "resetting", dev->resetting != 0,
                                                      "faults", faults_json(d, dev)));
        }
        session_reply_result(req->session, req->id, json_pack("{s:o}", "devices", list));
}

static json_t *mem_device_json(struct request *req, struct device *dev)
{
        struct session *me = req->session, *s;
        struct tenant_registry *reg = &me->npud->tenants;
        struct alloc_stats st;
        json_t *sessions = json_array(), *tenants = json_array();

        device_mem_stats(dev, &st);
        TAILQ_FOREACH(s, &me->npud->sessions, link) {
                if ((!me->admin && s->uid != me->uid) || !s->dev_bytes || !s->dev_bytes[dev->id])
                        continue;
                /* a holder left out would hide memory in use: no list rather than a short one */
                if (json_array_append_new(sessions,
                                          json_pack("{s:I, s:i, s:i, s:o, s:s, s:I}", "id", (json_int_t)s->id,
                                                    "pid", (int)s->pid, "uid", (int)s->uid,
                                                    "comm", json_client_text(s->comm),
                                                    "tenant", session_tenant_name(s), "bytes",
                                                    (json_int_t)s->dev_bytes[dev->id])) < 0)
                        goto fail;
        }
        for (int i = 0; i < reg->ntenants; i++) {
                const struct tenant *t = reg->tenants[i];
                if (dev->id < t->ndevices && t->dev[dev->id].mem_used &&
                    json_array_append_new(tenants, json_pack("{s:s, s:I}", "name", t->pol.name, "bytes",
                                                             (json_int_t)t->dev[dev->id].mem_used)) < 0)
                        goto fail;
        }
        /* Fragmentation: how much of the free memory cannot be had in one piece. */
        double frag = st.free_bytes ? 1.0 - (double)st.largest_free / (double)st.free_bytes : 0.0;
        return json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o, s:o}", "id", dev->id,
                         "memory_total", (json_int_t)dev->desc.mem_size,
                         "memory_used", (json_int_t)dev->mem_used,
                         "free_bytes", (json_int_t)st.free_bytes,
                         "largest_free", (json_int_t)st.largest_free,
                         "free_segments", (json_int_t)st.free_segments,
                         "live_blocks", (json_int_t)st.live_blocks,
                         "fragmentation", frag, "sessions", sessions, "tenants", tenants);
fail:
        json_decref(sessions);
        json_decref(tenants);
        return NULL;
}

static void method_mem(struct request *req)
{
        static const char *const keys[] = { "device", NULL };
        struct npud *d = req->session->npud;
        struct device *one = NULL;
        json_t *list;

        if (params_only(req, keys) < 0)
                return;
        if (json_object_get(req->params, "device") && !(one = param_device(req)))
                return;
        list = json_array();
        for (int i = 0; i < d->ex.devices.count; i++)
                if ((!one || one == &d->ex.devices.devices[i]) &&
                    json_array_append_new(list, mem_device_json(req, &d->ex.devices.devices[i])) < 0) {
                        json_decref(list);
                        session_reply_error(req->session, req->id, PROTO_E_LIMIT,
                                            "mem: device %d cannot be listed (out of memory)", i);
                        return;
                }
        session_reply_result(req->session, req->id,
                             json_pack("{s:o, s:b}", "devices", list, "all", req->session->admin));
}

const struct method methods_manage[] = {
        { "drain", method_drain, METHOD_ADMIN },
        { "undrain", method_undrain, METHOD_ADMIN },
        { "reset", method_reset, METHOD_ADMIN },
        { "session_kill", method_session_kill, METHOD_ADMIN },
        { "fault_inject", method_fault_inject, METHOD_ADMIN },
        { "fault_clear", method_fault_clear, METHOD_ADMIN },
        { "health", method_health, 0 },
        { "mem", method_mem, 0 },
        { NULL, NULL, 0 },
};
