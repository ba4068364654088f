/* Telemetry methods any client may call: topology (how the devices connect, from each
 * device's NUMA node, PCIe switch and HCCS group, as `nvidia-smi topo -m` shows it) and
 * history (each device's utilization, temperature and power over the last minutes, one
 * sample per utilization period). The figures come from the backend's device description
 * and health call (backend.h), so a driver backend fills them as the simulator does. */
#include <inttypes.h>
#include <stdio.h>

#include "proto/errors.h"
#include "dispatch.h"
#include "npud.h"
#include "session.h"

static const char *const engine_names[OPS_ENGINE_COUNT] = { "cube", "vector", "aicpu", "dma" };

static void method_topology(struct request *req)
{
        static const char *const keys[] = { NULL };
        struct device_registry *r = &req->session->npud->ex.devices;
        json_t *devs, *matrix;

        if (params_only(req, keys) < 0)
                return;
        devs = json_array();
        matrix = json_array();
        for (int i = 0; i < r->count; i++) {
                const struct device *a = &r->devices[i];
                json_t *row = json_array();
                json_array_append_new(devs, json_pack("{s:i, s:s, s:s, s:i, s:i, s:i}", "id", a->id,
                                                      "profile", a->desc.profile, "bus_id",
                                                      a->desc.bus_id, "numa_node", a->desc.numa_node,
                                                      "pcie_switch", a->desc.pcie_switch,
                                                      "hccs_group", a->desc.hccs_group));
                for (int j = 0; j < r->count; j++)
                        json_array_append_new(row, json_string(device_link(a, &r->devices[j])));
                json_array_append_new(matrix, row);
        }
        session_reply_result(req->session, req->id,
                             json_pack("{s:o, s:o}", "devices", devs, "links", matrix));
}

/* A figure rounded to a tenth, so that a long history stays small on the wire. */
static json_t *tenth(double v)
{
        return json_real((double)(int64_t)(v * 10.0 + (v < 0 ? -0.5 : 0.5)) / 10.0);
}

static json_t *history_json(const struct device *dev, int n)
{
        json_t *time = json_array(), *temp = json_array(), *power = json_array();
        json_t *util[OPS_ENGINE_COUNT];
        json_t *o;

        for (int k = 0; k < OPS_ENGINE_COUNT; k++)
                util[k] = json_array();
        if (n > dev->hist_count)
                n = dev->hist_count;
        for (int i = dev->hist_count - n; i < dev->hist_count; i++) {
                const struct device_sample *sm = device_sample_at(dev, i);
                json_array_append_new(time, json_integer((json_int_t)sm->wall_ms));
                for (int k = 0; k < OPS_ENGINE_COUNT; k++)
                        json_array_append_new(util[k], tenth(sm->util[k] * 100.0));
                json_array_append_new(temp, tenth(sm->temperature_c));
                json_array_append_new(power, tenth(sm->power_w));
        }
        o = json_pack("{s:i, s:o, s:o, s:o}", "id", dev->id, "time_ms", time, "temperature", temp,
                      "power", power);
        for (int k = 0; k < OPS_ENGINE_COUNT; k++)
                json_object_set_new(o, engine_names[k], util[k]);
        return o;
}

static void method_history(struct request *req)
{
        static const char *const keys[] = { "device", "samples", NULL };
        struct device_registry *r = &req->session->npud->ex.devices;
        uint64_t samples, id = 0;
        int one = json_object_get(req->params, "device") != NULL;
        json_t *list;

        if (params_only(req, keys) < 0 ||
            param_u64_opt(req, "samples", DEVICE_HISTORY, DEVICE_HISTORY, &samples) < 0 ||
            (one && param_u64(req, "device", INT32_MAX, &id) < 0))
                return;
        if (req->session->npud->config.no_telemetry) {
                session_reply_error(req->session, req->id, PROTO_E_UNSUPPORTED,
                                    "history: npud keeps no history (npud.conf \"telemetry\": false)");
                return;
        }
        if (one && !device_get(r, (int)id)) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "history: no device %" PRIu64 " (npud has %d device%s)", id,
                                    r->count, r->count == 1 ? "" : "s");
                return;
        }
        list = json_array();
        for (int i = 0; i < r->count; i++)
                if (!one || (uint64_t)i == id)
                        json_array_append_new(list, history_json(&r->devices[i], (int)samples));
        session_reply_result(req->session, req->id,
                             json_pack("{s:i, s:i, s:o}", "period_ms", 1000, "capacity",
                                       DEVICE_HISTORY, "devices", list));
}

const struct method methods_telemetry[] = {
        { "topology", method_topology, 0 },
        { "history", method_history, 0 },
        { NULL, NULL, 0 },
};
