/* Frame header encoding, incremental frame reassembly with fd passing, and output buffering. */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "frame.h"

#define READ_CHUNK 65536u

/* A reader with nothing buffered holds no memory, yet a busy connection empties its buffer
 * after every message: instead of a free and a malloc of 64 KiB per message, an emptied
 * chunk waits in a one-slot spare of the thread for the next read of any reader. The slot is
 * a thread-specific value too, so a chunk left there is freed when its thread exits. */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static int spare_ok;
struct spare_slot {
        uint8_t *buf;
        int registered; /* the slot is the thread's value of spare_key */
};
static __thread struct spare_slot spare;

static void spare_free(void *slot)
{
        struct spare_slot *sl = slot;

        free(sl->buf);
        sl->buf = NULL;
}

static void spare_init(void)
{
        spare_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* The thread-specific value is set once per thread (to the slot itself), so keeping and
 * taking a chunk is two plain stores, not a pthread call per message. */
static void chunk_release(uint8_t *buf)
{
        if (!spare.registered) {
                pthread_once(&spare_once, spare_init);
                if (!spare_ok || pthread_setspecific(spare_key, &spare) != 0) {
                        free(buf);
                        return;
                }
                spare.registered = 1;
        }
        if (spare.buf) {
                free(buf);
                return;
        }
        spare.buf = buf;
}

static uint8_t *chunk_take(void)
{
        uint8_t *b = spare.buf;

        spare.buf = NULL;
        return b;
}

void proto_header_encode(const struct proto_header *h, uint8_t out[PROTO_HEADER_SIZE])
{
        uint32_t magic = htole32(h->magic), body = htole32(h->body_len);
        uint16_t version = htole16(h->version);
        uint64_t id = htole64(h->request_id);

        memcpy(out, &magic, 4);
        memcpy(out + 4, &version, 2);
        out[6] = h->kind;
        out[7] = h->flags;
        out[8] = h->nfds;
        memset(out + 9, 0, 3);
        memcpy(out + 12, &body, 4);
        memcpy(out + 16, &id, 8);
}

int proto_header_decode(const uint8_t in[PROTO_HEADER_SIZE], struct proto_header *ret)
{
        struct proto_header h;
        uint32_t v32;
        uint16_t v16;
        uint64_t v64;

        memcpy(&v32, in, 4);
        h.magic = le32toh(v32);
        memcpy(&v16, in + 4, 2);
        h.version = le16toh(v16);
        h.kind = in[6];
        h.flags = in[7];
        h.nfds = in[8];
        memcpy(&v32, in + 12, 4);
        h.body_len = le32toh(v32);
        memcpy(&v64, in + 16, 8);
        h.request_id = le64toh(v64);

        if (h.magic != PROTO_MAGIC || h.flags != 0 || in[9] || in[10] || in[11])
                return -EBADMSG;
        if (h.version < PROTO_VERSION_MIN || h.version > PROTO_VERSION)
                return -EPROTONOSUPPORT;
        if (h.kind < PROTO_KIND_REQUEST || h.kind > PROTO_KIND_COMPLETION)
                return -EBADMSG;
        if (h.nfds > PROTO_MAX_FDS)
                return -ETOOMANYREFS;
        if (h.body_len > (h.kind == PROTO_KIND_SUBMIT ? PROTO_MAX_BODY : PROTO_MAX_JSON_BODY))
                return -EMSGSIZE;
        *ret = h;
        return 0;
}

void proto_reader_init(struct proto_reader *r)
{
        memset(r, 0, sizeof(*r));
}

void proto_reader_deinit(struct proto_reader *r)
{
        for (int i = 0; i < r->nfds; i++)
                close(r->fds[i]);
        free(r->buf);
        proto_reader_init(r);
}

/* Make room for at least `want` more bytes after the unread data. Small buffers double; a
 * need more than twice the buffer (a whole large frame) is met exactly, rounded to a chunk. */
static int reader_reserve(struct proto_reader *r, size_t want)
{
        if (r->start > 0 && (r->len == 0 || r->start + r->len + want > r->cap)) {
                memmove(r->buf, r->buf + r->start, r->len);
                r->start = 0;
        }
        if (r->start + r->len + want <= r->cap)
                return 0;
        size_t need = r->len + want, cap = r->cap ? r->cap * 2 : READ_CHUNK;
        if (cap < need)
                cap = (need + READ_CHUNK - 1) / READ_CHUNK * READ_CHUNK;
        uint8_t *nb = !r->buf && cap == READ_CHUNK ? chunk_take() : NULL;
        if (!nb)
                nb = realloc(r->buf, cap);
        if (!nb)
                return -ENOMEM;
        r->buf = nb;
        r->cap = cap;
        return 0;
}

/* Give back memory a large frame needed once it is consumed, so that what a connection holds
 * between frames is at most two read chunks (nothing at all when nothing is buffered). Called
 * where the previous frame's body is no longer in use. */
static void reader_trim(struct proto_reader *r)
{
        if (r->len == 0) {
                if (r->buf && r->cap == READ_CHUNK)
                        chunk_release(r->buf);
                else
                        free(r->buf);
                r->buf = NULL;
                r->start = r->cap = 0;
                return;
        }
        /* A buffer of two chunks stays: a pipelined SUBMIT body leaves part of a record
         * behind each read, and the next read wants a chunk more (shrinking it to one chunk
         * and growing it back cost two mremap calls per read). */
        if (r->cap > 2 * READ_CHUNK && r->len <= READ_CHUNK / 2) {
                memmove(r->buf, r->buf + r->start, r->len);
                r->start = 0;
                uint8_t *nb = realloc(r->buf, 2 * READ_CHUNK);
                if (nb) {
                        r->buf = nb;
                        r->cap = 2 * READ_CHUNK;
                }
        }
}

/* Header checks plus the reader's own body limit. */
static int reader_header(const struct proto_reader *r, struct proto_header *h)
{
        int e = proto_header_decode(r->buf + r->start, h);

        if (e == 0 && r->max_body && h->body_len > r->max_body)
                e = -EMSGSIZE;
        return e;
}

int proto_reader_feed(struct proto_reader *r, const void *data, size_t len)
{
        if (len == 0)
                return 0;
        if (len > PROTO_MAX_BODY + PROTO_HEADER_SIZE)
                return -EMSGSIZE;
        int e = reader_reserve(r, len);
        if (e < 0)
                return e;
        memcpy(r->buf + r->start + r->len, data, len);
        r->len += len;
        r->received += len;
        return 0;
}

ssize_t proto_reader_fill(struct proto_reader *r, int sock)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
                struct cmsghdr align;
        } ctl;
        struct iovec iov;
        struct msghdr msg = { 0 };
        size_t want = READ_CHUNK;
        ssize_t n;

        reader_trim(r);
        /* Read a whole pending JSON frame in one go when its header is already here. SUBMIT
         * bodies (up to 16 MiB) grow the buffer step by step; npud reads them in parts. */
        if (r->len >= PROTO_HEADER_SIZE && !r->body_left) {
                struct proto_header h;
                if (reader_header(r, &h) == 0 && h.kind != PROTO_KIND_SUBMIT &&
                    (size_t)h.body_len + PROTO_HEADER_SIZE > r->len)
                        want = (size_t)h.body_len + PROTO_HEADER_SIZE - r->len;
                if (want < READ_CHUNK)
                        want = READ_CHUNK;
        }
        if (reader_reserve(r, want) < 0)
                return -ENOMEM;
        iov.iov_base = r->buf + r->start + r->len;
        iov.iov_len = r->cap - r->start - r->len;
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;

        int bad = (msg.msg_flags & MSG_CTRUNC) != 0, before = r->nfds;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (r->nfds < (int)(sizeof(r->fds) / sizeof(r->fds[0])))
                                r->fds[r->nfds++] = fd;
                        else {
                                close(fd);
                                bad = 1;
                        }
                }
        }
        if (r->nfds > before) {
                if (n == 0 || r->nbatches == (int)(sizeof(r->batch) / sizeof(r->batch[0])))
                        bad = 1;
                else {
                        r->batch[r->nbatches].start = r->received;
                        r->batch[r->nbatches].end = r->received + (uint64_t)n;
                        r->batch[r->nbatches++].count = r->nfds - before;
                }
        }
        if (bad)
                return -EBADMSG;
        r->len += (size_t)n;
        r->received += (uint64_t)n;
        r->drained = (size_t)n < iov.iov_len;
        return n;
}

