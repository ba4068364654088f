/* Memory methods: device buffers and host regions. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "proto/errors.h"
#include "proto/frame.h"
#include "daemon/exec/alloc.h"
#include "daemon/exec/reclaim.h"
#include "proto/message.h"
#include "dispatch.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/tenant.h"

/* Tell every client once when a device's free memory falls below the low watermark; re-arm
 * when it is above again. */
static void check_watermark(struct npud *d, struct device *dev)
{
        struct alloc_stats st;
        struct session *s;
        double mark = d->tenants.policy->low_watermark;

        device_mem_stats(dev, &st);
        int low = (double)st.free_bytes < mark * (double)st.capacity;
        if (low == dev->low_memory)
                return;
        dev->low_memory = low;
        if (!low)
                return;
        TAILQ_FOREACH(s, &d->sessions, link)
                session_send_json(s, PROTO_KIND_NOTIFY, 0,
                                  proto_notify_new("memory-low",
                                                   json_pack("{s:i, s:I, s:I, s:f}", "device", dev->id,
                                                             "free", (json_int_t)st.free_bytes, "total",
                                                             (json_int_t)st.capacity, "watermark", mark)));
}

static void method_mem_alloc(struct request *req)
{
        static const char *const keys[] = { "device", "size", NULL };
        struct session *s = req->session;
        struct buffer *b;
        struct device *dev;
        uint64_t devid, size;
        uint32_t h;
        int e;

        if (params_only(req, keys) < 0 || param_u64(req, "device", INT32_MAX, &devid) < 0 ||
            param_u64(req, "size", UINT64_MAX >> 1, &size) < 0)
                return;
        dev = device_get(&s->npud->ex.devices, (int)devid);
        if (!dev) {
                session_reply_error(s, req->id, PROTO_E_INVALID, "mem_alloc: no device %" PRIu64, devid);
                return;
        }
        /* the tenant's devices bound its memory as they bound its streams (a container given
         * one device through CDI must not fill the others) */
        if (devid >= 64 || !(s->tenant->pol.devices >> devid & 1)) {
                session_reply_error(s, req->id, PROTO_E_PERMISSION, "mem_alloc: tenant '%s' may not use device %d",
                                    s->tenant->pol.name, dev->id);
                return;
        }
        if (session_device_hidden(s, req->id, "mem_alloc", dev->id))
                return;
        if (size == 0) {
                session_reply_error(s, req->id, PROTO_E_INVALID, "mem_alloc: size must be at least 1 byte");
                return;
        }
        if (s->handles.count[HANDLE_BUFFER] >= s->npud->config.limits.max_buffers) {
                session_reply_error(s, req->id, PROTO_E_LIMIT,
                                    "mem_alloc: session holds the maximum of %u buffers",
                                    s->npud->config.limits.max_buffers);
                return;
        }
        const struct policy_tenant *pol = &s->tenant->pol;
        uint64_t rounded = alloc_round_up(size);
        /* what the tenant's running work holds in graph intermediates counts too */
        uint64_t used = s->tenant->mem_used + atomic_load(&s->tenant->ws.used);
        uint64_t dev_used = s->tenant->dev[dev->id].mem_used +
                            atomic_load(&s->tenant->dev[dev->id].ws.used);
        if (pol->quota_total && used + rounded > pol->quota_total) {
                session_reply_error(s, req->id, PROTO_E_QUOTA,
                                    "mem_alloc: tenant '%s' would exceed its memory quota: %" PRIu64
                                    " bytes used + %" PRIu64 " requested > %" PRIu64 " allowed",
                                    pol->name, used, rounded, pol->quota_total);
                return;
        }
        uint64_t qdev = tenant_quota_device(s->tenant, dev->id);
        if (qdev && dev_used + rounded > qdev) {
                session_reply_error(s, req->id, PROTO_E_QUOTA,
                                    "mem_alloc: tenant '%s' would exceed its quota on device %d: %" PRIu64
                                    " bytes used + %" PRIu64 " requested > %" PRIu64 " allowed",
                                    pol->name, dev->id, dev_used, rounded, qdev);
                return;
        }
        uint64_t reserve = s->npud->tenants.policy->lc_reserved;
        if (reserve && pol->klass != POLICY_CLASS_LATENCY_CRITICAL) {
                struct alloc_stats st;
                device_mem_stats(dev, &st);
                if (st.free_bytes < reserve || st.free_bytes - reserve < rounded) {
                        session_reply_error(s, req->id, PROTO_E_NO_MEMORY,
                                            "mem_alloc: device %d has %" PRIu64 " bytes free, of which %" PRIu64
                                            " are reserved for latency-critical tenants", dev->id,
                                            st.free_bytes, reserve);
                        return;
                }
        }
        e = buffer_new(dev, size, &b);
        if (e < 0) {
                struct alloc_stats st;
                device_mem_stats(dev, &st);
                session_reply_error(s, req->id, PROTO_E_NO_MEMORY,
                                    "mem_alloc: device %d cannot fit %" PRIu64 " bytes (%" PRIu64
                                    " free, largest free block %" PRIu64 ")",
                                    dev->id, size, st.free_bytes, st.largest_free);
                return;
        }
        if (handle_insert(&s->handles, HANDLE_BUFFER, b, &h) < 0) {
                buffer_unref(b);
                session_reply_error(s, req->id, PROTO_E_LIMIT, "mem_alloc: handle table full");
                return;
        }
        b->owner = s->id;
        s->buffer_bytes += size;
        s->dev_bytes[dev->id] += rounded;
        s->tenant->mem_used += rounded;
        s->tenant->dev[dev->id].mem_used += rounded;
        if (s->tenant->mem_used > s->tenant->mem_peak)
                s->tenant->mem_peak = s->tenant->mem_used;
        session_reply_result(s, req->id, json_pack("{s:I}", "buffer", (json_int_t)h));
        check_watermark(s->npud, dev);
}

