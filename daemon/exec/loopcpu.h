/* The loop thread follows its latency-critical clients onto their CPU.
 *
 * A latency-critical request wakes the loop thread, and its reply goes back to the client:
 * two crossings between CPUs whenever the two threads are apart, which the kernel's
 * placement makes the rule (the loop thread, a real-time thread, stays on the CPU it last
 * ran on). Where the CPUs idle that is cheap (they poll while cpulat.h's request is held);
 * where a best-effort load keeps them busy each crossing is an interrupt that preempts the
 * load, and the woken thread's wait to be scheduled. A client of a latency-critical tenant
 * names the CPU it waits on (a wait's "cpu", session version 5), and libnpu keeps it awake
 * while it waits for a reply (npu_connect_options_t.wait_spin_us), so it stays there; the
 * loop thread moves onto that CPU. The client's next request then wakes the loop thread on
 * its own CPU, where, real-time, it runs at once, and the reply finds the client still on
 * that CPU, not asleep: no interrupt either way.
 *
 * The loop thread moves when one CPU was named LOOPCPU_CONFIRM times in a row by
 * latency-critical waits, at most once per LOOPCPU_MOVE_NS (clients on different CPUs do
 * not make it bounce), and gets the daemon's whole affinity back CPULAT_IDLE_NS after the
 * last latency-critical wait. Threads it starts later take the whole affinity
 * (loopcpu_thread_free).
 *
 * Off unless NPUD_LOOP_FOLLOW=1. Beside a best-effort MatMul queue it took the client's
 * loaded/alone p99 ratio from 1.42-1.65 to 0.89-1.40 (npubench isolation, other device,
 * alternated pairs), but beside best-effort graph runs it made about one request in a
 * hundred wait 0.5-1.7 ms: the loop thread preempts the client on its CPU, and when it
 * sleeps again the fair scheduler (EEVDF, Linux 6.18) finds the client, which ran since it
 * was placed, not eligible, and runs the best-effort worker at SCHED_IDLE that the client's
 * wake-up had preempted there, until the next wake-up on that CPU (traced, 2026-12-04;
 * docs/architecture.md has what was tried against it). SCHED_IDLE loses every wake-up
 * against a normal thread, but not such a pick; a client the loop thread never preempts
 * never meets it.
 *
 * Every function but loopcpu_thread_free runs on the loop thread. */
#ifndef NPUD_EXEC_LOOPCPU_H
#define NPUD_EXEC_LOOPCPU_H

#include <sched.h>
#include <stdint.h>

#define LOOPCPU_CONFIRM 3
#define LOOPCPU_MOVE_NS (100ull * 1000 * 1000)
#define LOOPCPU_AVOID_MOVE_NS (10ull * 1000 * 1000)

/* Note the daemon's affinity (on the loop thread, before the loop runs). */
void loopcpu_init(void);
/* A latency-critical client waits on CPU cpu. */
void loopcpu_client(int cpu, uint64_t now_ns);
/* Keep the loop thread off the CPUs in busy (where the backend runs best-effort work now or
 * lately: its wake-ups there interrupt that work, and the work has emptied those CPUs'
 * caches), while the daemon has other CPUs. When none is free of it, off the CPU a
 * latency-critical client waited on in the last CPULAT_IDLE_NS (NPUD_LOOP_APART=0: on
 * every CPU then): there the loop thread would preempt the client, and the client would
 * then lose its CPU to the best-effort worker its wake-up had preempted (above).
 * At most one move per LOOPCPU_AVOID_MOVE_NS. Not while following a client (which takes
 * over), nor with NPUD_LOOP_AVOID=0. Moves so far in loopcpu_avoid_moves. */
void loopcpu_avoid(const cpu_set_t *busy, uint64_t now_ns);
uint64_t loopcpu_avoid_moves(void);
/* The util timer: give the affinity back when no latency-critical client waited lately. */
void loopcpu_tick(uint64_t now_ns);
/* A thread the loop thread started, for itself: the daemon's whole affinity. */
void loopcpu_thread_free(void);
/* The CPU the loop thread is kept on, -1 when free; moves so far. */
int loopcpu_pinned(void);
uint64_t loopcpu_moves(void);

#endif
