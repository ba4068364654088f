/* Buffer export registry (see export.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "export.h"
#include "daemon/exec/mem.h"
#include "session.h"
#include "daemon/exec/tenant.h"

int export_new(struct export_list *l, struct session *s, struct buffer *buf, int readonly,
               struct export **ret)
{
        unsigned char raw[16];
        struct export *e;

        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                return -EIO;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        for (int i = 0; i < 16; i++)
                snprintf(e->token + 2 * i, 3, "%02x", raw[i]);
        e->buf = buffer_ref(buf);
        buffer_root(buf)->exports++;
        e->session_id = s->id;
        snprintf(e->tenant, sizeof(e->tenant), "%s", session_tenant_name(s));
        e->readonly = readonly;
        TAILQ_INSERT_TAIL(l, e, link);
        *ret = e;
        return 0;
}

struct export *export_find(struct export_list *l, const char *token)
{
        struct export *e;

        if (strlen(token) != EXPORT_TOKEN_LEN)
                return NULL;
        TAILQ_FOREACH(e, l, link)
                if (memcmp(e->token, token, EXPORT_TOKEN_LEN) == 0)
                        return e;
        return NULL;
}

int export_permits(const struct export *e, const char *tenant)
{
        if (strcmp(e->tenant, tenant) == 0)
                return 1;
        for (int i = 0; i < e->nallowed; i++)
                if (strcmp(e->allowed[i], tenant) == 0)
                        return 1;
        return 0;
}

void export_free(struct export_list *l, struct export *e)
{
        TAILQ_REMOVE(l, e, link);
        buffer_root(e->buf)->exports--;
        buffer_unref(e->buf);
        free(e);
}

int export_revoke_buffer(struct export_list *l, struct buffer *buf)
{
        struct export *e, *next;
        int n = 0;

        /* Most buffers were never exported: no walk over every export for them. */
        if (!buffer_root(buf)->exports)
                return 0;
        for (e = TAILQ_FIRST(l); e; e = next) {
                next = TAILQ_NEXT(e, link);
                if (e->buf == buf || (!buf->parent && e->buf->parent == buf)) {
                        export_free(l, e);
                        n++;
                }
        }
        return n;
}

int export_revoke_session(struct export_list *l, uint64_t session_id)
{
        struct export *e, *next;
        int n = 0;

        for (e = TAILQ_FIRST(l); e; e = next) {
                next = TAILQ_NEXT(e, link);
                if (e->session_id == session_id) {
                        export_free(l, e);
                        n++;
                }
        }
        return n;
}

void export_free_all(struct export_list *l)
{
        struct export *e;

        while ((e = TAILQ_FIRST(l)))
                export_free(l, e);
}
