/* npuctl drain, undrain, reset and fault: device management. Each is one admin method; the
 * daemon checks the device and the caller's rights and says what was wrong. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npuctl.h"

/* Call method with {"device": dev, ...extra}; on success print done (a format taking the
 * device number) unless --json, where the daemon's answer is printed. */
static int device_call(struct npuctl *c, const char *method, int dev, json_t *extra, const char *done)
{
        json_t *params = extra ? extra : json_object(), *res;
        int code = 0;

        json_object_set_new(params, "device", json_integer(dev));
        res = npuctl_call(c, method, params, &code);
        json_decref(params);
        if (!res)
                return code;
        if (c->json)
                npuctl_print_json(res);
        else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
                printf(done, dev);
#pragma GCC diagnostic pop
        json_decref(res);
        return 0;
}

static int one_device_cmd(struct npuctl *c, int argc, char **argv, const char *method, const char *done)
{
        int dev;

        if (npuctl_nargs(argv[0], argc, argv, 1, 1) < 0 || npuctl_parse_device(argv[0], argv[1], &dev) < 0)
                return NPUCTL_USAGE;
        return device_call(c, method, dev, NULL, done);
}

int npuctl_cmd_drain(struct npuctl *c, int argc, char **argv)
{
        return one_device_cmd(c, argc, argv, "drain", "device %d draining: it takes no new streams\n");
}

int npuctl_cmd_undrain(struct npuctl *c, int argc, char **argv)
{
        return one_device_cmd(c, argc, argv, "undrain", "device %d takes new streams again\n");
}

int npuctl_cmd_reset(struct npuctl *c, int argc, char **argv)
{
        return one_device_cmd(c, argc, argv, "reset",
                              "device %d reset: queued work cancelled, faults cleared\n");
}

int npuctl_cmd_fault(struct npuctl *c, int argc, char **argv)
{
        static const char *const kinds[] = { "fail-next", "fail-device", "slow" };
        const char *sub = argc > 1 ? argv[1] : "";
        int dev;

        if (strcmp(sub, "clear") == 0) {
                if (npuctl_nargs("fault clear", argc - 1, argv + 1, 1, 1) < 0 ||
                    npuctl_parse_device("fault clear", argv[2], &dev) < 0)
                        return NPUCTL_USAGE;
                return device_call(c, "fault_clear", dev, NULL, "device %d: faults cleared\n");
        }
        if (strcmp(sub, "inject") != 0) {
                fprintf(stderr, "npuctl fault: %s%s%s (fault inject DEV KIND [VALUE] | fault clear DEV)\n",
                        *sub ? "unknown subcommand '" : "missing subcommand", npuctl_esc(sub), *sub ? "'" : "");
                return NPUCTL_USAGE;
        }
        if (npuctl_nargs("fault inject", argc - 1, argv + 1, 2, 3) < 0 ||
            npuctl_parse_device("fault inject", argv[2], &dev) < 0)
                return NPUCTL_USAGE;
        int known = 0;
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
                known |= strcmp(argv[3], kinds[i]) == 0;
        if (!known) {
                fprintf(stderr, "npuctl fault inject: unknown kind '%s' (fail-next, fail-device, slow)\n",
                        npuctl_esc(argv[3]));
                return NPUCTL_USAGE;
        }
        json_t *params = json_pack("{s:s}", "kind", argv[3]);
        if (argc > 4) {
                char *end;
                errno = 0;
                double v = strtod(argv[4], &end);
                if (errno || end == argv[4] || *end || !(v > 0 && v <= 1e9)) {
                        fprintf(stderr, "npuctl fault inject: value '%s' is not a positive number\n",
                                npuctl_esc(argv[4]));
                        json_decref(params);
                        return NPUCTL_USAGE;
                }
                json_object_set_new(params, "value", json_real(v));
        }
        return device_call(c, "fault_inject", dev, params, "device %d: fault injected\n");
}
