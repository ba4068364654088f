/* npuctl: shared pieces of the command groups (one file per group). */
#ifndef NPUCTL_H
#define NPUCTL_H

#include <jansson.h>

#include "npu.h"

/* Exit codes (documented in npuctl --help). */
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
        npu_context_t *ctx;
};

/* Call an admin method; returns the result object or NULL after printing the error.
 * *ret_code receives the exit code on failure. */
json_t *npuctl_call(struct npuctl *c, const char *method, int *ret_code);
/* Print v as indented JSON on stdout. */
void npuctl_print_json(json_t *v);
/* "1.5 GiB" style. */
void npuctl_format_bytes(double bytes, char *buf, size_t len);

int npuctl_cmd_devices(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_sessions(struct npuctl *c, int argc, char **argv);
int npuctl_cmd_version(struct npuctl *c, int argc, char **argv);

#endif
