/* Cost model: how long a task takes on an engine, from its work (operations, bytes) and the
 * engine's rates. Pure arithmetic, no clock; used by model-mode devices and by engine choice. */
#ifndef NPU_POLICY_COST_H
#define NPU_POLICY_COST_H

#include <stdint.h>

#define COST_LAUNCH_NS 2000u /* fixed per-task overhead of a device launch */

/* Duration in ns of a kernel doing `ops` operations and moving `bytes` on `cores` cores that
 * each do ops_per_core_s operations per second, with mem_bw bytes/s of memory bandwidth. */
uint64_t cost_kernel_ns(uint64_t ops, uint64_t bytes, double ops_per_core_s, int cores,
                        double mem_bw);
/* Duration in ns of a copy of `bytes` at bw bytes/s. */
uint64_t cost_copy_ns(uint64_t bytes, double bw);

/* Engine a task runs on: the operator's engine kind when the device has cores of that kind,
 * otherwise the AI CPU (which every device has). cores[] is indexed by engine kind; returns
 * -1 when no engine can run it. */
int policy_engine_choose(int op_engine, const int *cores, int nkinds, int aicpu_kind);

#endif
