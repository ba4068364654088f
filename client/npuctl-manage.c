/* npuctl drain, undrain, reset and fault: device management through the typed admin calls
 * of npu-admin.h, each one admin method; the daemon checks the device and the caller's rights
 * and says what was wrong. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npuctl.h"

/* The typed admin calls (npu-admin.h) npuctl's device commands make. */
enum device_op { OP_DRAIN, OP_UNDRAIN, OP_RESET, OP_FAULT_CLEAR, OP_FAULT_INJECT };

/* Run op on dev; on success print done (a format taking the device number), or {} under
 * --json (what npud answers these methods). */
static int device_call(struct npuctl *c, const char *method, enum device_op op, int dev,
                       npu_fault_t kind, double value, const char *done)
{
        npu_status_t st;
        int code = npuctl_connect(c);

        if (code)
                return code;
        switch (op) {
        case OP_DRAIN: st = npu_admin_device_drain(c->ctx, dev, 1); break;
        case OP_UNDRAIN: st = npu_admin_device_drain(c->ctx, dev, 0); break;
        case OP_RESET: st = npu_admin_device_reset(c->ctx, dev); break;
        case OP_FAULT_CLEAR: st = npu_admin_fault_clear(c->ctx, dev); break;
        default: st = npu_admin_fault_inject(c->ctx, dev, kind, value); break;
        }
        if (st != NPU_OK)
                return npuctl_failed(method, st);
        if (c->json)
                printf("{}\n");
        else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
                printf(done, dev);
#pragma GCC diagnostic pop
        return 0;
}

static int one_device_cmd(struct npuctl *c, int argc, char **argv, const char *method,
                          enum device_op op, const char *done)
{
        int dev;

        if (npuctl_nargs(argv[0], argc, argv, 1, 1) < 0 || npuctl_parse_device(argv[0], argv[1], &dev) < 0)
                return NPUCTL_USAGE;
        return device_call(c, method, op, dev, 0, 0, done);
}

int npuctl_cmd_drain(struct npuctl *c, int argc, char **argv)
{
        return one_device_cmd(c, argc, argv, "drain", OP_DRAIN, "device %d draining: it takes no new streams\n");
}

int npuctl_cmd_undrain(struct npuctl *c, int argc, char **argv)
{
        return one_device_cmd(c, argc, argv, "undrain", OP_UNDRAIN, "device %d takes new streams again\n");
}

int npuctl_cmd_reset(struct npuctl *c, int argc, char **argv)
{
        return one_device_cmd(c, argc, argv, "reset", OP_RESET,
                              "device %d reset: queued work cancelled, faults cleared\n");
}

int npuctl_cmd_fault(struct npuctl *c, int argc, char **argv)
{
        static const struct { const char *name; npu_fault_t kind; } kinds[] = {
                { "fail-next", NPU_FAULT_FAIL_NEXT },
                { "fail-device", NPU_FAULT_FAIL_DEVICE },
                { "slow", NPU_FAULT_SLOW },
                { "ecc-corrected", NPU_FAULT_ECC_CORRECTED },
                { "ecc-uncorrected", NPU_FAULT_ECC_UNCORRECTED },
        };
        const char *sub = argc > 1 ? argv[1] : "";
        int dev;

        if (strcmp(sub, "clear") == 0) {
                if (npuctl_nargs("fault clear", argc - 1, argv + 1, 1, 1) < 0 ||
                    npuctl_parse_device("fault clear", argv[2], &dev) < 0)
                        return NPUCTL_USAGE;
                return device_call(c, "fault_clear", OP_FAULT_CLEAR, dev, 0, 0,
                                   "device %d: faults cleared\n");
        }
        if (strcmp(sub, "inject") != 0) {
                fprintf(stderr, "npuctl fault: %s%s%s (fault inject DEV KIND [VALUE] | fault clear DEV)\n",
                        *sub ? "unknown subcommand '" : "missing subcommand", npuctl_esc(sub), *sub ? "'" : "");
                return NPUCTL_USAGE;
        }
        if (npuctl_nargs("fault inject", argc - 1, argv + 1, 2, 3) < 0 ||
            npuctl_parse_device("fault inject", argv[2], &dev) < 0)
                return NPUCTL_USAGE;
        npu_fault_t kind = 0;
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
                if (strcmp(argv[3], kinds[i].name) == 0)
                        kind = kinds[i].kind;
        if (!kind) {
                fprintf(stderr, "npuctl fault inject: unknown kind '%s' (fail-next, fail-device, slow, ecc-corrected, ecc-uncorrected)\n",
                        npuctl_esc(argv[3]));
                return NPUCTL_USAGE;
        }
        double v = 1.0; /* npud's default */
        if (argc > 4) {
                char *end;
                errno = 0;
                v = strtod(argv[4], &end);
                if (errno || end == argv[4] || *end || !(v > 0 && v <= 1e9)) {
                        fprintf(stderr, "npuctl fault inject: value '%s' is not a positive number\n",
                                npuctl_esc(argv[4]));
                        return NPUCTL_USAGE;
                }
        }
        return device_call(c, "fault_inject", OP_FAULT_INJECT, dev, kind, v, "device %d: fault injected\n");
}
