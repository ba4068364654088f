/* Leveled logging (see log.h). Under systemd, stderr is a stream to journald, which would
 * store each line as a bare MESSAGE; writing to the journal directly instead keeps the
 * priority and adds fields a query can select on. Detection follows systemd's rule: the
 * $JOURNAL_STREAM device:inode must be those of fd 2, so a stderr redirected elsewhere by a
 * child of a service (or a test) gets plain lines. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
/* Without this, every entry would name log.c:emit() as its CODE_FILE/CODE_LINE/CODE_FUNC. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "log.h"

static enum log_level current_level = LOG_LVL_INFO;
static const char *const level_names[] = { "error", "warn", "info", "debug" };
/* syslog priorities (LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG) per level */
static const int level_priority[] = { 3, 4, 6, 7 };

static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static int to_journal;

static void detect_journal(void)
{
        const char *env = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        int end = 0;

        if (!env || sscanf(env, "%llu:%llu%n", &dev, &ino, &end) != 2 || env[end] != '\0')
                return;
        if (fstat(STDERR_FILENO, &st) < 0)
                return;
        to_journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_set_level(enum log_level level)
{
        current_level = level;
}

int log_level_parse(const char *name)
{
        for (int i = 0; i <= LOG_LVL_DEBUG; i++)
                if (strcmp(name, level_names[i]) == 0)
                        return i;
        return -1;
}

/* Add "NAME=value" to iov[*n] from buf (which must outlive the send). */
static void add_field(struct iovec *iov, int *n, char *buf, size_t len, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static void add_field(struct iovec *iov, int *n, char *buf, size_t len, const char *fmt, ...)
{
        va_list ap;
        int w;

        va_start(ap, fmt);
        w = vsnprintf(buf, len, fmt, ap);
        va_end(ap);
        if (w < 0)
                return;
        iov[*n].iov_base = buf;
        iov[*n].iov_len = (size_t)w < len ? (size_t)w : len - 1;
        (*n)++;
}

/* Journal fields of one entry beside the message; 0, -1 or NULL leave a field out. */
struct log_fields {
        uint64_t session;
        pid_t pid;
        const char *tenant;
        int device;
        const char *message_id;
        int have_uid;
        uid_t uid;
        const char *via;
};

/* A plain line starts with the time (UTC, milliseconds): outside the journal nothing else
 * dates it (a redirected stderr, a container's log file). */
static void plain_line(enum log_level level, const char *line)
{
        struct timespec ts;
        struct tm tm;
        char when[32] = "";

        clock_gettime(CLOCK_REALTIME, &ts);
        if (gmtime_r(&ts.tv_sec, &tm))
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        fprintf(stderr, "%s.%03ldZ npud[%s]: %s\n", when, ts.tv_nsec / 1000000L, level_names[level],
                line);
}

static void emit(enum log_level level, const struct log_fields *f, const char *fmt, va_list ap)
{
        char line[1024];

        vsnprintf(line, sizeof(line), fmt, ap);
        pthread_once(&journal_once, detect_journal);
        if (to_journal) {
                char msg[sizeof(line) + 16], prio[16], sess[48], pidf[32], ten[128], dev[32];
                char mid[64], uidf[32], via[48];
                struct iovec iov[10];
                int n = 0;

                add_field(iov, &n, msg, sizeof(msg), "MESSAGE=%s", line);
                add_field(iov, &n, prio, sizeof(prio), "PRIORITY=%d", level_priority[level]);
                iov[n].iov_base = (char *)"SYSLOG_IDENTIFIER=npud";
                iov[n++].iov_len = strlen("SYSLOG_IDENTIFIER=npud");
                if (f->session)
                        add_field(iov, &n, sess, sizeof(sess), "NPUD_SESSION=%llu",
                                  (unsigned long long)f->session);
                if (f->pid > 0)
                        add_field(iov, &n, pidf, sizeof(pidf), "NPUD_PID=%d", (int)f->pid);
                if (f->tenant && *f->tenant)
                        add_field(iov, &n, ten, sizeof(ten), "NPUD_TENANT=%s", f->tenant);
                if (f->device >= 0)
                        add_field(iov, &n, dev, sizeof(dev), "NPUD_DEVICE=%d", f->device);
                if (f->message_id)
                        add_field(iov, &n, mid, sizeof(mid), "MESSAGE_ID=%s", f->message_id);
                if (f->have_uid)
                        add_field(iov, &n, uidf, sizeof(uidf), "NPUD_UID=%u", (unsigned)f->uid);
                if (f->via)
                        add_field(iov, &n, via, sizeof(via), "NPUD_VIA=%s", f->via);
                if (sd_journal_sendv(iov, n) >= 0)
                        return;
                /* journald went away: the stream may still take a plain line */
        }
        plain_line(level, line);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
        va_list ap;

        if (level > current_level)
                return;
        va_start(ap, fmt);
        emit(level, &(struct log_fields){ .device = -1 }, fmt, ap);
        va_end(ap);
}

void log_session_msg(enum log_level level, uint64_t session, pid_t pid, const char *tenant,
                     int device, const char *fmt, ...)
{
        va_list ap;

        if (level > current_level)
                return;
        va_start(ap, fmt);
        emit(level, &(struct log_fields){ .session = session, .pid = pid, .tenant = tenant,
                                          .device = device }, fmt, ap);
        va_end(ap);
}

void log_event(enum log_level level, const char *message_id, int device, uid_t uid, pid_t pid,
               const char *via, const char *fmt, ...)
{
        va_list ap;

        if (level > current_level)
                return;
        va_start(ap, fmt);
        emit(level, &(struct log_fields){ .pid = pid, .device = device, .message_id = message_id,
                                          .have_uid = via && uid != (uid_t)-1, .uid = uid, .via = via },
             fmt, ap);
        va_end(ap);
}
