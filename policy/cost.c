/* Cost model and the foundation's engine choice (capability first, AI CPU as fallback). */
#include "cost.h"

uint64_t cost_kernel_ns(uint64_t ops, uint64_t bytes, double ops_per_core_s, int cores,
                        double mem_bw)
{
        double compute = 0, memory = 0;

        if (cores < 1)
                cores = 1;
        if (ops_per_core_s > 0)
                compute = (double)ops / (ops_per_core_s * cores);
        if (mem_bw > 0)
                memory = (double)bytes / mem_bw;
        double t = (compute > memory ? compute : memory) * 1e9;
        if (t > 1e15)
                t = 1e15;
        return COST_LAUNCH_NS + (uint64_t)t;
}

uint64_t cost_copy_ns(uint64_t bytes, double bw)
{
        double t = bw > 0 ? (double)bytes / bw * 1e9 : 0;
        if (t > 1e15)
                t = 1e15;
        return COST_LAUNCH_NS + (uint64_t)t;
}

int policy_engine_choose(int op_engine, const int *cores, int nkinds, int aicpu_kind)
{
        if (op_engine >= 0 && op_engine < nkinds && cores[op_engine] > 0)
                return op_engine;
        if (aicpu_kind >= 0 && aicpu_kind < nkinds && cores[aicpu_kind] > 0)
                return aicpu_kind;
        return -1;
}
