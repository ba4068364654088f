/* Robustness of the real npud against bad input: malformed and oversized frames, garbage
 * bytes, bad JSON and parameters, unknown methods, bad, foreign and freed handles, out of range
 * copies, operator mismatches, destroyed streams, bad file descriptor passing, malformed
 * SUBMIT records and a client SIGKILLed with queued work. Every test checks that the daemon
 * is still alive and that a second, well-behaved libnpu client still works afterwards. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/frame.h"
#include "proto/submit.h"
#include "harness.h"
#include "npu.h"

static struct npud_proc daemon_proc;
static npu_context_t *ctx; /* the well-behaved client */

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

/* ---- helpers ---- */

/* The daemon is alive and the well-behaved client can ping and round-trip data. */
static void other_client_works(void)
{
        static unsigned round;
        uint8_t out[4096], in[4096];
        npu_buffer_t b;

        round++;
        ck_assert_msg(harness_alive(&daemon_proc), "npud is not running");
        OK(npu_ping(ctx));
        for (size_t i = 0; i < sizeof(out); i++)
                out[i] = (uint8_t)(i * 7 + round * 13 + 1);
        memset(in, 0, sizeof(in));
        OK(npu_malloc(ctx, 0, sizeof(out), &b));
        OK(npu_memcpy_to_device(ctx, b, 0, out, sizeof(out)));
        OK(npu_memcpy_from_device(ctx, in, b, 0, sizeof(in)));
        ck_assert_mem_eq(in, out, sizeof(out));
        OK(npu_free(ctx, b));
        ck_assert(harness_alive(&daemon_proc));
}

/* Number of file descriptors the daemon holds open. */
static int daemon_fd_count(void)
{
        char path[64];
        struct dirent *e;
        DIR *d;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)daemon_proc.pid);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d)))
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

/* Wait up to 2 s for the daemon's fd count to come back to `want`; returns the last count. */
static int daemon_fd_count_settles(int want)
{
        int n = daemon_fd_count();

        for (int i = 0; i < 200 && n != want; i++) {
                usleep(10000);
                n = daemon_fd_count();
        }
        return n;
}

/* Raw connection that has done hello. */
static int raw_session(void)
{
        int fd = harness_raw_connect(daemon_proc.sock);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(harness_raw_hello(fd), 0);
        return fd;
}

/* Send arbitrary bytes, with fds attached to the first byte; send errors are ignored (the
 * daemon may already have hung up). */
static void send_bytes(int fd, const void *data, size_t len, const int *fds, int nfds)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * 8)];
                struct cmsghdr align;
        } ctl;
        struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

        ck_assert_int_le(nfds, 8);
        if (nfds > 0) {
                memset(&ctl, 0, sizeof(ctl));
                msg.msg_control = ctl.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
        }
        while (msg.msg_iovlen && iov.iov_len) {
                ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return;
                iov.iov_base = (char *)iov.iov_base + n;
                iov.iov_len -= (size_t)n;
                msg.msg_control = NULL;
                msg.msg_controllen = 0;
        }
}

/* A frame whose header fields (nfds, body_len) need not match what is actually sent. */
static void send_frame_raw(int fd, int kind, uint8_t hdr_nfds, uint32_t body_len, uint64_t id,
                           const void *body, size_t sent_len, const int *fds, int nfds)
{
        struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                  .kind = (uint8_t)kind, .nfds = hdr_nfds,
                                  .body_len = body_len, .request_id = id };
        uint8_t *buf = malloc(PROTO_HEADER_SIZE + sent_len);

        ck_assert_ptr_nonnull(buf);
        proto_header_encode(&h, buf);
        if (sent_len)
                memcpy(buf + PROTO_HEADER_SIZE, body, sent_len);
        send_bytes(fd, buf, PROTO_HEADER_SIZE + sent_len, fds, nfds);
        free(buf);
}

static const char *reply_message(json_t *reply)
{
        const char *m = json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
        return m ? m : "";
}

/* Reply to a raw request must be the error `code` with `needle` in its message. */
static void expect_error_reply(json_t *r, const char *what, int code, const char *needle)
{
        ck_assert_msg(r != NULL, "%s: no reply", what);
        ck_assert_msg(harness_reply_code(r) == code, "%s: error code %d (%s), expected %d", what,
                      harness_reply_code(r), reply_message(r), code);
        ck_assert_msg(strstr(reply_message(r), needle), "%s: message '%s' lacks '%s'", what,
                      reply_message(r), needle);
        json_decref(r);
}

static void expect_error(int fd, uint64_t id, const char *req, int code, const char *needle)
{
        expect_error_reply(harness_raw_call(fd, id, req), req, code, needle);
}

static void expect_ok(int fd, uint64_t id, const char *req)
{
        json_t *r = harness_raw_call(fd, id, req);

        ck_assert_msg(r != NULL, "%s: no reply", req);
        ck_assert_msg(harness_reply_code(r) == 0, "%s: error %d (%s)", req, harness_reply_code(r),
                      reply_message(r));
        json_decref(r);
}

static void raw_ping_ok(int fd, uint64_t id)
{
        expect_ok(fd, id, "{\"method\":\"ping\"}");
}

static npu_tensor_t tensor1(npu_buffer_t b, npu_dtype_t dt, int64_t n)
{
        npu_tensor_t t = { .buf = b, .dtype = dt, .ndim = 1 };
        t.dims[0] = n;
        return t;
}

static npu_tensor_t tensor2(npu_buffer_t b, npu_dtype_t dt, int64_t r, int64_t c)
{
        npu_tensor_t t = { .buf = b, .dtype = dt, .ndim = 2 };
        t.dims[0] = r;
        t.dims[1] = c;
        return t;
}

