/* The kernel tuning cache (ops/tune.h) as npuctl shows it: tune_list for any client (what
 * npud measured about this host's kernels is no secret), tune_clear for root and the admin
 * group (the next load of each graph measures again). */
#include <errno.h>
#include <string.h>

#include "ops/tune.h"
#include "proto/errors.h"
#include "util/log.h"
#include "dispatch.h"
#include "manage.h"
#include "npud.h"
#include "session.h"

struct list_ctx {
        json_t *entries;
        const char *profile;
        const char *op;
};

static int list_one(void *arg, const struct tune_entry *e)
{
        struct list_ctx *l = arg;
        json_t *variants = json_array();

        if (l->op && strcmp(e->op, l->op) != 0)
                return 0;
        for (int i = 0; i < e->nvariants; i++)
                json_array_append_new(variants, json_pack("{s:s, s:I}", "name", e->names[i], "ns",
                                                          (json_int_t)e->ns[i]));
        /* names come from models (shapes, attributes): keep the reply valid UTF-8 */
        json_array_append_new(l->entries,
                              json_pack("{s:s, s:o, s:s, s:o, s:I, s:b}", "op", e->op, "shapes",
                                        json_client_text(e->sig), "variant",
                                        e->names[e->variant], "variants", variants, "when",
                                        (json_int_t)e->when, "this_host",
                                        strcmp(e->profile, l->profile) == 0));
        return 0;
}

static void method_tune_list(struct request *req)
{
        static const char *const keys[] = { "op", NULL };
        json_t *jop = json_object_get(req->params, "op");
        struct list_ctx l = { .entries = json_array(), .profile = tune_profile() };

        if (params_only(req, keys) < 0) {
                json_decref(l.entries);
                return;
        }
        if (jop && !json_is_string(jop)) {
                json_decref(l.entries);
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "tune_list: parameter 'op' must be an operator name");
                return;
        }
        l.op = jop ? json_string_value(jop) : NULL;
        tune_foreach(list_one, &l);
        session_reply_result(req->session, req->id,
                             json_pack("{s:s, s:o, s:s}", "profile", l.profile, "entries", l.entries,
                                       "file", req->session->npud->config.tuning_cache));
}

static void method_tune_clear(struct request *req)
{
        static const char *const keys[] = { "op", NULL };
        json_t *jop = json_object_get(req->params, "op");
        const char *op;
        int n;

        if (params_only(req, keys) < 0)
                return;
        if (jop && (!json_is_string(jop) || json_string_length(jop) == 0 ||
                    json_string_length(jop) >= TUNE_OP_MAX)) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID,
                                    "tune_clear: parameter 'op' must be an operator name of 1 to %d bytes",
                                    TUNE_OP_MAX - 1);
                return;
        }
        op = jop ? json_string_value(jop) : NULL;
        n = tune_clear(op);
        if (n < 0) {
                session_reply_error(req->session, req->id, PROTO_E_SYSTEM,
                                    "tune_clear: cleared in memory, but %s could not be rewritten: %s",
                                    req->session->npud->config.tuning_cache, strerror(errno));
                return;
        }
        manage_audit(req->session->npud, LOG_LVL_INFO, LOG_MID_TUNE_CLEAR, -1,
                     "tuning cache cleared (%s): %d entries dropped", op ? op : "every operator", n);
        session_reply_result(req->session, req->id, json_pack("{s:i}", "dropped", n));
}

const struct method methods_tune[] = {
        { "tune_list", method_tune_list, 0 },
        { "tune_clear", method_tune_clear, METHOD_ADMIN },
        { NULL, NULL, 0 },
};
