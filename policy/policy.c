/* Parsing and matching of tenants and scheduler settings (see policy.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"

static const char *const class_names[POLICY_CLASS_COUNT] = { "latency-critical", "normal",
                                                             "best-effort" };
static const char *const placement_names[] = { "least-loaded", "spread", "binpack" };

const char *policy_class_name(enum policy_class k)
{
        return k < POLICY_CLASS_COUNT ? class_names[k] : "?";
}

const char *policy_placement_name(enum policy_placement p)
{
        return p <= POLICY_PLACE_BINPACK ? placement_names[p] : "?";
}

static void tenant_defaults(struct policy_tenant *t, const char *name)
{
        memset(t, 0, sizeof(*t));
        snprintf(t->name, sizeof(t->name), "%s", name);
        t->klass = POLICY_CLASS_NORMAL;
        t->weight = 1.0;
        t->devices = ~0ull;
        t->max_run_ms = POLICY_DEFAULT_MAX_RUN_MS;
        t->max_loop_trips = POLICY_DEFAULT_MAX_LOOP_TRIPS;
}

void policy_config_init(struct policy_config *c)
{
        memset(c, 0, sizeof(*c));
        tenant_defaults(&c->tenants[0], "default");
        c->ntenants = 1;
        c->placement = POLICY_PLACE_LEAST_LOADED;
        c->min_share = 0.05;
        c->tile_ns = 1000000;
        c->low_watermark = 0.1;
}

static int fail(char *err, size_t errlen, const char *path, const char *what)
{
        snprintf(err, errlen, "%s: %s", path, what);
        return -EINVAL;
}

static int only_keys(json_t *obj, const char *path, const char *const *keys, char *err,
                     size_t errlen)
{
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return fail(err, errlen, path, "must be an object");
        json_object_foreach(obj, key, v) {
                int ok = 0;
                for (const char *const *k = keys; *k; k++)
                        ok |= strcmp(*k, key) == 0;
                if (!ok) {
                        char p[160];
                        snprintf(p, sizeof(p), "%s.%s", path, key);
                        return fail(err, errlen, p, "unknown key");
                }
        }
        return 0;
}

/* Non-negative integer member; absent leaves *ret. */
static int get_uint(json_t *obj, const char *key, const char *path, uint64_t max, uint64_t *ret,
                    char *err, size_t errlen)
{
        json_t *v = json_object_get(obj, key);
        char p[160];

        if (!v)
                return 0;
        snprintf(p, sizeof(p), "%s.%s", path, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > max)
                return fail(err, errlen, p, "must be a non-negative integer in range");
        *ret = (uint64_t)json_integer_value(v);
        return 0;
}

static int get_ids(json_t *obj, const char *key, const char *path, uint32_t *ids, int *n,
                   char *err, size_t errlen)
{
        json_t *v = json_object_get(obj, key), *e;
        char p[160];
        size_t i;

        if (!v)
                return 0;
        snprintf(p, sizeof(p), "%s.%s", path, key);
        if (!json_is_array(v) || json_array_size(v) > POLICY_MAX_IDS)
                return fail(err, errlen, p, "must be an array of at most 32 ids");
        json_array_foreach(v, i, e) {
                if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                    json_integer_value(e) > UINT32_MAX - 1)
                        return fail(err, errlen, p, "ids must be non-negative integers");
                ids[i] = (uint32_t)json_integer_value(e);
        }
        *n = (int)json_array_size(v);
        return 0;
}

