/* Stream, event and task objects and their lifetimes. */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "graph-obj.h"
#include "stream.h"
#include "tenant.h"

struct stream *stream_new(struct exec *x, struct session *owner, struct device *dev,
                          int priority, struct tenant *tenant)
{
        struct stream *st = calloc(1, sizeof(*st));

        if (!st)
                return NULL;
        st->refs = 1;
        st->x = x;
        st->session = owner;
        st->dev = dev;
        st->priority = priority;
        st->tenant = tenant_ref(tenant);
        st->q.tenant = &tenant->dev[dev->id].pd;
        st->q.priority = priority;
        TAILQ_INIT(&st->tasks);
        TAILQ_INIT(&st->waiters);
        dev->streams++;
        return st;
}

struct stream *stream_ref(struct stream *st)
{
        st->refs++;
        return st;
}

void stream_unref(struct stream *st)
{
        if (!st || --st->refs > 0)
                return;
        if (st->x->obs.stream_released)
                st->x->obs.stream_released(st->x->obs.data, st);
        st->dev->streams--;
        tenant_unref(st->tenant);
        for (int i = 0; i < STREAM_RUN_RESULTS; i++)
                free(st->results[i]);
        free(st);
}

void stream_keep_result(struct stream *st, uint64_t seq, int nout, const struct ops_tensor *got)
{
        struct run_result *r = malloc(sizeof(*r) + sizeof(r->shapes[0]) * (size_t)(nout > 0 ? nout : 0));
        unsigned slot = st->results_next++ % STREAM_RUN_RESULTS;

        free(st->results[slot]);
        st->results[slot] = r;
        if (!r)
                return;
        r->seq = seq;
        r->nout = nout;
        for (int k = 0; k < nout; k++) {
                r->shapes[k] = got[k];
                r->shapes[k].data = NULL;
        }
}

const struct run_result *stream_find_result(const struct stream *st, uint64_t seq)
{
        for (int i = 0; i < STREAM_RUN_RESULTS; i++)
                if (st->results[i] && st->results[i]->seq == seq)
                        return st->results[i];
        return NULL;
}

struct npu_evt *evt_new(void)
{
        struct npu_evt *e = calloc(1, sizeof(*e));

        if (!e)
                return NULL;
        e->refs = 1;
        TAILQ_INIT(&e->blocked);
        TAILQ_INIT(&e->waiters);
        return e;
}

struct npu_evt *evt_ref(struct npu_evt *e)
{
        e->refs++;
        return e;
}

void evt_unref(struct npu_evt *e)
{
        if (!e || --e->refs > 0)
                return;
        free(e);
}

/* Pipelined clients make hundreds of thousands of tasks a second, so freed tasks and
 * operator calls are kept for reuse, as many as a session can have queued (the pools are
 * capped in bytes, so a burst leaves at most that much behind). A task is a few hundred
 * bytes and is cleared whole on reuse. Calls come in size classes (backend.h: a call is
 * sized to its tensors and attributes) and are written whole by exec_call_pack. Loop thread
 * only. */
#define TASK_POOL_BYTES (8u << 20)
#define CALL_POOL_BYTES (4u << 20)
#define TASK_POOL_MAX (TASK_POOL_BYTES / sizeof(struct task))
static struct task *task_pool;
static unsigned task_pool_len;

/* 256, 512, 1 Ki, 2 Ki bytes, and the largest call (16 inputs, 8 outputs, 24 attributes) */
#define CALL_CLASSES 5
static const size_t call_class_bytes[CALL_CLASSES] = {
        256, 512, 1024, 2048, sizeof(struct exec_call) +
        (OPS_MAX_INPUTS + OPS_MAX_OUTPUTS) * sizeof(struct ops_tensor) +
        OPS_MAX_ATTRS * sizeof(struct ops_attr),
};

struct call_pool {
        void *head; /* a pooled call's first bytes link to the next */
        unsigned len;
};
static struct call_pool call_pools[CALL_CLASSES];

struct exec_call *exec_call_get(int nin, int nout, int nattr)
{
        size_t need = exec_call_bytes(nin, nout, nattr);
        int k = 0;

        while (k < CALL_CLASSES - 1 && call_class_bytes[k] < need)
                k++;
        if (need > call_class_bytes[k])
                return NULL;
        struct call_pool *p = &call_pools[k];
        struct exec_call *c = p->head;
        if (c) {
                p->head = *(void **)c;
                p->len--;
        } else if (!(c = malloc(call_class_bytes[k]))) {
                return NULL;
        }
        c->size_class = (uint8_t)k;
        c->nin = c->nout = c->nattr = 0;
        c->opset = 0;
        return c;
}

void exec_call_put(struct exec_call *c)
{
        if (!c)
                return;
        struct call_pool *p = &call_pools[c->size_class];
        if (p->len >= CALL_POOL_BYTES / call_class_bytes[c->size_class]) {
                free(c);
                return;
        }
        *(void **)c = p->head;
        p->head = c;
        p->len++;
}

int exec_call_copy(struct exec_call *dst, const struct exec_call *src)
{
        size_t n = exec_call_bytes(src->nin, src->nout, src->nattr);

        if (n > call_class_bytes[dst->size_class])
                return -1;
        uint8_t k = dst->size_class;
        memcpy(dst, src, n);
        dst->size_class = k;
        return 0;
}

int task_add_buffer(struct task *t, struct buffer *b)
{
        if (t->nbufs >= TASK_MAX_REFS)
                return -1;
        if (t->nbufs < TASK_INLINE_BUFS) {
                t->bufs[t->nbufs++] = b;
                return 0;
        }
        if (!t->spill && !(t->spill = malloc(sizeof(*t->spill) * (TASK_MAX_REFS - TASK_INLINE_BUFS))))
                return -1;
        t->spill[t->nbufs++ - TASK_INLINE_BUFS] = b;
        return 0;
}

struct task *task_new(enum task_kind kind, struct stream *st, uint64_t seq)
{
        struct task *t = task_pool;

        if (t) {
                task_pool = *(struct task **)t;
                task_pool_len--;
        } else if (!(t = malloc(sizeof(*t)))) {
                return NULL;
        }
        *t = (struct task){ .kind = kind, .seq = seq, .stream = stream_ref(st) };
        return t;
}

void task_free(struct task *t)
{
        if (!t)
                return;
        for (int i = 0; i < t->nbufs; i++)
                buffer_unref(task_buffer(t, i));
        free(t->spill);
        region_unref(t->region);
        evt_unref(t->evt);
        graph_bind_free(t->item.graph);
        free(t->steps);
        exec_call_put(t->item.call); /* the unit that ran it has come back */
        stream_unref(t->stream);
        if (task_pool_len < TASK_POOL_MAX) {
                *(struct task **)t = task_pool;
                task_pool = t;
                task_pool_len++;
                return;
        }
        free(t);
}

void task_pool_drain(void)
{
        while (task_pool) {
                struct task *t = task_pool;
                task_pool = *(struct task **)t;
                free(t);
        }
        task_pool_len = 0;
        for (int k = 0; k < CALL_CLASSES; k++) {
                while (call_pools[k].head) {
                        void *c = call_pools[k].head;
                        call_pools[k].head = *(void **)c;
                        free(c);
                }
                call_pools[k].len = 0;
        }
}
