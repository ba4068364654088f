/* Completions without polling (issue 12): the completion fd wakes an epoll loop when a
 * stream reaches a notify point, completions come in stream order with the stream's own
 * status, host callbacks run after the work before them and hold the work after them, the
 * daemon's device notices reach the queue, bad input is refused clearly, and a tenant that
 * never acknowledges a host callback holds nothing but its own stream. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npu-admin.h"
#include "npu.h"
#include "harness.h"
#include "proto/completion.h"
#include "proto/frame.h"

static struct npud_proc daemon_proc;
static npu_context_t *ctx;

static void setup(void)
{
        ck_assert_int_eq(harness_start(&daemon_proc, NULL), 0);
        ck_assert_int_eq(npu_connect(daemon_proc.sock, &ctx), NPU_OK);
}

static void teardown(void)
{
        npu_disconnect(ctx);
        ctx = NULL;
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

static npu_tensor_t tensor2(npu_buffer_t b, int64_t r, int64_t c)
{
        npu_tensor_t t = { .buf = b, .dtype = NPU_FLOAT32, .ndim = 2 };
        t.dims[0] = r;
        t.dims[1] = c;
        return t;
}

/* Wait (epoll, at most 10 s) until the completion fd is readable, then take one. */
static npu_status_t wait_completion(npu_context_t *c, npu_completion_t *out)
{
        int fd, ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN }, got;
        npu_status_t st;

        ck_assert_int_eq(npu_completion_fd(c, &fd), NPU_OK);
        ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
        for (;;) {
                memset(out, 0, sizeof(*out));
                out->size = sizeof(*out);
                st = npu_completion_next(c, out);
                if (st != NPU_ERR_NOT_READY)
                        break;
                int n = epoll_wait(ep, &got, 1, 10000);
                ck_assert_msg(n == 1, "no completion within 10 s (epoll_wait %d)", n);
        }
        close(ep);
        return st;
}

/* epoll on the fd wakes for the notify after a long MatMul; the fd is not readable before
 * and not after the completion was taken. */
START_TEST(test_epoll_wakes_after_matmul)
{
        enum { N = 384 };
        npu_buffer_t a, b, o;
        npu_stream_t s;
        npu_completion_t c;
        uint64_t mm = 0, task = 0;
        int fd, ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN }, got;

        OK(npu_completion_fd(ctx, &fd));
        ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
        ck_assert_int_eq(epoll_wait(ep, &got, 1, 0), 0); /* nothing queued yet */
        OK(npu_malloc(ctx, 0, N * N * 4, &a));
        OK(npu_malloc(ctx, 0, N * N * 4, &b));
        OK(npu_malloc(ctx, 0, N * N * 4, &o));
        OK(npu_stream_create(ctx, 0, 2, &s));
        OK(npu_memset_async(ctx, s, a, 0, 0, N * N * 4, NULL));
        OK(npu_memset_async(ctx, s, b, 0, 0, N * N * 4, NULL));
        npu_tensor_t in[2] = { tensor2(a, N, N), tensor2(b, N, N) }, out = tensor2(o, N, N);
        OK(npu_launch(ctx, s, "MatMul", in, 2, &out, 1, NULL, 0, &mm));
        OK(npu_stream_notify(ctx, s, 0xfeedface12345678ull, &task));
        ck_assert_uint_gt(task, mm);
        ck_assert_int_eq(epoll_wait(ep, &got, 1, 10000), 1);
        c.size = sizeof(c);
        OK(npu_completion_next(ctx, &c));
        ck_assert_int_eq(c.kind, NPU_COMPLETION_NOTIFY);
        ck_assert_int_eq(c.status, NPU_OK);
        ck_assert_uint_eq(c.tag, 0xfeedface12345678ull);
        ck_assert_uint_eq(c.task, task);
        ck_assert_uint_eq(c.stream.id, s.id);
        ck_assert_uint_eq(c.error_task, 0);
        /* the MatMul had finished: the stream is idle */
        OK(npu_stream_synchronize(ctx, s));
        ck_assert_int_eq(epoll_wait(ep, &got, 1, 0), 0); /* taken: not readable any more */
        ck_assert_int_eq(npu_completion_next(ctx, &c), NPU_ERR_NOT_READY);
        close(ep);
}
END_TEST

