/* Stream, event and task objects and their lifetimes. */
#include <stdlib.h>
#include <string.h>

#include "graph/graph-obj.h"
#include "session.h"
#include "stream.h"
#include "tenant.h"

struct stream *stream_new(struct session *s, struct device *dev, int priority,
                          struct tenant *tenant)
{
        struct stream *st = calloc(1, sizeof(*st));

        if (!st)
                return NULL;
        st->refs = 1;
        st->session = s;
        st->dev = dev;
        st->priority = priority;
        st->tenant = tenant_ref(tenant);
        st->q.tenant = &tenant->dev[dev->id].pd;
        st->q.priority = priority;
        TAILQ_INIT(&st->tasks);
        TAILQ_INIT(&st->waiters);
        TAILQ_INSERT_TAIL(&s->streams, st, session_link);
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
        if (st->session)
                TAILQ_REMOVE(&st->session->streams, st, session_link);
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

struct task *task_new(enum task_kind kind, struct stream *st, uint64_t seq)
{
        struct task *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
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
        free(t);
}