/* A sealed memfd of `size` bytes (as libnpu registers) or an unsealed one. */
static int make_memfd(size_t size, int seal)
{
        int fd = memfd_create("badinput", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
        if (seal)
                ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
        return fd;
}

/* Region size in a region_register reply, -1 for an error. */
static long long region_reply_size(json_t *r)
{
        json_t *size = json_object_get(json_object_get(r, "result"), "size");
        return json_is_integer(size) ? (long long)json_integer_value(size) : -1;
}

/* ---- framing ---- */

START_TEST(test_oversized_frame)
{
        int fd = raw_session();

        /* a REQUEST declaring more than the JSON limit: closed before any body is read */
        send_frame_raw(fd, PROTO_KIND_REQUEST, 0, PROTO_MAX_JSON_BODY + 1, 2, NULL, 0, NULL, 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        /* the same before hello, and a SUBMIT over the binary limit */
        fd = harness_raw_connect(daemon_proc.sock);
        ck_assert_int_ge(fd, 0);
        send_frame_raw(fd, PROTO_KIND_REQUEST, 0, UINT32_MAX, 1, "{}", 2, NULL, 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        fd = raw_session();
        send_frame_raw(fd, PROTO_KIND_SUBMIT, 0, PROTO_MAX_BODY + 1, 0, NULL, 0, NULL, 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        other_client_works();
}
END_TEST

START_TEST(test_truncated_header_close)
{
        static const uint8_t part[10] = { 'N', 'P', 'U', '1', 1, 0, 1, 0, 0, 0 };
        int base = daemon_fd_count();
        int fd = harness_raw_connect(daemon_proc.sock);

        ck_assert_int_ge(fd, 0);
        send_bytes(fd, part, sizeof(part), NULL, 0);
        close(fd);
        ck_assert_int_eq(daemon_fd_count_settles(base), base);
        other_client_works();
}
END_TEST

START_TEST(test_truncated_header_kept_open)
{
        static const uint8_t part[10] = { 'N', 'P', 'U', '1', 1, 0, 1, 0, 0, 0 };
        int fd = harness_raw_connect(daemon_proc.sock);
        int fd2 = harness_raw_connect(daemon_proc.sock);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_ge(fd2, 0);
        send_bytes(fd, part, sizeof(part), NULL, 0);
        /* the daemon waits for the rest of that header without blocking anyone else */
        other_client_works();
        ck_assert_int_eq(harness_raw_hello(fd2), 0);
        raw_ping_ok(fd2, 2);
        other_client_works();
        /* the rest of the header and a body complete the frame: a ping */
        {
                const char *body = "{\"method\":\"ping\"}";
                struct proto_header h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION,
                                          .kind = PROTO_KIND_REQUEST,
                                          .body_len = (uint32_t)strlen(body), .request_id = 7 };
                uint8_t hdr[PROTO_HEADER_SIZE];
                int kind = 0;
                uint64_t id = 0;
                proto_header_encode(&h, hdr);
                ck_assert_mem_eq(hdr, part, sizeof(part));
                send_bytes(fd, hdr + sizeof(part), sizeof(hdr) - sizeof(part), NULL, 0);
                send_bytes(fd, body, strlen(body), NULL, 0);
                json_t *r = harness_raw_recv(fd, &kind, &id);
                ck_assert_ptr_nonnull(r);
                ck_assert_int_eq(kind, PROTO_KIND_REPLY);
                ck_assert_uint_eq(id, 7);
                ck_assert_int_eq(harness_reply_code(r), 0);
                json_decref(r);
        }
        close(fd);
        close(fd2);
        other_client_works();
}
END_TEST

START_TEST(test_random_bytes)
{
        uint8_t junk[4096];
        uint64_t x = 0x9e3779b97f4a7c15ull; /* fixed seed: xorshift64 */
        int base = daemon_fd_count();

        for (size_t i = 0; i < sizeof(junk); i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                junk[i] = (uint8_t)x;
        }
        junk[0] = 0; /* never the magic */
        /* before and after hello */
        for (int round = 0; round < 2; round++) {
                int fd = round ? raw_session() : harness_raw_connect(daemon_proc.sock);
                ck_assert_int_ge(fd, 0);
                send_bytes(fd, junk, sizeof(junk), NULL, 0);
                ck_assert(harness_raw_closed(fd));
                close(fd);
        }
        ck_assert_int_eq(daemon_fd_count_settles(base), base);
        other_client_works();
}
END_TEST

/* ---- requests ---- */

START_TEST(test_non_json_body)
{
        static const char *const bodies[] = { "this is not json", "{\"method\":", "[1,2,3]",
                                              "\"ping\"", "{\"method\":\"ping\",\"method\":\"ping\"}",
                                              "{\"method\":42}", "{\"method\":\"ping\",\"params\":[]}",
                                              "{\"method\":\"ping\",\"extra\":1}", "" };
        int fd = raw_session();
        uint64_t id = 10;

        for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++, id += 2) {
                char what[128];
                snprintf(what, sizeof(what), "body '%s'", bodies[i]);
                ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, id, bodies[i],
                                                  strlen(bodies[i]), NULL, 0), 0);
                int kind = 0;
                uint64_t rid = 0;
                json_t *r = harness_raw_recv(fd, &kind, &rid);
                ck_assert_int_eq(kind, PROTO_KIND_REPLY);
                ck_assert_uint_eq(rid, id);
                expect_error_reply(r, what, NPU_ERR_PROTOCOL, "");
                /* the session stays up */
                raw_ping_ok(fd, id + 1);
        }
        close(fd);
        other_client_works();
}
END_TEST