/* Completions of one stream come in its order; a failing launch's error goes to the notify
 * of its own stream only, and is still that stream's synchronize error afterwards. */
START_TEST(test_order_and_status_per_stream)
{
        npu_buffer_t a, b, o;
        npu_stream_t good, bad;
        npu_completion_t c;
        uint64_t tasks[4], badtask = 0, badnote = 0, goodnote = 0;
        int seen_good = 0, seen_bad = 0, next = 0;

        OK(npu_malloc(ctx, 0, 4096, &a));
        OK(npu_malloc(ctx, 0, 4096, &b));
        OK(npu_malloc(ctx, 0, 4096, &o));
        OK(npu_stream_create(ctx, 0, 2, &good));
        OK(npu_stream_create(ctx, 0, 2, &bad));
        for (int i = 0; i < 4; i++) {
                OK(npu_memset_async(ctx, good, a, 0, i, 4096, NULL));
                OK(npu_stream_notify(ctx, good, 100 + (uint64_t)i, &tasks[i]));
        }
        /* inner dimensions differ: refused at submission, failed in stream order */
        npu_tensor_t in[2] = { tensor2(a, 4, 8), tensor2(b, 4, 8) }, out = tensor2(o, 4, 8);
        OK(npu_launch(ctx, bad, "MatMul", in, 2, &out, 1, NULL, 0, &badtask));
        OK(npu_stream_notify(ctx, bad, 7, &badnote));
        OK(npu_memset_async(ctx, good, b, 0, 1, 4096, NULL));
        OK(npu_stream_notify(ctx, good, 200, &goodnote));
        while (seen_good + seen_bad < 6) {
                OK(wait_completion(ctx, &c));
                ck_assert_int_eq(c.kind, NPU_COMPLETION_NOTIFY);
                if (c.stream.id == bad.id) {
                        seen_bad++;
                        ck_assert_uint_eq(c.tag, 7);
                        ck_assert_uint_eq(c.task, badnote);
                        ck_assert_int_eq(c.status, NPU_ERR_SHAPE);
                        ck_assert_uint_eq(c.error_task, badtask);
                        ck_assert_msg(strstr(c.message, "MatMul"), "message: %s", c.message);
                        continue;
                }
                ck_assert_uint_eq(c.stream.id, good.id);
                ck_assert_int_eq(c.status, NPU_OK);
                ck_assert_uint_eq(c.error_task, 0);
                if (next < 4) {
                        ck_assert_uint_eq(c.tag, 100 + (uint64_t)next);
                        ck_assert_uint_eq(c.task, tasks[next]);
                } else {
                        ck_assert_uint_eq(c.tag, 200);
                        ck_assert_uint_eq(c.task, goodnote);
                }
                next++;
                seen_good++;
        }
        ck_assert_int_eq(seen_bad, 1);
        OK(npu_stream_synchronize(ctx, good));
        ck_assert_int_eq(npu_stream_synchronize(ctx, bad), NPU_ERR_SHAPE); /* not consumed */
        ck_assert_uint_eq(npu_error_task(), badtask);
}
END_TEST

struct hf_state {
        pthread_mutex_t mu;
        pthread_cond_t cv;
        npu_buffer_t buf;
        npu_event_t ev;
        int go, ran, order;
        npu_status_t status, query;
        uint8_t first;
        int in_reader_thread;
        int notified_before_return;
};

static void host_func(void *user, npu_status_t st)
{
        struct hf_state *h = user;
        uint8_t byte = 0;

        pthread_mutex_lock(&h->mu);
        while (!h->go)
                pthread_cond_wait(&h->cv, &h->mu);
        pthread_mutex_unlock(&h->mu);
        /* the memset before it ran; the memset and event record after it have not */
        h->query = npu_event_query(ctx, h->ev);
        if (npu_memcpy_from_device(ctx, &byte, h->buf, 0, 1) != NPU_OK)
                byte = 0xee;
        pthread_mutex_lock(&h->mu);
        h->status = st;
        h->first = byte;
        h->ran = 1;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
}

