/* Error status and messages shared by every pipenet module.
 * Library functions return 0 or a negative pn_status and record a message here;
 * only the program (src/cli) decides to print it and exit.
 * src/base holds what every layer of the stack needs (errors, logging, RNG):
 * it sits below src/math and depends on nothing but libc. */
#ifndef PN_ERROR_H
#define PN_ERROR_H

typedef enum pn_status {
    PN_OK = 0,
    PN_ERR_INVALID = -1,     /* bad user input: config, data, arguments */
    PN_ERR_NOMEM = -2,       /* an allocation failed */
    PN_ERR_IO = -3,          /* a file could not be read or written */
    PN_ERR_UNSUPPORTED = -4, /* valid request this build or device cannot do */
    PN_ERR_INTERNAL = -5,    /* a bug: an impossible state was reached */
    PN_ERR_MPI = -6,         /* an MPI call failed or a peer misbehaved */
    PN_ERR_DEVICE = -7,      /* a CUDA, cuBLAS or NCCL call failed */
    PN_ERR_PEER = -8,        /* another rank failed and reports why */
    PN_ERR_STALL = -9        /* a wait for other ranks outlasted the stall timeout */
} pn_status;

/* Records a printf-style message for the calling thread and returns code. */
int pn_error_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepends "<prefix>: " to the recorded message (adds context on the way up). */
int pn_error_wrap(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last recorded message of the calling thread ("" if none). */
const char *pn_error_message(void);

/* Forgets the recorded message. */
void pn_error_clear(void);

/* Short name of a status code ("invalid input", ...). */
const char *pn_status_name(int code);

/* Returns from the enclosing function when expr yields a negative status. */
#define PN_TRY(expr)                        \
    do {                                    \
        int pn_try_rc_ = (expr);            \
        if (pn_try_rc_ < 0)                 \
            return pn_try_rc_;              \
    } while (0)

#endif
