/* Which devices a client asks npud for at hello, from its environment: a container runtime
 * sets them through the CDI spec (npuctl cdi generate). Each CDI device of kind npud.io/npu
 * sets a variable of its own, NPU_VISIBLE_DEVICE_<N>=<N>, because CDI merges the containerEdits
 * of every device a container is given and one shared variable would keep only the last
 * device's value; "all" sets NPU_VISIBLE_DEVICE_ALL=1. A user may also set
 * NPU_VISIBLE_DEVICES=0,2 by hand. The union is sent as hello's 'devices'; npud hides the
 * other devices from the session (a narrowing of its tenant's devices, never a widening). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libnpu-internal.h"

extern char **environ;

#define VISIBLE_PREFIX "NPU_VISIBLE_DEVICE_"

/* "17" -> 17 when it is a device id npud could have (0..63); -1 otherwise. */
static int parse_id(const char *s, size_t len)
{
        int v = 0;

        if (len == 0 || len > 2)
                return -1;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                v = v * 10 + (s[i] - '0');
        }
        return v < 64 ? v : -1;
}

int npu_visible_devices(uint64_t *mask, char *err, size_t errlen)
{
        const char *list = getenv("NPU_VISIBLE_DEVICES");
        int any = 0;

        *mask = 0;
        if (list && *list) {
                if (strcmp(list, "all") == 0)
                        return 0;
                for (const char *p = list; *p;) {
                        size_t n = strcspn(p, ",");
                        int id = parse_id(p, n);
                        if (id < 0) {
                                snprintf(err, errlen, "NPU_VISIBLE_DEVICES='%.64s': expected device ids "
                                         "0 to 63 separated by commas, or 'all'", list);
                                return -1;
                        }
                        *mask |= 1ull << id;
                        any = 1;
                        p += n + (p[n] == ',');
                }
        }
        for (char **e = environ; e && *e; e++) {
                const char *eq, *name = *e;
                if (strncmp(name, VISIBLE_PREFIX, sizeof(VISIBLE_PREFIX) - 1) != 0 ||
                    !(eq = strchr(name, '=')) || !eq[1])
                        continue;
                name += sizeof(VISIBLE_PREFIX) - 1;
                if ((size_t)(eq - name) == 3 && strncmp(name, "ALL", 3) == 0)
                        return 0; /* "all" given beside single devices: all of them */
                int id = parse_id(name, (size_t)(eq - name));
                if (id < 0) {
                        snprintf(err, errlen, "%.*s: not a device id 0 to 63 after " VISIBLE_PREFIX,
                                 (int)(eq - *e), *e);
                        return -1;
                }
                *mask |= 1ull << id;
                any = 1;
        }
        return any;
}