/* The host callback runs once the work before it finished, and the work after it waits
 * until it returned (checked by what the callback sees, not by timing). */
START_TEST(test_host_func_orders_stream)
{
        static struct hf_state h = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
        npu_stream_t s;
        npu_completion_t c;
        uint64_t hf_task = 0, note = 0;
        uint8_t byte = 0;

        OK(npu_malloc(ctx, 0, 4096, &h.buf));
        OK(npu_event_create(ctx, &h.ev));
        OK(npu_stream_create(ctx, 0, 2, &s));
        OK(npu_memset_async(ctx, s, h.buf, 0, 1, 4096, NULL));
        OK(npu_launch_host_func(ctx, s, host_func, &h, &hf_task));
        OK(npu_memset_async(ctx, s, h.buf, 0, 2, 4096, NULL));
        OK(npu_event_record(ctx, h.ev, s));
        OK(npu_stream_notify(ctx, s, 9, &note));
        OK(npu_ping(ctx)); /* npud has queued everything above */
        ck_assert_uint_gt(note, hf_task);
        pthread_mutex_lock(&h.mu);
        h.go = 1;
        pthread_cond_broadcast(&h.cv);
        pthread_mutex_unlock(&h.mu);
        OK(wait_completion(ctx, &c));
        ck_assert_uint_eq(c.task, note);
        ck_assert_int_eq(c.status, NPU_OK);
        pthread_mutex_lock(&h.mu);
        ck_assert_int_eq(h.ran, 1); /* the notify after it came after it returned */
        pthread_mutex_unlock(&h.mu);
        ck_assert_int_eq(h.status, NPU_OK);
        ck_assert_int_eq(h.first, 1);
        ck_assert_int_eq(h.query, NPU_ERR_NOT_READY);
        OK(npu_stream_synchronize(ctx, s));
        OK(npu_event_query(ctx, h.ev));
        OK(npu_memcpy_from_device(ctx, &byte, h.buf, 0, 1));
        ck_assert_int_eq(byte, 2);
}
END_TEST

static void record_status(void *user, npu_status_t st)
{
        *(npu_status_t *)user = st;
}

/* A host callback after a failed task gets that stream's failure. */
START_TEST(test_host_func_gets_stream_error)
{
        npu_buffer_t a;
        npu_stream_t s;
        npu_status_t got = NPU_OK;
        uint64_t bad = 0;

        OK(npu_malloc(ctx, 0, 64, &a));
        OK(npu_stream_create(ctx, 0, 2, &s));
        OK(npu_memset_async(ctx, s, a, 60, 0, 64, &bad)); /* out of range */
        OK(npu_launch_host_func(ctx, s, record_status, &got, NULL));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_OUT_OF_RANGE);
        ck_assert_int_eq(got, NPU_ERR_OUT_OF_RANGE);
}
END_TEST

/* npud's device-health notice after an injected device failure arrives as a completion. */
START_TEST(test_device_health_notice)
{
        npu_completion_t c;
        char *json = NULL;
        int fd;

        OK(npu_completion_fd(ctx, &fd));
        OK(npu_admin_call(ctx, "fault_inject", "{\"device\": 1, \"kind\": \"fail-device\", \"value\": 1}", &json));
        free(json);
        OK(wait_completion(ctx, &c));
        ck_assert_int_eq(c.kind, NPU_COMPLETION_DEVICE_HEALTH);
        ck_assert_int_eq(c.device, 1);
        ck_assert_str_eq(c.health, "failed");
}
END_TEST

/* A device notice that comes before the program first asks for completions is kept: a
 * server that creates its completion fd late, after calls of its own that read the socket,
 * still learns that a device failed. */
