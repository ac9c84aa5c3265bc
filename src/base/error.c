/* Per-thread error message buffer behind pn_error_set / pn_error_message. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { PN_ERROR_CAP = 1024 };
static _Thread_local char error_text[PN_ERROR_CAP];

int pn_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof error_text, fmt, ap);
    va_end(ap);
    return code;
}

int pn_error_wrap(int code, const char *fmt, ...)
{
    char prefix[PN_ERROR_CAP], old[PN_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, error_text, sizeof old);
    int n = snprintf(error_text, sizeof error_text, old[0] ? "%s: " : "%s", prefix);
    if (old[0] && n >= 0 && (size_t)n < sizeof error_text)
        snprintf(error_text + n, sizeof error_text - (size_t)n, "%s", old);
    return code;
}

const char *pn_error_message(void) { return error_text; }

void pn_error_clear(void) { error_text[0] = '\0'; }

const char *pn_status_name(int code)
{
    switch (code) {
    case PN_OK: return "ok";
    case PN_ERR_INVALID: return "invalid input";
    case PN_ERR_NOMEM: return "out of memory";
    case PN_ERR_IO: return "I/O error";
    case PN_ERR_UNSUPPORTED: return "unsupported";
    case PN_ERR_INTERNAL: return "internal error";
    case PN_ERR_MPI: return "MPI error";
    case PN_ERR_DEVICE: return "device error";
    case PN_ERR_PEER: return "failed on another rank";
    case PN_ERR_STALL: return "stalled";
    default: return "unknown error";
    }
}
