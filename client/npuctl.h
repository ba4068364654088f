/* npuctl: shared pieces of the command groups (one file per group): the global options, the
 * admin call wrapper, argument parsers and the table writer that gives every listing its
 * three forms (aligned table, CSV, and the daemon's own JSON). */
#ifndef NPUCTL_H
#define NPUCTL_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "npu-admin.h"
#include "npu.h"

/* Exit codes (documented in npuctl --help and npuctl(8)). */
enum {
        NPUCTL_OK = 0,
        NPUCTL_ERROR = 1,      /* the daemon refused or failed the request */
        NPUCTL_USAGE = 2,      /* bad command line */
        NPUCTL_CONNECT = 3,    /* npud not reachable */
        NPUCTL_PERMISSION = 4, /* not allowed */
};

struct npuctl {
        const char *socket;
        int json;
        int csv;
        const char *fields; /* --fields a,b,c: columns of table-like output, in this order */
        double watch;       /* --watch SECONDS: repeat (top: refresh period); 0 = once */
        long count;         /* --count N: iterations of --watch and top; 0 = until q/Ctrl-C */
        int tty;            /* stdout is a terminal: clear the screen between refreshes */
        /* --watch with --csv, a log: the CSV header only on the first refresh, and a first
         * column "timestamp" (ISO 8601 UTC of the refresh); "" otherwise */
        char stamp[32];
        int quiet_connect;  /* --watch retrying after npud went away: no message per try */
        npu_context_t *ctx;
};

/* ---- text npuctl did not write ----
 * Every string from outside npuctl (names and messages from the daemon, anything from JSON,
 * echoed arguments) reaches the terminal through one of these, so that a process name like
 * "\033]0;...\007" cannot drive the admin's terminal. Written as visible ASCII instead:
 * C0 controls and DEL (\x1b), bytes that are not valid UTF-8, raw C1 bytes 0x80-0x9f among
 * them (\x9b), the C1 controls U+0080-U+009F in UTF-8 form, bidirectional overrides and
 * isolates, and the line and paragraph separators (\u009b, \u202e); a backslash is doubled
 * so that the escaped form cannot be forged. Other UTF-8 text stays as it is. Table cells
 * (npuctl_table_set) are escaped here too, so tables and CSV need nothing more. */
/* A malloc'd escaped copy of s (NULL: ""); exits on out of memory. */
char *npuctl_escape(const char *s);
/* s itself when nothing needs escaping (NULL stays NULL), else an escaped copy that lives
 * until npuctl_esc_release(): for printf arguments. */
const char *npuctl_esc(const char *s);
/* Free the copies npuctl_esc made (between refreshes of --watch and top). */
void npuctl_esc_release(void);
/* v as JSON text for a terminal (free() it): non-ASCII as \uXXXX and DEL as \u007f, which
 * jansson would otherwise write raw; indent 2 when indent, else compact. NULL on failure. */
char *npuctl_json_text(json_t *v, int indent);

/* Call an admin method with params (an object, borrowed; NULL for none). Returns the result
 * object, or NULL after printing "npuctl: METHOD: why" with *ret_code set to the exit code. */
/* Connect c->ctx if not yet: 0, or the exit code after printing why not. */
int npuctl_connect(struct npuctl *c);
/* Print the failure of a call of method (npu_error_message) and return its exit code. */
int npuctl_failed(const char *method, npu_status_t st);
json_t *npuctl_call(struct npuctl *c, const char *method, json_t *params, int *ret_code);
/* Print v as indented JSON on stdout. */
void npuctl_print_json(json_t *v);
/* "1.5 GiB" style. */
void npuctl_format_bytes(double bytes, char *buf, size_t len);

/* Argument parsers; each prints "npuctl CMD: ..." and returns -1 on a bad value. */
int npuctl_parse_device(const char *cmd, const char *arg, int *ret);
int npuctl_parse_u64(const char *cmd, const char *what, const char *arg, uint64_t *ret);
/* Bytes with an optional binary suffix: 512, 64K, 1.5G, 2TiB; "unlimited" or "none" = 0. */
int npuctl_parse_bytes(const char *cmd, const char *arg, uint64_t *ret);
/* Check that a command got between min and max operands (argv[0] is the command). */
int npuctl_nargs(const char *cmd, int argc, char **argv, int min, int max);

/* Wait up to seconds for the next refresh. Returns 1 when the user asked to stop (q, Q or
 * Ctrl-C), else 0. Puts a terminal on stdin in single-key mode on first use. */
int npuctl_wait(double seconds);
/* Clear the screen (terminal output only) before a refresh. */
void npuctl_clear(const struct npuctl *c);
/* Set when SIGINT or SIGTERM arrived during a --watch or top loop. */
extern volatile int npuctl_stop;

/* ---- tables ---- */

enum {
        COL_RIGHT = 1 << 0, /* numbers: right-aligned */
        COL_TABLE = 1 << 1, /* shown in the human table when --fields is not given */
        COL_CSV = 1 << 2,   /* shown in CSV when --fields is not given */
};
#define COL_DEFAULT (COL_TABLE | COL_CSV)

struct npuctl_col {
        const char *key;  /* field name for --fields and the CSV header */
        const char *head; /* table heading */
        unsigned flags;
};

struct npuctl_table;

/* cols ends with an entry whose key is NULL. */
struct npuctl_table *npuctl_table_new(const struct npuctl_col *cols);
void npuctl_table_free(struct npuctl_table *t);
/* Draw with +---+ rules and | separators, the look of npu-smi. */
void npuctl_table_boxed(struct npuctl_table *t);
/* Start a row; the setters fill cells of the latest row by column key. */
void npuctl_table_row(struct npuctl_table *t);
/* text: what a person reads in the table; raw: the CSV value (NULL = same as text). */
void npuctl_table_set(struct npuctl_table *t, const char *key, const char *text, const char *raw);
void npuctl_table_str(struct npuctl_table *t, const char *key, const char *s);
void npuctl_table_int(struct npuctl_table *t, const char *key, long long v);
void npuctl_table_bytes(struct npuctl_table *t, const char *key, uint64_t v);
/* text formatted with fmt (a printf format taking one double), raw with full precision. */
void npuctl_table_num(struct npuctl_table *t, const char *key, const char *fmt, double v);
/* Check --fields against the columns: 0, or NPUCTL_USAGE after naming the unknown field. */
int npuctl_table_check_fields(const struct npuctl *c, const struct npuctl_col *cols);
/* Print as a table or CSV (c->csv), with c->fields. 0 or NPUCTL_USAGE. */
int npuctl_table_print(const struct npuctl *c, struct npuctl_table *t);

/* ---- commands ---- */

int npuctl_cmd_devices(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_device(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_health(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_top(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_sessions(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_session(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_version(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_mem(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_drain(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_undrain(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_reset(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_fault(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_tenants(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_quota(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_sched(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_reload(struct npuctl *c, int argc, char **argv);
/* npuctl-telemetry.c: topo, devices --history [SECONDS]; npuctl-diag.c: diag [-r LEVEL] */
int npuctl_cmd_topo(struct npuctl *c, int argc, char **argv);
int npuctl_devices_history(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_diag(struct npuctl *c, int argc, char **argv);
/* npuctl-cluster.c: tenant add/remove, cdi generate/tenants, slurm gres */
int npuctl_cmd_tenant(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_cdi(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_slurm(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_tune(struct npuctl *c, int argc, char **argv);

#endif