static void method_mem_free(struct request *req)
{
        static const char *const keys[] = { "buffer", NULL };
        struct session *s = req->session;
        struct buffer *b;
        uint64_t h;

        if (params_only(req, keys) < 0 || param_u64(req, "buffer", UINT32_MAX, &h) < 0)
                return;
        b = handle_remove(&s->handles, HANDLE_BUFFER, (uint32_t)h);
        if (!b) {
                session_reply_error(s, req->id, PROTO_E_BAD_HANDLE,
                                    "mem_free: buffer handle %" PRIu64 " is unknown or already freed", h);
                return;
        }
        struct device *dev = b->dev;
        session_buffer_released(s, b);
        buffer_unref(b); /* memory returns once tasks using it complete */
        session_reply_result(s, req->id, NULL);
        check_watermark(s->npud, dev);
}

static void method_region_register(struct request *req)
{
        static const char *const keys[] = { "fd", NULL };
        struct session *s = req->session;
        const struct npud_limits *lim = &s->npud->config.limits;
        struct region *r;
        uint64_t idx;
        uint32_t h;
        char err[160];

        if (params_only(req, keys) < 0 || param_u64(req, "fd", PROTO_MAX_FDS - 1, &idx) < 0)
                return;
        if ((int)idx >= req->nfds || req->fds[idx] < 0) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "region_register: fd index %" PRIu64 " was not passed", idx);
                return;
        }
        if (s->handles.count[HANDLE_REGION] >= lim->max_regions) {
                session_reply_error(s, req->id, PROTO_E_LIMIT,
                                    "region_register: session holds the maximum of %u regions",
                                    lim->max_regions);
                return;
        }
        int fd = req->fds[idx];
        req->fds[idx] = -1;
        uint64_t room = lim->max_region_bytes - s->region_bytes;
        const struct tenant *tn = s->tenant;
        if (tn->pol.max_region_bytes) {
                uint64_t troom = tn->region_bytes < tn->pol.max_region_bytes
                                         ? tn->pol.max_region_bytes - tn->region_bytes : 0;
                if (troom < room)
                        room = troom;
        }
        if (region_new(fd, room, &r, err, sizeof(err)) < 0) {
                session_reply_error(s, req->id, PROTO_E_INVALID, "region_register: %s", err);
                return;
        }
        if (handle_insert(&s->handles, HANDLE_REGION, r, &h) < 0) {
                region_unref(r);
                session_reply_error(s, req->id, PROTO_E_LIMIT, "region_register: handle table full");
                return;
        }
        s->region_bytes += r->size;
        s->tenant->region_bytes += r->size;
        session_reply_result(s, req->id, json_pack("{s:I, s:I}", "region", (json_int_t)h, "size",
                                                   (json_int_t)r->size));
}

static void method_region_unregister(struct request *req)
{
        static const char *const keys[] = { "region", NULL };
        struct session *s = req->session;
        struct region *r;
        uint64_t h;

        if (params_only(req, keys) < 0 || param_u64(req, "region", UINT32_MAX, &h) < 0)
                return;
        r = handle_remove(&s->handles, HANDLE_REGION, (uint32_t)h);
        if (!r) {
                session_reply_error(s, req->id, PROTO_E_BAD_HANDLE,
                                    "region_unregister: region handle %" PRIu64 " is unknown", h);
                return;
        }
        s->region_bytes -= r->size;
        s->tenant->region_bytes -= r->size;
        region_unref(r); /* unmapped once in-flight copies complete */
        session_reply_result(s, req->id, NULL);
}

const struct method methods_memory[] = {
        { "mem_alloc", method_mem_alloc, 0 },
        { "mem_free", method_mem_free, 0 },
        { "region_register", method_region_register, 0 },
        { "region_unregister", method_region_unregister, 0 },
        { NULL, NULL, 0 },
};
