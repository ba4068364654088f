/* Device registry built from the backend's device descriptions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "device.h"

int device_registry_init(struct device_registry *r, struct backend *b, double min_share,
                         char *err, size_t errlen)
{
        int n = b->ops->device_count(b);

        memset(r, 0, sizeof(*r));
        if (n <= 0)
                return 0;
        r->devices = calloc((size_t)n, sizeof(*r->devices));
        if (!r->devices) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        for (int i = 0; i < n; i++) {
                struct device *d = &r->devices[i];
                int e;

                d->id = i;
                snprintf(d->name, sizeof(d->name), "npu%d", i);
                d->backend = b;
                e = b->ops->device_describe(b, i, &d->desc);
                if (e == 0) {
                        void *host = NULL;
                        e = b->ops->mem_map(b, i, d->desc.mem_addr, d->desc.mem_size, &host);
                        d->mem_host = host;
                }
                if (e == 0)
                        e = alloc_new(d->desc.mem_size, &d->alloc);
                if (e < 0) {
                        snprintf(err, errlen, "device %d: %s", i, strerror(-e));
                        r->count = i;
                        device_registry_deinit(r);
                        return e;
                }
                pd_device_init(&d->pd, d->desc.cores, min_share);
                d->calib_slots = (int)ops_count() + 3;
                d->calib = malloc(sizeof(double) * (size_t)d->calib_slots * OPS_ENGINE_COUNT);
                if (!d->calib) {
                        snprintf(err, errlen, "out of memory");
                        r->count = i + 1;
                        device_registry_deinit(r);
                        return -ENOMEM;
                }
                for (int k = 0; k < d->calib_slots * OPS_ENGINE_COUNT; k++)
                        d->calib[k] = 1.0;
                d->util_last_ns = now_ns();
                d->telemetry.slow = 1.0;
                b->ops->health(b, i, &d->telemetry);
        }
        r->count = n;
        return 0;
}

void device_registry_deinit(struct device_registry *r)
{
        for (int i = 0; i < r->count; i++) {
                struct device *d = &r->devices[i];
                if (d->mem_host)
                        d->backend->ops->mem_unmap(d->backend, i, d->mem_host, d->desc.mem_size);
                alloc_free(r->devices[i].alloc);
                pd_device_deinit(&r->devices[i].pd);
                free(r->devices[i].calib);
        }
        free(r->devices);
        memset(r, 0, sizeof(*r));
}

struct device *device_get(struct device_registry *r, int id)
{
        if (id < 0 || id >= r->count)
                return NULL;
        return &r->devices[id];
}

void device_update_util(struct device *d, uint64_t now)
{
        uint64_t dt = now - d->util_last_ns;

        if (dt == 0)
                return;
        for (int k = 0; k < OPS_ENGINE_COUNT; k++) {
                uint64_t busy = d->busy_ns[k] - d->util_last_busy[k];
                double u = d->desc.cores[k] ? (double)busy / ((double)dt * d->desc.cores[k]) : 0;
                d->util[k] = u > 1 ? 1 : u;
                d->util_last_busy[k] = d->busy_ns[k];
        }
        d->util_last_ns = now;
        /* telemetry follows the same period; a failed read keeps the last figures */
        struct backend_health h = { .slow = 1.0 };
        if (d->backend->ops->health(d->backend, d->id, &h) == 0)
                d->telemetry = h;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct device_sample *sm = &d->hist[d->hist_head];
        sm->wall_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
        for (int k = 0; k < OPS_ENGINE_COUNT; k++)
                sm->util[k] = (float)d->util[k];
        sm->temperature_c = (float)d->telemetry.temperature_c;
        sm->power_w = (float)d->telemetry.power_w;
        d->hist_head = (d->hist_head + 1) % DEVICE_HISTORY;
        if (d->hist_count < DEVICE_HISTORY)
                d->hist_count++;
}

const struct device_sample *device_sample_at(const struct device *d, int i)
{
        return &d->hist[(d->hist_head - d->hist_count + i + DEVICE_HISTORY) % DEVICE_HISTORY];
}

const char *device_link(const struct device *a, const struct device *b)
{
        if (a == b)
                return "X";
        if (a->desc.hccs_group >= 0 && a->desc.hccs_group == b->desc.hccs_group)
                return "HCCS";
        if (a->desc.pcie_switch == b->desc.pcie_switch)
                return "PIX";
        if (a->desc.numa_node == b->desc.numa_node)
                return "NODE";
        return "SYS";
}

const char *device_health_name(enum device_health h)
{
        return h == DEVICE_OK ? "ok" : "failed";
}

int device_calib_slot_graph(const struct device *d)
{
        return d->calib_slots - 3;
}

int device_calib_slot_copy(const struct device *d)
{
        return d->calib_slots - 2;
}

int device_calib_slot_memset(const struct device *d)
{
        return d->calib_slots - 1;
}

double *device_calib(struct device *d, int slot, int engine)
{
        return &d->calib[slot * OPS_ENGINE_COUNT + engine];
}
