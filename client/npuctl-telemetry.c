/* npuctl topo and devices --history: how the devices connect (npud's "topology": a matrix
 * in the manner of nvidia-smi topo -m) and each device's utilization, temperature and power
 * per second over the last minutes (npud's "history"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npuctl.h"

int npuctl_cmd_topo(struct npuctl *c, int argc, char **argv)
{
        json_t *res, *devs, *links, *d;
        int code = 0;
        size_t i, j, n;

        if (npuctl_nargs("topo", argc, argv, 0, 0) < 0)
                return NPUCTL_USAGE;
        if (c->csv || c->fields) {
                fprintf(stderr, "npuctl topo: a matrix has no CSV form (use --json)\n");
                return NPUCTL_USAGE;
        }
        if (!(res = npuctl_call(c, "topology", NULL, &code)))
                return code;
        if (c->json) {
                npuctl_print_json(res);
                json_decref(res);
                return 0;
        }
        devs = json_object_get(res, "devices");
        links = json_object_get(res, "links");
        n = json_array_size(devs);
        printf("%-8s", "");
        for (i = 0; i < n; i++)
                printf("NPU%-5lld", (long long)json_integer_value(json_object_get(json_array_get(devs, i), "id")));
        printf("%-14s %-10s %s\n", "Bus-Id", "NUMA node", "PCIe switch");
        json_array_foreach(devs, i, d) {
                json_t *row = json_array_get(links, i);
                printf("NPU%-5lld", (long long)json_integer_value(json_object_get(d, "id")));
                for (j = 0; j < n; j++)
                        printf("%-8s", npuctl_esc(json_string_value(json_array_get(row, j))));
                printf("%-14s %-10lld %lld\n", npuctl_esc(json_string_value(json_object_get(d, "bus_id"))),
                       (long long)json_integer_value(json_object_get(d, "numa_node")),
                       (long long)json_integer_value(json_object_get(d, "pcie_switch")));
        }
        printf("\nLegend:\n"
               "  X    = itself\n"
               "  HCCS = connected by HCCS (the chip-to-chip fabric of one server's NPU group)\n"
               "  PIX  = through one PCIe switch\n"
               "  NODE = through the PCIe host bridge of one NUMA node\n"
               "  SYS  = across the interconnect between NUMA nodes\n");
        json_decref(res);
        return 0;
}

static const struct npuctl_col history_cols[] = {
        { "time", "TIME", COL_DEFAULT },
        { "id", "NPU", COL_RIGHT | COL_DEFAULT },
        { "cube", "AICORE%", COL_RIGHT | COL_DEFAULT },
        { "vector", "VECTOR%", COL_RIGHT | COL_DEFAULT },
        { "aicpu", "AICPU%", COL_RIGHT | COL_DEFAULT },
        { "dma", "DMA%", COL_RIGHT | COL_DEFAULT },
        { "temperature", "TEMP(C)", COL_RIGHT | COL_DEFAULT },
        { "power", "POWER(W)", COL_RIGHT | COL_DEFAULT },
        { NULL, NULL, 0 },
};

/* Percentages in the table, fractions 0..1 in CSV (as devices). */
static void set_pct(struct npuctl_table *t, const char *key, json_t *v)
{
        char text[32], raw[32];
        double pct = json_number_value(v);

        snprintf(text, sizeof(text), "%.1f", pct);
        snprintf(raw, sizeof(raw), "%.4f", pct / 100.0);
        npuctl_table_set(t, key, text, raw);
}

int npuctl_devices_history(struct npuctl *c, int argc, char **argv)
{
        uint64_t seconds = 60;
        json_t *res, *params, *d;
        struct npuctl_table *t;
        int code = 0;
        size_t i;

        if (npuctl_nargs("devices --history", argc, argv, 0, 1) < 0 ||
            (argc > 1 && npuctl_parse_u64("devices --history", "SECONDS", argv[1], &seconds) < 0) ||
            npuctl_table_check_fields(c, history_cols))
                return NPUCTL_USAGE;
        if (seconds < 1 || seconds > 300) {
                fprintf(stderr, "npuctl devices --history: SECONDS must be 1 to 300 (npud keeps "
                                "the last five minutes)\n");
                return NPUCTL_USAGE;
        }
        params = json_pack("{s:I}", "samples", (json_int_t)seconds);
        res = npuctl_call(c, "history", params, &code);
        json_decref(params);
        if (!res)
                return code;
        if (c->json) {
                npuctl_print_json(res);
                json_decref(res);
                return 0;
        }
        t = npuctl_table_new(history_cols);
        json_array_foreach(json_object_get(res, "devices"), i, d) {
                json_t *times = json_object_get(d, "time_ms");
                size_t k;
                for (k = 0; k < json_array_size(times); k++) {
                        json_int_t ms = json_integer_value(json_array_get(times, k));
                        time_t sec = (time_t)(ms / 1000);
                        char when[32], raw[32];
                        strftime(when, sizeof(when), "%H:%M:%S", localtime(&sec));
                        snprintf(raw, sizeof(raw), "%.3f", (double)ms / 1000.0);
                        npuctl_table_row(t);
                        npuctl_table_set(t, "time", when, raw);
                        npuctl_table_int(t, "id", json_integer_value(json_object_get(d, "id")));
                        set_pct(t, "cube", json_array_get(json_object_get(d, "cube"), k));
                        set_pct(t, "vector", json_array_get(json_object_get(d, "vector"), k));
                        set_pct(t, "aicpu", json_array_get(json_object_get(d, "aicpu"), k));
                        set_pct(t, "dma", json_array_get(json_object_get(d, "dma"), k));
                        npuctl_table_num(t, "temperature", "%.1f",
                                         json_number_value(json_array_get(json_object_get(d, "temperature"), k)));
                        npuctl_table_num(t, "power", "%.1f",
                                         json_number_value(json_array_get(json_object_get(d, "power"), k)));
                }
        }
        code = npuctl_table_print(c, t);
        npuctl_table_free(t);
        json_decref(res);
        return code;
}
