/* Giving large memory back off the loop thread (reclaim.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/event.h>

#include "util/log.h"
#include "util/prio.h"
#include "alloc.h"
#include "device.h"
#include "mem.h"
#include "reclaim.h"

struct job {
        struct job *next;
        struct device *dev; /* a block of dev's memory, or (NULL) a mapping to unmap */
        uint64_t off, block;
        void *map;
        size_t map_size;
};

static struct {
        pthread_mutex_t mu;
        pthread_cond_t work_cv, idle_cv;
        struct job *todo, **todo_tail; /* under mu */
        struct job *done;              /* under mu: cleared blocks for the loop thread */
        int busy;                      /* under mu: the thread holds a job */
        int stopping;                  /* under mu */
        int started;                   /* loop thread only */
        int efd;
        struct event *ev;
        pthread_t thread;
} rc = {
        .mu = PTHREAD_MUTEX_INITIALIZER,
        .work_cv = PTHREAD_COND_INITIALIZER,
        .idle_cv = PTHREAD_COND_INITIALIZER,
        .efd = -1,
};

/* The pages of a block wholly inside it go back to the kernel (zero when next touched); the
 * bytes on pages it shares with its neighbours are zeroed. In pieces of RECLAIM_PIECE bytes:
 * each call is short, so a thread that wakes on this CPU gets it between two. */
#define RECLAIM_PIECE (1u << 20)

static void clear_block(uint8_t *base, uint64_t off, uint64_t size)
{
        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), end = off + size;
        uint64_t lo = (off + page - 1) & ~(page - 1), hi = end & ~(page - 1);

        if (lo >= hi) {
                memset(base + off, 0, size);
                return;
        }
        for (uint64_t p = lo; p < hi; p += RECLAIM_PIECE) {
                uint64_t n = hi - p < RECLAIM_PIECE ? hi - p : RECLAIM_PIECE;
                if (madvise(base + p, n, MADV_DONTNEED) < 0)
                        memset(base + p, 0, n);
        }
        memset(base + off, 0, lo - off);
        memset(base + hi, 0, end - hi);
}

/* A job: a block cleared, or a mapping unmapped (in pieces, for the same reason). */
static void job_do(struct job *j)
{
        if (j->dev) {
                clear_block(j->dev->mem_host, j->off, j->block);
                return;
        }
        for (size_t p = 0; p < j->map_size; p += RECLAIM_PIECE)
                munmap((uint8_t *)j->map + p, j->map_size - p < RECLAIM_PIECE ? j->map_size - p : RECLAIM_PIECE);
}

/* Under mu: a block goes to the loop thread, a mapping's job is over. */
static void finished_locked(struct job *j)
{
        if (j->dev) {
                j->next = rc.done;
                rc.done = j;
        } else {
                free(j);
        }
}

/* Under mu: the first queued job, or NULL. */
static struct job *take_locked(void)
{
        struct job *j = rc.todo;

        if (j && !(rc.todo = j->next))
                rc.todo_tail = &rc.todo;
        return j;
}

static void *reclaim_main(void *arg)
{
        (void)arg;
        prio_normal(); /* started by the loop thread, whose priority is raised */
        pthread_setname_np(pthread_self(), "npud-reclaim");
        /* Nice 19: any thread that wakes takes the CPU from it at once (a latency-critical
         * client's, a worker), yet it is never starved outright, and an allocation that
         * needs its blocks clears them on the loop thread (reclaim_drain). */
        if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) != 0)
                log_warn("reclaim: cannot lower its priority: %s", strerror(errno));
        pthread_mutex_lock(&rc.mu);
        for (;;) {
                struct job *j;
                while (!rc.todo && !rc.stopping) {
                        pthread_cond_broadcast(&rc.idle_cv);
                        pthread_cond_wait(&rc.work_cv, &rc.mu);
                }
                if (!(j = take_locked()))
                        break;
                rc.busy = 1;
                pthread_mutex_unlock(&rc.mu);
                job_do(j);
                pthread_mutex_lock(&rc.mu);
                rc.busy = 0;
                finished_locked(j);
                uint64_t one = 1;
                if (write(rc.efd, &one, sizeof(one)) < 0) { /* full: the loop is woken anyway */
                }
        }
        pthread_cond_broadcast(&rc.idle_cv);
        pthread_mutex_unlock(&rc.mu);
        return NULL;
}

