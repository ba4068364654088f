/* Methods on a session's own tasks (graph runs above all): task_cancel (a queued task fails
 * as cancelled, a running graph run is cut at its next node), task_info (where a task is and
 * the deadline and tag the scheduler holds for it) and graph_run_shapes (the computed output
 * shapes of a completed run submitted with flexible outputs). Tasks are named by the stream
 * handle and the task number the client gave them, so only the stream's owner can reach
 * them: another session's stream handle is unknown here. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "proto/errors.h"
#include "daemon/exec/sched.h"
#include "dispatch.h"
#include "npud.h"
#include "session.h"
#include "util/clock.h"

#define TASK_SEQ_MAX ((uint64_t)INT64_MAX)

static struct stream *own_stream(struct request *req)
{
        uint64_t h;
        struct stream *st;

        if (param_u64(req, "stream", UINT32_MAX, &h) < 0)
                return NULL;
        st = handle_lookup(&req->session->handles, HANDLE_STREAM, (uint32_t)h);
        if (!st)
                session_reply_error(req->session, req->id, PROTO_E_BAD_HANDLE,
                                    "%s: stream handle %" PRIu64 " is unknown or destroyed (not a "
                                    "stream of this session)", req->method, h);
        return st;
}

static void method_task_cancel(struct request *req)
{
        static const char *const keys[] = { "stream", "task", NULL };
        struct session *s = req->session;
        struct stream *st;
        uint64_t seq;
        char msg[192];
        int rc;

        if (params_only(req, keys) < 0 || !(st = own_stream(req)) ||
            param_u64(req, "task", TASK_SEQ_MAX, &seq) < 0)
                return;
        rc = sched_task_cancel(&s->npud->ex, st, seq, msg, sizeof(msg));
        if (rc)
                session_reply_error(s, req->id, rc, "task_cancel: %s", msg);
        else
                session_reply_result(s, req->id, json_pack("{s:s}", "state", msg));
}

static void method_task_info(struct request *req)
{
        static const char *const keys[] = { "stream", "task", NULL };
        struct session *s = req->session;
        const struct task *t;
        const char *state = NULL;
        struct stream *st;
        uint64_t seq, now = now_ns();

        if (params_only(req, keys) < 0 || !(st = own_stream(req)) ||
            param_u64(req, "task", TASK_SEQ_MAX, &seq) < 0)
                return;
        int running;
        t = sched_find_task(st, seq, &running);
        if (t)
                state = t->kind == TASK_FAIL ? "failing" : running ? "running" : "queued";
        if (!t) {
                session_reply_error(s, req->id, PROTO_E_INVALID,
                                    "task_info: task %" PRIu64 " is neither queued nor running on stream %u",
                                    seq, st->handle);
                return;
        }
        uint64_t dl = sched_task_deadline(t);
        session_reply_result(s, req->id,
                             json_pack("{s:s, s:I, s:I, s:s, s:b}", "state", state, "deadline_us",
                                       (json_int_t)((t->deadline_ns ? t->deadline_ns : st->deadline_ns) / 1000),
                                       "deadline_in_us", (json_int_t)(dl > now ? (dl - now) / 1000 : 0),
                                       "tag", t->tag, "deadline_set", dl != 0));
}

static void method_graph_run_shapes(struct request *req)
{
        static const char *const keys[] = { "stream", "task", NULL };
        struct session *s = req->session;
        const struct run_result *r;
        struct stream *st;
        uint64_t seq;
        json_t *outs;

        if (params_only(req, keys) < 0 || !(st = own_stream(req)) ||
            param_u64(req, "task", TASK_SEQ_MAX, &seq) < 0)
                return;
        r = stream_find_result(st, seq);
        if (!r) {
                int running;
                if (sched_find_task(st, seq, &running))
                        session_reply_error(s, req->id, PROTO_E_NOT_READY,
                                            "graph_run_shapes: task %" PRIu64 " has not completed yet", seq);
                else
                        session_reply_error(s, req->id, PROTO_E_INVALID,
                                            "graph_run_shapes: no shapes kept for task %" PRIu64
                                            " on stream %u (failed, not a run with "
                                            "flexible outputs, or older than the last %d such runs)",
                                            seq, st->handle, STREAM_RUN_RESULTS);
                return;
        }
        outs = json_array();
        for (int k = 0; k < r->nout; k++) {
                json_t *shape = json_array();
                for (int d = 0; d < r->shapes[k].ndim; d++)
                        json_array_append_new(shape, json_integer((json_int_t)r->shapes[k].dims[d]));
                json_array_append_new(outs, json_pack("{s:i, s:o}", "dtype", (int)r->shapes[k].dtype,
                                                      "shape", shape));
        }
        session_reply_result(s, req->id, json_pack("{s:o}", "outputs", outs));
}

const struct method methods_run[] = {
        { "task_cancel", method_task_cancel, 0 },
        { "task_info", method_task_info, 0 },
        { "graph_run_shapes", method_graph_run_shapes, 0 },
        { NULL, NULL, 0 },
};
