/* The one way an error message is written into a caller's buffer: format into err (when
 * there is one) and return the code, so that `return err_set(err, len, -EINVAL, ...)` reports
 * and fails in one statement. */
#ifndef NPUD_UTIL_ERR_H
#define NPUD_UTIL_ERR_H

#include <stdarg.h>
#include <stddef.h>

int err_set(char *err, size_t errlen, int code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
int err_vset(char *err, size_t errlen, int code, const char *fmt, va_list ap)
        __attribute__((format(printf, 4, 0)));

#endif
