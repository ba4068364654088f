/* Session methods: hello (version negotiation), ping, and op_resolve (operator names to the
 * registry ids that LAUNCH_ID records carry). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto/errors.h"
#include "ops/ops.h"
#include "proto/frame.h"
#include "proto/submit.h"
#include "dispatch.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/tenant.h"

#ifndef NPUD_VERSION
#define NPUD_VERSION "0.1.0"
#endif

/* hello's 'devices': the devices this session will use (a container's CDI devices), the
 * others hidden from it. A narrowing only: the tenant's devices still bound it. 0, or -1
 * after an error naming what was wrong. */
static int hello_devices(struct request *req)
{
        struct session *s = req->session;
        json_t *list = json_object_get(req->params, "devices"), *e;
        int count = s->npud->ex.devices.count;
        uint64_t want = 0;
        size_t i;

        if (!list)
                return 0;
        if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > 64) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "hello: 'devices' must be an array of 1 to 64 device ids");
                return -1;
        }
        json_array_foreach(list, i, e) {
                json_int_t id = json_is_integer(e) ? json_integer_value(e) : -1;
                if (id < 0 || id >= count || id >= 64) {
                        session_reply_error(s, req->id, PROTO_E_INVALID,
                                            "hello: 'devices'[%zu] is not a device id (npud has %d device%s)",
                                            i, count, count == 1 ? "" : "s");
                        return -1;
                }
                want |= 1ull << id;
        }
        s->hidden_devices = ~want;
        return 0;
}

static void method_hello(struct request *req)
{
        static const char *const keys[] = { "min_version", "max_version", "client", "tenant",
                                            "backpressure", "devices", NULL };
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
        if (hello_devices(req) < 0)
                return;
        s->backpressure_error = bp && strcmp(json_string_value(bp), "error") == 0;
        uint64_t v = hi < PROTO_SESSION_VERSION ? hi : PROTO_SESSION_VERSION;
        if (lo > hi || v < lo || v < PROTO_SESSION_VERSION_MIN) {
                session_reply_error(s, req->id, PROTO_E_VERSION,
                                    "hello: client speaks versions %llu-%llu, npud %d-%d",
                                    (unsigned long long)lo, (unsigned long long)hi,
                                    PROTO_SESSION_VERSION_MIN, PROTO_SESSION_VERSION);
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

#define OP_RESOLVE_MAX_NAMES 256

/* Names to registry ids, once per name and connection: LAUNCH_ID records then carry the id
 * and the daemon indexes the registry instead of searching it by name for every launch. An
 * unknown name is not an error here: its id is null and the client keeps sending its name,
 * so that the launch fails exactly as a LAUNCH record naming it always has. */
static void method_op_resolve(struct request *req)
{
        static const char *const keys[] = { "names", NULL };
        struct session *s = req->session;
        json_t *names = json_object_get(req->params, "names"), *ops, *name;
        size_t i;

        if (s->version < PROTO_VERSION_OP_ID) {
                session_reply_error(s, req->id, PROTO_E_PROTOCOL,
                                    "op_resolve: needs protocol version %d, the session negotiated %d",
                                    PROTO_VERSION_OP_ID, s->version);
                return;
        }
        if (params_only(req, keys) < 0)
                return;
        if (!json_is_array(names) || json_array_size(names) == 0 ||
            json_array_size(names) > OP_RESOLVE_MAX_NAMES) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "op_resolve: parameter 'names' must be an array of 1 to %d strings",
                                    OP_RESOLVE_MAX_NAMES);
                return;
        }
        json_array_foreach(names, i, name) {
                const char *n = json_string_value(name);
                if (!n || !*n || strlen(n) >= PROTO_REC_OP_NAME) {
                        session_reply_error(s, req->id, PROTO_E_INVALID,
                                            "op_resolve: name %zu must be a string of 1 to %d characters",
                                            i, PROTO_REC_OP_NAME - 1);
                        return;
                }
        }
        ops = json_array();
        json_array_foreach(names, i, name) {
                const struct ops_def *def = ops_lookup(json_string_value(name));
                size_t id = def ? ops_id(def) : 0;
                json_t *e;

                /* ids fit the record's u16; a registry that outgrew it resolves by name */
                if (def && id <= UINT16_MAX)
                        e = json_pack("{s:O, s:I, s:i, s:i, s:i}", "name", name, "id", (json_int_t)id,
                                      "min_inputs", def->min_inputs, "max_inputs", def->max_inputs,
                                      "outputs", def->outputs);
                else
                        e = json_pack("{s:O, s:n}", "name", name, "id");
                if (!ops || !e || json_array_append_new(ops, e) < 0) {
                        json_decref(ops);
                        session_reply_error(s, req->id, PROTO_E_SYSTEM, "op_resolve: out of memory");
                        return;
                }
        }
        session_reply_result(s, req->id, json_pack("{s:o}", "ops", ops));
}

const struct method methods_session[] = {
        { "op_resolve", method_op_resolve, 0 },
        { "hello", method_hello, METHOD_BEFORE_HELLO },
        { "ping", method_ping, METHOD_BEFORE_HELLO },
        { NULL, NULL, 0 },
};