START_TEST(test_wrong_field_types)
{
        int fd = raw_session();

        expect_error(fd, 2, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":\"abc\"}}",
                     NPU_ERR_INVALID, "'size'");
        expect_error(fd, 3, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":-1}}",
                     NPU_ERR_INVALID, "'size'");
        expect_error(fd, 4, "{\"method\":\"mem_alloc\",\"params\":{\"device\":1e3,\"size\":64}}",
                     NPU_ERR_INVALID, "'device'");
        expect_error(fd, 5, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0}}",
                     NPU_ERR_INVALID, "'size'");
        expect_error(fd, 6, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":64,\"bogus\":1}}",
                     NPU_ERR_INVALID, "'bogus'");
        expect_error(fd, 7, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":1.5}}",
                     NPU_ERR_INVALID, "'size'");
        expect_error(fd, 8, "{\"method\":\"mem_alloc\",\"params\":{\"device\":null,\"size\":64}}",
                     NPU_ERR_INVALID, "'device'");
        expect_error(fd, 9, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":true}}",
                     NPU_ERR_INVALID, "'size'");
        expect_error(fd, 10, "{\"method\":\"mem_alloc\",\"params\":{\"device\":2147483648,\"size\":64}}",
                     NPU_ERR_INVALID, "'device'");
        expect_error(fd, 11, "{\"method\":\"mem_free\",\"params\":{\"buffer\":\"1\"}}",
                     NPU_ERR_INVALID, "'buffer'");
        expect_error(fd, 12, "{\"method\":\"stream_create\",\"params\":{\"device\":0,\"priority\":99}}",
                     NPU_ERR_INVALID, "'priority'");
        expect_error(fd, 13, "{\"method\":\"stream_create\",\"params\":{\"device\":[0]}}",
                     NPU_ERR_INVALID, "'device'");
        expect_error(fd, 14, "{\"method\":\"region_register\",\"params\":{\"fd\":{}}}",
                     NPU_ERR_INVALID, "'fd'");
        expect_error(fd, 15, "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":1,\"client\":5}}",
                     NPU_ERR_INVALID, "'client'");
        /* a wait's "cpu" (session version 5) is a CPU number */
        expect_error(fd, 17, "{\"method\":\"synchronize\",\"params\":{\"cpu\":-1}}",
                     NPU_ERR_INVALID, "'cpu'");
        expect_error(fd, 18, "{\"method\":\"synchronize\",\"params\":{\"cpu\":\"0\"}}",
                     NPU_ERR_INVALID, "'cpu'");
        expect_error(fd, 19, "{\"method\":\"synchronize\",\"params\":{\"cpu\":1048576}}",
                     NPU_ERR_INVALID, "'cpu'");
        expect_error(fd, 20, "{\"method\":\"stream_synchronize\",\"params\":{\"stream\":1,\"cpu\":1.5}}",
                     NPU_ERR_INVALID, "'cpu'");
        expect_error(fd, 21, "{\"method\":\"event_synchronize\",\"params\":{\"event\":1,\"cpu\":null}}",
                     NPU_ERR_INVALID, "'cpu'");
        expect_ok(fd, 22, "{\"method\":\"synchronize\",\"params\":{\"cpu\":0}}");
        /* still usable, and a correct allocation works */
        expect_ok(fd, 16, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":64}}");
        close(fd);
        other_client_works();
}
END_TEST

START_TEST(test_unknown_method)
{
        int fd = raw_session();

        expect_error(fd, 2, "{\"method\":\"frobnicate\",\"params\":{}}", NPU_ERR_PROTOCOL,
                     "frobnicate");
        expect_error(fd, 3, "{\"method\":\"\"}", NPU_ERR_PROTOCOL, "unknown method");
        raw_ping_ok(fd, 4);
        close(fd);
        other_client_works();
}
END_TEST

START_TEST(test_request_before_hello)
{
        int fd = harness_raw_connect(daemon_proc.sock);

        ck_assert_int_ge(fd, 0);
        expect_error(fd, 1, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":64}}",
                     NPU_ERR_PROTOCOL, "hello");
        expect_error(fd, 2, "{\"method\":\"stream_create\",\"params\":{\"device\":0}}",
                     NPU_ERR_PROTOCOL, "hello");
        expect_error(fd, 3, "{\"method\":\"devices\"}", NPU_ERR_PROTOCOL, "hello");
        /* hello still works afterwards, and then the same request succeeds */
        ck_assert_int_eq(harness_raw_hello(fd), 0);
        expect_ok(fd, 4, "{\"method\":\"mem_alloc\",\"params\":{\"device\":0,\"size\":64}}");
        expect_error(fd, 5, "{\"method\":\"hello\",\"params\":{\"min_version\":1,\"max_version\":1}}",
                     NPU_ERR_PROTOCOL, "already");
        close(fd);
        other_client_works();
}
END_TEST

/* ---- handles ---- */