static int parse_tenant(struct policy_tenant *t, json_t *obj, const char *path, char *err,
                        size_t errlen)
{
        static const char *const keys[] = { "name", "class", "weight", "uids", "gids",
                                            "memory_quota", "max_streams", "max_queued_tasks",
                                            "devices", "max_host_region_bytes", "max_run_ms",
                                            "max_loop_trips", NULL };
        static const char *const qkeys[] = { "total", "per_device", NULL };
        json_t *v;
        char p[160];
        uint64_t u;
        int e;

        if ((e = only_keys(obj, path, keys, err, errlen)))
                return e;
        v = json_object_get(obj, "name");
        snprintf(p, sizeof(p), "%s.name", path);
        if (!json_is_string(v) || json_string_length(v) == 0 ||
            json_string_length(v) >= POLICY_NAME_MAX)
                return fail(err, errlen, p, "must be a name of 1 to 63 characters");
        for (const char *c = json_string_value(v); *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
                        return fail(err, errlen, p, "may contain only letters, digits, '-', '_', '.'");
        tenant_defaults(t, json_string_value(v));
        if ((v = json_object_get(obj, "class"))) {
                int k = -1;
                for (int i = 0; i < POLICY_CLASS_COUNT; i++)
                        if (json_is_string(v) && strcmp(json_string_value(v), class_names[i]) == 0)
                                k = i;
                snprintf(p, sizeof(p), "%s.class", path);
                if (k < 0)
                        return fail(err, errlen, p, "must be latency-critical, normal or best-effort");
                t->klass = (enum policy_class)k;
        }
        if ((v = json_object_get(obj, "weight"))) {
                snprintf(p, sizeof(p), "%s.weight", path);
                if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > 1e6)
                        return fail(err, errlen, p, "must be a number above 0 (at most 1e6)");
                t->weight = json_number_value(v);
        }
        if ((e = get_ids(obj, "uids", path, t->uids, &t->nuids, err, errlen)) ||
            (e = get_ids(obj, "gids", path, t->gids, &t->ngids, err, errlen)))
                return e;
        if ((v = json_object_get(obj, "memory_quota"))) {
                snprintf(p, sizeof(p), "%s.memory_quota", path);
                if ((e = only_keys(v, p, qkeys, err, errlen)) ||
                    (e = get_uint(v, "total", p, INT64_MAX, &t->quota_total, err, errlen)) ||
                    (e = get_uint(v, "per_device", p, INT64_MAX, &t->quota_per_device, err, errlen)))
                        return e;
        }
        if ((e = get_uint(obj, "max_host_region_bytes", path, INT64_MAX, &t->max_region_bytes, err, errlen)))
                return e;
        if ((e = get_uint(obj, "max_run_ms", path, 86400000ull, &t->max_run_ms, err, errlen)) ||
            (e = get_uint(obj, "max_loop_trips", path, INT64_MAX, &t->max_loop_trips, err, errlen)))
                return e;
        u = t->max_streams;
        if ((e = get_uint(obj, "max_streams", path, 1u << 20, &u, err, errlen)))
                return e;
        t->max_streams = (uint32_t)u;
        u = t->max_queued_tasks;
        if ((e = get_uint(obj, "max_queued_tasks", path, 1u << 24, &u, err, errlen)))
                return e;
        t->max_queued_tasks = (uint32_t)u;
        if ((v = json_object_get(obj, "devices"))) {
                json_t *d;
                size_t i;
                snprintf(p, sizeof(p), "%s.devices", path);
                if (!json_is_array(v))
                        return fail(err, errlen, p, "must be an array of device ids");
                t->devices = 0;
                json_array_foreach(v, i, d) {
                        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > 63)
                                return fail(err, errlen, p, "device ids must be 0 to 63");
                        t->devices |= 1ull << json_integer_value(d);
                }
        }
        return 0;
}

