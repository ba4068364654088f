/* Generation-checked handle tables (see handle.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "handle.h"

#define GEN_BITS 12
#define SLOT_BITS 20

void handle_table_init(struct handle_table *t)
{
        memset(t, 0, sizeof(*t));
}

void handle_table_deinit(struct handle_table *t)
{
        free(t->slots);
        free(t->free_list);
        memset(t, 0, sizeof(*t));
}

int handle_insert(struct handle_table *t, enum handle_type type, void *obj, uint32_t *ret_handle)
{
        uint32_t idx;

        if (!obj || type <= HANDLE_NONE || type >= HANDLE_TYPE_COUNT)
                return -EINVAL;
        if (t->nfree > 0) {
                idx = t->free_list[--t->nfree];
        } else {
                if (t->nslots >= HANDLE_MAX_SLOTS)
                        return -ENOSPC;
                if (t->nslots == t->cap) {
                        uint32_t cap = t->cap ? t->cap * 2 : 64;
                        struct handle_slot *ns = realloc(t->slots, cap * sizeof(*ns));
                        if (!ns)
                                return -ENOMEM;
                        t->slots = ns;
                        uint32_t *nf = realloc(t->free_list, cap * sizeof(*nf));
                        if (!nf)
                                return -ENOMEM;
                        t->free_list = nf;
                        t->cap = cap;
                }
                idx = t->nslots++;
                t->slots[idx].gen = 1;
        }
        t->slots[idx].obj = obj;
        t->slots[idx].type = (uint8_t)type;
        t->count[type]++;
        *ret_handle = ((uint32_t)t->slots[idx].gen << SLOT_BITS) | (idx + 1);
        return 0;
}

static struct handle_slot *slot_find(const struct handle_table *t, enum handle_type type,
                                     uint32_t handle)
{
        uint32_t idx = (handle & ((1u << SLOT_BITS) - 1)), gen = handle >> SLOT_BITS;

        if (idx == 0 || idx > t->nslots)
                return NULL;
        struct handle_slot *s = &t->slots[idx - 1];
        if (s->type != type || s->gen != gen || !s->obj)
                return NULL;
        return s;
}

void *handle_lookup(const struct handle_table *t, enum handle_type type, uint32_t handle)
{
        struct handle_slot *s = slot_find(t, type, handle);
        return s ? s->obj : NULL;
}

void *handle_remove(struct handle_table *t, enum handle_type type, uint32_t handle)
{
        struct handle_slot *s = slot_find(t, type, handle);
        void *obj;

        if (!s)
                return NULL;
        obj = s->obj;
        s->obj = NULL;
        s->type = HANDLE_NONE;
        s->gen = (uint16_t)((s->gen % ((1u << GEN_BITS) - 1)) + 1);
        t->count[type]--;
        t->free_list[t->nfree++] = (uint32_t)(s - t->slots);
        return obj;
}

void handle_foreach(const struct handle_table *t,
                    void (*fn)(enum handle_type type, void *obj, void *userdata), void *userdata)
{
        for (uint32_t i = 0; i < t->nslots; i++)
                if (t->slots[i].obj)
                        fn((enum handle_type)t->slots[i].type, t->slots[i].obj, userdata);
}
