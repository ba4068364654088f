/* Device placement (see placement.h). */
#include "placement.h"

/* Is candidate a better placement than current best b? */
static int better(enum policy_placement p, const struct place_device *a,
                  const struct place_device *b)
{
        switch (p) {
        case POLICY_PLACE_SPREAD:
                if (a->streams != b->streams)
                        return a->streams < b->streams;
                return a->mem_free > b->mem_free;
        case POLICY_PLACE_BINPACK:
                if (a->streams != b->streams)
                        return a->streams > b->streams;
                return a->mem_free < b->mem_free;
        case POLICY_PLACE_LEAST_LOADED:
        default:
                if (a->load != b->load)
                        return a->load < b->load;
                if (a->streams != b->streams)
                        return a->streams < b->streams;
                return a->mem_free > b->mem_free;
        }
}

int policy_place(enum policy_placement p, const struct place_device *devs, int n,
                 uint64_t need_mem)
{
        int best = -1;

        for (int i = 0; i < n; i++) {
                if (!devs[i].usable || devs[i].mem_free < need_mem)
                        continue;
                if (best < 0 || better(p, &devs[i], &devs[best]))
                        best = i;
        }
        return best;
}
