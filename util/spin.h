/* Waiting without sleeping, for threads that hand work to each other within microseconds
 * (a gang's workers, the parts of one graph step). Sleeping on a futex is what costs here:
 * on a virtual machine the wake-up of a halted vCPU takes tens of microseconds, more than
 * the wait itself. */
#ifndef NPUD_UTIL_SPIN_H
#define NPUD_UTIL_SPIN_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

/* Below this long a spin pauses; beyond, it yields its CPU at each turn, so that a thread
 * woken on this CPU (a client receiving its reply, the lock's holder) runs at once instead
 * of after the spinner's time slice. */
#define SPIN_PAUSE_NS 20000

/* One turn of a spin that has lasted waited_ns. */
static inline void spin_turn(uint64_t waited_ns)
{
        if (waited_ns < SPIN_PAUSE_NS) {
                for (int k = 0; k < 64; k++)
                        __builtin_ia32_pause();
        } else {
                sched_yield();
        }
}

/* A lock held for microseconds by threads on different CPUs: the waiter spins instead of
 * sleeping, 64 pauses a turn for 32 turns (tens of microseconds), then yielding its CPU at
 * each turn in case the holder was preempted on it. Zero is unlocked. */
typedef atomic_int spin_lock_t;

static inline void spin_lock(spin_lock_t *l)
{
        for (unsigned turn = 0;; turn++) {
                if (!atomic_load_explicit(l, memory_order_relaxed) &&
                    !atomic_exchange_explicit(l, 1, memory_order_acquire))
                        return;
                if (turn < 32) {
                        for (int k = 0; k < 64; k++)
                                __builtin_ia32_pause();
                } else {
                        sched_yield();
                }
        }
}

static inline void spin_unlock(spin_lock_t *l)
{
        atomic_store_explicit(l, 0, memory_order_release);
}

#endif
