/* Leveled logging to stderr, the only way library code prints.
 * Lines carry a "[rank N]" tag once the program has set the rank. */
#ifndef PN_LOG_H
#define PN_LOG_H

typedef enum pn_log_level {
    PN_LOG_ERROR = 0,
    PN_LOG_WARN = 1,
    PN_LOG_INFO = 2,
    PN_LOG_DEBUG = 3
} pn_log_level;

/* Messages above this level are dropped (default PN_LOG_INFO, or $PIPENET_LOG). */
void pn_log_set_level(pn_log_level level);
pn_log_level pn_log_get_level(void);

/* Tags every following line with the MPI rank (-1: no tag). */
void pn_log_set_rank(int rank);

void pn_log(pn_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define pn_log_error(...) pn_log(PN_LOG_ERROR, __VA_ARGS__)
#define pn_log_warn(...) pn_log(PN_LOG_WARN, __VA_ARGS__)
#define pn_log_info(...) pn_log(PN_LOG_INFO, __VA_ARGS__)
#define pn_log_debug(...) pn_log(PN_LOG_DEBUG, __VA_ARGS__)

#endif