int proto_reader_has_frame(const struct proto_reader *r)
{
        struct proto_header h;

        return !r->body_left && r->len >= PROTO_HEADER_SIZE && reader_header(r, &h) == 0 &&
               r->len - PROTO_HEADER_SIZE >= h.body_len;
}

/* Batches of fds that no frame can claim any more: every frame starting in their read has
 * been seen up to `next`, the start of the next frame. */
static int reader_unclaimed(const struct proto_reader *r, int first, uint64_t next)
{
        return r->nbatches > first && r->batch[first].end <= next;
}

int proto_reader_next(struct proto_reader *r, struct proto_frame *ret)
{
        struct proto_header h;
        int e;

        if (r->body_left)
                return 0;
        reader_trim(r);
        if (r->len < PROTO_HEADER_SIZE)
                return 0;
        e = reader_header(r, &h);
        if (e < 0)
                return e;
        if (r->len - PROTO_HEADER_SIZE < h.body_len)
                return 0;
        uint64_t f = r->consumed, end = f + PROTO_HEADER_SIZE + h.body_len;
        if (reader_unclaimed(r, 0, f))
                return -EBADMSG; /* no frame starting in that read claimed its fds */
        if (h.nfds && (!r->nbatches || r->batch[0].start > f || r->batch[0].count != h.nfds))
                return -EBADMSG; /* fds come with the frame's first byte, as declared */
        /* fds that arrived with this frame's first byte but that it does not claim: no later
         * frame starts in their read when this one reaches its end */
        if (reader_unclaimed(r, h.nfds ? 1 : 0, end))
                return -EBADMSG;
        if (h.nfds) {
                memmove(r->batch, r->batch + 1, sizeof(r->batch[0]) * (size_t)(r->nbatches - 1));
                r->nbatches--;
        }
        ret->hdr = h;
        ret->body = r->buf + r->start + PROTO_HEADER_SIZE;
        for (int i = 0; i < PROTO_MAX_FDS; i++)
                ret->fds[i] = -1;
        for (int i = 0; i < h.nfds; i++)
                ret->fds[i] = r->fds[i];
        memmove(r->fds, r->fds + h.nfds, sizeof(int) * (size_t)(r->nfds - h.nfds));
        r->nfds -= h.nfds;
        r->consumed = end;
        r->start += PROTO_HEADER_SIZE + h.body_len;
        r->len -= PROTO_HEADER_SIZE + h.body_len;
        return 1;
}

