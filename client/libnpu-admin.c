/* Typed administration calls (npu-admin.h): each is one admin method of npud whose JSON
 * answer is turned into caller-sized structs here, so that programs never parse npud's JSON
 * and the answer's keys can change without breaking them. */
#include "client/libnpu-internal.h"
#include "npu-admin.h"

#include <math.h>

/* Members of an answer; a missing or mistyped member reads as 0 or "" (an older npud that
 * lacks it), never as an error: the listing is still worth having. */
static uint64_t get_u64(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static int get_int(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
        return i < INT32_MIN || i > INT32_MAX ? 0 : (int)i;
}

static double get_num(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void get_str(json_t *o, const char *key, char *dst, size_t len)
{
        const char *s = json_string_value(json_object_get(o, key));
        snprintf(dst, len, "%s", s ? s : "");
}

/* Fills one element: fill(elem, json) writes a local struct of this libnpu's layout. */
typedef void (*fill_fn)(void *elem, json_t *o, void *arg);

/* Turns the JSON array `key` of res into a list of elem_size-strided elements, each the
 * first min(elem_size, known) bytes of what fill wrote, zeros after. */
static npu_status_t make_list(const char *what, json_t *res, const char *key, size_t elem_size,
                              size_t known, fill_fn fill, void *arg, void **ret_list, size_t *ret_count)
{
        json_t *arr = json_object_get(res, key), *o;
        size_t n = json_array_size(arr), i, copy = elem_size < known ? elem_size : known;
        unsigned char *list;
        _Alignas(max_align_t) unsigned char tmp[512]; /* one element, as this libnpu lays it out */

        if (!json_is_array(arr))
                return fail(NPU_ERR_PROTOCOL, "%s: npud's answer lacks '%s'", what, key);
        if (known > sizeof(tmp))
                return fail(NPU_ERR_SYSTEM, "%s: internal element too large", what);
        /* calloc(0) may return NULL: an empty list is one zeroed element nobody reads */
        list = calloc(n ? n : 1, elem_size);
        if (!list)
                return fail(NPU_ERR_SYSTEM, "%s: out of memory for %zu entries", what, n);
        json_array_foreach(arr, i, o) {
                memset(tmp, 0, known);
                fill(tmp, o, arg);
                memcpy(tmp, &copy, sizeof(size_t)); /* size: every struct starts with it */
                memcpy(list + i * elem_size, tmp, copy);
        }
        *ret_list = list;
        *ret_count = n;
        return NPU_OK;
}

/* The checks every listing makes before its round trip. */
static npu_status_t list_args(const char *what, npu_context_t *ctx, size_t elem_size, size_t v1,
                              void *ret_list, size_t *ret_count)
{
        if (!ctx || !ret_list || !ret_count)
                return fail(NPU_ERR_INVALID, "%s: NULL argument", what);
        /* every element type holds 64-bit members: its sizeof is a multiple of 8, and a
         * stride that is not would misalign the elements after the first */
        if (elem_size < v1 || elem_size > (1u << 20) || elem_size % sizeof(uint64_t))
                return fail(NPU_ERR_INVALID, "%s: elem_size is %zu, pass the sizeof of the "
                            "element type", what, elem_size);
        return NPU_OK;
}

static void fill_session(void *elem, json_t *o, void *arg)
{
        npu_admin_session_t *s = elem;
        (void)arg;
        s->id = get_u64(o, "id");
        s->pid = get_int(o, "pid");
        s->uid = get_int(o, "uid");
        s->gid = get_int(o, "gid");
        get_str(o, "comm", s->comm, sizeof(s->comm));
        s->buffers = get_u64(o, "buffers");
        s->buffer_bytes = get_u64(o, "buffer_bytes");
        s->regions = get_u64(o, "regions");
        s->region_bytes = get_u64(o, "region_bytes");
        s->streams = get_u64(o, "streams");
        s->events = get_u64(o, "events");
        s->queued_tasks = get_u64(o, "queued_tasks");
        s->tasks_submitted = get_u64(o, "tasks_submitted");
        s->tasks_completed = get_u64(o, "tasks_completed");
}

NPU_EXPORT npu_status_t npu_admin_sessions(npu_context_t *ctx, size_t elem_size,
                                           npu_admin_session_t **ret_list, size_t *ret_count,
                                           int *ret_all)
{
        json_t *res = NULL;
        npu_status_t st = list_args("npu_admin_sessions", ctx, elem_size,
                                    NPU_SIZE_V1(npu_admin_session_t, tasks_completed), ret_list,
                                    ret_count);

        if (st == NPU_OK)
                st = npu_call(ctx, "sessions", NULL, &res);
        if (st != NPU_OK)
                return st;
        st = make_list("sessions", res, "sessions", elem_size, sizeof(npu_admin_session_t),
                       fill_session, NULL, (void **)ret_list, ret_count);
        if (st == NPU_OK && ret_all)
                *ret_all = json_is_true(json_object_get(res, "all"));
        json_decref(res);
        return st;
}

static void fill_device(void *elem, json_t *o, void *arg)
{
        npu_admin_device_t *d = elem;
        json_t *cores = json_object_get(o, "cores"), *util = json_object_get(o, "utilization");
        (void)arg;
        d->id = get_int(o, "id");
        get_str(o, "name", d->name, sizeof(d->name));
        get_str(o, "profile", d->profile, sizeof(d->profile));
        get_str(o, "health", d->health, sizeof(d->health));
        d->draining = json_is_true(json_object_get(o, "draining"));
        d->memory_total = get_u64(o, "memory_total");
        d->memory_used = get_u64(o, "memory_used");
        d->largest_free = get_u64(o, "largest_free");
        d->cube_cores = get_int(cores, "cube");
        d->vector_cores = get_int(cores, "vector");
        d->aicpu_cores = get_int(cores, "aicpu");
        d->util_cube = get_num(util, "cube");
        d->util_vector = get_num(util, "vector");
        d->util_aicpu = get_num(util, "aicpu");
        d->util_dma = get_num(util, "dma");
        d->sessions = get_int(o, "sessions");
        d->streams = get_int(o, "streams");
        d->tasks_completed = get_u64(o, "tasks_completed");
        d->tasks_failed = get_u64(o, "tasks_failed");
        d->units = get_u64(o, "units");
        d->units_inline = get_u64(o, "units_inline");
        d->host_workers = get_int(o, "host_workers");
        get_str(o, "host_cpus", d->host_cpus, sizeof(d->host_cpus));
}

NPU_EXPORT npu_status_t npu_admin_devices(npu_context_t *ctx, size_t elem_size,
                                          npu_admin_device_t **ret_list, size_t *ret_count)
{
        json_t *res = NULL;
        npu_status_t st = list_args("npu_admin_devices", ctx, elem_size,
                                    NPU_SIZE_V1(npu_admin_device_t, tasks_failed), ret_list, ret_count);

        if (st == NPU_OK)
                st = npu_call(ctx, "devices", NULL, &res);
        if (st != NPU_OK)
                return st;
        st = make_list("devices", res, "devices", elem_size, sizeof(npu_admin_device_t),
                       fill_device, NULL, (void **)ret_list, ret_count);
        json_decref(res);
        return st;
}

static void fill_tenant(void *elem, json_t *o, void *arg)
{
        npu_admin_tenant_t *t = elem;
        json_t *devs = json_object_get(o, "devices"), *d;
        size_t i;
        (void)arg;
        get_str(o, "name", t->name, sizeof(t->name));
        get_str(o, "class", t->sched_class, sizeof(t->sched_class));
        t->weight = get_num(o, "weight");
        t->sessions = get_int(o, "sessions");
        t->streams = get_int(o, "streams");
        t->queued_tasks = get_int(o, "queued_tasks");
        t->memory_used = get_u64(o, "memory_used");
        t->memory_quota_total = get_u64(o, "memory_quota_total");
        t->memory_quota_per_device = get_u64(o, "memory_quota_per_device");
        t->max_streams = get_int(o, "max_streams");
        t->max_queued_tasks = get_int(o, "max_queued_tasks");
        json_array_foreach(devs, i, d)
                if (json_is_integer(d) && json_integer_value(d) >= 0 && json_integer_value(d) < 64)
                        t->devices |= UINT64_C(1) << json_integer_value(d);
        t->workspace_bytes = get_u64(o, "workspace_bytes");
        t->workspace_peak_bytes = get_u64(o, "workspace_peak_bytes");
        t->max_run_ms = get_u64(o, "max_run_ms");
        t->max_loop_trips = get_u64(o, "max_loop_trips");
}

NPU_EXPORT npu_status_t npu_admin_tenants(npu_context_t *ctx, size_t elem_size,
                                          npu_admin_tenant_t **ret_list, size_t *ret_count)
{
        json_t *res = NULL;
        npu_status_t st = list_args("npu_admin_tenants", ctx, elem_size,
                                    NPU_SIZE_V1(npu_admin_tenant_t, max_loop_trips), ret_list, ret_count);

        if (st == NPU_OK)
                st = npu_call(ctx, "tenants", NULL, &res);
        if (st != NPU_OK)
                return st;
        st = make_list("tenants", res, "tenants", elem_size, sizeof(npu_admin_tenant_t),
                       fill_tenant, NULL, (void **)ret_list, ret_count);
        json_decref(res);
        return st;
}

static void fill_sched(void *elem, json_t *o, void *arg)
{
        npu_admin_sched_t *s = elem;
        (void)arg;
        s->device = get_int(o, "device");
        get_str(o, "name", s->tenant, sizeof(s->tenant));
        get_str(o, "class", s->sched_class, sizeof(s->sched_class));
        s->weight = get_num(o, "weight");
        s->tasks = get_u64(o, "tasks");
        s->failed = get_u64(o, "failed");
        s->engine_seconds = get_num(o, "engine_seconds");
        s->share = get_num(o, "share");
        s->target_share = get_num(o, "target_share");
        s->wait_p50_us = get_num(o, "wait_p50_us");
        s->wait_p99_us = get_num(o, "wait_p99_us");
        s->cancelled = get_u64(o, "cancelled");
        s->removed = json_is_true(json_object_get(o, "removed"));
}

NPU_EXPORT npu_status_t npu_admin_sched(npu_context_t *ctx, size_t elem_size,
                                        npu_admin_sched_t **ret_list, size_t *ret_count)
{
        json_t *res = NULL, *devs, *dev, *flat;
        size_t i, j;
        npu_status_t st = list_args("npu_admin_sched", ctx, elem_size,
                                    NPU_SIZE_V1(npu_admin_sched_t, wait_p99_us), ret_list, ret_count);

        if (st == NPU_OK)
                st = npu_call(ctx, "sched", NULL, &res);
        if (st != NPU_OK)
                return st;
        /* npud nests tenants under devices; the list is flat, one element per pair, with the
         * device copied into each (the "device" key added here, read by fill_sched). */
        devs = json_object_get(res, "devices");
        flat = json_array();
        if (!json_is_array(devs) || !flat) {
                json_decref(res);
                json_decref(flat);
                return fail(NPU_ERR_PROTOCOL, "sched: npud's answer lacks 'devices'");
        }
        json_array_foreach(devs, i, dev) {
                json_t *t;
                json_array_foreach(json_object_get(dev, "tenants"), j, t) {
                        json_t *row = json_copy(t);
                        if (!row || json_object_set_new(row, "device", json_integer(get_int(dev, "id"))) < 0 ||
                            json_array_append_new(flat, row) < 0) {
                                json_decref(flat);
                                json_decref(res);
                                return fail(NPU_ERR_SYSTEM, "sched: out of memory");
                        }
                }
        }
        json_decref(res);
        json_t *wrap = json_pack("{s:o}", "rows", flat);
        if (!wrap)
                return fail(NPU_ERR_SYSTEM, "sched: out of memory");
        st = make_list("sched", wrap, "rows", elem_size, sizeof(npu_admin_sched_t), fill_sched,
                       NULL, (void **)ret_list, ret_count);
        json_decref(wrap);
        return st;
}

NPU_EXPORT void npu_admin_free(void *list)
{
        free(list);
}

/* An admin method with params, whose answer is {}. */
static npu_status_t admin_do(npu_context_t *ctx, const char *method, json_t *params)
{
        if (!ctx) {
                json_decref(params);
                return fail(NPU_ERR_INVALID, "npu_admin %s: NULL context", method);
        }
        if (!params)
                return fail(NPU_ERR_SYSTEM, "%s: out of memory", method);
        return npu_call(ctx, method, params, NULL);
}

NPU_EXPORT npu_status_t npu_admin_session_kill(npu_context_t *ctx, uint64_t session)
{
        if (session > INT64_MAX)
                return fail(NPU_ERR_INVALID, "npu_admin_session_kill: no session %llu",
                            (unsigned long long)session);
        return admin_do(ctx, "session_kill", json_pack("{s:I}", "session", (json_int_t)session));
}

NPU_EXPORT npu_status_t npu_admin_quota_set(npu_context_t *ctx, const char *tenant, int device,
                                            uint64_t bytes)
{
        if (!tenant)
                return fail(NPU_ERR_INVALID, "npu_admin_quota_set: NULL tenant");
        if (device < -1)
                return fail(NPU_ERR_INVALID, "npu_admin_quota_set: device %d (-1 for the total "
                            "quota, else a device id)", device);
        if (bytes > INT64_MAX)
                return fail(NPU_ERR_INVALID, "npu_admin_quota_set: %llu bytes is too large",
                            (unsigned long long)bytes);
        return admin_do(ctx, "quota_set", json_pack("{s:s, s:i, s:I}", "tenant", tenant, "device",
                                                    device, "bytes", (json_int_t)bytes));
}

static npu_status_t device_do(npu_context_t *ctx, const char *fn, const char *method, int device)
{
        if (device < 0)
                return fail(NPU_ERR_INVALID, "%s: no device %d", fn, device);
        return admin_do(ctx, method, json_pack("{s:i}", "device", device));
}

NPU_EXPORT npu_status_t npu_admin_device_drain(npu_context_t *ctx, int device, int drain)
{
        return device_do(ctx, "npu_admin_device_drain", drain ? "drain" : "undrain", device);
}

NPU_EXPORT npu_status_t npu_admin_device_reset(npu_context_t *ctx, int device)
{
        return device_do(ctx, "npu_admin_device_reset", "reset", device);
}

NPU_EXPORT npu_status_t npu_admin_fault_clear(npu_context_t *ctx, int device)
{
        return device_do(ctx, "npu_admin_fault_clear", "fault_clear", device);
}

NPU_EXPORT npu_status_t npu_admin_fault_inject(npu_context_t *ctx, int device, npu_fault_t kind,
                                               double value)
{
        static const char *const names[] = { [NPU_FAULT_FAIL_NEXT] = "fail-next",
                                             [NPU_FAULT_FAIL_DEVICE] = "fail-device",
                                             [NPU_FAULT_SLOW] = "slow",
                                             [NPU_FAULT_ECC_CORRECTED] = "ecc-corrected",
                                             [NPU_FAULT_ECC_UNCORRECTED] = "ecc-uncorrected" };

        if (kind < NPU_FAULT_FAIL_NEXT || kind > NPU_FAULT_ECC_UNCORRECTED)
                return fail(NPU_ERR_INVALID, "npu_admin_fault_inject: unknown fault kind %d "
                            "(NPU_FAULT_FAIL_NEXT, _FAIL_DEVICE, _SLOW, _ECC_CORRECTED or _ECC_UNCORRECTED)", (int)kind);
        if (device < 0)
                return fail(NPU_ERR_INVALID, "npu_admin_fault_inject: no device %d", device);
        if (!isfinite(value))
                return fail(NPU_ERR_INVALID, "npu_admin_fault_inject: the value is not a number");
        /* npud checks the value against the kind and says what it must be */
        return admin_do(ctx, "fault_inject", json_pack("{s:i, s:s, s:f}", "device", device, "kind",
                                                       names[kind], "value", value));
}

/* The "mem" answer for one device or all (device -1). */
static npu_status_t mem_call(npu_context_t *ctx, const char *fn, int device, json_t **res)
{
        json_t *params = NULL;

        if (device < -1)
                return fail(NPU_ERR_INVALID, "%s: device %d (-1 for every device, else a device id)",
                            fn, device);
        if (device >= 0 && !(params = json_pack("{s:i}", "device", device)))
                return fail(NPU_ERR_SYSTEM, "%s: out of memory", fn);
        return npu_call(ctx, "mem", params, res);
}

static void fill_mem(void *elem, json_t *o, void *arg)
{
        npu_admin_mem_t *m = elem;
        (void)arg;
        m->device = get_int(o, "id");
        m->memory_total = get_u64(o, "memory_total");
        m->memory_used = get_u64(o, "memory_used");
        m->free_bytes = get_u64(o, "free_bytes");
        m->largest_free = get_u64(o, "largest_free");
        m->free_segments = get_u64(o, "free_segments");
        m->live_blocks = get_u64(o, "live_blocks");
        m->fragmentation = get_num(o, "fragmentation");
}

NPU_EXPORT npu_status_t npu_admin_mem(npu_context_t *ctx, int device, size_t elem_size,
                                      npu_admin_mem_t **ret_list, size_t *ret_count)
{
        json_t *res = NULL;
        npu_status_t st = list_args("npu_admin_mem", ctx, elem_size,
                                    NPU_SIZE_V1(npu_admin_mem_t, fragmentation), ret_list, ret_count);

        if (st == NPU_OK)
                st = mem_call(ctx, "npu_admin_mem", device, &res);
        if (st != NPU_OK)
                return st;
        st = make_list("mem", res, "devices", elem_size, sizeof(npu_admin_mem_t), fill_mem, NULL,
                       (void **)ret_list, ret_count);
        json_decref(res);
        return st;
}

static void fill_holder(void *elem, json_t *o, void *arg)
{
        npu_admin_mem_holder_t *h = elem;
        (void)arg;
        h->device = get_int(o, "device");
        h->kind = get_int(o, "kind") == NPU_ADMIN_HOLDER_TENANT ? NPU_ADMIN_HOLDER_TENANT
                                                                  : NPU_ADMIN_HOLDER_SESSION;
        if (h->kind == NPU_ADMIN_HOLDER_SESSION) {
                h->session = get_u64(o, "id");
                h->pid = get_int(o, "pid");
                h->uid = get_int(o, "uid");
                get_str(o, "comm", h->comm, sizeof(h->comm));
                get_str(o, "tenant", h->tenant, sizeof(h->tenant));
        } else {
                get_str(o, "name", h->tenant, sizeof(h->tenant));
        }
        h->bytes = get_u64(o, "bytes");
}

/* Appends a copy of each entry of dev[key] to flat with the device and the kind added (the
 * keys fill_holder reads); -1 when memory runs out. */
static int flatten_holders(json_t *flat, json_t *dev, const char *key, int kind)
{
        json_t *e;
        size_t i;

        json_array_foreach(json_object_get(dev, key), i, e) {
                json_t *row = json_copy(e);
                if (!row || json_object_set_new(row, "device", json_integer(get_int(dev, "id"))) < 0 ||
                    json_object_set_new(row, "kind", json_integer(kind)) < 0 ||
                    json_array_append_new(flat, row) < 0)
                        return -1;
        }
        return 0;
}

NPU_EXPORT npu_status_t npu_admin_mem_holders(npu_context_t *ctx, int device, size_t elem_size,
                                              npu_admin_mem_holder_t **ret_list, size_t *ret_count,
                                              int *ret_all)
{
        json_t *res = NULL, *devs, *dev, *sessions, *tenants, *wrap;
        size_t i;
        int all;
        npu_status_t st = list_args("npu_admin_mem_holders", ctx, elem_size,
                                    NPU_SIZE_V1(npu_admin_mem_holder_t, bytes), ret_list, ret_count);

        if (st == NPU_OK)
                st = mem_call(ctx, "npu_admin_mem_holders", device, &res);
        if (st != NPU_OK)
                return st;
        devs = json_object_get(res, "devices");
        all = json_is_true(json_object_get(res, "all"));
        if (!json_is_array(devs)) {
                json_decref(res);
                return fail(NPU_ERR_PROTOCOL, "mem: npud's answer lacks 'devices'");
        }
        /* every device's sessions first, then every device's tenants: a program that wants
         * one kind reads one run of the list */
        sessions = json_array();
        tenants = json_array();
        json_array_foreach(devs, i, dev)
                if (!sessions || !tenants || flatten_holders(sessions, dev, "sessions", NPU_ADMIN_HOLDER_SESSION) < 0 ||
                    flatten_holders(tenants, dev, "tenants", NPU_ADMIN_HOLDER_TENANT) < 0)
                        break;
        json_decref(res);
        if (i < json_array_size(devs) || !sessions || !tenants ||
            json_array_extend(sessions, tenants) < 0 || !(wrap = json_pack("{s:O}", "rows", sessions))) {
                json_decref(sessions);
                json_decref(tenants);
                return fail(NPU_ERR_SYSTEM, "mem: out of memory");
        }
        json_decref(sessions);
        json_decref(tenants);
        st = make_list("mem", wrap, "rows", elem_size, sizeof(npu_admin_mem_holder_t), fill_holder,
                       NULL, (void **)ret_list, ret_count);
        json_decref(wrap);
        if (st == NPU_OK && ret_all)
                *ret_all = all;
        return st;
}

static void fill_health(void *elem, json_t *o, void *arg)
{
        npu_admin_health_t *h = elem;
        json_t *f;
        size_t i;
        (void)arg;
        h->device = get_int(o, "id");
        get_str(o, "health", h->health, sizeof(h->health));
        h->draining = json_is_true(json_object_get(o, "draining"));
        h->resetting = json_is_true(json_object_get(o, "resetting"));
        h->slow = 1.0;
        /* faults are {"kind", "value"}: the kinds npu_admin_fault_inject names */
        json_array_foreach(json_object_get(o, "faults"), i, f) {
                const char *kind = json_string_value(json_object_get(f, "kind"));
                double v = get_num(f, "value");
                if (!kind)
                        continue;
                if (strcmp(kind, "fail-device") == 0)
                        h->failed = 1;
                else if (strcmp(kind, "fail-next") == 0 && v >= 1 && v < 1e18)
                        h->fail_next = (uint64_t)v;
                else if (strcmp(kind, "slow") == 0 && v > 0)
                        h->slow = v;
        }
}

NPU_EXPORT npu_status_t npu_admin_health(npu_context_t *ctx, size_t elem_size,
                                         npu_admin_health_t **ret_list, size_t *ret_count)
{
        json_t *res = NULL;
        npu_status_t st = list_args("npu_admin_health", ctx, elem_size,
                                    NPU_SIZE_V1(npu_admin_health_t, slow), ret_list, ret_count);

        if (st == NPU_OK)
                st = npu_call(ctx, "health", NULL, &res);
        if (st != NPU_OK)
                return st;
        st = make_list("health", res, "devices", elem_size, sizeof(npu_admin_health_t), fill_health,
                       NULL, (void **)ret_list, ret_count);
        json_decref(res);
        return st;
}

NPU_EXPORT npu_status_t npu_admin_version(npu_context_t *ctx, npu_admin_version_t *ret)
{
        npu_admin_version_t v = { .size = sizeof(v) };
        json_t *res = NULL;
        npu_status_t st;

        if (!ctx || !ret)
                return fail(NPU_ERR_INVALID, "npu_admin_version: NULL argument");
        if (ret->size < NPU_SIZE_V1(npu_admin_version_t, backend))
                return fail(NPU_ERR_INVALID, "npu_admin_version: ret->size is %zu, set it to "
                            "sizeof(npu_admin_version_t)", ret->size);
        if ((st = npu_call(ctx, "version", NULL, &res)) != NPU_OK)
                return st;
        get_str(res, "version", v.version, sizeof(v.version));
        v.protocol = get_int(res, "protocol");
        v.protocol_min = get_int(res, "protocol_min");
        get_str(res, "backend", v.backend, sizeof(v.backend));
        json_decref(res);
        size_t size = ret->size < sizeof(v) ? ret->size : sizeof(v);
        memcpy(ret, &v, size); /* a caller's older, smaller struct gets its own part */
        ret->size = size;
        return NPU_OK;
}

NPU_EXPORT npu_status_t npu_admin_reload(npu_context_t *ctx)
{
        return admin_do(ctx, "reload", json_object());
}
