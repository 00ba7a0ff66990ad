/* rlx.c - error formatting and small shared helpers. */
#include "backends/rlx.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int rlx_errorf(rlx_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

const char *rlx_strerror(int code)
{
    switch (code) {
    case RLX_OK: return "ok";
    case RLX_EINVAL: return "invalid argument";
    case RLX_ENOMEM: return "out of memory";
    case RLX_EIO: return "I/O error";
    case RLX_EFORMAT: return "malformed file";
    case RLX_EUNSUPPORTED: return "unsupported";
    case RLX_ENOTFOUND: return "not found";
    case RLX_ERANGE: return "out of range";
    case RLX_EFULL: return "full";
    case RLX_ECANCELED: return "cancelled";
    case RLX_ETOOLONG: return "too long";
    default: return "unknown error";
    }
}

double rlx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
