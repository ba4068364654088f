/* Session methods: hello (version negotiation) and ping. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto/errors.h"
#include "proto/frame.h"
#include "dispatch.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/tenant.h"

#ifndef NPUD_VERSION
#define NPUD_VERSION "0.1.0"
#endif

static void method_hello(struct request *req)
{
        static const char *const keys[] = { "min_version", "max_version", "client", "tenant",
                                            "backpressure", NULL };
        json_t *tenant = json_object_get(req->params, "tenant");
        json_t *bp = json_object_get(req->params, "backpressure");
        struct session *s = req->session;
        uint64_t lo, hi;
        json_t *client = json_object_get(req->params, "client");

        if (params_only(req, keys) < 0 ||
            param_u64(req, "min_version", 65535, &lo) < 0 ||
            param_u64(req, "max_version", 65535, &hi) < 0)
                return;
        if (client && !json_is_string(client)) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "hello: parameter 'client' must be a string");
                return;
        }
        if (s->version) {
                session_reply_error(s, req->id, PROTO_E_PROTOCOL, "hello: already done");
                return;
        }
        if ((tenant && !json_is_string(tenant)) ||
            (bp && (!json_is_string(bp) || (strcmp(json_string_value(bp), "block") &&
                                            strcmp(json_string_value(bp), "error"))))) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "hello: 'tenant' must be a string, 'backpressure' \"block\" or \"error\"");
                return;
        }
        if (tenant) {
                int e = session_assign_tenant(s, json_string_value(tenant));
                if (e == -ENOENT) {
                        session_reply_error(s, req->id, PROTO_E_INVALID, "hello: no tenant named '%.64s'",
                                            json_string_value(tenant));
                        return;
                }
                if (e < 0) {
                        session_reply_error(s, req->id, PROTO_E_PERMISSION,
                                            "hello: uid %d may not join tenant '%.64s'", (int)s->uid,
                                            json_string_value(tenant));
                        return;
                }
        }
        s->backpressure_error = bp && strcmp(json_string_value(bp), "error") == 0;
        uint64_t v = hi < PROTO_VERSION ? hi : PROTO_VERSION;
        if (lo > hi || v < lo || v < PROTO_VERSION_MIN) {
                session_reply_error(s, req->id, PROTO_E_VERSION,
                                    "hello: client speaks versions %llu-%llu, npud %d-%d",
                                    (unsigned long long)lo, (unsigned long long)hi,
                                    PROTO_VERSION_MIN, PROTO_VERSION);
                return;
        }
        s->version = (int)v;
        session_hello_done(s);
        session_reply_result(s, req->id,
                             json_pack("{s:i, s:s, s:s, s:I, s:i, s:b, s:s, s:s}", "version", s->version,
                                       "server", "npud", "server_version", NPUD_VERSION,
                                       "session", (json_int_t)s->id, "devices",
                                       s->npud->ex.devices.count, "admin", s->admin, "tenant",
                                       session_tenant_name(s), "class", session_tenant_class(s)));
}

/* Parameters are not checked (documented): a liveness probe answers whatever it carries. */
static void method_ping(struct request *req)
{
        session_reply_result(req->session, req->id, NULL);
}

const struct method methods_session[] = {
        { "hello", method_hello, METHOD_BEFORE_HELLO },
        { "ping", method_ping, METHOD_BEFORE_HELLO },
        { NULL, NULL, 0 },
};
