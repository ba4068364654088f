/* Kernel tuning cache (tune.h). */
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tune.h"

#define TUNE_MAGIC "npud-tune 1"
#define INDEX_SLOTS (2 * TUNE_MAX_ENTRIES) /* a power of two, at most half full */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct tune_entry *entries; /* oldest first */
static int nentries;
static int index_of[INDEX_SLOTS]; /* entry + 1, 0 = empty */
static char *file;                /* NULL: memory only */

static pthread_once_t profile_once = PTHREAD_ONCE_INIT;
static char profile[TUNE_PROFILE_MAX];

/* The linker's build ID (NT_GNU_BUILD_ID) of the object that holds this code, its first
 * bytes in hex: kernels change from one build to the next, and times measured with another
 * build's kernels would choose for them. */
struct build_find {
        uintptr_t addr;
        char hex[13];
};

static int build_id_of(struct dl_phdr_info *info, size_t size, void *arg)
{
        struct build_find *f = arg;
        int mine = 0;

        (void)size;
        for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
                if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr - lo < ph->p_memsz)
                        mine = 1;
        }
        for (int i = 0; mine && i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_NOTE)
                        continue;
                const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
                while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
                        const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
                        const char *name = p + sizeof(*n), *desc = name + ((n->n_namesz + 3) & ~3u);
                        if (desc > end || n->n_descsz > (size_t)(end - desc))
                                break;
                        if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                                for (size_t j = 0; j < n->n_descsz && j < (sizeof(f->hex) - 1) / 2; j++)
                                        snprintf(f->hex + 2 * j, 3, "%02x", (unsigned char)desc[j]);
                                return 1;
                        }
                        p = desc + ((n->n_descsz + 3) & ~3u);
                }
        }
        return mine;
}

static void profile_init(void)
{
        char model[96] = "unknown", line[256];
        FILE *f = fopen("/proc/cpuinfo", "r");
        const char *core = getenv("OPENBLAS_CORETYPE");

        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "model name", 10) == 0) {
                        char *v = strchr(line, ':');
                        if (v) {
                                v += 1 + (v[1] == ' ');
                                v[strcspn(v, "\n")] = 0;
                                snprintf(model, sizeof(model), "%s", v);
                        }
                        break;
                }
        if (f)
                fclose(f);
        /* the cache file is line- and tab-separated */
        for (char *p = model; *p; p++)
                if (*p == '\t' || *p == ';')
                        *p = ' ';
        __builtin_cpu_init();
        struct build_find bf = { .addr = (uintptr_t)&profile_init, .hex = "" };
        dl_iterate_phdr(build_id_of, &bf);
        snprintf(profile, sizeof(profile), "cpu=%.96s;isa=%s;openblas=%.16s;build=%s", model,
                 __builtin_cpu_supports("avx512f") ? "avx512" :
                 __builtin_cpu_supports("avx2") ? "avx2" : "base",
                 core && *core && !strpbrk(core, "\t\n;") ? core : "auto", bf.hex[0] ? bf.hex : "unknown");
}

const char *tune_profile(void)
{
        pthread_once(&profile_once, profile_init);
        return profile;
}

static uint32_t key_hash(const char *prof, const char *op, const char *sig)
{
        uint32_t h = 2166136261u;
        const char *parts[3] = { prof, op, sig };

        for (int i = 0; i < 3; i++) {
                for (const unsigned char *p = (const unsigned char *)parts[i]; *p; p++)
                        h = (h ^ *p) * 16777619u;
                h = (h ^ 0xff) * 16777619u; /* a separator no name holds */
        }
        return h;
}

static int find_locked(const char *prof, const char *op, const char *sig)
{
        for (uint32_t i = key_hash(prof, op, sig) & (INDEX_SLOTS - 1); index_of[i];
             i = (i + 1) & (INDEX_SLOTS - 1)) {
                const struct tune_entry *e = &entries[index_of[i] - 1];
                if (strcmp(e->op, op) == 0 && strcmp(e->sig, sig) == 0 &&
                    strcmp(e->profile, prof) == 0)
                        return index_of[i] - 1;
        }
        return -1;
}

static void reindex_locked(void)
{
        memset(index_of, 0, sizeof(index_of));
        for (int k = 0; k < nentries; k++) {
                const struct tune_entry *e = &entries[k];
                uint32_t i = key_hash(e->profile, e->op, e->sig) & (INDEX_SLOTS - 1);
                while (index_of[i])
                        i = (i + 1) & (INDEX_SLOTS - 1);
                index_of[i] = k + 1;
        }
}

