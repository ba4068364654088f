/* Views and sharing of device buffers: mem_view (a range of a buffer with its parent's
 * lifetime), mem_export / mem_import / mem_revoke (unguessable tokens, checked against the
 * tenants an export names, optionally read-only). Sharing never widens: only the session
 * that allocated the memory exports it, so who can reach a buffer is decided by its owner
 * alone, and revoking or freeing ends every token there is for it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "proto/errors.h"
#include "dispatch.h"
#include "export.h"
#include "npud.h"
#include "session.h"
#include "daemon/exec/tenant.h"

#define MAX_EXPORTS_PER_SESSION 4096

static struct buffer *buffer_param(struct request *req)
{
        uint64_t h;
        struct buffer *b;

        if (param_u64(req, "buffer", UINT32_MAX, &h) < 0)
                return NULL;
        b = handle_lookup(&req->session->handles, HANDLE_BUFFER, (uint32_t)h);
        if (!b)
                session_reply_error(req->session, req->id, PROTO_E_BAD_HANDLE,
                                    "%s: buffer handle %" PRIu64 " is unknown or freed", req->method, h);
        return b;
}

static int buffer_slot_free(struct request *req)
{
        struct session *s = req->session;
        if (s->handles.count[HANDLE_BUFFER] < s->npud->config.limits.max_buffers)
                return 1;
        session_reply_error(s, req->id, PROTO_E_LIMIT, "%s: session holds the maximum of %u buffers",
                            req->method, s->npud->config.limits.max_buffers);
        return 0;
}

/* Insert a new derived buffer and reply with its handle. */
static void reply_new_buffer(struct request *req, struct buffer *v)
{
        uint32_t h;

        if (handle_insert(&req->session->handles, HANDLE_BUFFER, v, &h) < 0) {
                buffer_unref(v);
                session_reply_error(req->session, req->id, PROTO_E_LIMIT, "%s: handle table full", req->method);
                return;
        }
        session_reply_result(req->session, req->id,
                             json_pack("{s:I, s:I, s:i, s:b}", "buffer", (json_int_t)h, "size",
                                       (json_int_t)v->size, "device", v->dev->id, "readonly", v->readonly));
}

static void method_mem_view(struct request *req)
{
        static const char *const keys[] = { "buffer", "offset", "size", NULL };
        struct buffer *b, *v;
        uint64_t off, size;

        if (params_only(req, keys) < 0 || !(b = buffer_param(req)) ||
            param_u64(req, "offset", UINT64_MAX >> 1, &off) < 0 ||
            param_u64(req, "size", UINT64_MAX >> 1, &size) < 0 || !buffer_slot_free(req))
                return;
        if (size == 0 || !range_ok(off, size, b->size)) {
                session_reply_error(req->session, req->id, PROTO_E_OUT_OF_RANGE,
                                    "mem_view: range %" PRIu64 "+%" PRIu64 " outside buffer of %" PRIu64 " bytes (or empty)",
                                    off, size, b->size);
                return;
        }
        if (buffer_view_new(b, off, size, 0, &v) < 0) {
                session_reply_error(req->session, req->id, PROTO_E_LIMIT, "mem_view: out of memory");
                return;
        }
        reply_new_buffer(req, v);
}