START_TEST(test_bad_handles_sync)
{
        npu_context_t *c2, *c3;
        npu_buffer_t mine, freed, foreign[16];
        uint8_t data[256], back[256];

        OK(npu_connect(daemon_proc.sock, &c2));
        OK(npu_connect(daemon_proc.sock, &c3));
        /* Handles are per session: c3 holds more buffers than c2, so c3's last handle names
         * no slot of c2's table. */
        for (int i = 0; i < 16; i++)
                OK(npu_malloc(c3, 0, sizeof(data), &foreign[i]));
        OK(npu_malloc(c2, 0, 64, &mine));
        OK(npu_malloc(c2, 0, 64, &freed));
        OK(npu_free(c2, freed));

        /* unknown */
        ck_assert_int_eq(npu_free(c2, (npu_buffer_t){ 0 }), NPU_ERR_BAD_HANDLE);
        ck_assert_int_eq(npu_free(c2, (npu_buffer_t){ 0xdeadbeef }), NPU_ERR_BAD_HANDLE);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "unknown"));
        /* foreign */
        ck_assert_int_eq(npu_free(c2, foreign[15]), NPU_ERR_BAD_HANDLE);
        /* freed, and double free */
        ck_assert_int_eq(npu_free(c2, freed), NPU_ERR_BAD_HANDLE);
        OK(npu_free(c2, mine));
        ck_assert_int_eq(npu_free(c2, mine), NPU_ERR_BAD_HANDLE);
        /* other handle kinds */
        ck_assert_int_eq(npu_stream_destroy(c2, (npu_stream_t){ 12345 }), NPU_ERR_BAD_HANDLE);
        ck_assert_int_eq(npu_event_destroy(c2, (npu_event_t){ 12345 }), NPU_ERR_BAD_HANDLE);
        ck_assert_int_eq(npu_host_free(c2, (npu_region_t){ 12345 }), NPU_ERR_BAD_HANDLE);

        /* the foreign buffer was not touched: its owner still uses it */
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(255 - i);
        OK(npu_memcpy_to_device(c3, foreign[15], 0, data, sizeof(data)));
        OK(npu_memcpy_from_device(c3, back, foreign[15], 0, sizeof(back)));
        ck_assert_mem_eq(back, data, sizeof(data));
        OK(npu_ping(c2));
        npu_disconnect(c2);
        npu_disconnect(c3);
        other_client_works();
}
END_TEST

