#include <stdio.h>

#include "err.h"

int err_vset(char *err, size_t errlen, int code, const char *fmt, va_list ap)
{
        if (err && errlen)
                vsnprintf(err, errlen, fmt, ap);
        return code;
}

int err_set(char *err, size_t errlen, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        err_vset(err, errlen, code, fmt, ap);
        va_end(ap);
        return code;
}
