/* Daemon logging: leveled lines on stderr, prefixed with the level, or structured journal
 * entries when stderr is connected to journald ($JOURNAL_STREAM names fd 2). Only daemon code
 * at the top of an operation logs; library-like modules return errors instead. */
#ifndef NPUD_LOG_H
#define NPUD_LOG_H

#include <stdint.h>
#include <sys/types.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_set_level(enum log_level level);
/* "error", "warn", "info", "debug" -> level; -1 when unknown. */
int log_level_parse(const char *name);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A message about one client or device. In the journal the identifiers become the fields
 * NPUD_SESSION, NPUD_PID, NPUD_TENANT and NPUD_DEVICE (journalctl NPUD_SESSION=12); on a
 * plain stderr only the message is written, so it should name them itself. Pass session 0,
 * pid <= 0, tenant NULL or device < 0 to leave a field out. */
void log_session_msg(enum log_level level, uint64_t session, pid_t pid, const char *tenant,
                     int device, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
