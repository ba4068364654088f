/* Daemon logging: leveled lines on stderr, prefixed with the UTC time and the level, or structured journal
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

/* An event of a kind a query selects by MESSAGE_ID (journalctl MESSAGE_ID=...): admin
 * actions name who did them (uid, pid, and via "socket", "dbus" or "signal": NPUD_UID,
 * NPUD_PID, NPUD_VIA; via NULL leaves the three out, for events nobody asked for). device < 0
 * leaves NPUD_DEVICE out. The plain-text line should name them itself, as above. */
void log_event(enum log_level level, const char *message_id, int device, uid_t uid, pid_t pid,
               const char *via, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* MESSAGE_IDs, one per kind of event (docs/logging.md lists them). */
#define LOG_MID_DEVICE_DRAIN "85fa777a48334f35bc05377e5655c824"
#define LOG_MID_DEVICE_RESET "ec8c4b27a136403884c79458ff3dfe9f"
#define LOG_MID_FAULT_INJECT "9810cbdacf3d4556af159080697f32ff"
#define LOG_MID_FAULT_CLEAR "a746f1c954d34807a5ef1cad4ae97c5e"
#define LOG_MID_QUOTA_SET "14e54437ce954b2ab5c087b0012d2445"
#define LOG_MID_SESSION_KILL "66770a6c82c44ff093f72b6aaacb538d"
#define LOG_MID_RELOAD "aa854b6aea0d4c34a8ee4d7d20fb6593"
#define LOG_MID_DEVICE_FAILED "4a87292b65194eb4978a5af1e72c0f32"
#define LOG_MID_TASKS_FAILED "9f7644a8a1254514b93ee461a53f6632"
#define LOG_MID_TENANT_ADD "3c1f0d8e5a7b4e29b6d4a0c2f19e7d53"
#define LOG_MID_TENANT_REMOVE "b87e2a4c91d04f6a8c3e5d7f0a2b4c61"
#define LOG_MID_TUNE_CLEAR "a98c0aa1e4684bdeae8741b9421b50f6"

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