START_TEST(test_bad_handles_async)
{
        npu_context_t *c2, *c3;
        npu_buffer_t a, b, freed, foreign[16];
        npu_stream_t s;
        uint64_t task = 0;
        float x[4] = { 1, 2, 3, 4 }, y[4];

        OK(npu_connect(daemon_proc.sock, &c2));
        OK(npu_connect(daemon_proc.sock, &c3));
        for (int i = 0; i < 16; i++)
                OK(npu_malloc(c3, 0, sizeof(x), &foreign[i]));
        OK(npu_malloc(c2, 0, sizeof(x), &a));
        OK(npu_malloc(c2, 0, sizeof(x), &b));
        OK(npu_malloc(c2, 0, sizeof(x), &freed));
        OK(npu_free(c2, freed));
        OK(npu_memcpy_to_device(c2, a, 0, x, sizeof(x)));
        OK(npu_stream_create(c2, 0, 3, &s));
        npu_tensor_t ta = tensor1(a, NPU_FLOAT32, 4), tb = tensor1(b, NPU_FLOAT32, 4);

        /* launch naming a foreign buffer */
        npu_tensor_t tf = tensor1(foreign[15], NPU_FLOAT32, 4);
        OK(npu_launch(c2, s, "Add", (npu_tensor_t[]){ ta, tf }, 2, &tb, 1, NULL, 0, &task));
        ck_assert_uint_ne(task, 0);
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* launch writing to a freed buffer */
        npu_tensor_t tfr = tensor1(freed, NPU_FLOAT32, 4);
        OK(npu_launch(c2, s, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tfr, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* copies naming unknown, foreign and freed buffers, either side */
        OK(npu_memcpy_d2d_async(c2, s, b, 0, (npu_buffer_t){ 0xdeadbeef }, 0, 4, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_memcpy_d2d_async(c2, s, foreign[15], 0, a, 0, 4, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_memcpy_d2d_async(c2, s, b, 0, freed, 0, 4, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_memset_async(c2, s, freed, 0, 0, 4, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* host region side of a copy: unknown region */
        OK(npu_memcpy_h2d_async(c2, s, b, 0, (npu_region_t){ 4242 }, 0, 4, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* an unknown event in a record */
        OK(npu_event_record(c2, (npu_event_t){ 4242 }, s));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);

        /* errors were reported once; the stream works again */
        OK(npu_launch(c2, s, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tb, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(c2, s));
        OK(npu_memcpy_from_device(c2, y, b, 0, sizeof(y)));
        for (int i = 0; i < 4; i++)
                ck_assert_float_eq(y[i], 2 * x[i]);
        npu_disconnect(c2);
        npu_disconnect(c3);
        other_client_works();
}
END_TEST

/* Work queued before a task that fails at submission still runs (only later work is
 * cancelled). */
START_TEST(test_bad_handle_keeps_earlier_work)
{
        npu_context_t *c2;
        npu_buffer_t a;
        npu_stream_t s;
        uint64_t task = 0;
        uint8_t y[64];

        OK(npu_connect(daemon_proc.sock, &c2));
        OK(npu_malloc(c2, 0, sizeof(y), &a));
        OK(npu_memset(c2, a, 0, 0, sizeof(y)));
        OK(npu_stream_create(c2, 0, 3, &s));
        OK(npu_memset_async(c2, s, a, 0, 0x5a, sizeof(y), NULL));
        OK(npu_memset_async(c2, s, (npu_buffer_t){ 0xdeadbeef }, 0, 0x11, sizeof(y), &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_memcpy_from_device(c2, y, a, 0, sizeof(y)));
        for (size_t i = 0; i < sizeof(y); i++)
                ck_assert_msg(y[i] == 0x5a, "byte %zu is 0x%02x: the memset queued before the bad task was cancelled",
                              i, y[i]);
        npu_disconnect(c2);
        other_client_works();
}
END_TEST

START_TEST(test_copy_out_of_range)
{
        npu_context_t *c2;
        npu_buffer_t a, b;
        npu_stream_t s;
        uint64_t task = 0;

        OK(npu_connect(daemon_proc.sock, &c2));
        OK(npu_malloc(c2, 0, 4096, &a));
        OK(npu_malloc(c2, 0, 4096, &b));
        OK(npu_stream_create(c2, 0, 2, &s));
        /* offset + len beyond the buffer, destination and source */
        OK(npu_memcpy_d2d_async(c2, s, a, 4000, b, 0, 200, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        ck_assert_ptr_nonnull(strstr(npu_error_message(), "outside"));
        OK(npu_memcpy_d2d_async(c2, s, a, 0, b, 4096, 1, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* offset + len overflowing uint64 (would wrap to a small in-range value) */
        OK(npu_memcpy_d2d_async(c2, s, a, 16, b, 0, UINT64_MAX - 8, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_memcpy_d2d_async(c2, s, a, 0, b, UINT64_MAX - 2, 4, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_memset_async(c2, s, a, UINT64_MAX, 0, 2, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* host region side */
        {
                void *host;
                npu_region_t r;
                OK(npu_host_alloc(c2, 4096, &host, &r));
                OK(npu_memcpy_h2d_async(c2, s, a, 0, r, 4095, 2, &task));
                ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_OUT_OF_RANGE);
                ck_assert_uint_eq(npu_error_task(), task);
                OK(npu_memcpy_d2h_async(c2, s, r, 8, a, 0, UINT64_MAX - 4, &task));
                ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_OUT_OF_RANGE);
                ck_assert_uint_eq(npu_error_task(), task);
                OK(npu_host_free(c2, r));
        }
        /* a launch reading past the end of its buffer */
        npu_tensor_t big = tensor1(a, NPU_FLOAT32, 2048), out = tensor1(b, NPU_FLOAT32, 2048);
        OK(npu_launch(c2, s, "Relu", &big, 1, &out, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_OUT_OF_RANGE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_memcpy_d2d_async(c2, s, a, 0, b, 0, 4096, NULL));
        OK(npu_stream_synchronize(c2, s));
        npu_disconnect(c2);
        other_client_works();
}
END_TEST

START_TEST(test_operator_mismatch)
{
        npu_context_t *c2;
        npu_buffer_t a, b, c;
        npu_stream_t s;
        uint64_t task = 0;

        OK(npu_connect(daemon_proc.sock, &c2));
        OK(npu_malloc(c2, 0, 64, &a));
        OK(npu_malloc(c2, 0, 64, &b));
        OK(npu_malloc(c2, 0, 64, &c));
        OK(npu_stream_create(c2, 0, 2, &s));
        npu_tensor_t fa = tensor1(a, NPU_FLOAT32, 4), fb = tensor1(b, NPU_FLOAT32, 4);
        npu_tensor_t ib = tensor1(b, NPU_INT32, 4);

        /* output of the wrong shape */
        npu_tensor_t bad_out = tensor2(c, NPU_FLOAT32, 2, 3);
        OK(npu_launch(c2, s, "Add", (npu_tensor_t[]){ fa, fb }, 2, &bad_out, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_SHAPE);
        ck_assert_uint_eq(npu_error_task(), task);
        ck_assert_msg(strstr(npu_error_message(), "Add"), "message: %s", npu_error_message());
        /* float32 + int32 */
        npu_tensor_t out = tensor1(c, NPU_FLOAT32, 4);
        OK(npu_launch(c2, s, "Add", (npu_tensor_t[]){ fa, ib }, 2, &out, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_SHAPE);
        ck_assert_uint_eq(npu_error_task(), task);
        ck_assert_msg(strstr(npu_error_message(), "Add"), "message: %s", npu_error_message());
        /* MatMul with mismatched inner dimensions */
        npu_tensor_t m1 = tensor2(a, NPU_FLOAT32, 2, 2), m2 = tensor2(b, NPU_FLOAT32, 3, 1);
        npu_tensor_t mo = tensor2(c, NPU_FLOAT32, 2, 1);
        OK(npu_launch(c2, s, "MatMul", (npu_tensor_t[]){ m1, m2 }, 2, &mo, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_SHAPE);
        ck_assert_uint_eq(npu_error_task(), task);
        ck_assert_msg(strstr(npu_error_message(), "MatMul"), "message: %s", npu_error_message());
        /* unknown operator */
        OK(npu_launch(c2, s, "Frobnicate", &fa, 1, &out, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_UNSUPPORTED);
        ck_assert_uint_eq(npu_error_task(), task);
        ck_assert_msg(strstr(npu_error_message(), "Frobnicate"), "message: %s", npu_error_message());
        /* wrong input count, negative dimension, unknown attribute */
        OK(npu_launch(c2, s, "Add", &fa, 1, &out, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_SHAPE);
        ck_assert_uint_eq(npu_error_task(), task);
        npu_tensor_t neg = tensor1(a, NPU_FLOAT32, -4);
        OK(npu_launch(c2, s, "Relu", &neg, 1, &out, 1, NULL, 0, &task));
        ck_assert_int_ne(npu_stream_synchronize(c2, s), NPU_OK);
        ck_assert_uint_eq(npu_error_task(), task);
        npu_attr_t attr = { .name = "nonsense", .i = 1 };
        OK(npu_launch(c2, s, "Relu", &fa, 1, &out, 1, &attr, 1, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_SHAPE);
        ck_assert_uint_eq(npu_error_task(), task);
        /* an unknown dtype */
        npu_tensor_t weird = tensor1(a, (npu_dtype_t)200, 4);
        OK(npu_launch(c2, s, "Relu", &weird, 1, &out, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_UNSUPPORTED);
        ck_assert_uint_eq(npu_error_task(), task);
        /* the stream works again */
        OK(npu_launch(c2, s, "Add", (npu_tensor_t[]){ fa, fb }, 2, &out, 1, NULL, 0, NULL));
        OK(npu_stream_synchronize(c2, s));
        npu_disconnect(c2);
        other_client_works();
}
END_TEST

START_TEST(test_destroyed_stream)
{
        npu_context_t *c2;
        npu_buffer_t a, b;
        npu_stream_t s, s2;
        uint64_t task = 0;

        OK(npu_connect(daemon_proc.sock, &c2));
        OK(npu_malloc(c2, 0, 64, &a));
        OK(npu_malloc(c2, 0, 64, &b));
        OK(npu_stream_create(c2, 0, 2, &s));
        OK(npu_stream_destroy(c2, s));
        npu_tensor_t ta = tensor1(a, NPU_FLOAT32, 4), tb = tensor1(b, NPU_FLOAT32, 4);
        OK(npu_launch(c2, s, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tb, 1, NULL, 0, &task));
        ck_assert_int_eq(npu_synchronize(c2), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_synchronize(c2)); /* reported once */
        /* requests naming it fail at once */
        ck_assert_int_eq(npu_stream_synchronize(c2, s), NPU_ERR_BAD_HANDLE);
        ck_assert_int_eq(npu_stream_destroy(c2, s), NPU_ERR_BAD_HANDLE);
        /* with another live stream in the session, the error still surfaces */
        OK(npu_stream_create(c2, 0, 2, &s2));
        OK(npu_memset_async(c2, s, a, 0, 0, 4, &task));
        OK(npu_launch(c2, s2, "Add", (npu_tensor_t[]){ ta, ta }, 2, &tb, 1, NULL, 0, NULL));
        ck_assert_int_eq(npu_synchronize(c2), NPU_ERR_BAD_HANDLE);
        ck_assert_uint_eq(npu_error_task(), task);
        OK(npu_synchronize(c2));
        npu_disconnect(c2);
        other_client_works();
}
END_TEST

/* ---- file descriptors ---- */

START_TEST(test_too_many_fds)
{
        int base = daemon_fd_count();
        int fd = raw_session();
        int p[2], m = make_memfd(4096, 1);
        const char *body = "{\"method\":\"region_register\",\"params\":{\"fd\":0}}";

        ck_assert_int_eq(pipe(p), 0);
        /* header declaring 5 (over PROTO_MAX_FDS), with nothing attached */
        send_frame_raw(fd, PROTO_KIND_REQUEST, 5, (uint32_t)strlen(body), 2, body, strlen(body),
                       NULL, 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        /* declaring 5 with 4 attached */
        fd = raw_session();
        int four[4] = { m, p[0], p[1], m };
        send_frame_raw(fd, PROTO_KIND_REQUEST, 5, (uint32_t)strlen(body), 2, body, strlen(body),
                       four, 4);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        /* 6 fds attached to a frame declaring 1: more than a frame may carry */
        fd = raw_session();
        int six[6] = { m, p[0], p[1], m, p[0], p[1] };
        send_frame_raw(fd, PROTO_KIND_REQUEST, 1, (uint32_t)strlen(body), 2, body, strlen(body),
                       six, 6);
        json_t *r = harness_raw_recv(fd, NULL, NULL);
        json_decref(r); /* a reply or not; the connection must go either way */
        ck_assert(harness_raw_closed(fd));
        close(fd);
        /* a frame declaring fds that never come */
        fd = raw_session();
        send_frame_raw(fd, PROTO_KIND_REQUEST, 2, (uint32_t)strlen(body), 2, body, strlen(body),
                       NULL, 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        close(m);
        close(p[0]);
        close(p[1]);
        ck_assert_int_eq(daemon_fd_count_settles(base), base);
        other_client_works();
}
END_TEST

START_TEST(test_extra_fds)
{
        int base = daemon_fd_count();
        int fd = raw_session();
        int p[2], m1 = make_memfd(4096, 1);
        const char *body = "{\"method\":\"region_register\",\"params\":{\"fd\":0}}";
        const char *ping = "{\"method\":\"ping\"}";
        int kind = 0;
        uint64_t id = 0;
        json_t *r;

        ck_assert_int_eq(pipe(p), 0);
        /* 4 fds with a frame declaring 2: served or refused, but no crash */
        int four[4] = { m1, p[0], p[1], p[0] };
        send_frame_raw(fd, PROTO_KIND_REQUEST, 2, (uint32_t)strlen(body), 2, body, strlen(body),
                       four, 4);
        r = harness_raw_recv(fd, &kind, &id);
        if (r) {
                ck_assert_uint_eq(id, 2);
                json_decref(r);
                raw_ping_ok(fd, 3);
                /* keep sending fds nobody declared: what the daemon holds stays bounded */
                for (int i = 0; i < 6; i++) {
                        send_frame_raw(fd, PROTO_KIND_REQUEST, 0, (uint32_t)strlen(ping), 10 + (uint64_t)i,
                                       ping, strlen(ping), four, 4);
                        r = harness_raw_recv(fd, &kind, &id);
                        if (!r)
                                break;
                        json_decref(r);
                        ck_assert_int_le(daemon_fd_count(), base + 1 + 2 * PROTO_MAX_FDS);
                }
        } else {
                ck_assert(harness_raw_closed(fd));
        }
        ck_assert(harness_alive(&daemon_proc));
        close(fd);
        close(m1);
        close(p[0]);
        close(p[1]);
        /* it holds none of those fds once the client is gone */
        ck_assert_int_eq(daemon_fd_count_settles(base), base);
        other_client_works();
}
END_TEST

/* Extra fds sent with one frame must not be handed to a later frame in place of the fds
 * that frame carries. */
START_TEST(test_extra_fds_not_misattributed)
{
        int fd = raw_session();
        int p[2], m1 = make_memfd(4096, 1), m2 = make_memfd(8192, 1);
        const char *body = "{\"method\":\"region_register\",\"params\":{\"fd\":0}}";
        int kind = 0;
        uint64_t id = 0;
        json_t *r;

        ck_assert_int_eq(pipe(p), 0);
        int four[4] = { m1, p[0], p[1], p[0] };
        send_frame_raw(fd, PROTO_KIND_REQUEST, 2, (uint32_t)strlen(body), 2, body, strlen(body),
                       four, 4);
        r = harness_raw_recv(fd, &kind, &id);
        if (r) { /* served: a later, correct frame registers its own fd, not a stray one */
                json_decref(r);
                ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, 4, body, strlen(body),
                                                  &m2, 1), 0);
                r = harness_raw_recv(fd, &kind, &id);
                if (r) {
                        ck_assert_uint_eq(id, 4);
                        ck_assert_msg(region_reply_size(r) == 8192,
                                      "region_register after a frame with extra fds: %s",
                                      harness_reply_code(r) ? reply_message(r) : "registered the wrong fd");
                        json_decref(r);
                } else {
                        ck_assert(harness_raw_closed(fd));
                }
        } else {
                ck_assert(harness_raw_closed(fd));
        }
        close(fd);
        close(m1);
        close(m2);
        close(p[0]);
        close(p[1]);
        other_client_works();
}
END_TEST

START_TEST(test_region_not_memfd)
{
        int base = daemon_fd_count();
        int fd = raw_session();
        int p[2], m = make_memfd(4096, 0), empty = make_memfd(0, 1), good = make_memfd(4096, 1);
        const char *body = "{\"method\":\"region_register\",\"params\":{\"fd\":0}}";

        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, 2, body, strlen(body), &p[0], 1), 0);
        expect_error_reply(harness_raw_recv(fd, NULL, NULL), "pipe fd", NPU_ERR_INVALID, "not a memfd");
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, 3, body, strlen(body), &m, 1), 0);
        expect_error_reply(harness_raw_recv(fd, NULL, NULL), "unsealed memfd", NPU_ERR_INVALID,
                           "F_SEAL_SHRINK");
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, 4, body, strlen(body), &empty, 1), 0);
        expect_error_reply(harness_raw_recv(fd, NULL, NULL), "empty memfd", NPU_ERR_INVALID, "empty");
        /* fd index not passed, and an index past the fds passed */
        expect_error(fd, 5, body, NPU_ERR_INVALID, "not passed");
        const char *idx1 = "{\"method\":\"region_register\",\"params\":{\"fd\":1}}";
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, 6, idx1, strlen(idx1), &good, 1), 0);
        expect_error_reply(harness_raw_recv(fd, NULL, NULL), "fd index 1", NPU_ERR_INVALID, "not passed");
        /* the session still works and registers a good region */
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REQUEST, 7, body, strlen(body), &good, 1), 0);
        json_t *r = harness_raw_recv(fd, NULL, NULL);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(region_reply_size(r), 4096);
        json_decref(r);
        close(p[0]);
        close(p[1]);
        close(m);
        close(empty);
        close(good);
        close(fd);
        ck_assert_int_eq(daemon_fd_count_settles(base), base);
        other_client_works();
}
END_TEST

/* ---- SUBMIT and frame kinds ---- */

static size_t memset_record(uint8_t *out, uint32_t stream, uint32_t buf, uint64_t seq)
{
        struct proto_rec rec = { .type = PROTO_REC_MEMSET, .seq = seq, .stream = stream };

        rec.memset.buf = buf;
        rec.memset.value = 1;
        rec.memset.len = 8;
        return proto_rec_encode(&rec, out);
}

static void submit_expect_closed(const uint8_t *body, size_t len, int hello)
{
        int fd = hello ? raw_session() : harness_raw_connect(daemon_proc.sock);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_SUBMIT, 0, body, len, NULL, 0), 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
}

START_TEST(test_malformed_submit)
{
        uint8_t rec[2 * 64];
        size_t n = memset_record(rec, 1, 1, 1);

        ck_assert_uint_eq(n, PROTO_REC_HEADER_SIZE + 24);
        /* nonzero reserved bytes: header flags, header tail, payload padding */
        for (int which = 0; which < 3; which++) {
                uint8_t bad[64];
                memcpy(bad, rec, n);
                bad[which == 0 ? 2 : which == 1 ? 20 : PROTO_REC_HEADER_SIZE + 5] = 1;
                submit_expect_closed(bad, n, 1);
        }
        /* a length beyond the frame */
        {
                uint8_t bad[64];
                uint32_t len = (uint32_t)n + 8;
                memcpy(bad, rec, n);
                memcpy(bad + 4, &len, 4); /* little-endian hosts only, like the daemon */
                submit_expect_closed(bad, n, 1);
                len = UINT32_MAX;
                memcpy(bad + 4, &len, 4);
                submit_expect_closed(bad, n, 1);
        }
        /* a length not matching the type, a truncated record, an unknown type */
        {
                uint8_t bad[64];
                uint32_t len = PROTO_REC_HEADER_SIZE;
                memcpy(bad, rec, n);
                memcpy(bad + 4, &len, 4);
                submit_expect_closed(bad, n, 1);
                submit_expect_closed(rec, 10, 1);
                memcpy(bad, rec, n);
                bad[0] = 99;
                submit_expect_closed(bad, n, 1);
        }
        /* a good record followed by a bad one in the same frame */
        {
                uint8_t two[128];
                memcpy(two, rec, n);
                memcpy(two + n, rec, n);
                two[n + 2] = 7;
                submit_expect_closed(two, 2 * n, 1);
        }
        /* SUBMIT with fds attached */
        {
                int fd = raw_session(), m = make_memfd(4096, 1);
                ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_SUBMIT, 0, rec, n, &m, 1), 0);
                ck_assert(harness_raw_closed(fd));
                close(fd);
                close(m);
        }
        other_client_works();
}
END_TEST

START_TEST(test_submit_before_hello)
{
        uint8_t rec[64];
        size_t n = memset_record(rec, 1, 1, 1);

        submit_expect_closed(rec, n, 0);
        /* even an empty one */
        submit_expect_closed(rec, 0, 0);
        other_client_works();
}
END_TEST

START_TEST(test_reply_kind_frame)
{
        const char *body = "{\"result\":{}}";
        int fd = raw_session();

        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_REPLY, 1, body, strlen(body), NULL, 0), 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        /* a notification, and an unknown kind */
        fd = raw_session();
        body = "{\"event\":\"x\",\"data\":{}}";
        ck_assert_int_eq(harness_raw_send(fd, PROTO_KIND_NOTIFY, 0, body, strlen(body), NULL, 0), 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        fd = raw_session();
        send_frame_raw(fd, 9, 0, 2, 5, "{}", 2, NULL, 0);
        ck_assert(harness_raw_closed(fd));
        close(fd);
        other_client_works();
}
END_TEST

/* ---- a client killed with queued work ---- */

/* Tasks queued by all sessions of this user, from the admin listing. */
static long long queued_tasks_total(void)
{
        char *text = NULL;
        json_t *v, *s;
        size_t i;
        long long n = 0;

        OK(npu_admin_call(ctx, "sessions", NULL, &text));
        v = json_loads(text, 0, NULL);
        free(text);
        ck_assert_ptr_nonnull(v);
        json_array_foreach(json_object_get(v, "sessions"), i, s)
                n += json_integer_value(json_object_get(s, "queued_tasks"));
        json_decref(v);
        return n;
}

static uint64_t device_memory_used(int dev)
{
        npu_device_info_t info = { .size = sizeof(info) };

        OK(npu_device_get_info(ctx, dev, &info));
        return info.memory_used;
}

START_TEST(test_sigkill_with_queued_work)
{
        enum { DIM = 256, LAUNCHES = 3000, EXTRA = 32 };
        uint64_t before = device_memory_used(0);
        const uint64_t mat = (uint64_t)DIM * DIM * sizeof(float);
        int pipefd[2];
        pid_t child;
        char c;

        ck_assert_int_eq(pipe(pipefd), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                npu_context_t *cc;
                npu_stream_t s;
                npu_buffer_t a, b, o, extra[EXTRA];
                close(pipefd[0]);
                if (npu_connect(daemon_proc.sock, &cc) != NPU_OK)
                        _exit(1);
                if (npu_malloc(cc, 0, mat, &a) != NPU_OK || npu_malloc(cc, 0, mat, &b) != NPU_OK ||
                    npu_malloc(cc, 0, mat, &o) != NPU_OK)
                        _exit(2);
                for (int i = 0; i < EXTRA; i++)
                        if (npu_malloc(cc, 0, 1 << 20, &extra[i]) != NPU_OK)
                                _exit(3);
                if (npu_memset(cc, a, 0, 0, mat) != NPU_OK || npu_memset(cc, b, 0, 0, mat) != NPU_OK ||
                    npu_stream_create(cc, 0, 5, &s) != NPU_OK)
                        _exit(4);
                npu_tensor_t ta = tensor2(a, NPU_FLOAT32, DIM, DIM);
                npu_tensor_t tb = tensor2(b, NPU_FLOAT32, DIM, DIM);
                npu_tensor_t to = tensor2(o, NPU_FLOAT32, DIM, DIM);
                for (int i = 0; i < LAUNCHES; i++)
                        if (npu_launch(cc, s, "MatMul", (npu_tensor_t[]){ ta, tb }, 2, &to, 1,
                                       NULL, 0, NULL) != NPU_OK)
                                _exit(5);
                if (npu_flush(cc) != NPU_OK || write(pipefd[1], "x", 1) != 1)
                        _exit(6);
                for (;;)
                        pause();
        }
        close(pipefd[1]);
        ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
        close(pipefd[0]);
        ck_assert_uint_ge(device_memory_used(0), before + 3 * mat + EXTRA * (1u << 20));
        long long queued = 0;
        for (int i = 0; i < 200 && queued == 0; i++) {
                queued = queued_tasks_total();
                if (!queued)
                        usleep(10000);
        }
        ck_assert_msg(queued > 0, "the client has no queued work to be killed with");
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        uint64_t now = 0;
        for (int i = 0; i < 300; i++) {
                now = device_memory_used(0);
                if (now == before)
                        break;
                usleep(10000);
        }
        ck_assert_uint_eq(now, before);
        other_client_works();
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-badinput");
        TCase *tc = tcase_create("badinput");
        SRunner *sr;
        int failed;

        signal(SIGPIPE, SIG_IGN);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_oversized_frame);
        tcase_add_test(tc, test_truncated_header_close);
        tcase_add_test(tc, test_truncated_header_kept_open);
        tcase_add_test(tc, test_random_bytes);
        tcase_add_test(tc, test_non_json_body);
        tcase_add_test(tc, test_wrong_field_types);
        tcase_add_test(tc, test_unknown_method);
        tcase_add_test(tc, test_request_before_hello);
        tcase_add_test(tc, test_bad_handles_sync);
        tcase_add_test(tc, test_bad_handles_async);
        tcase_add_test(tc, test_bad_handle_keeps_earlier_work);
        tcase_add_test(tc, test_copy_out_of_range);
        tcase_add_test(tc, test_operator_mismatch);
        tcase_add_test(tc, test_destroyed_stream);
        tcase_add_test(tc, test_too_many_fds);
        tcase_add_test(tc, test_extra_fds);
        tcase_add_test(tc, test_extra_fds_not_misattributed);
        tcase_add_test(tc, test_region_not_memfd);
        tcase_add_test(tc, test_malformed_submit);
        tcase_add_test(tc, test_submit_before_hello);
        tcase_add_test(tc, test_reply_kind_frame);
        tcase_add_test(tc, test_sigkill_with_queued_work);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