START_TEST(test_notice_before_fd)
{
        npu_context_t *admin;
        npu_completion_t c = { .size = sizeof(c) };
        npu_buffer_t b;
        uint64_t dropped = 1;
        int fd, ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN }, got;

        OK(npu_connect(daemon_proc.sock, &admin));
        OK(npu_admin_fault_inject(admin, 1, NPU_FAULT_FAIL_DEVICE, 1));
        /* ctx's own calls read the notice from the socket (it came before their replies) */
        OK(npu_ping(ctx));
        OK(npu_malloc(ctx, 0, 4096, &b));
        OK(npu_free(ctx, b));
        OK(npu_completion_dropped(ctx, &dropped));
        ck_assert_uint_eq(dropped, 0);
        OK(npu_completion_fd(ctx, &fd));
        ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
        ck_assert_int_eq(epoll_wait(ep, &got, 1, 0), 1); /* readable at once */
        OK(npu_completion_next(ctx, &c));
        ck_assert_int_eq(c.kind, NPU_COMPLETION_DEVICE_HEALTH);
        ck_assert_int_eq(c.device, 1);
        ck_assert_str_eq(c.health, "failed");
        ck_assert_int_eq(npu_completion_next(ctx, &c), NPU_ERR_NOT_READY);
        ck_assert_int_eq(epoll_wait(ep, &got, 1, 0), 0);
        OK(npu_admin_device_reset(admin, 1));
        OK(wait_completion(ctx, &c)); /* and the ones after the fd as before */
        ck_assert_int_eq(c.kind, NPU_COMPLETION_DEVICE_HEALTH);
        ck_assert_int_eq(c.device, 1);
        close(ep);
        npu_disconnect(admin);
}
END_TEST

/* Past 256 unread notices the oldest go, counted; the newest (the device as it is now) stay. */
START_TEST(test_notice_overflow)
{
        enum { PAIRS = 150 };
        npu_context_t *admin;
        npu_completion_t c = { .size = sizeof(c) };
        uint64_t dropped = 0;
        int n = 0, last_draining = -1;

        OK(npu_connect(daemon_proc.sock, &admin));
        for (int i = 0; i < PAIRS; i++) { /* each changes draining: one notice each */
                OK(npu_admin_device_drain(admin, 1, 1));
                OK(npu_admin_device_drain(admin, 1, 0));
        }
        OK(npu_ping(ctx)); /* all of them read, before the fd exists */
        OK(npu_completion_dropped(ctx, &dropped));
        ck_assert_uint_eq(dropped, 2 * PAIRS - 256);
        while (npu_completion_next(ctx, &c) == NPU_OK) {
                ck_assert_int_eq(c.kind, NPU_COMPLETION_DEVICE_HEALTH);
                /* the kept ones are the newest: they start where the dropped ones end */
                if (n == 0)
                        ck_assert_int_eq(c.draining, (2 * PAIRS - 256) % 2 == 0);
                last_draining = c.draining;
                n++;
        }
        ck_assert_int_eq(n, 256);
        ck_assert_int_eq(last_draining, 0);
        ck_assert_int_eq(npu_completion_dropped(NULL, &dropped), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_completion_dropped(ctx, NULL), NPU_ERR_INVALID);
        npu_disconnect(admin);
}
END_TEST

/* npu_event_notify: a completion once the event's last record completed, with the event's
 * status; at once for an event never recorded; bad handles refused. */
