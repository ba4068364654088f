/* Tenant registry and statistics (see tenant.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tenant.h"

struct ops_mem_budget tenant_ws_host = { .name = "npud (host memory)" };

static void ws_host_init(void)
{
        if (atomic_load(&tenant_ws_host.limit))
                return;
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        uint64_t phys = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 8ull << 30;
        atomic_store(&tenant_ws_host.limit, phys / 2); /* half: the rest is npud, clients, cache */
}

void tenant_ws_sync(struct tenant *t, int device)
{
        atomic_store(&t->ws.limit, t->pol.quota_total);
        atomic_store(&t->ws.held, t->mem_used);
        if (device >= 0 && device < t->ndevices) {
                atomic_store(&t->dev[device].ws.limit, tenant_quota_device(t, device));
                atomic_store(&t->dev[device].ws.held, t->dev[device].mem_used);
        }
}

static struct tenant *tenant_new(const struct policy_tenant *pol, int index, int ndevices)
{
        struct tenant *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        t->dev = calloc((size_t)(ndevices ? ndevices : 1), sizeof(*t->dev));
        if (!t->dev) {
                free(t);
                return NULL;
        }
        t->refs = 1;
        t->index = index;
        t->pol = *pol;
        t->file = *pol;
        t->ndevices = ndevices;
        ws_host_init();
        snprintf(t->ws_name, sizeof(t->ws_name), "tenant '%s'", pol->name);
        t->ws.name = t->ws_name;
        t->ws.parent = &tenant_ws_host;
        for (int i = 0; i < ndevices; i++) {
                t->dev[i].pd.klass = pol->klass;
                t->dev[i].pd.weight = pol->weight;
                t->dev[i].ws.name = t->ws_name;
                t->dev[i].ws.parent = &t->ws;
        }
        return t;
}

struct tenant *tenant_ref(struct tenant *t)
{
        t->refs++;
        return t;
}

void tenant_unref(struct tenant *t)
{
        if (!t || --t->refs > 0)
                return;
        free(t->dev);
        free(t);
}

int tenant_registry_init(struct tenant_registry *r, const struct policy_config *policy,
                         int ndevices)
{
        memset(r, 0, sizeof(*r));
        r->ndevices = ndevices;
        return tenant_registry_apply(r, policy);
}

uint64_t tenant_quota_device(const struct tenant *t, int device)
{
        if (device >= 0 && device < t->ndevices && t->dev[device].has_quota)
                return t->dev[device].quota;
        return t->pol.quota_per_device;
}

void tenant_quota_set(struct tenant *t, int device, uint64_t bytes)
{
        if (device < 0) {
                t->has_quota_total = 1;
                t->quota_total = bytes;
                t->pol.quota_total = bytes;
        } else if (device < t->ndevices) {
                t->dev[device].has_quota = 1;
                t->dev[device].quota = bytes;
        }
}

/* The file's policy for a tenant that stays: run-time quotas survive unless the file's own
 * value of that quota changed. */
static void tenant_repolicy(struct tenant *t, const struct policy_tenant *pol)
{
        if (t->file.quota_total != pol->quota_total)
                t->has_quota_total = 0;
        if (t->file.quota_per_device != pol->quota_per_device)
                for (int d = 0; d < t->ndevices; d++)
                        t->dev[d].has_quota = 0;
        t->file = *pol;
        t->pol = *pol;
        if (t->has_quota_total)
                t->pol.quota_total = t->quota_total;
}

static void tenant_forget_quotas(struct tenant *t)
{
        t->has_quota_total = 0;
        for (int d = 0; d < t->ndevices; d++)
                t->dev[d].has_quota = 0;
}

void tenant_registry_deinit(struct tenant_registry *r)
{
        for (int i = 0; i < r->ntenants; i++)
                tenant_unref(r->tenants[i]);
        for (int i = 0; i < r->nretired; i++)
                tenant_unref(r->retired[i]);
        free(r->retired);
        free(r->tenants);
        free(r->policy);
        memset(r, 0, sizeof(*r));
}