int proto_reader_peek_header(const struct proto_reader *r, struct proto_header *ret)
{
        if (r->body_left || r->len < PROTO_HEADER_SIZE)
                return 0;
        int e = reader_header(r, ret);
        return e < 0 ? e : 1;
}

int proto_reader_begin_body(struct proto_reader *r, const struct proto_header *h)
{
        if (r->body_left || r->len < PROTO_HEADER_SIZE || h->nfds)
                return -EINVAL;
        if (reader_unclaimed(r, 0, r->consumed))
                return -EBADMSG;
        r->consumed += PROTO_HEADER_SIZE;
        r->start += PROTO_HEADER_SIZE;
        r->len -= PROTO_HEADER_SIZE;
        r->body_left = h->body_len;
        /* an empty body ends the frame at once */
        return h->body_len ? 0 : proto_reader_body_consume(r, 0);
}

size_t proto_reader_body(const struct proto_reader *r, const uint8_t **ret)
{
        *ret = r->buf ? r->buf + r->start : NULL;
        return r->len < r->body_left ? r->len : (size_t)r->body_left;
}

int proto_reader_body_consume(struct proto_reader *r, size_t n)
{
        if (n > r->len || n > r->body_left)
                return -EINVAL;
        r->start += n;
        r->len -= n;
        r->consumed += n;
        r->body_left -= n;
        if (!r->body_left && reader_unclaimed(r, 0, r->consumed))
                return -EBADMSG; /* fds arrived within a body: no frame claims them */
        return 0;
}