START_TEST(test_event_notify)
{
        enum { N = 384 };
        npu_buffer_t a, b, o;
        npu_stream_t s, bad;
        npu_event_t ev, never, failed_ev, gone = { 876543 };
        npu_completion_t c;
        uint64_t bad_task = 0;

        OK(npu_malloc(ctx, 0, N * N * 4, &a));
        OK(npu_malloc(ctx, 0, N * N * 4, &b));
        OK(npu_malloc(ctx, 0, N * N * 4, &o));
        OK(npu_stream_create(ctx, 0, 2, &s));
        OK(npu_event_create(ctx, &ev));
        OK(npu_memset_async(ctx, s, a, 0, 0, N * N * 4, NULL));
        OK(npu_memset_async(ctx, s, b, 0, 0, N * N * 4, NULL));
        npu_tensor_t in[2] = { tensor2(a, N, N), tensor2(b, N, N) }, out = tensor2(o, N, N);
        OK(npu_launch(ctx, s, "MatMul", in, 2, &out, 1, NULL, 0, NULL));
        OK(npu_event_record(ctx, ev, s));
        OK(npu_event_notify(ctx, ev, 0xfeedface12345678ull));
        OK(wait_completion(ctx, &c));
        ck_assert_int_eq(c.kind, NPU_COMPLETION_EVENT);
        ck_assert_uint_eq(c.event.id, ev.id);
        ck_assert_uint_eq(c.tag, 0xfeedface12345678ull);
        ck_assert_int_eq(c.status, NPU_OK);
        OK(npu_event_query(ctx, ev)); /* it had completed */

        /* never recorded: at once */
        OK(npu_event_create(ctx, &never));
        OK(npu_event_notify(ctx, never, 7));
        OK(wait_completion(ctx, &c));
        ck_assert_int_eq(c.kind, NPU_COMPLETION_EVENT);
        ck_assert_uint_eq(c.event.id, never.id);
        ck_assert_uint_eq(c.tag, 7);

        /* the event's stream failed before the record: the event's status says so */
        OK(npu_stream_create(ctx, 0, 2, &bad));
        OK(npu_event_create(ctx, &failed_ev));
        OK(npu_memset_async(ctx, bad, a, N * N * 4 - 8, 0, 64, &bad_task)); /* out of range */
        OK(npu_event_record(ctx, failed_ev, bad));
        OK(npu_event_notify(ctx, failed_ev, 8));
        OK(wait_completion(ctx, &c));
        ck_assert_int_eq(c.kind, NPU_COMPLETION_EVENT);
        ck_assert_int_eq(c.status, NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(c.error_task, bad_task);
        ck_assert_msg(c.message[0], "no message");
        ck_assert_int_eq(npu_stream_synchronize(ctx, bad), NPU_ERR_OUT_OF_RANGE);

        ck_assert_int_eq(npu_event_notify(ctx, gone, 0), NPU_ERR_BAD_HANDLE);
        ck_assert_msg(strstr(npu_error_message(), "876543"), "%s", npu_error_message());
        ck_assert_int_eq(npu_event_notify(NULL, ev, 0), NPU_ERR_INVALID);
        /* a raw request's tag must be an integer; nothing is queued for a refused one */
        char *json = NULL;
        char req[96];
        snprintf(req, sizeof(req), "{\"event\": %u, \"tag\": \"x\"}", ev.id);
        ck_assert_int_eq(npu_admin_call(ctx, "event_notify", req, &json), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "tag"), "%s", npu_error_message());
        snprintf(req, sizeof(req), "{\"event\": %u, \"extra\": 1}", ev.id);
        ck_assert_int_eq(npu_admin_call(ctx, "event_notify", req, &json), NPU_ERR_INVALID);
        c.size = sizeof(c);
        ck_assert_int_eq(npu_completion_next(ctx, &c), NPU_ERR_NOT_READY);
        OK(npu_stream_synchronize(ctx, s));
}
END_TEST

/* Bad input: clear errors naming what is wrong, nothing queued for it. */
START_TEST(test_bad_input)
{
        npu_completion_t c = { .size = sizeof(c) };
        npu_stream_t s, never = { 987654 };
        char *json = NULL;
        int fd;

        ck_assert_int_eq(npu_completion_fd(NULL, &fd), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_completion_fd(ctx, NULL), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_completion_next(ctx, NULL), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_completion_next(NULL, &c), NPU_ERR_INVALID);
        c.size = 8;
        ck_assert_int_eq(npu_completion_next(ctx, &c), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "size"), "message: %s", npu_error_message());
        c.size = sizeof(c);
        ck_assert_int_eq(npu_completion_next(ctx, &c), NPU_ERR_NOT_READY);
        ck_assert_int_eq(npu_stream_notify(NULL, never, 0, NULL), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_stream_notify(ctx, never, 0, NULL), NPU_ERR_BAD_HANDLE);
        ck_assert_msg(strstr(npu_error_message(), "987654"), "message: %s", npu_error_message());
        OK(npu_stream_create(ctx, 0, 2, &s));
        ck_assert_int_eq(npu_launch_host_func(ctx, s, NULL, NULL, NULL), NPU_ERR_INVALID);
        OK(npu_stream_destroy(ctx, s));
        ck_assert_int_eq(npu_stream_notify(ctx, s, 0, NULL), NPU_ERR_BAD_HANDLE);
        ck_assert_msg(strstr(npu_error_message(), "destroyed"), "message: %s", npu_error_message());
        ck_assert_int_eq(npu_launch_host_func(ctx, s, record_status, NULL, NULL), NPU_ERR_BAD_HANDLE);
        /* an ack for a callback npud does not hold */
        ck_assert_int_eq(npu_admin_call(ctx, "host_func_done", "{\"stream\": 1, \"task\": 5}", &json),
                         NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "does not wait"), "message: %s", npu_error_message());
        ck_assert_int_eq(npu_completion_next(ctx, &c), NPU_ERR_NOT_READY);
        OK(npu_ping(ctx));
}
END_TEST

