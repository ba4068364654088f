/* Sizes of what a task carries (issue 10): the task, its execution item, an operator call,
 * the scheduler's unit, and the bytes a copy, memset, launch and graph-run task occupy with
 * their pooled or allocated parts. The baseline is the layout before issue 10, when every
 * task embedded a whole operator call and 64 buffer pointers and every dispatch allocated a
 * unit with a second embedded call: those figures are constants measured on x86-64 then
 * (this binary cannot build the old layout), printed beside the new ones with the ratio.
 *
 * Output: one `name: value` line per figure; nothing is checked. */
#include <stdio.h>

#include "daemon/exec/sched.h"
#include "daemon/exec/stream.h"
#include "graph/exec.h"
#include "proto/submit.h"

/* measured with gcc on x86-64 at commit 1b11904 (sched_unit: 7,176 B there, not the 7,120 B
 * the issue quotes) */
#define OLD_TASK 5632       /* sizeof(struct task) before issue 10 */
#define OLD_SCHED_UNIT 7176 /* sizeof(struct sched_unit) before issue 10 */

int main(void)
{
        size_t task = sizeof(struct task), call = sizeof(struct ops_call);
        size_t add = exec_call_bytes(2, 1, 0), conv = exec_call_bytes(3, 1, 4);
        size_t big = exec_call_bytes(OPS_MAX_INPUTS, OPS_MAX_OUTPUTS, OPS_MAX_ATTRS);
        size_t spill = sizeof(struct buffer *) * (TASK_MAX_REFS - TASK_INLINE_BUFS);

        printf("sizeof struct task: %zu B (was %d B, ratio %.3f)\n", task, OLD_TASK,
               (double)task / OLD_TASK);
        printf("sizeof struct exec_item: %zu B (embedded a %zu B call before)\n",
               sizeof(struct exec_item), call);
        printf("sizeof struct ops_call: %zu B (the kernels' view, built on the worker's stack; "
               "queued calls are packed)\n", call);
        printf("packed call (exec_call) of an Add (2 in, 1 out): %zu B; a Conv with 4 attributes: "
               "%zu B; the largest (%d in, %d out, %d attributes): %zu B; pools by size class "
               "256/512/1024/2048/largest\n", add, conv, OPS_MAX_INPUTS, OPS_MAX_OUTPUTS,
               OPS_MAX_ATTRS, big);
        printf("sizeof struct sched_unit: %zu B (was %d B, ratio %.3f; pooled, no malloc per "
               "dispatch; + %zu B call once a unit has run an operator tile)\n",
               sched_unit_size, OLD_SCHED_UNIT, (double)sched_unit_size / OLD_SCHED_UNIT, big);
        printf("copy task: %zu B (was %d B, ratio %.3f)\n", task, OLD_TASK, (double)task / OLD_TASK);
        printf("memset task: %zu B (was %d B, ratio %.3f)\n", task, OLD_TASK,
               (double)task / OLD_TASK);
        printf("event/free/fail task: %zu B (was %d B, ratio %.3f)\n", task, OLD_TASK,
               (double)task / OLD_TASK);
        printf("Add launch task (task + packed call from the 256 B class): %zu B (was %d B, ratio "
               "%.3f)\n", task + 256, OLD_TASK, (double)(task + 256) / OLD_TASK);
        /* Bytes an Add launch writes on its way, from the sizes this build has: the record
         * decoded (its members only), the tensors bound in the loop's scratch call, the
         * signature built and compared against the remembered verdict, the packed call, the
         * task cleared, and on the worker the call unpacked onto its stack. Before issue 10
         * one Add launch moved about 20 KB through memcpy on the loop thread (the issue's
         * measurement: the record cleared and decoded whole, whole calls copied, a task and
         * a unit cleared). */
        size_t rec = sizeof(struct proto_rec_tensor) * 3 + 32;
        size_t bound = sizeof(struct ops_tensor) * 3;
        size_t sigb = 2 * 8 * (1 + 3 * 2);
        size_t loop_bytes = rec + bound + sigb + add + task;
        size_t worker_bytes = add + 64; /* tensors and counts of the unpacked call */
        size_t old_bytes = 20u << 10;
        printf("bytes written per Add launch: loop thread %zu (decoded record %zu, bound tensors "
               "%zu, signature and compare %zu, packed call %zu, task %zu), worker %zu; about "
               "%zu before issue 10 (ratio %.3f)\n", loop_bytes, rec, bound, sigb, add, task,
               worker_bytes, old_bytes, (double)(loop_bytes + worker_bytes) / (double)old_bytes);
        printf("graph-run task of > %d tensors (task + spill array; graph_bind %zu B as before): "
               "%zu B (was %d B, ratio %.3f)\n",
               TASK_INLINE_BUFS, sizeof(struct graph_bind), task + spill, OLD_TASK,
               (double)(task + spill) / OLD_TASK);
        return 0;
}
