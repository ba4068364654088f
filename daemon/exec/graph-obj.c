/* Loaded graphs' lifetime (see graph-obj.h). */
#include <stdlib.h>

#include "graph/exec.h"
#include "graph-obj.h"
#include "mem.h"

struct graph_obj *graph_obj_ref(struct graph_obj *o)
{
        o->refs++;
        return o;
}

void graph_obj_unref(struct graph_obj *o)
{
        if (!o || --o->refs > 0)
                return;
        graph_free(o->g);
        buffer_unref(o->weights);
        free(o->est_shapes);
        free(o->est_steps);
        free(o->est_parts);
        free(o->est_balance);
        free(o->est_host);
        free(o);
}

void graph_bind_free(struct graph_bind *b)
{
        if (!b)
                return;
        graph_run_free(b->run); /* no step of it runs any more */
        graph_obj_unref(b->owner);
        free(b->got);
        free(b);
}
