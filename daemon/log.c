/* Leveled logging to stderr (journald adds timestamps when it is the receiver). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static enum log_level current_level = LOG_LVL_INFO;
static const char *const level_names[] = { "error", "warn", "info", "debug" };

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

void log_msg(enum log_level level, const char *fmt, ...)
{
        char line[1024];
        va_list ap;

        if (level > current_level)
                return;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        fprintf(stderr, "npud[%s]: %s\n", level_names[level], line);
}