void proto_writer_init(struct proto_writer *w)
{
        memset(w, 0, sizeof(*w));
}

void proto_writer_deinit(struct proto_writer *w)
{
        free(w->buf);
        proto_writer_init(w);
}

int proto_writer_append(struct proto_writer *w, const struct proto_header *h, const void *body)
{
        size_t need = PROTO_HEADER_SIZE + h->body_len;

        if (w->start > 0 && w->start + w->len + need > w->cap) {
                memmove(w->buf, w->buf + w->start, w->len);
                w->start = 0;
        }
        if (w->len + need > w->cap) {
                size_t cap = w->cap ? w->cap : 4096;
                while (cap < w->len + need)
                        cap *= 2;
                uint8_t *nb = realloc(w->buf, cap);
                if (!nb)
                        return -ENOMEM;
                w->buf = nb;
                w->cap = cap;
        }
        proto_header_encode(h, w->buf + w->start + w->len);
        if (h->body_len)
                memcpy(w->buf + w->start + w->len + PROTO_HEADER_SIZE, body, h->body_len);
        w->len += need;
        return 0;
}

ssize_t proto_writer_flush(struct proto_writer *w, int sock)
{
        while (w->len > 0) {
                ssize_t n = send(sock, w->buf + w->start, w->len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                break;
                        return -errno;
                }
                w->start += (size_t)n;
                w->len -= (size_t)n;
        }
        if (w->len == 0) {
                w->start = 0;
                if (w->cap > (256u << 10)) { /* a burst is over: do not keep its memory */
                        free(w->buf);
                        w->buf = NULL;
                        w->cap = 0;
                }
        }
        return (ssize_t)w->len;
}

int proto_send_frame(int sock, const struct proto_header *h, const void *body, const int *fds)
{
        uint8_t hdr[PROTO_HEADER_SIZE];
        union {
                char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
                struct cmsghdr align;
        } ctl;
        struct iovec iov[2];
        size_t total = PROTO_HEADER_SIZE + h->body_len, done = 0;
        int first = 1;

        if (h->nfds > PROTO_MAX_FDS)
                return -ETOOMANYREFS;
        proto_header_encode(h, hdr);
        /* A small frame without fds leaves as one buffer through send(): a plain send costs
         * less in the kernel than a sendmsg of two iovecs (no msghdr or iovec array to copy
         * in), and most requests and replies are well under a kilobyte. */
        if (!h->nfds && total <= 1024) {
                uint8_t one[1024];
                memcpy(one, hdr, PROTO_HEADER_SIZE);
                if (h->body_len)
                        memcpy(one + PROTO_HEADER_SIZE, body, h->body_len);
                while (done < total) {
                        ssize_t n = send(sock, one + done, total - done, MSG_NOSIGNAL);
                        if (n < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        done += (size_t)n;
                }
                return 0;
        }
        while (done < total) {
                struct msghdr msg = { 0 };
                int niov = 0;
                if (done < PROTO_HEADER_SIZE) {
                        iov[niov].iov_base = hdr + done;
                        iov[niov++].iov_len = PROTO_HEADER_SIZE - done;
                        if (h->body_len) {
                                iov[niov].iov_base = (void *)body;
                                iov[niov++].iov_len = h->body_len;
                        }
                } else {
                        iov[niov].iov_base = (uint8_t *)body + (done - PROTO_HEADER_SIZE);
                        iov[niov++].iov_len = total - done;
                }
                msg.msg_iov = iov;
                msg.msg_iovlen = (size_t)niov;
                if (first && h->nfds) {
                        memset(&ctl, 0, sizeof(ctl));
                        msg.msg_control = ctl.buf;
                        msg.msg_controllen = CMSG_SPACE(sizeof(int) * h->nfds);
                        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(int) * h->nfds);
                        memcpy(CMSG_DATA(c), fds, sizeof(int) * h->nfds);
                }
                ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                first = 0;
                done += (size_t)n;
        }
        return 0;
}
