/* Buffer sharing between sessions. An export names a buffer by an unguessable 128-bit token
 * (getrandom) and holds a reference to it; another session imports the token — if its tenant
 * is the exporter's or one the export names — and gets its own handle and reference, so the
 * memory stays valid for importers after the exporter frees it or dies (and stays charged to
 * the allocating tenant until then). Only the session that allocated the memory exports it
 * (the allocation or views of it, never an import). A token ends when the exporter revokes
 * it, when the exporter frees the handle it names or the allocation under it, and when the
 * exporter's session ends; imports already made keep their memory. */
#ifndef NPUD_EXPORT_H
#define NPUD_EXPORT_H

#include <stdint.h>
#include <sys/queue.h>

#include "policy/policy.h"

#define EXPORT_TOKEN_LEN 32 /* hex characters */
#define EXPORT_MAX_TENANTS 8

struct buffer;
struct session;

struct export {
        TAILQ_ENTRY(export) link;
        char token[EXPORT_TOKEN_LEN + 1];
        struct buffer *buf;          /* reference */
        uint64_t session_id;         /* exporter */
        char tenant[POLICY_NAME_MAX];
        char allowed[EXPORT_MAX_TENANTS][POLICY_NAME_MAX];
        int nallowed;
        int readonly;                /* imports are read-only */
        uint64_t imports;
};

TAILQ_HEAD(export_list, export);

/* New export of buf by session s. 0, -ENOMEM, or -EIO when no randomness is available. */
int export_new(struct export_list *l, struct session *s, struct buffer *buf, int readonly,
               struct export **ret);
struct export *export_find(struct export_list *l, const char *token);
/* May a session of tenant `tenant` import it? */
int export_permits(const struct export *e, const char *tenant);
void export_free(struct export_list *l, struct export *e);
/* End every export of buf, and when buf is an allocation every export of its views;
 * returns how many. */
int export_revoke_buffer(struct export_list *l, struct buffer *buf);
/* Revoke every export of one session; returns how many. */
int export_revoke_session(struct export_list *l, uint64_t session_id);
void export_free_all(struct export_list *l);

#endif