/* Add or replace e; the oldest entry goes when the cache is full. */
static void put_locked(const struct tune_entry *e)
{
        int k = find_locked(e->profile, e->op, e->sig);

        if (k >= 0) {
                entries[k] = *e;
                return;
        }
        if (!entries && !(entries = calloc(TUNE_MAX_ENTRIES, sizeof(*entries))))
                return;
        if (nentries == TUNE_MAX_ENTRIES) {
                memmove(entries, entries + 1, sizeof(*entries) * (TUNE_MAX_ENTRIES - 1));
                nentries--;
                entries[nentries] = *e;
                nentries++;
                reindex_locked();
                return;
        }
        entries[nentries++] = *e;
        uint32_t i = key_hash(e->profile, e->op, e->sig) & (INDEX_SLOTS - 1);
        while (index_of[i])
                i = (i + 1) & (INDEX_SLOTS - 1);
        index_of[i] = nentries;
}

/* A field of the file: no tab, no newline, not empty, shorter than max. */
static int field_ok(const char *s, size_t max)
{
        size_t n = strlen(s);
        return n > 0 && n < max && !strpbrk(s, "\t\n");
}

/* One entry line: profile, op, sig, when, winner, then name=ns per variant. */
static int parse_line(char *line, struct tune_entry *e)
{
        char *f[6 + TUNE_MAX_VARIANTS], *save = NULL;
        int n = 0;

        line[strcspn(line, "\n")] = 0;
        for (char *t = strtok_r(line, "\t", &save); t && n < (int)(sizeof(f) / sizeof(f[0]));
             t = strtok_r(NULL, "\t", &save))
                f[n++] = t;
        if (n < 6 || !field_ok(f[0], TUNE_PROFILE_MAX) || !field_ok(f[1], TUNE_OP_MAX) ||
            !field_ok(f[2], TUNE_SIG_MAX))
                return -1;
        memset(e, 0, sizeof(*e));
        strcpy(e->profile, f[0]);
        strcpy(e->op, f[1]);
        strcpy(e->sig, f[2]);
        char *end;
        errno = 0;
        e->when = strtoull(f[3], &end, 10);
        if (errno || *end)
                return -1;
        long v = strtol(f[4], &end, 10);
        if (*end || v < 0)
                return -1;
        e->nvariants = n - 5;
        if (v >= e->nvariants)
                return -1;
        e->variant = (int)v;
        for (int i = 0; i < e->nvariants; i++) {
                char *eq = strrchr(f[5 + i], '=');
                if (!eq || eq == f[5 + i] || (size_t)(eq - f[5 + i]) >= TUNE_NAME_MAX)
                        return -1;
                *eq = 0;
                strcpy(e->names[i], f[5 + i]);
                errno = 0;
                e->ns[i] = strtoull(eq + 1, &end, 10);
                if (errno || *end || eq[1] == 0)
                        return -1;
        }
        return 0;
}

/* Rewrite the file from memory: a temporary file renamed over it, so a reader (or a crash)
 * sees the old file or the new one, never half of one. */
static int save_locked(void)
{
        char tmp[4096 + 16];
        FILE *f;

        if (!file)
                return 0;
        /* per process: two npuds sharing a cache must not write into one temporary file */
        if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", file, (int)getpid()) >= (int)sizeof(tmp)) {
                errno = ENAMETOOLONG;
                return -1;
        }
        if (!(f = fopen(tmp, "w")))
                return -1;
        fprintf(f, "%s\n", TUNE_MAGIC);
        for (int k = 0; k < nentries; k++) {
                const struct tune_entry *e = &entries[k];
                fprintf(f, "%s\t%s\t%s\t%" PRIu64 "\t%d", e->profile, e->op, e->sig, e->when,
                        e->variant);
                for (int i = 0; i < e->nvariants; i++)
                        fprintf(f, "\t%s=%" PRIu64, e->names[i], e->ns[i]);
                fputc('\n', f);
        }
        int bad = ferror(f);
        if (fclose(f) != 0 || bad) {
                int e = errno ? errno : EIO;
                unlink(tmp);
                errno = e;
                return -1;
        }
        if (rename(tmp, file) < 0) {
                int e = errno;
                unlink(tmp);
                errno = e;
                return -1;
        }
        return 0;
}

int tune_open(const char *path, int *ret_skipped, char *err, size_t errlen)
{
        char line[2048];
        int skipped = 0, rc = 0;
        FILE *f;

        pthread_mutex_lock(&mu);
        free(file);
        file = path && *path ? strdup(path) : NULL;
        nentries = 0;
        memset(index_of, 0, sizeof(index_of));
        if (file && (f = fopen(file, "r"))) {
                if (!fgets(line, sizeof(line), f) || strncmp(line, TUNE_MAGIC, strlen(TUNE_MAGIC)) != 0) {
                        snprintf(err, errlen, "%s: not a tuning cache (first line is not '%s')",
                                 file, TUNE_MAGIC);
                        rc = -1;
                } else {
                        while (fgets(line, sizeof(line), f)) {
                                struct tune_entry e;
                                if (!strchr(line, '\n') && !feof(f)) { /* too long: skip it whole */
                                        int c;
                                        while ((c = fgetc(f)) != EOF && c != '\n')
                                                ;
                                        skipped++;
                                        continue;
                                }
                                if (parse_line(line, &e) == 0)
                                        put_locked(&e);
                                else
                                        skipped++;
                        }
                }
                fclose(f);
        } else if (file && errno != ENOENT) {
                snprintf(err, errlen, "%s: %s", file, strerror(errno));
                rc = -1;
        }
        pthread_mutex_unlock(&mu);
        if (ret_skipped)
                *ret_skipped = skipped;
        return rc;
}