/* A NOTIFY record (task 42, tag 5) naming stream 0x77, which the session does not have. */
static void send_unknown_notify(int fd)
{
        uint8_t rec[40] = { 0 };

        rec[0] = 9;                      /* NOTIFY */
        rec[4] = 40;                     /* length */
        rec[8] = 42;                     /* seq */
        rec[16] = 0x77;                  /* stream 0x77: unknown */
        rec[24] = 5;                     /* tag */
        ck_assert_int_eq(harness_raw_send(fd, 4, 0, rec, sizeof(rec), NULL, 0), 0);
}

/* A raw client's NOTIFY record naming an unknown stream gets a completion carrying the error
 * (its epoll loop would otherwise wait for ever). */
START_TEST(test_raw_notify_unknown_stream)
{
        int fd = harness_raw_connect(daemon_proc.sock);
        json_t *hello, *msg;
        int kind = 0;
        uint64_t id = 0;

        ck_assert_int_ge(fd, 0);
        hello = harness_raw_call(fd, 1, "{\"method\":\"hello\",\"params\":{\"min_version\":3,\"max_version\":3}}");
        ck_assert_int_eq(harness_reply_code(hello), 0);
        json_decref(hello);
        send_unknown_notify(fd);
        for (;;) {
                msg = harness_raw_recv(fd, &kind, &id);
                ck_assert_ptr_nonnull(msg);
                if (strcmp(json_string_value(json_object_get(msg, "event")), "completion") == 0)
                        break;
                json_decref(msg);
        }
        json_t *d = json_object_get(msg, "data");
        ck_assert_int_eq(json_integer_value(json_object_get(d, "task")), 42);
        ck_assert_int_eq(json_integer_value(json_object_get(d, "tag")), 5);
        ck_assert_int_eq(json_integer_value(json_object_get(d, "code")), NPU_ERR_BAD_HANDLE);
        json_decref(msg);
        close(fd);
}
END_TEST

/* The same in session version 4: the completion comes as a binary COMPLETION frame (kind 5,
 * docs/protocol.md section 7.2), and an unknown stream's is refused in it the same way. */
START_TEST(test_raw_completion_frame_v4)
{
        int fd = harness_raw_connect(daemon_proc.sock);
        json_t *hello;
        struct proto_completion pc;
        uint8_t *body = NULL;
        size_t len = 0;
        int kind = 0;
        uint64_t id = 0;

        ck_assert_int_ge(fd, 0);
        hello = harness_raw_call(fd, 1, "{\"method\":\"hello\",\"params\":{\"min_version\":3,\"max_version\":4}}");
        ck_assert_int_eq(harness_reply_code(hello), 0);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(hello, "result"), "version")), 4);
        json_decref(hello);
        send_unknown_notify(fd);
        for (;;) {
                body = harness_raw_recv_bytes(fd, &kind, &id, &len);
                ck_assert_ptr_nonnull(body);
                ck_assert_int_ne(kind, PROTO_KIND_REPLY); /* nothing asked a reply */
                if (kind == PROTO_KIND_COMPLETION)
                        break;
                free(body); /* a JSON notice (device state) */
        }
        ck_assert_int_eq(proto_completion_decode(body, len, &pc), 0);
        ck_assert_uint_eq(id, 0);
        ck_assert_uint_eq(pc.stream, 0x77);
        ck_assert_uint_eq(pc.task, 42);
        ck_assert_uint_eq(pc.tag, 5);
        ck_assert_int_eq(pc.code, NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(pc.flags, 0);
        ck_assert(pc.message_len > 0);
        free(body);
        close(fd);
}
END_TEST

