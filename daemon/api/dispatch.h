/* Request dispatch: one table row per protocol method with its handler, permission and the
 * session state it needs. Handlers reply now or keep the request id for a deferred reply. */
#ifndef NPUD_DISPATCH_H
#define NPUD_DISPATCH_H

#include <jansson.h>
#include <stdint.h>

struct session;

struct request {
        struct session *session;
        uint64_t id;
        const char *method;
        json_t *params; /* object, borrowed */
        int *fds;       /* PROTO_MAX_FDS entries, -1 for none; a handler that keeps one sets it to -1 */
        int nfds;
};

enum method_flags {
        METHOD_BEFORE_HELLO = 1 << 0, /* allowed before the hello exchange */
        METHOD_ADMIN = 1 << 1,        /* root or the admin group only */
};

struct method {
        const char *name;
        void (*handler)(struct request *req);
        unsigned flags;
};

void dispatch_request(struct request *req);
struct proto_rec;
/* Turn one decoded SUBMIT record into a task on its stream (or an asynchronous failure). The
 * session calls it record by record and checks the queued-task limit before each one. */
void dispatch_submit_record(struct session *s, const struct proto_rec *r);
/* Is the session or its tenant at or over its queued-task limit? */
int dispatch_over_queue_limit(const struct session *s);

/* Method groups, each in its own file. */
extern const struct method methods_session[];
extern const struct method methods_memory[];
extern const struct method methods_stream[];
extern const struct method methods_admin[];
extern const struct method methods_sched[];
extern const struct method methods_share[];
extern const struct method methods_manage[];
extern const struct method methods_telemetry[];
extern const struct method methods_graph[];
extern const struct method methods_run[];
extern const struct method methods_tenant[];
extern const struct method methods_tune[];

/* Parameter helpers: 0 or -EINVAL with an error reply already sent naming the key. */
int param_u64(struct request *req, const char *key, uint64_t max, uint64_t *ret);
int param_u64_opt(struct request *req, const char *key, uint64_t max, uint64_t def, uint64_t *ret);
/* A JSON string of a client-chosen name, never NULL-by-encoding (see dispatch.c). */
json_t *json_client_text(const char *s);
/* Reject keys outside the allowed list (NULL-terminated). */
int params_only(struct request *req, const char *const *allowed);

#endif
