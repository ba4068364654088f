/* Per-session handle tables: clients name objects by small integers, never pointers. A
 * handle is (generation << 20 | slot + 1); a freed slot's next handle has a new generation,
 * so a stale handle (double free, use after free) is recognised instead of hitting a new
 * object. Handles of one session mean nothing in another. */
#ifndef NPUD_HANDLE_H
#define NPUD_HANDLE_H

#include <stdint.h>

enum handle_type {
        HANDLE_NONE = 0,
        HANDLE_BUFFER,
        HANDLE_REGION,
        HANDLE_STREAM,
        HANDLE_EVENT,
        HANDLE_GRAPH, /* a loaded model (daemon/exec/graph-obj.h) */
        HANDLE_TYPE_COUNT
};

struct handle_slot {
        void *obj;
        uint16_t gen;
        uint8_t type;
};

struct handle_table {
        struct handle_slot *slots;
        uint32_t nslots, cap;
        uint32_t *free_list; /* stack of free slot indexes */
        uint32_t nfree;
        uint32_t count[HANDLE_TYPE_COUNT];
};

#define HANDLE_MAX_SLOTS ((1u << 20) - 1)

void handle_table_init(struct handle_table *t);
void handle_table_deinit(struct handle_table *t);
/* 0 with *ret_handle set, or -ENOMEM / -ENOSPC. */
int handle_insert(struct handle_table *t, enum handle_type type, void *obj, uint32_t *ret_handle);
/* The object, or NULL when the handle is unknown, stale or of another type. */
void *handle_lookup(const struct handle_table *t, enum handle_type type, uint32_t handle);
/* Remove and return the object (NULL when lookup would fail). */
void *handle_remove(struct handle_table *t, enum handle_type type, uint32_t handle);
/* Visit every live entry; callback may not modify the table. */
void handle_foreach(const struct handle_table *t,
                    void (*fn)(enum handle_type type, void *obj, void *userdata), void *userdata);

#endif
