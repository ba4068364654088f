/* Placement: which device a stream created for "any device" lands on. Failed, drained and
 * disallowed devices are never chosen; devices without the requested free memory neither. */
#ifndef NPU_POLICY_PLACEMENT_H
#define NPU_POLICY_PLACEMENT_H

#include <stdint.h>

#include "policy.h"

struct place_device {
        int usable;         /* healthy, not draining, allowed for the tenant */
        uint64_t mem_free;  /* bytes */
        uint32_t streams;   /* live streams */
        double load;        /* estimated ns of queued + running work per core */
};

/* Index of the chosen device, or -1 when none qualifies. */
int policy_place(enum policy_placement p, const struct place_device *devs, int n,
                 uint64_t need_mem);

#endif
