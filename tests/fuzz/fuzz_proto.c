/* libFuzzer target for everything npud parses from a client's bytes: frame reassembly
 * (proto_reader), JSON bodies of REQUEST and REPLY frames, and SUBMIT task records. Every
 * record that decodes must re-encode to exactly the bytes it came from. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/frame.h"
#include "proto/message.h"
#include "proto/submit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_json_request(const uint8_t *body, size_t len)
{
        char err[256];
        const char *method;
        json_t *params;
        json_t *v = proto_json_parse(body, len, err, sizeof(err));

        if (!v)
                return;
        if (proto_request_parse(v, &method, &params, err, sizeof(err)) == 0) {
                if (!method || (params && !json_is_object(params)))
                        abort();
                (void)strlen(method);
        }
        json_decref(v);
}

static void check_json_reply(const uint8_t *body, size_t len)
{
        char err[256];
        json_t *result;
        json_t *v = proto_json_parse(body, len, err, sizeof(err));

        if (!v)
                return;
        int code = proto_reply_parse(v, &result, err, sizeof(err));
        if (code == 0 && !result)
                abort();
        if (code > 0)
                (void)strlen(err);
        json_decref(v);
}

static void check_submit(const uint8_t *body, size_t len)
{
        static uint8_t enc[PROTO_REC_HEADER_SIZE + 40 + 80 * PROTO_REC_MAX_TENSORS +
                           48 * PROTO_REC_MAX_ATTRS];
        struct proto_rec rec;
        char err[160];
        size_t pos = 0, before;
        int r;

        for (;;) {
                before = pos;
                r = proto_rec_decode(body, len, &pos, &rec, err, sizeof(err));
                if (r != 1)
                        break;
                size_t n = pos - before;
                /* a decoded record is canonical: encoding it gives back the same bytes */
                if (n == 0 || proto_rec_size(&rec) != n || n > sizeof(enc) ||
                    proto_rec_encode(&rec, enc) != n || memcmp(enc, body + before, n) != 0)
                        abort();
                if (rec.type == PROTO_REC_LAUNCH &&
                    strnlen(rec.launch.op, PROTO_REC_OP_NAME) == PROTO_REC_OP_NAME)
                        abort();
        }
        if (r < 0 && pos != before)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct proto_reader r;
        struct proto_frame f;
        int e;

        proto_reader_init(&r);
        if (proto_reader_feed(&r, data, size) < 0) {
                proto_reader_deinit(&r);
                return 0;
        }
        while ((e = proto_reader_next(&r, &f)) == 1) {
                switch (f.hdr.kind) {
                case PROTO_KIND_REQUEST:
                        check_json_request(f.body, f.hdr.body_len);
                        break;
                case PROTO_KIND_REPLY:
                        check_json_reply(f.body, f.hdr.body_len);
                        break;
                case PROTO_KIND_SUBMIT:
                        check_submit(f.body, f.hdr.body_len);
                        break;
                default:
                        break;
                }
                for (int i = 0; i < PROTO_MAX_FDS; i++)
                        if (f.fds[i] >= 0)
                                close(f.fds[i]);
        }
        proto_reader_deinit(&r);
        return 0;
}