int tune_lookup(const char *op, const char *sig)
{
        const char *prof = tune_profile();
        int v = -1;

        pthread_mutex_lock(&mu);
        int k = nentries ? find_locked(prof, op, sig) : -1;
        if (k >= 0)
                v = entries[k].variant;
        pthread_mutex_unlock(&mu);
        return v;
}

uint64_t tune_lookup_ns(const char *op, const char *sig, int v)
{
        const char *prof = tune_profile();
        uint64_t ns = 0;

        pthread_mutex_lock(&mu);
        int k = nentries ? find_locked(prof, op, sig) : -1;
        if (k >= 0 && v >= 0 && v < entries[k].nvariants)
                ns = entries[k].ns[v];
        pthread_mutex_unlock(&mu);
        return ns;
}

static uint64_t real_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t (*mono_ns)(void) = real_ns;

void tune_set_clock(uint64_t (*clock)(void))
{
        mono_ns = clock ? clock : real_ns;
}

int tune_choose(const char *op, const char *sig, int n, const char *const *names, tune_run_fn run,
                void *arg)
{
        return tune_choose_weighted(op, sig, n, names, NULL, run, arg);
}

int tune_choose_weighted(const char *op, const char *sig, int n, const char *const *names,
                         const double *weight, tune_run_fn run, void *arg)
{
        struct tune_entry e = { 0 };
        int v = tune_lookup(op, sig);

        if (v >= 0 && v < n)
                return v;
        if (n < 1 || n > TUNE_MAX_VARIANTS || strlen(op) >= TUNE_OP_MAX || strlen(sig) >= TUNE_SIG_MAX)
                return n >= 1 ? 0 : -1;
        snprintf(e.profile, sizeof(e.profile), "%s", tune_profile());
        snprintf(e.op, sizeof(e.op), "%s", op);
        snprintf(e.sig, sizeof(e.sig), "%s", sig);
        e.nvariants = n;
        e.variant = -1;
        /* Round robin, one run of each variant a round: a noisy stretch of the host (a
         * neighbour's burst) then falls on every variant alike instead of on the one being
         * measured. Each keeps its fastest run, and runs until it has run TUNE_MIN_REPS
         * times and for TUNE_MIN_NS (at most 65 rounds); a failing variant is dropped. */
        uint64_t spent[TUNE_MAX_VARIANTS] = { 0 };
        int failed[TUNE_MAX_VARIANTS] = { 0 };
        for (int i = 0; i < n; i++)
                snprintf(e.names[i], sizeof(e.names[i]), "%s", names[i]);
        for (int round = 0, more = 1; more && round <= 64; round++) {
                more = 0;
                for (int i = 0; i < n; i++) {
                        if (failed[i] || (round >= TUNE_MIN_REPS && spent[i] >= TUNE_MIN_NS))
                                continue;
                        uint64_t t0 = mono_ns();
                        if (run(arg, i) != 0) {
                                failed[i] = 1;
                                e.ns[i] = 0;
                                continue;
                        }
                        uint64_t t = mono_ns() - t0;
                        spent[i] += t;
                        if (!e.ns[i] || t < e.ns[i])
                                e.ns[i] = t ? t : 1;
                        more = 1;
                }
        }
        for (int i = 0; i < n; i++)
                if (e.ns[i] && (e.variant < 0 || (double)e.ns[i] * (weight ? weight[i] : 1.0) <
                                                         (double)e.ns[e.variant] * (weight ? weight[e.variant] : 1.0)))
                        e.variant = i;
        if (e.variant < 0)
                return -1;
        e.when = (uint64_t)time(NULL);
        pthread_mutex_lock(&mu);
        put_locked(&e);
        save_locked(); /* a cache that cannot be written still serves this process */
        pthread_mutex_unlock(&mu);
        return e.variant;
}

void tune_foreach(int (*fn)(void *arg, const struct tune_entry *e), void *arg)
{
        pthread_mutex_lock(&mu);
        for (int k = 0; k < nentries; k++)
                if (fn(arg, &entries[k]))
                        break;
        pthread_mutex_unlock(&mu);
}

int tune_count(void)
{
        pthread_mutex_lock(&mu);
        int n = nentries;
        pthread_mutex_unlock(&mu);
        return n;
}

int tune_clear(const char *op)
{
        int dropped = 0, kept = 0;

        pthread_mutex_lock(&mu);
        for (int k = 0; k < nentries; k++) {
                if (!op || strcmp(entries[k].op, op) == 0)
                        dropped++;
                else
                        entries[kept++] = entries[k];
        }
        nentries = kept;
        reindex_locked();
        int rc = save_locked();
        pthread_mutex_unlock(&mu);
        return rc < 0 ? -1 : dropped;
}
