/* Kernel tuning: for an operator with several ways to compute it (kernel variants), the first
 * time a (device profile, operator, shape signature) is seen each variant is measured on the
 * real shapes and the fastest is kept; later loads and runs take the winner without measuring.
 * The cache lives in memory and, when a path is configured, in a text file that npud keeps
 * in its state directory (one line per entry, rewritten whole through a rename), so a
 * restart skips the search.
 *
 * The profile names what the measurements depend on: the host CPU (model and the vector ISA
 * the kernels may use), the kernel libraries' settings that change their speed, and the
 * build of npud's own kernels (the linker's build ID: an upgraded npud measures anew). Entries
 * of another profile in the file are kept but never used (the oldest go past
 * TUNE_MAX_ENTRIES).
 *
 * Thread-safe: lookups and stores take a mutex; measuring runs outside it (two threads that
 * tune the same key at once both measure, and the later result stands). */
#ifndef NPUD_OPS_TUNE_H
#define NPUD_OPS_TUNE_H

#include <stddef.h>
#include <stdint.h>

#define TUNE_MAX_VARIANTS 8
#define TUNE_OP_MAX 32
#define TUNE_SIG_MAX 160
#define TUNE_PROFILE_MAX 160
#define TUNE_NAME_MAX 24
/* A measured variant runs at least this often and for at least this long, the variants
 * taking turns (the fastest run counts: the least disturbed by other work on the host). */
#define TUNE_MIN_REPS 3
#define TUNE_MIN_NS 2000000ull
/* Entries kept; past it the oldest is dropped. */
#define TUNE_MAX_ENTRIES 4096

struct tune_entry {
        char profile[TUNE_PROFILE_MAX];
        char op[TUNE_OP_MAX];
        char sig[TUNE_SIG_MAX];
        int variant;                              /* the winner */
        int nvariants;
        char names[TUNE_MAX_VARIANTS][TUNE_NAME_MAX];
        uint64_t ns[TUNE_MAX_VARIANTS];           /* fastest run of each; 0 = failed */
        uint64_t when;                            /* wall-clock seconds of the measurement */
};

/* This host's profile ("cpu=...;isa=...;openblas=...;build=..."). */
const char *tune_profile(void);

/* Use path as the cache file (NULL: memory only) and load its entries. 0, or -1 with a
 * message when the file exists but cannot be read (the cache then starts empty; malformed
 * lines are skipped and counted in *ret_skipped). */
int tune_open(const char *path, int *ret_skipped, char *err, size_t errlen);

/* The winning variant of (op, sig) for this host's profile, or -1 when never tuned. */
int tune_lookup(const char *op, const char *sig);

/* The fastest time the cache holds for variant v of (op, sig) on this host's profile, in
 * nanoseconds; 0 when never measured. */
uint64_t tune_lookup_ns(const char *op, const char *sig, int v);

/* Runs variant v once on prepared data: 0, or -1 when this variant cannot do the job. */
typedef int (*tune_run_fn)(void *arg, int variant);

/* The winner of (op, sig): from the cache, or by measuring each of the n variants (named by
 * names) through run and storing the result (and the file). -1 when every variant failed. */
int tune_choose(const char *op, const char *sig, int n, const char *const *names, tune_run_fn run,
                void *arg);

/* tune_choose comparing variant i's time multiplied by weight[i] (NULL: all 1): a variant
 * with a cost of its own (memory) wins only when it is that much faster. The cache keeps the
 * measured times and the winner so chosen. */
int tune_choose_weighted(const char *op, const char *sig, int n, const char *const *names,
                         const double *weight, tune_run_fn run, void *arg);

/* The clock tune_choose measures with (nanoseconds, monotonic); NULL restores the real one.
 * For tests: a fake clock makes the choice deterministic on a loaded host. */
void tune_set_clock(uint64_t (*clock)(void));

/* Each entry (of every profile), oldest first; stops early when fn returns non-zero. */
void tune_foreach(int (*fn)(void *arg, const struct tune_entry *e), void *arg);
/* Entries kept. */
int tune_count(void);
/* Forget every entry (op NULL) or those of one operator, in memory and in the file. Returns
 * how many were dropped, or -1 when the file could not be rewritten (errno). */
int tune_clear(const char *op);

#endif