/* Loop thread: the cleared blocks become free memory of their devices. */
static int release_done(void)
{
        struct job *list, *j;
        int n = 0;

        pthread_mutex_lock(&rc.mu);
        list = rc.done;
        rc.done = NULL;
        pthread_mutex_unlock(&rc.mu);
        while ((j = list)) {
                uint64_t free_off, free_size;
                list = j->next;
                j->dev->reclaiming -= j->block;
                if (!j->dev->reclaiming)
                        j->dev->reclaiming_largest = 0;
                if (alloc_release_span(j->dev->alloc, j->off, &free_off, &free_size) != 0)
                        log_error("reclaim: device %d: block at %llu was not allocated", j->dev->id,
                                  (unsigned long long)j->off);
                free(j);
                n++;
        }
        return n;
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
        uint64_t n;

        (void)what;
        (void)arg;
        if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
                log_error("reclaim: eventfd read: %s", strerror(errno));
        release_done();
}

int reclaim_start(struct event_base *base)
{
        if (rc.started)
                return 0;
        rc.todo_tail = &rc.todo;
        rc.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (rc.efd < 0)
                return -errno;
        rc.ev = event_new(base, rc.efd, EV_READ | EV_PERSIST, on_done, NULL);
        if (!rc.ev || event_add(rc.ev, NULL) < 0 || pthread_create(&rc.thread, NULL, reclaim_main, NULL) != 0) {
                if (rc.ev)
                        event_free(rc.ev);
                rc.ev = NULL;
                close(rc.efd);
                rc.efd = -1;
                return -ENOMEM;
        }
        rc.stopping = 0;
        rc.started = 1;
        return 0;
}

static void queue(struct job *j)
{
        j->next = NULL;
        pthread_mutex_lock(&rc.mu);
        *rc.todo_tail = j;
        rc.todo_tail = &j->next;
        pthread_cond_signal(&rc.work_cv);
        pthread_mutex_unlock(&rc.mu);
}

int reclaim_block(struct device *dev, uint64_t off, uint64_t block)
{
        struct job *j;

        if (!rc.started || block < RECLAIM_MIN_BYTES || !(j = calloc(1, sizeof(*j))))
                return -1;
        j->dev = dev;
        j->off = off;
        j->block = block;
        queue(j);
        dev->reclaiming += block;
        if (block > dev->reclaiming_largest)
                dev->reclaiming_largest = block;
        return 0;
}

int reclaim_unmap(void *map, size_t size)
{
        struct job *j;

        if (!rc.started || size < RECLAIM_MIN_BYTES || !(j = calloc(1, sizeof(*j))))
                return -1;
        j->map = map;
        j->map_size = size;
        queue(j);
        return 0;
}

int reclaim_drain(void)
{
        struct job *j;

        if (!rc.started)
                return 0;
        /* the queued jobs here, rather than after a thread at nice 19; then the one it holds */
        pthread_mutex_lock(&rc.mu);
        while ((j = take_locked())) {
                pthread_mutex_unlock(&rc.mu);
                job_do(j);
                pthread_mutex_lock(&rc.mu);
                finished_locked(j);
        }
        while (rc.busy)
                pthread_cond_wait(&rc.idle_cv, &rc.mu);
        pthread_mutex_unlock(&rc.mu);
        return release_done();
}

void reclaim_stop(void)
{
        if (!rc.started)
                return;
        reclaim_drain();
        pthread_mutex_lock(&rc.mu);
        rc.stopping = 1;
        pthread_cond_broadcast(&rc.work_cv);
        pthread_mutex_unlock(&rc.mu);
        pthread_join(rc.thread, NULL);
        release_done();
        event_free(rc.ev);
        rc.ev = NULL;
        close(rc.efd);
        rc.efd = -1;
        rc.started = 0;
}

void device_mem_stats(struct device *dev, struct alloc_stats *st)
{
        alloc_get_stats(dev->alloc, st);
        st->free_bytes += dev->reclaiming;
        st->allocated -= dev->reclaiming;
        /* at least the largest block being cleared, once it is back */
        if (dev->reclaiming_largest > st->largest_free)
                st->largest_free = dev->reclaiming_largest;
}
