/* stderr logger with a level threshold and an optional rank tag. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_level = -1;
static int log_rank = -1;

static pn_log_level level_from_env(void)
{
    const char *v = getenv("PIPENET_LOG");
    if (!v) return PN_LOG_INFO;
    if (!strcmp(v, "error")) return PN_LOG_ERROR;
    if (!strcmp(v, "warn")) return PN_LOG_WARN;
    if (!strcmp(v, "debug")) return PN_LOG_DEBUG;
    return PN_LOG_INFO;
}

void pn_log_set_level(pn_log_level level) { log_level = (int)level; }

pn_log_level pn_log_get_level(void)
{
    if (log_level < 0) log_level = (int)level_from_env();
    return (pn_log_level)log_level;
}

void pn_log_set_rank(int rank) { log_rank = rank; }

void pn_log(pn_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "", "debug"};
    if ((int)level > (int)pn_log_get_level()) return;
    char line[2048];
    int n = 0;
    if (log_rank >= 0) n = snprintf(line, sizeof line, "[rank %d] ", log_rank);
    if (level != PN_LOG_INFO)
        n += snprintf(line + n, sizeof line - (size_t)n, "pipenet: %s: ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