int tenant_registry_apply(struct tenant_registry *r, const struct policy_config *policy)
{
        struct policy_config *copy = malloc(sizeof(*copy));
        struct tenant **next = calloc((size_t)policy->ntenants, sizeof(*next));

        if (!r->retired)
                r->retired = calloc(TENANT_RETIRED_MAX, sizeof(*r->retired));
        if (!copy || !next || !r->retired) {
                free(copy);
                free(next);
                return -ENOMEM;
        }
        *copy = *policy;
        for (int i = 0; i < policy->ntenants; i++) {
                const struct policy_tenant *pol = &policy->tenants[i];
                for (int j = 0; j < r->ntenants; j++)
                        if (r->tenants[j] && strcmp(r->tenants[j]->pol.name, pol->name) == 0) {
                                next[i] = r->tenants[j];
                                r->tenants[j] = NULL;
                                tenant_repolicy(next[i], pol);
                                break;
                        }
                /* named again after a reload removed it: its statistics come back, the
                 * run-time quotas of before do not (the tenant was gone) */
                for (int j = 0; !next[i] && j < r->nretired; j++)
                        if (strcmp(r->retired[j]->pol.name, pol->name) == 0) {
                                next[i] = r->retired[j];
                                memmove(&r->retired[j], &r->retired[j + 1],
                                        (size_t)(r->nretired - j - 1) * sizeof(*r->retired));
                                r->nretired--;
                                tenant_forget_quotas(next[i]);
                                next[i]->file = *pol;
                                next[i]->pol = *pol;
                        }
                if (!next[i] && !(next[i] = tenant_new(pol, i, r->ndevices))) {
                        for (int k = 0; k < i; k++)
                                tenant_unref(next[k]);
                        free(copy);
                        free(next);
                        return -ENOMEM;
                }
                next[i]->index = i;
                for (int d = 0; d < r->ndevices; d++) {
                        next[i]->dev[d].pd.klass = pol->klass;
                        next[i]->dev[d].pd.weight = pol->weight;
                }
        }
        for (int j = 0; j < r->ntenants; j++)
                if (r->tenants[j]) {
                        r->tenants[j]->index = -1; /* removed; lives while referenced */
                        if (r->nretired == TENANT_RETIRED_MAX) { /* the oldest goes */
                                tenant_unref(r->retired[0]);
                                memmove(&r->retired[0], &r->retired[1],
                                        (size_t)(r->nretired - 1) * sizeof(*r->retired));
                                r->nretired--;
                        }
                        r->retired[r->nretired++] = r->tenants[j]; /* takes the reference */
                }
        free(r->tenants);
        free(r->policy);
        r->tenants = next;
        r->ntenants = policy->ntenants;
        r->policy = copy;
        return 0;
}

void tenant_note_wait(struct tenant *t, int device, uint64_t wait_ns)
{
        /* bucket b holds waits in [2^b, 2^(b+1)) ns (0 and 1 ns in bucket 0) */
        int b = wait_ns > 1 ? 63 - __builtin_clzll(wait_ns) : 0;

        if (device < 0 || device >= t->ndevices)
                return;
        if (b > WAIT_BUCKETS - 1)
                b = WAIT_BUCKETS - 1;
        t->dev[device].wait_hist[b]++;
}

uint64_t tenant_wait_quantile(const struct tenant *t, int device, double q)
{
        uint64_t hist[WAIT_BUCKETS] = { 0 }, total = 0, seen = 0;

        for (int d = 0; d < t->ndevices; d++)
                if (device < 0 || d == device)
                        for (int b = 0; b < WAIT_BUCKETS; b++)
                                hist[b] += t->dev[d].wait_hist[b];
        for (int b = 0; b < WAIT_BUCKETS; b++)
                total += hist[b];
        if (!total)
                return 0;
        for (int b = 0; b < WAIT_BUCKETS; b++) {
                seen += hist[b];
                if ((double)seen >= q * (double)total)
                        return b == 0 ? 1 : 3ull << (b - 1); /* bucket midpoint: [2^b, 2^(b+1)) */
        }
        return 0;
}