static void method_mem_export(struct request *req)
{
        static const char *const keys[] = { "buffer", "tenants", "readonly", NULL };
        struct session *s = req->session;
        json_t *tenants = json_object_get(req->params, "tenants"), *ro = json_object_get(req->params, "readonly"), *t;
        struct export *e;
        struct buffer *b;
        size_t i;
        int n = 0;

        if (params_only(req, keys) < 0 || !(b = buffer_param(req)))
                return;
        if (b->imported || buffer_root(b)->owner != s->id) {
                session_reply_error(s, req->id, PROTO_E_PERMISSION,
                                    "mem_export: the buffer is an import (or a view of one); only the session "
                                    "that allocated the memory may export it");
                return;
        }
        if ((tenants && (!json_is_array(tenants) || json_array_size(tenants) > EXPORT_MAX_TENANTS)) ||
            (ro && !json_is_boolean(ro))) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "mem_export: 'tenants' must be an array of at most %d names, 'readonly' a boolean",
                                    EXPORT_MAX_TENANTS);
                return;
        }
        json_array_foreach(tenants, i, t)
                if (!json_is_string(t) || json_string_length(t) == 0 || json_string_length(t) >= POLICY_NAME_MAX) {
                        session_reply_error(s, req->id, PROTO_E_INVALID, "mem_export: tenants[%zu] is not a tenant name", i);
                        return;
                }
        TAILQ_FOREACH(e, &s->npud->exports, link)
                n += e->session_id == s->id;
        if (n >= MAX_EXPORTS_PER_SESSION) {
                session_reply_error(s, req->id, PROTO_E_LIMIT, "mem_export: session has the maximum of %d exports",
                                    MAX_EXPORTS_PER_SESSION);
                return;
        }
        if (export_new(&s->npud->exports, s, b, json_is_true(ro), &e) < 0) {
                session_reply_error(s, req->id, PROTO_E_LIMIT, "mem_export: no token could be made");
                return;
        }
        json_array_foreach(tenants, i, t)
                snprintf(e->allowed[e->nallowed++], POLICY_NAME_MAX, "%s", json_string_value(t));
        session_reply_result(s, req->id, json_pack("{s:s}", "token", e->token));
}

static struct export *token_param(struct request *req)
{
        json_t *tok = json_object_get(req->params, "token");
        struct export *e;

        if (!json_is_string(tok)) {
                session_reply_error(req->session, req->id, PROTO_E_INVALID, "%s: parameter 'token' must be a string",
                                    req->method);
                return NULL;
        }
        e = export_find(&req->session->npud->exports, json_string_value(tok));
        if (!e)
                session_reply_error(req->session, req->id, PROTO_E_BAD_HANDLE,
                                    "%s: token is unknown or revoked", req->method);
        return e;
}

static void method_mem_import(struct request *req)
{
        static const char *const keys[] = { "token", "readonly", NULL };
        struct session *s = req->session;
        json_t *ro = json_object_get(req->params, "readonly");
        struct export *e;
        struct buffer *v;

        if (params_only(req, keys) < 0)
                return;
        if (ro && !json_is_boolean(ro)) {
                session_reply_error(s, req->id, PROTO_E_INVALID, "mem_import: 'readonly' must be a boolean");
                return;
        }
        if (!(e = token_param(req)) || !buffer_slot_free(req))
                return;
        if (!export_permits(e, session_tenant_name(s))) {
                session_reply_error(s, req->id, PROTO_E_PERMISSION,
                                    "mem_import: tenant '%s' may not import this buffer (exported by tenant '%s')",
                                    session_tenant_name(s), e->tenant);
                return;
        }
        if (buffer_view_new(e->buf, 0, e->buf->size, e->readonly || json_is_true(ro), &v) < 0) {
                session_reply_error(s, req->id, PROTO_E_LIMIT, "mem_import: out of memory");
                return;
        }
        v->imported = 1;
        e->imports++;
        reply_new_buffer(req, v);
}

static void method_mem_revoke(struct request *req)
{
        static const char *const keys[] = { "token", NULL };
        struct export *e;

        if (params_only(req, keys) < 0 || !(e = token_param(req)))
                return;
        if (e->session_id != req->session->id) {
                session_reply_error(req->session, req->id, PROTO_E_PERMISSION,
                                    "mem_revoke: only the exporting session may revoke a token");
                return;
        }
        /* Importers keep their references. No other token can lead to the memory through
         * this one: imports cannot be exported. */
        export_free(&req->session->npud->exports, e);
        session_reply_result(req->session, req->id, NULL);
}

const struct method methods_share[] = {
        { "mem_view", method_mem_view, 0 },
        { "mem_export", method_mem_export, 0 },
        { "mem_import", method_mem_import, 0 },
        { "mem_revoke", method_mem_revoke, 0 },
        { NULL, NULL, 0 },
};