int policy_config_parse(struct policy_config *c, json_t *tenants, json_t *scheduler, char *err,
                        size_t errlen)
{
        static const char *const skeys[] = { "placement", "min_best_effort_share", "tile_us", NULL };
        json_t *v;
        size_t i;
        int e, default_seen = 0;

        if (tenants) {
                if (!json_is_array(tenants) || json_array_size(tenants) >= POLICY_MAX_TENANTS)
                        return fail(err, errlen, "tenants", "must be an array of at most 255 tenants");
                json_array_foreach(tenants, i, v) {
                        char path[32];
                        struct policy_tenant t;
                        snprintf(path, sizeof(path), "tenants[%zu]", i);
                        if ((e = parse_tenant(&t, v, path, err, errlen)))
                                return e;
                        int idx = policy_tenant_find(c, t.name);
                        /* "default" is always present, so only a second entry for it is a
                         * duplicate */
                        if (idx > 0 || (idx == 0 && default_seen++)) {
                                char p[64];
                                snprintf(p, sizeof(p), "%s.name", path);
                                return fail(err, errlen, p, "duplicate tenant name");
                        }
                        if (idx == 0) /* configures the default tenant */
                                c->tenants[0] = t;
                        else
                                c->tenants[c->ntenants++] = t;
                }
        }
        if (scheduler) {
                if ((e = only_keys(scheduler, "scheduler", skeys, err, errlen)))
                        return e;
                if ((v = json_object_get(scheduler, "placement"))) {
                        int p = -1;
                        for (int k = 0; k <= POLICY_PLACE_BINPACK; k++)
                                if (json_is_string(v) && strcmp(json_string_value(v), placement_names[k]) == 0)
                                        p = k;
                        if (p < 0)
                                return fail(err, errlen, "scheduler.placement",
                                            "must be least-loaded, spread or binpack");
                        c->placement = (enum policy_placement)p;
                }
                if ((v = json_object_get(scheduler, "min_best_effort_share"))) {
                        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 0.5)
                                return fail(err, errlen, "scheduler.min_best_effort_share",
                                            "must be a number from 0 to 0.5");
                        c->min_share = json_number_value(v);
                }
                uint64_t us = c->tile_ns / 1000;
                if ((e = get_uint(scheduler, "tile_us", "scheduler", 1000000, &us, err, errlen)))
                        return e;
                if (us < 10)
                        return fail(err, errlen, "scheduler.tile_us", "must be at least 10");
                c->tile_ns = us * 1000;
        }
        return 0;
}

int policy_memory_parse(struct policy_config *c, json_t *memory, char *err, size_t errlen)
{
        static const char *const keys[] = { "reserved_for_latency_critical", "low_watermark", NULL };
        json_t *v;
        int e;

        if (!memory)
                return 0;
        if ((e = only_keys(memory, "memory", keys, err, errlen)) ||
            (e = get_uint(memory, "reserved_for_latency_critical", "memory", INT64_MAX, &c->lc_reserved,
                          err, errlen)))
                return e;
        if ((v = json_object_get(memory, "low_watermark"))) {
                if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1)
                        return fail(err, errlen, "memory.low_watermark", "must be a fraction from 0 to 1");
                c->low_watermark = json_number_value(v);
        }
        return 0;
}

int policy_tenant_find(const struct policy_config *c, const char *name)
{
        for (int i = 0; i < c->ntenants; i++)
                if (strcmp(c->tenants[i].name, name) == 0)
                        return i;
        return -1;
}

static int credentials_match(const struct policy_tenant *t, uid_t uid, gid_t gid,
                             const gid_t *groups, int ngroups)
{
        for (int i = 0; i < t->nuids; i++)
                if (t->uids[i] == uid)
                        return 1;
        for (int i = 0; i < t->ngids; i++) {
                if (t->gids[i] == gid)
                        return 1;
                for (int g = 0; g < ngroups; g++)
                        if (groups[g] == t->gids[i])
                                return 1;
        }
        return 0;
}

int policy_tenant_match(const struct policy_config *c, const char *requested, uid_t uid,
                        gid_t gid, const gid_t *groups, int ngroups)
{
        if (requested) {
                int i = policy_tenant_find(c, requested);
                if (i < 0)
                        return -ENOENT;
                if (i > 0)
                        return credentials_match(&c->tenants[i], uid, gid, groups, ngroups) ? i
                                                                                       : -EPERM;
                /* The default tenant is for users no other tenant matches: a user matched to
                 * a tenant (say a best-effort one with a small quota) cannot leave it for the
                 * default's class and quota by asking. */
                for (int j = 1; j < c->ntenants; j++)
                        if (credentials_match(&c->tenants[j], uid, gid, groups, ngroups))
                                return -EPERM;
                return 0;
        }
        for (int i = 1; i < c->ntenants; i++)
                if (credentials_match(&c->tenants[i], uid, gid, groups, ngroups))
                        return i;
        return 0;
}
