/* Stream, event and task objects and their lifetimes. */
#include <stddef.h>
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

/* Tasks are big (an operator call has room for 16 inputs and 24 attributes) and pipelined
 * clients make hundreds of thousands a second, so freed tasks are kept for reuse and only the
 * parts that carry state are cleared: the tensor and attribute arrays are written up to
 * nin/nout/nattr by whoever prepares the call. Loop thread only. */
#define TASK_POOL_MAX 4096
static struct task *task_pool;
static unsigned task_pool_len;

static void task_clear(struct task *t)
{
        struct exec_item *it = &t->item;
        char *call_end = (char *)&it->call + sizeof(it->call);

        memset(t, 0, offsetof(struct task, item));
        memset(it, 0, offsetof(struct exec_item, call));
        it->call.nin = it->call.nout = it->call.nattr = 0;
        it->call.opset = 0;
        it->call.graph_run = NULL;
        it->call.graph_ctx = NULL;
        memset(call_end, 0, (size_t)((char *)(it + 1) - call_end));
        memset((char *)(it + 1), 0, sizeof(*t) - offsetof(struct task, item) - sizeof(*it));
}

struct task *task_new(enum task_kind kind, struct stream *st, uint64_t seq)
{
        struct task *t = task_pool;

        if (t) {
                task_pool = *(struct task **)t;
                task_pool_len--;
                task_clear(t);
        } else if (!(t = calloc(1, sizeof(*t)))) {
                return NULL;
        }
        t->kind = kind;
        t->seq = seq;
        t->stream = stream_ref(st);
        return t;
}

void task_free(struct task *t)
{
        if (!t)
                return;
        for (int i = 0; i < t->nbufs; i++)
                buffer_unref(t->bufs[i]);
        region_unref(t->region);
        evt_unref(t->evt);
        graph_bind_free(t->item.graph);
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
}
