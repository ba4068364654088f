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
        free(st);
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
 * operator calls are kept for reuse. A task is a few hundred bytes and is cleared whole on
 * reuse; a call (room for 16 inputs and 24 attributes, about 5 KB) only exists for launches,
 * and only its counts and graph fields are cleared: the tensor and attribute arrays are
 * written up to nin/nout/nattr by whoever prepares the call. Loop thread only. */
#define TASK_POOL_MAX 4096
#define CALL_POOL_MAX 4096
static struct task *task_pool;
static unsigned task_pool_len;

union call_slot {
        union call_slot *next; /* while pooled */
        struct ops_call call;
};
static union call_slot *call_pool;
static unsigned call_pool_len;

struct ops_call *exec_call_get(void)
{
        union call_slot *c = call_pool;

        /* a new call is not cleared (4.6 KB): everything is read up to the counts only */
        if (c) {
                call_pool = c->next;
                call_pool_len--;
        } else if (!(c = malloc(sizeof(*c)))) {
                return NULL;
        }
        c->call.nin = c->call.nout = c->call.nattr = 0;
        c->call.opset = 0;
        c->call.graph_run = NULL;
        c->call.graph_ctx = NULL;
        return &c->call;
}

void exec_call_put(struct ops_call *call)
{
        union call_slot *c = (union call_slot *)call;

        if (!c)
                return;
        if (call_pool_len >= CALL_POOL_MAX) {
                free(c);
                return;
        }
        c->next = call_pool;
        call_pool = c;
        call_pool_len++;
}

void exec_call_copy(struct ops_call *dst, const struct ops_call *src)
{
        dst->nin = src->nin;
        dst->nout = src->nout;
        dst->nattr = src->nattr;
        memcpy(dst->in, src->in, sizeof(src->in[0]) * (size_t)src->nin);
        memcpy(dst->out, src->out, sizeof(src->out[0]) * (size_t)src->nout);
        memcpy(dst->attr, src->attr, sizeof(src->attr[0]) * (size_t)src->nattr);
        dst->opset = src->opset;
        dst->graph_run = src->graph_run;
        dst->graph_ctx = src->graph_ctx;
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
        while (call_pool) {
                union call_slot *c = call_pool;
                call_pool = c->next;
                free(c);
        }
        call_pool_len = 0;
}