static int ready_pipe[2];

static void never_returns(void *user, npu_status_t st)
{
        char c = 'r';
        if (write(ready_pipe[1], &c, 1) != 1)
                _exit(3);
        for (;;)
                pause();
}

/* The unprivileged tenant: its stream is held by a callback that never returns; the work
 * queued after it does not run. */
static int unacked_tenant(void *arg)
{
        npu_context_t *c;
        npu_stream_t s;
        npu_buffer_t b;

        if (npu_connect(daemon_proc.sock, &c) != NPU_OK || npu_malloc(c, 0, 4096, &b) != NPU_OK ||
            npu_stream_create(c, 0, 2, &s) != NPU_OK ||
            npu_launch_host_func(c, s, never_returns, NULL, NULL) != NPU_OK ||
            npu_memset_async(c, s, b, 0, 1, 4096, NULL) != NPU_OK || npu_flush(c) != NPU_OK)
                return 1;
        for (;;)
                pause();
}

static int session_count(void)
{
        char *json = NULL;
        OK(npu_admin_call(ctx, "sessions", NULL, &json));
        json_t *v = json_loads(json, 0, NULL), *list = json_object_get(v, "sessions");
        int n = (int)json_array_size(json_is_array(list) ? list : v);
        json_decref(v);
        free(json);
        return n;
}

/* A client that never acks a host callback holds only its own stream: another tenant's work
 * on the same device completes, and killing the client reclaims its session. */
START_TEST(test_unacked_callback_isolated)
{
        uid_t uid = 0;
        gid_t gid = 0;
        npu_buffer_t b;
        npu_stream_t s;
        npu_completion_t c;
        char ch;
        int status;

        if (harness_attacker(&uid, &gid) < 0)
                fprintf(stderr, "skipped: no unprivileged user; running the tenant as this user\n");
        ck_assert_int_eq(harness_share_socket(&daemon_proc), 0);
        ck_assert_int_eq(pipe(ready_pipe), 0);
        int before = session_count();
        pid_t pid = harness_spawn_as(uid, gid, unacked_tenant, NULL);
        ck_assert_int_gt(pid, 0);
        ck_assert_int_eq(read(ready_pipe[0], &ch, 1), 1); /* its callback is running */
        OK(npu_malloc(ctx, 0, 4096, &b));
        OK(npu_stream_create(ctx, 0, 2, &s));
        for (int i = 0; i < 20; i++) {
                OK(npu_memset_async(ctx, s, b, 0, i, 4096, NULL));
                OK(npu_stream_notify(ctx, s, (uint64_t)i, NULL));
                OK(wait_completion(ctx, &c));
                ck_assert_int_eq(c.status, NPU_OK);
        }
        OK(npu_synchronize(ctx));
        ck_assert_int_eq(session_count(), before + 1);
        kill(pid, SIGKILL);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        for (int i = 0; i < 500 && session_count() > before; i++)
                usleep(10000);
        ck_assert_int_eq(session_count(), before);
        ck_assert(harness_alive(&daemon_proc));
        close(ready_pipe[0]);
        close(ready_pipe[1]);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-completion");
        TCase *tc = tcase_create("completion");
        SRunner *sr;
        int failed;

        signal(SIGPIPE, SIG_IGN);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_epoll_wakes_after_matmul);
        tcase_add_test(tc, test_order_and_status_per_stream);
        tcase_add_test(tc, test_host_func_orders_stream);
        tcase_add_test(tc, test_host_func_gets_stream_error);
        tcase_add_test(tc, test_device_health_notice);
        tcase_add_test(tc, test_notice_before_fd);
        tcase_add_test(tc, test_notice_overflow);
        tcase_add_test(tc, test_event_notify);
        tcase_add_test(tc, test_bad_input);
        tcase_add_test(tc, test_raw_notify_unknown_stream);
        tcase_add_test(tc, test_raw_completion_frame_v4);
        tcase_add_test(tc, test_unacked_callback_isolated);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
